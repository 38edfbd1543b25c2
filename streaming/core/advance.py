"""advance(): one group of a shard through one micro-batch: keep its refreshes, or step it.

A step costs about 2 ms of Python per group (decode, findings, encode), and a steady fleet sends
every group a few heartbeats per batch that change nothing (streaming.core.state.refresh). A
batch whose events are all refreshes of the group's view is therefore kept beside the group's
blob, without a step; the group steps with them, in their place, when an event that is not a
refresh arrives, when the watermark passes the deadline the kept refreshes renew (a session
really expired), or when its cap of them wait and thinning them (Refreshes.thinned) leaves
too many. Kept refreshes renew the sessions they restate,
so a steady group does not step each session timeout; its entry's timeout moves with them, so
the watermark does not wake it for nothing. That is the same as the batches
being cut another way, which `step` does not depend on (tests/unit/test_step_properties.py);
and since a kept batch would have changed no finding and no metric but the event time, nothing
is detected later for it (tests/unit/test_refresh_deferral.py).

    >>> from streaming.core.state.events import parse_event
    >>> def hb(ts, topics=("T",)):
    ...     return [(parse_event({"type": "heartbeat", "ts": ts, "group": "g", "client_id": "c1",
    ...                           "topics": list(topics), "strategy": "AVG"})[0], ts % 1000)]
    >>> deferring = StepConfig(exact=False)     # exact: no refresh is kept, every batch steps
    >>> first = advance(None, hb(1_700_000_000_000), None, deferring)
    >>> kept = advance(first.entry, hb(1_700_000_030_000), None, deferring)
    >>> kept.output, kept.entry.blob == first.entry.blob, kept.entry.kept_count
    (None, True, 1)
    >>> changed = advance(kept.entry, hb(1_700_000_031_000, topics=("T", "U")), None, deferring)
    >>> changed.output.metrics.event_time_ms, changed.entry.kept
    (1700000031000, b'')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from streaming.core.contract import ResetCause, StepOutput
from streaming.core.state.codec import CodecError
from streaming.core.state.events import Event
from streaming.core.state.refresh import Refreshes, unpack_kept
from streaming.core.state.shard import ShardEntry
from streaming.core.step import StepConfig, refreshes_of, stepped
from streaming.core.times import NO_TIMEOUT


class Advanced(NamedTuple):
    """The group's entry after the batch (None: the group is gone), its step's output (None:
    the batch's events were kept, there is nothing to publish), what the new blob's view
    takes as a refresh (None: no step, or the group is gone) and, when the stored entry could
    not be read, why (the group then starts afresh from this batch's events)."""

    entry: ShardEntry | None
    output: StepOutput | None
    refreshes: Refreshes | None = None
    reset: ResetCause | None = None


def advance(entry: ShardEntry | None, events: Sequence[tuple[Event, int]],
            watermark_ms: int | None, config: StepConfig | None = None,
            refreshes_for: Callable[[ShardEntry], Refreshes] | None = None,
            stems: Sequence[bytes | None] | None = None,
            fold_refreshes: bool = True, thin_kept: bool = True) -> Advanced:
    """`refreshes_for(entry)` gives what the entry's blob's view takes as a refresh; by default
    it is decoded from the blob (the job caches it per worker, keyed by the blob's stored
    text, so a kept group's blob is never decoded); `stems`, each event's text without its time
    when known (Refreshes.keep_all). When the group steps, the refreshes it kept are given to
    the step as such (`stepped`'s `refreshes`: those before every new event go onto the view
    at once); `fold_refreshes=False` steps them one by one among the events, the twin that
    tests/unit/test_refresh_fold.py compares it with. `thin_kept`: a group at its cap of
    kept refreshes thins them (Refreshes.thinned) before it steps; off, the twin that
    tests/unit/test_kept_thinning.py compares it with, it steps. A stored entry
    that cannot be read is never fatal: the group is rebuilt from the batch's events (gone if
    it has none), and `reset` says why.

        >>> from streaming.core.state.events import parse_event
        >>> [beat] = parse_event({"type": "heartbeat", "ts": 1_700_000_000_000, "group": "g",
        ...                       "client_id": "c1", "topics": ["T"], "strategy": "AVG"})
        >>> rebuilt = advance(ShardEntry.of(b"\x09garbage", 0), [(beat, 0)], None)
        >>> rebuilt.reset, rebuilt.output.metrics.members
        ('unknown_version', 1)
    """
    config = config or StepConfig()
    try:
        return _advance(entry, events, watermark_ms, config, refreshes_for, stems, fold_refreshes,
                        thin_kept)
    except CodecError as error:
        if entry is None:
            raise
        return _advance(None, events, watermark_ms, config, None, None,
                        fold_refreshes, thin_kept)._replace(reset=error.cause)


def _advance(entry: ShardEntry | None, events: Sequence[tuple[Event, int]],
             watermark_ms: int | None, config: StepConfig,
             refreshes_for: Callable[[ShardEntry], Refreshes] | None,
             stems: Sequence[bytes | None] | None, fold_refreshes: bool,
             thin_kept: bool) -> Advanced:
    if refreshes_for is None:
        def refreshes_for(entry: ShardEntry) -> Refreshes:
            return refreshes_of(entry.blob, config)
    view = None
    if not config.exact and entry is not None and (events or entry.kept):
        view = refreshes_for(entry)
        if view.may_keep(entry.kept, len(events), thin_kept):
            kept = view.keep_all(events, watermark_ms, entry.kept, stems, thin_kept)
            if kept is not None:
                return _kept(entry, kept)
    waiting = []
    if entry is not None and entry.kept:
        view = view if view is not None else refreshes_for(entry)
        waiting = view.events(unpack_kept(entry.kept))
    if not fold_refreshes:
        events, waiting = [*waiting, *events], []
    output, refreshes = stepped(entry.blob if entry else None, events,
                                watermark_ms=watermark_ms, config=config, refreshes=waiting)
    if output.blob is None:
        return Advanced(None, output)
    return Advanced(ShardEntry.of(output.blob, timeout_after(output, watermark_ms)), output,
                    refreshes)


def keep_stemmed(entry: ShardEntry, stamped: Sequence[tuple[bytes, int, int]],
                 watermark_ms: int | None, refreshes: Refreshes,
                 thin: bool = True) -> Advanced | None:
    """`advance` of events given by their stem, time and offset alone, each stem one that the
    entry's `refreshes` knows (Refreshes.knows), when advance would keep them: the same
    Advanced it gives those events. None where it would not (it steps the group, or the entry
    does not decode): call `advance` with the events."""
    try:
        kept = refreshes.keep_stemmed(stamped, watermark_ms, entry.kept, thin)
    except CodecError:
        return None
    return None if kept is None else _kept(entry, kept)


def _kept(entry: ShardEntry, kept: tuple[bytes, int]) -> Advanced:
    packed, deadline = kept
    return Advanced(entry._replace(kept=packed, timeout_ms=max(entry.timeout_ms, deadline)), None)


def timeout_after(output: StepOutput, watermark_ms: int | None) -> int:
    """When the watermark wakes the group, which must lie after the watermark (as Spark required
    of the group's own key)."""
    if output.next_timeout_ms is None:
        return NO_TIMEOUT
    return max(output.next_timeout_ms, (watermark_ms or 0) + 1)
