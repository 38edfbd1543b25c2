"""foreachBatch on the driver: the exporter's snapshots (each group's metrics and detail), the
findings topic, the dead-letter topic, and the job's counters.

Counters are exactly-once per micro-batch id: a batch Spark re-runs after a crash (same id, same
rows, since the state step is deterministic) refreshes the snapshots but is not counted or
produced again. The counters file lives in the checkpoint, so it moves with it.

Records go through an Outbox, so no produce failure stops the job: a batch waits a bounded time
for its records' outcomes before its counters are saved (a crash before then re-runs the batch
and produces them again: at least once), and what is still pending after that settles in the
background, delivered or counted as undelivered by topic and cause.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from streaming.common.delivery import Delivery, Outbox, Record
from streaming.core.contract import (
    COUNTS,
    DEAD_LETTER,
    DETAIL,
    FINDING,
    METRICS,
    REMOVED,
    FindingRecord,
    GroupKey,
    GroupMetrics,
    ShardCounts,
)
from streaming.exporter import SnapshotStore
from streaming.spark.checkpoint_files import TextFile, checkpoint_child
from streaming.spark.staleness import ClusterLiveness

log = logging.getLogger(__name__)

REASON_HEADER = "rebalance-monitor-reason"


@dataclass
class JobCounters:
    """The job's counters, saved in the checkpoint. `events` and `invalid` count records, once
    each (a route naming several groups is one record); `batch_id` is the last batch they hold.
    The source's figures come from Spark's progress of each batch, up to `progress_batch_id`."""

    batch_id: int = -1
    events: Counter = field(default_factory=Counter)
    invalid: Counter = field(default_factory=Counter)
    max_event_time_ms: int = 0
    progress_batch_id: int = -1
    source_records: int = 0
    rows_dropped_by_watermark: int = 0
    unaccounted_records: int = 0
    resets: Counter = field(default_factory=Counter)   # ResetCause -> stored states reset
    liveness: dict | None = None       # streaming.spark.staleness.ClusterLiveness.to_json()

    @classmethod
    def load(cls, file: TextFile) -> JobCounters:
        text = file.read()
        if text is None:
            return cls()
        data = json.loads(text)
        for name in ("events", "invalid", "resets"):
            data[name] = Counter(data.get(name, {}))
        return cls(**data)

    def save(self, file: TextFile) -> None:
        file.write(json.dumps(self.__dict__))


def counters_path(checkpoint: str) -> str:
    """Where the counters live: beside Spark's offsets and state, on the same filesystem."""
    return checkpoint_child(checkpoint, "monitor", "counters.json")


class BatchSink:
    """Callable for DataStreamWriter.foreachBatch."""

    def __init__(self, store: SnapshotStore, counters_file: TextFile, outbox: Outbox,
                 findings_topic: str, dead_letter_topic: str, wait_s: float = 30.0,
                 after_batch: Callable[[], None] | None = None,
                 cluster_silence_ms: int = 30_000, cluster_forget_ms: int = 86_400_000) -> None:
        self._store = store
        self._after_batch = after_batch
        self._counters_file = counters_file
        self._counters = JobCounters.load(counters_file)
        self._outbox = outbox
        self._findings_topic = findings_topic
        self._dead_letter_topic = dead_letter_topic
        self._wait_s = wait_s
        self._sent: list[Delivery] = []
        # The sink runs on the query's thread, note_progress on the listener's.
        self._lock = threading.Lock()
        self._batch_records: dict[int, int] = {}
        self._liveness = ClusterLiveness.from_json(self._counters.liveness, cluster_silence_ms,
                                                  cluster_forget_ms)
        # The details the core wrote for groups held while their cluster is silent (in memory:
        # a restart takes each group's detail from the state store).
        self._held_details: dict[GroupKey, bytes] = {}
        for frozen in self._liveness.frozen.values():   # a restart shows them as they were
            if frozen.shown is not None:
                self._store.replace_group(GroupMetrics.from_json(frozen.shown), restored=True)
        self._publish_health()

    def close(self, timeout_s: float = 10.0) -> None:
        """Deliver what is still queued (bounded) and let go of the producer."""
        if self._outbox is not None:
            self._outbox.close(timeout_s)
            self._outbox = None

    def __call__(self, batch_df, batch_id: int) -> None:
        self.apply_rows(batch_df.collect(), batch_id)
        # The batch's counts were shown with its groups (apply_rows); only its end is new.
        self._store.update_health(last_batch_timestamp_seconds=time.time())
        if self._after_batch is not None:
            self._after_batch()

    def apply_rows(self, rows, batch_id: int) -> None:
        first_time = batch_id > self._counters.batch_id
        accounted = Counter()
        with self._store.batch():     # a scrape sees the batch's groups and counts together
            self._apply_batch(rows, batch_id, first_time, accounted)
        with self._lock:
            self._batch_records[batch_id] = accounted.total()
        if first_time:
            pending = self._outbox.wait(self._sent, self._wait_s)
            if pending:
                log.warning("batch %d: %d records not yet delivered after %.0f s; they stay "
                            "queued and are retried", batch_id, pending, self._wait_s)
            self._sent = []
            with self._lock:
                self._counters.batch_id = batch_id
                self._counters.liveness = self._liveness.to_json()
                self._counters.save(self._counters_file)

    def _apply_batch(self, rows, batch_id: int, first_time: bool, accounted: Counter) -> None:
        resets_before = Counter(self._counters.resets)
        for row in rows:
            if row.kind == COUNTS:
                self._apply_counts(ShardCounts.from_json(bytes(row.payload)), first_time,
                                   accounted)
        if self._counters.resets != resets_before:
            reset = self._counters.resets - resets_before
            log.error("batch %d: %d stored group states could not be read and were reset (%s); "
                      "each group is rebuilt from its next events", batch_id, reset.total(),
                      ", ".join(f"{cause} {n}" for cause, n in sorted(reset.items())))
        for key, frozen in self._liveness.thaw():
            held = self._held_details.pop(key, None)
            if held is not None:
                self._store.details.put(held)
            if frozen.pending is not None:
                self._apply_group_row(key, *frozen.pending)
        for row in rows:
            if row.kind != COUNTS:
                self._apply_row(row, count=first_time)
        self._publish_health()

    def note_progress(self, batch_id: int, input_rows: int, dropped_by_watermark: int) -> None:
        """Spark's account of a finished batch (its listener calls this): the records its
        source read and the rows its stateful operator dropped. Each record read must be among
        those this sink saw applied or dead-lettered in that batch; any other is counted as
        unaccounted. Saved at once, so a restart keeps it."""
        with self._lock:
            accounted = self._batch_records.pop(batch_id, 0)
            if batch_id <= self._counters.progress_batch_id:
                return
            missing = input_rows - accounted
            if missing or dropped_by_watermark:
                log.error("batch %d: the source read %d records, %d were applied or "
                          "dead-lettered, Spark dropped %d rows behind the watermark",
                          batch_id, input_rows, accounted, dropped_by_watermark)
            counters = self._counters
            counters.progress_batch_id = batch_id
            counters.source_records += input_rows
            counters.rows_dropped_by_watermark += dropped_by_watermark
            counters.unaccounted_records += max(0, missing)
            counters.save(self._counters_file)
        self._publish_health()
        if self._after_batch is not None:     # a full scrape shows what is rendered
            self._after_batch()

    def _apply_counts(self, counts: ShardCounts, count: bool, accounted: Counter) -> None:
        accounted.update(counts.events)
        accounted.update(counts.invalid)
        self._counters.max_event_time_ms = max(self._counters.max_event_time_ms,
                                               counts.event_time_ms)
        self._liveness.observe(counts.clusters)
        if count:
            self._counters.events.update(counts.events)
            self._counters.invalid.update(counts.invalid)
            self._counters.resets.update(counts.resets)

    def _apply_row(self, row, count: bool) -> None:
        kind, key = row.kind, GroupKey(row.system, row.group, row.cluster)
        payload = bytes(row.payload) if row.payload is not None else b""
        if kind in (METRICS, REMOVED):
            if not self._liveness.hold(key, kind, payload, lambda: self._shown(key)):
                self._apply_group_row(key, kind, payload)
        elif kind == FINDING:
            record = FindingRecord.from_json(payload)
            if self._liveness.is_silent(key.cluster):
                # The core's view of a group whose cluster is silent: said so in the record.
                record = replace(record, detail={**(record.detail or {}), "cluster_silent": True})
                payload = record.to_json()
            self._store.record_finding(record)
            if count:
                self._send(Record(self._findings_topic, payload, key.group.encode()))
        elif kind == DETAIL:
            # Held with the group's metrics while its cluster is silent: the page shows the
            # group as it was, marked stale.
            if self._liveness.is_silent(key.cluster):
                self._held_details[key] = payload
            else:
                self._store.details.put(payload)
        elif kind == DEAD_LETTER and count:
            reason = (REASON_HEADER, (row.reason or "").encode())
            self._send(Record(self._dead_letter_topic, payload, headers=(reason,), cuttable=True))

    def _shown(self, key: GroupKey) -> bytes | None:
        shown = self._store.group(key)
        return None if shown is None else shown.to_json()

    def _apply_group_row(self, key: GroupKey, kind: str, payload: bytes) -> None:
        if kind == METRICS:
            metrics = GroupMetrics.from_json(payload)
            self._store.replace_group(metrics)
            self._counters.max_event_time_ms = max(self._counters.max_event_time_ms,
                                                   metrics.event_time_ms)
        else:
            self._store.remove_group(key)

    def _send(self, record: Record) -> None:
        self._sent.append(self._outbox.send(record))

    def _publish_health(self) -> None:
        counters = self._counters
        changes = dict(events_total=dict(counters.events),
                       invalid_events_total=dict(counters.invalid),
                       max_event_time_ms=counters.max_event_time_ms,
                       source_records_total=counters.source_records,
                       rows_dropped_by_watermark_total=counters.rows_dropped_by_watermark,
                       unaccounted_records_total=counters.unaccounted_records,
                       state_resets_total=dict(counters.resets),
                       clusters=self._liveness.clusters_health(),
                       stale_groups=self._liveness.stale_groups(self._store.group_keys()))
        self._store.update_health(**changes)
