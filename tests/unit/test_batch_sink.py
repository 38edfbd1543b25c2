import json

import pytest
from confluent_kafka import KafkaError
from pyspark.sql import Row

from streaming.common.delivery import DeliveryStats, Outbox
from streaming.core.contract import (
    FindingIdentity,
    FindingRecord,
    GroupDetail,
    GroupKey,
    MemberDetail,
)
from streaming.exporter import SnapshotStore
from streaming.spark.checkpoint_files import LocalTextFile
from streaming.spark.sinks import BatchSink, JobCounters, counters_path
from tests.unit.fake_producer import FakeProducer
from tests.unit.state_helpers import group_metrics

pytestmark = pytest.mark.unit


UNROUTABLE = "\u0000unroutable"


def row(kind, group="g", payload=b"", reason=None, system="rocketmq", cluster="default"):
    """One row of the state function's output, as foreachBatch collects it."""
    return Row(system=system, group=group, cluster=cluster, kind=kind, reason=reason,
               payload=payload)


def batch(system="rocketmq"):
    metrics = group_metrics("g", system, members=2, event_time_ms=5000)
    finding = FindingRecord("started", FindingIdentity("double_assignment", "T", ("b", 0),
                                                       ("c1", "c2")), "g", system, 4000, 5000)
    return [
        row("metrics", payload=metrics.to_json(), system=system),
        row("finding", payload=finding.to_json(), system=system),
        row("dead_letter", UNROUTABLE, b"not json", "not_json", UNROUTABLE),
        row("counts", payload=json.dumps({"events": {"heartbeat": 3}, "invalid": {"not_json": 1}, "event_time_ms": 0}).encode(),
            system=system),
    ]


class Sent:
    """What reached the fake broker, as (topic, key, value, headers)."""

    def __init__(self, producer: FakeProducer) -> None:
        self._producer = producer

    def __eq__(self, other):
        return list(self) == other

    def __iter__(self):
        return iter([(m.topic(), m.key(), m.value(), m.headers()) for m in self._producer.delivered])

    def __getitem__(self, index):
        return list(self)[index]

    def __len__(self):
        return len(self._producer.delivered)


def make_sink(tmp_path, producer=None):
    store = SnapshotStore()
    producer = producer or FakeProducer()
    outbox = Outbox(producer, DeliveryStats())
    sink = BatchSink(store, LocalTextFile(tmp_path / "counters.json"), outbox, "findings", "dlq")
    return sink, store, Sent(producer)


def test_a_batch_updates_snapshots_counters_and_topics(tmp_path):
    sink, store, producer = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)
    assert store.group(GroupKey("rocketmq", "g")).members == 2
    assert store.recent_findings()[0].clients == ("c1", "c2")
    assert [(t, k) for t, k, _, _ in producer] == [("findings", b"g"), ("dlq", None)]
    assert producer[1][3] == [("rebalance-monitor-reason", b"not_json")]
    counters = JobCounters.load(LocalTextFile(tmp_path / "counters.json"))
    assert (counters.batch_id, counters.events["heartbeat"], counters.invalid["not_json"]) == (0, 3, 1)
    assert counters.max_event_time_ms == 5000


def test_a_replayed_batch_is_not_counted_or_produced_twice(tmp_path):
    sink, store, producer = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)
    # A restarted job (new sink, same checkpoint) re-runs batch 0 and then runs batch 1.
    restarted, store2, producer2 = make_sink(tmp_path)
    restarted.apply_rows(batch(), batch_id=0)
    assert producer2 == []
    assert store2.groups()[0].members == 2  # metrics are still refreshed
    restarted.apply_rows(batch(), batch_id=1)
    counters = JobCounters.load(LocalTextFile(tmp_path / "counters.json"))
    assert (counters.batch_id, counters.events["heartbeat"], counters.invalid["not_json"]) == (1, 6, 2)
    assert len(producer2) == 2


def test_removed_group_disappears(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)
    sink.apply_rows([row("removed")], batch_id=1)
    assert store.groups() == []


def test_removing_a_group_leaves_the_other_systems_group_of_the_same_name(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    sink.apply_rows(batch("rocketmq") + batch("kafka"), batch_id=0)
    assert [g.key for g in store.groups()] == [GroupKey("kafka", "g"), GroupKey("rocketmq", "g")]
    sink.apply_rows([row("removed", system="kafka")], batch_id=1)
    assert [g.key for g in store.groups()] == [GroupKey("rocketmq", "g")]


def test_counters_live_in_the_checkpoints_own_filesystem():
    assert counters_path("hdfs://namenode:8020/cp/rm") == "hdfs://namenode:8020/cp/rm/monitor/counters.json"
    assert counters_path("/var/lib/rm/") == "/var/lib/rm/monitor/counters.json"


def test_a_dead_letter_the_topic_refuses_is_counted_and_the_batch_completes(tmp_path):
    refusing = FakeProducer(lambda m: KafkaError.TOPIC_AUTHORIZATION_FAILED
                            if m.topic() == "dlq" else None)
    sink, store, sent = make_sink(tmp_path, refusing)
    sink.apply_rows(batch(), batch_id=0)
    assert [t for t, _, _, _ in sent] == ["findings"]
    assert sink._outbox.stats.snapshot().undelivered == {("dlq", "topic_authorization_failed"): 1}
    counters = JobCounters.load(LocalTextFile(tmp_path / "counters.json"))
    assert counters.batch_id == 0 and counters.invalid["not_json"] == 1


def test_an_oversized_dead_letter_is_cut_and_keeps_its_reason(tmp_path):
    sink, _, sent = make_sink(tmp_path)
    big = row("dead_letter", UNROUTABLE, b"{" * 1_100_000, "not_json", UNROUTABLE)
    sink.apply_rows([big], batch_id=0)
    ((topic, _, value, headers),) = list(sent)
    assert topic == "dlq" and len(value) < 1_000_000
    assert dict(headers)["rebalance-monitor-reason"] == b"not_json"
    assert dict(headers)["rebalance-monitor-original-bytes"] == b"1100000"


class CollectedBatch:
    """What foreachBatch hands the sink, for a batch of known rows."""

    def __init__(self, rows) -> None:
        self._rows = rows

    def collect(self):
        return self._rows


def test_after_a_batch_its_snapshots_are_in_when_the_sink_says_so(tmp_path):
    store = SnapshotStore()
    seen = []
    sink = BatchSink(store, LocalTextFile(tmp_path / "counters.json"),
                     Outbox(FakeProducer(), DeliveryStats()), "findings", "dlq",
                     after_batch=lambda: seen.append(store.group(GroupKey("rocketmq", "g"))))
    sink(CollectedBatch(batch()), 0)
    assert [metrics.members for metrics in seen] == [2]
    assert store.health().last_batch_timestamp_seconds > 0


def test_spark_progress_is_checked_against_what_the_batch_accounted_for(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)          # 3 valid + 1 invalid records
    sink.note_progress(0, input_rows=4, dropped_by_watermark=0)
    assert store.health().unaccounted_records_total == 0
    sink.apply_rows(batch(), batch_id=1)
    sink.note_progress(1, input_rows=7, dropped_by_watermark=3)   # Spark read 3 more
    sink.note_progress(1, input_rows=7, dropped_by_watermark=3)   # the same batch again
    health = store.health()
    assert (health.source_records_total, health.unaccounted_records_total,
            health.rows_dropped_by_watermark_total) == (11, 3, 3)


def test_the_cluster_figures_survive_a_restart(tmp_path):
    sink, _, _ = make_sink(tmp_path)
    sink.apply_rows(batch(), batch_id=0)
    sink.note_progress(0, input_rows=5, dropped_by_watermark=1)
    restarted, store, _ = make_sink(tmp_path)
    restarted.apply_rows(batch(), batch_id=0)     # re-run: counted once, checked again
    restarted.note_progress(0, input_rows=5, dropped_by_watermark=1)
    health = store.health()
    assert (health.source_records_total, health.unaccounted_records_total,
            health.rows_dropped_by_watermark_total) == (5, 1, 1)
    assert health.events_total == {"heartbeat": 3}


def clusters_counts(clusters: dict) -> Row:
    payload = json.dumps({"events": {}, "invalid": {}, "event_time_ms": 0,
                          "clusters": clusters}).encode()
    return row("counts", group="", payload=payload, cluster="")


def doubled(group: str, cluster: str, members: int) -> Row:
    metrics = group_metrics(group, members=members, double_assigned={"T": 2}, cluster=cluster)
    return row("metrics", group=group, payload=metrics.to_json(), cluster=cluster)


def test_a_silent_clusters_groups_stay_as_they_were_and_are_marked_stale(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    gb = GroupKey("rocketmq", "g", "b")
    sink(CollectedBatch([clusters_counts({"a": 1_000, "b": 1_000}),
                         doubled("g", "a", 2), doubled("g", "b", 2)]), 0)
    # b goes silent; a goes on, the core expires b's members and then the group.
    sink(CollectedBatch([clusters_counts({"a": 200_000}), doubled("g", "b", 1)]), 1)
    sink(CollectedBatch([row("removed", cluster="b")]), 2)
    assert (store.group(gb).members, store.group(gb).double_assigned) == (2, {"T": 2})
    health = store.health()
    assert health.stale_groups == [gb]
    assert health.clusters == {"a": (200_000, False), "b": (1_000, True)}
    # A restart while b is silent shows the group as it was.
    _, restarted, _ = make_sink(tmp_path)
    assert restarted.group(gb).members == 2
    assert restarted.health().stale_groups == [gb]
    # b speaks again: the row held back is applied, then b's new rows.
    sink(CollectedBatch([clusters_counts({"b": 201_000})]), 3)
    assert store.group(gb) is None
    assert store.health().stale_groups == []
    assert store.group(GroupKey("rocketmq", "g", "a")).members == 2


def test_a_cluster_silent_past_the_forget_time_is_retired(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    gb = GroupKey("rocketmq", "g", "b")
    sink(CollectedBatch([clusters_counts({"a": 1_000, "b": 1_000}), doubled("g", "b", 2)]), 0)
    sink(CollectedBatch([clusters_counts({"a": 200_000}), row("removed", cluster="b")]), 1)
    assert store.group(gb).members == 2
    sink(CollectedBatch([clusters_counts({"a": 1_000 + 86_400_001})]), 2)
    assert store.group(gb) is None
    assert "b" not in store.health().clusters


def detail_row(group: str, cluster: str, members: int) -> Row:
    detail = GroupDetail("rocketmq", group, (), tuple(
        MemberDetail(f"c{i}", "", ("T",), "AVG") for i in range(members)), (), cluster)
    return row("detail", group=group, payload=detail.to_json(), cluster=cluster)


def test_a_groups_detail_is_kept_until_the_group_goes(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    key = GroupKey("rocketmq", "g")
    sink.apply_rows([doubled("g", "default", 2), detail_row("g", "default", 2)], batch_id=0)
    assert len(store.details.get(key).members) == 2
    sink.apply_rows([doubled("g", "default", 2)], batch_id=1)      # no change, no detail row
    assert len(store.details.get(key).members) == 2
    sink.apply_rows([row("removed")], batch_id=2)
    assert store.details.get(key) is None


def test_a_silent_clusters_group_detail_is_held_with_its_metrics(tmp_path):
    sink, store, _ = make_sink(tmp_path)
    gb = GroupKey("rocketmq", "g", "b")
    sink(CollectedBatch([clusters_counts({"a": 1_000, "b": 1_000}), doubled("g", "b", 2),
                         detail_row("g", "b", 2)]), 0)
    sink(CollectedBatch([clusters_counts({"a": 200_000}), doubled("g", "b", 1),
                         detail_row("g", "b", 1)]), 1)
    assert len(store.details.get(gb).members) == 2       # as it was when b went silent
    sink(CollectedBatch([clusters_counts({"b": 201_000})]), 2)
    assert len(store.details.get(gb).members) == 1
