"""A restarted job's /metrics and group pages, from each group's stored blob, before any new
event: the metrics at once, the detail when its page is first asked for."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from streaming.core.contract import GroupKey
from streaming.core.step import StepConfig, restored_of, snapshot_of
from streaming.exporter.collector import SnapshotStore
from streaming.exporter.details import Deferred, DetailSummary


def restore_group(store: SnapshotStore, key: GroupKey, blob: bytes, config: StepConfig) -> None:
    """The group's metrics and detail as its blob has them. The detail is deferred, its summary
    taken from the open findings; with `config.exact` it is rendered now and summarised from
    itself, as a detail the state function sends (the twin, which tests/unit/test_restore.py
    compares the deferred one with). Raises CodecError for a blob that cannot be read."""
    metrics, open_since = restored_of(blob, config)
    store.replace_group(replace(metrics, cluster=key.cluster), restored=True)
    if config.exact:
        store.details.put(_detail_json(blob, config, key.cluster))
        return
    summary = DetailSummary.of((identity.kind, since) for identity, since in open_since.items())
    store.details.put_deferred(key, summary, Deferred(partial(_detail_json, blob, config,
                                                              key.cluster)))


def _detail_json(blob: bytes, config: StepConfig, cluster: str) -> bytes:
    return replace(snapshot_of(blob, config)[1], cluster=cluster).to_json()
