"""A restart's /metrics and group pages, from the state store of the last committed batch.

Each stored group is rebuilt from its blob alone (streaming.core.step.snapshot_of): decoding
it and replaying its window is most of a restart's time before its first batch, about 1 ms a
group of 10 clients. It runs in the Python workers, one task per state partition, so that
every core takes a share (on the driver alone it held one core of two for 12 s at 10,000
groups, docs/benchmarks.md, "The restore on the workers"). The driver only files what they
send: each group's metrics and detail in the contract's own serialisation, as the state
function sends them after a step.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace
from functools import partial

import pandas as pd
from pyspark.errors.exceptions.captured import SparkRuntimeException
from pyspark.sql import SparkSession

from streaming.core.contract import DETAIL, METRICS, GroupMetrics
from streaming.core.state.codec import CodecError
from streaming.core.state.shard import salvage_shard
from streaming.core.step import StepConfig, snapshot_of
from streaming.exporter import SnapshotStore
from streaming.spark.checkpoint_files import checkpoint_child, hadoop_path_exists

log = logging.getLogger(__name__)

RESTORED_SCHEMA = "kind string, payload binary"
# A stored shard, or a group's blob in one, that does not decode: no payload.
UNREADABLE = "unreadable"


def snapshot_rows(blobs: Iterable[bytes | None],
                  config: StepConfig) -> Iterator[tuple[str, bytes | None]]:
    """(kind, payload) for the stored shards `blobs`: each group's METRICS and DETAIL payload,
    and an UNREADABLE row for each shard or group that does not decode (the state function
    resets those at their next batch, where they are counted by cause)."""
    for blob in blobs:
        salvaged = salvage_shard(bytes(blob)) if blob is not None else None
        if salvaged is None:
            continue
        if salvaged.broken:
            yield UNREADABLE, None
        for key, entry in salvaged.entries.items():
            try:
                metrics, detail = snapshot_of(entry.blob, config)
            except CodecError:
                yield UNREADABLE, None
                continue
            yield METRICS, replace(metrics, cluster=key.cluster).to_json()
            yield DETAIL, replace(detail, cluster=key.cluster).to_json()


def _snapshot_frames(frames: Iterator[pd.DataFrame], config: StepConfig) -> Iterator[pd.DataFrame]:
    """mapInPandas: the shards' blobs in, their rows out."""
    for frame in frames:
        rows = list(snapshot_rows(frame["blob"], config))
        yield pd.DataFrame(rows, columns=["kind", "payload"])


def file_snapshots(rows: Iterable[tuple[str, bytes | None]], store: SnapshotStore) -> int:
    """File the rows of `snapshot_rows` in the store, as a restart's (their counters count from
    before it); returns how many groups were restored."""
    restored, unreadable = 0, 0
    for kind, payload in rows:
        if kind == METRICS:
            store.replace_group(GroupMetrics.from_json(payload), restored=True)
            restored += 1
        elif kind == DETAIL:
            store.details.put(payload)
        else:
            unreadable += 1
    if unreadable:
        log.error("%d stored group states or shards could not be read: not shown until their "
                  "groups' next events rebuild them", unreadable)
    return restored


def restore_snapshots(spark: SparkSession, checkpoint: str, store: SnapshotStore,
                      step_config: StepConfig) -> int:
    """Fill /metrics and the groups' details from the state store of the last committed batch,
    before any new event; returns how many groups were restored."""
    if not hadoop_path_exists(spark, checkpoint_child(checkpoint, "state")):
        return 0
    # The state store reader asks the driver's StateStoreCoordinator, which pyspark 4.2 only
    # registers with the session's StreamingQueryManager: before any query, create it.
    spark.streams.active  # noqa: B018
    try:
        rows = (spark.read.format("statestore").load(checkpoint)
                .selectExpr("value.groupState.blob AS blob")
                .mapInPandas(partial(_snapshot_frames, config=step_config), RESTORED_SCHEMA)
                .collect())
    except SparkRuntimeException as error:
        # Killed during its first batch: state files exist but no batch was committed. Nothing
        # to restore; the query re-runs that batch.
        if error.getCondition() != "STDS_COMMITTED_BATCH_UNAVAILABLE":
            raise
        return 0
    return file_snapshots(((row["kind"], None if row["payload"] is None else bytes(row["payload"]))
                           for row in rows), store)
