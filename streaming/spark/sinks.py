"""foreachBatch on the driver: the exporter's snapshots, the findings topic, the dead-letter topic,
and the job's counters.

Counters and produced records are exactly-once per micro-batch id: a batch Spark re-runs after a
crash (same id, same rows, since the state step is deterministic) refreshes the snapshots but is
not counted or produced again. The counters file lives in the checkpoint, so it moves with it.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from streaming.exporter import SnapshotStore
from streaming.spark.checkpoint_files import TextFile, checkpoint_child
from streaming.spark.state_function import COUNTS, DEAD_LETTER, FINDING, REMOVED, SNAPSHOT

log = logging.getLogger(__name__)

REASON_HEADER = "rebalance-monitor-reason"


@dataclass
class JobCounters:
    batch_id: int = -1
    events: Counter = field(default_factory=Counter)
    invalid: Counter = field(default_factory=Counter)
    max_event_time_ms: int = 0

    @classmethod
    def load(cls, file: TextFile) -> JobCounters:
        text = file.read()
        if text is None:
            return cls()
        data = json.loads(text)
        return cls(data["batch_id"], Counter(data["events"]), Counter(data["invalid"]),
                   data.get("max_event_time_ms", 0))

    def save(self, file: TextFile) -> None:
        file.write(json.dumps({"batch_id": self.batch_id, "events": self.events,
                               "invalid": self.invalid,
                               "max_event_time_ms": self.max_event_time_ms}))


def counters_path(checkpoint: str) -> str:
    """Where the counters live: beside Spark's offsets and state, on the same filesystem."""
    return checkpoint_child(checkpoint, "monitor", "counters.json")


class BatchSink:
    """Callable for DataStreamWriter.foreachBatch."""

    def __init__(self, store: SnapshotStore, counters_file: TextFile, producer,
                 findings_topic: str, dead_letter_topic: str) -> None:
        self._store = store
        self._counters_file = counters_file
        self._counters = JobCounters.load(counters_file)
        self._producer = producer  # confluent_kafka.Producer or anything with produce/flush
        self._findings_topic = findings_topic
        self._dead_letter_topic = dead_letter_topic
        self._publish_health()

    def close(self) -> None:
        """Flush what was produced and let go of the producer (its client closes with it)."""
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None

    def __call__(self, batch_df, batch_id: int) -> None:
        self.apply_rows(batch_df.collect(), batch_id)
        self._publish_health(time.time())

    def apply_rows(self, rows, batch_id: int) -> None:
        first_time = batch_id > self._counters.batch_id
        for row in rows:
            self._apply_row(row, count=first_time)
        if first_time:
            self._producer.flush(30)
            self._counters.batch_id = batch_id
            self._counters.save(self._counters_file)

    def _apply_row(self, row, count: bool) -> None:
        kind, key = row["kind"], row["state_key"]
        payload = bytes(row["payload"]) if row["payload"] is not None else b""
        if kind == SNAPSHOT:
            snapshot = json.loads(payload)
            self._store.replace_group(snapshot)
            self._counters.max_event_time_ms = max(self._counters.max_event_time_ms,
                                                   int(snapshot.get("event_time_ms") or 0))
        elif kind == REMOVED:
            for system in ("rocketmq", "kafka"):
                self._store.remove_group(system, key)
        elif kind == FINDING:
            self._store.record_finding(json.loads(payload))
            if count:
                self._producer.produce(self._findings_topic, key=key.encode(), value=payload)
        elif not count:
            return
        elif kind == DEAD_LETTER:
            self._producer.produce(self._dead_letter_topic, value=payload,
                                   headers=[(REASON_HEADER, (row["reason"] or "").encode())])
        elif kind == COUNTS:
            counts = json.loads(payload)
            self._counters.events.update(counts.get("events", {}))
            self._counters.invalid.update(counts.get("invalid", {}))

    def _publish_health(self, finished_at: float | None = None) -> None:
        changes = dict(events_total=dict(self._counters.events),
                       invalid_events_total=dict(self._counters.invalid),
                       max_event_time_ms=self._counters.max_event_time_ms)
        if finished_at is not None:
            changes["last_batch_timestamp_seconds"] = finished_at
        self._store.update_health(**changes)
