import json

import pytest

from streaming.exporter import SnapshotStore
from streaming.spark.checkpoint_files import LocalTextFile
from streaming.spark.sinks import BatchSink, JobCounters, counters_path

pytestmark = pytest.mark.unit


class RecordingProducer:
    """Test double for confluent_kafka.Producer: records what would be sent (the real producer
    is exercised by the integration tests against the broker)."""

    def __init__(self):
        self.sent = []

    def produce(self, topic, value=None, key=None, headers=None):
        self.sent.append((topic, key, value, headers))

    def flush(self, timeout=None):
        return 0


def row(kind, key="g", payload=b"{}", reason=None):
    return {"state_key": key, "kind": kind, "reason": reason, "payload": payload}


def batch():
    snapshot = {"group": "g", "system": "rocketmq", "members": 2, "event_time_ms": 5000}
    finding = {"status": "started", "kind": "double_assignment", "group": "g"}
    return [
        row("snapshot", payload=json.dumps(snapshot).encode()),
        row("finding", payload=json.dumps(finding).encode()),
        row("dead_letter", key="\u0000unroutable", payload=b"not json", reason="not_json"),
        row("counts", payload=json.dumps({"events": {"heartbeat": 3}, "invalid": {"not_json": 1}}).encode()),
    ]


def make_sink(tmp_path, producer=None):
    store = SnapshotStore()
    producer = producer or RecordingProducer()
    sink = BatchSink(store, LocalTextFile(tmp_path / "counters.json"), producer, "findings", "dlq")
    return sink, store, producer


def test_a_batch_updates_snapshots_counters_and_topics(tmp_path):
    sink, store, producer = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)
    assert store.groups()[0]["members"] == 2
    assert [(t, k) for t, k, _, _ in producer.sent] == [("findings", b"g"), ("dlq", None)]
    assert producer.sent[1][3] == [("rebalance-monitor-reason", b"not_json")]
    counters = JobCounters.load(LocalTextFile(tmp_path / "counters.json"))
    assert (counters.batch_id, counters.events["heartbeat"], counters.invalid["not_json"]) == (0, 3, 1)
    assert counters.max_event_time_ms == 5000


def test_a_replayed_batch_is_not_counted_or_produced_twice(tmp_path):
    sink, store, producer = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)
    # A restarted job (new sink, same checkpoint) re-runs batch 0 and then runs batch 1.
    restarted, store2, producer2 = make_sink(tmp_path)
    restarted.apply_rows(batch(), batch_id=0)
    assert producer2.sent == []
    assert store2.groups()[0]["members"] == 2  # snapshots are still refreshed
    restarted.apply_rows(batch(), batch_id=1)
    counters = JobCounters.load(LocalTextFile(tmp_path / "counters.json"))
    assert (counters.batch_id, counters.events["heartbeat"], counters.invalid["not_json"]) == (1, 6, 2)
    assert len(producer2.sent) == 2


def test_removed_group_disappears(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)
    sink.apply_rows([row("removed")], batch_id=1)
    assert store.groups() == []


def test_counters_live_in_the_checkpoints_own_filesystem():
    assert counters_path("hdfs://namenode:8020/cp/rm") == "hdfs://namenode:8020/cp/rm/monitor/counters.json"
    assert counters_path("/var/lib/rm/") == "/var/lib/rm/monitor/counters.json"
