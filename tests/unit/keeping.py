"""A group's batches through `advance`, which keeps refreshes, against a step every batch: what
the deferral tests (test_refresh_deferral, test_kept_thinning) compare."""

from __future__ import annotations

from typing import NamedTuple

from streaming.core.advance import advance
from streaming.core.state.codec import decode
from streaming.core.state.refresh import unpack_kept
from streaming.core.step import refreshes_of, step


class Run(NamedTuple):
    """The last output, the finding records published in order, the batches kept and, of
    those, the ones whose kept refreshes were thinned."""

    out: object
    records: list
    kept_batches: int = 0
    thinned: int = 0


def every_batch(batches, config) -> Run:
    """The reference: one step per batch."""
    blob, records, out = None, [], None
    for events, watermark in batches:
        out = step(blob, events, watermark_ms=watermark, config=config)
        blob, records = out.blob, records + out.findings
    return Run(out, records)


def keeping(batches, config, thin_kept: bool = True) -> Run:
    """advance() per batch, then one step for what is still kept (the job steps it when
    another event comes, its cap is reached or a session it renews expires)."""
    entry, records, out, kept_batches, thinned = None, [], None, 0, 0
    for events, watermark in batches:
        before = entry
        advanced = advance(entry, events, watermark, config, thin_kept=thin_kept)
        entry = advanced.entry
        if advanced.output is None:
            kept_batches += 1
            thinned += before is not None and not entry.kept.startswith(before.kept)
        else:
            out, records = advanced.output, records + advanced.output.findings
    if entry is not None and entry.kept:
        waiting = refreshes_of(entry.blob, config).events(unpack_kept(entry.kept))
        out = step(entry.blob, waiting, watermark_ms=batches[-1][1], config=config)
        records += out.findings
    return Run(out, records, kept_batches, thinned)


def final(out) -> tuple:
    """The findings open in the blob and the metrics: what any cut into batches ends with."""
    published = None if out.blob is None else decode(out.blob).open_findings
    return published, out.metrics


def record_texts(records) -> list[bytes]:
    return [record.to_json() for record in records]
