"""The seed scenarios as events through the real broker and a real SparkSession, read back from
the job's real /metrics endpoint with the exact values."""

import json

import pytest

from streaming.spark.sinks import REASON_HEADER
from tests.integration.monitor_harness import RunningMonitor, produce_events
from tests.integration.seed_scenarios import seed_events
from tests.support import read_topic
from tests.unit.state_helpers import T0, hb, queues, route

pytestmark = [pytest.mark.integration, pytest.mark.slow]

B = "broker-b"


def crash_view(ids_a, ids_b) -> dict:
    return {"queues": {"TopicX": queues("broker-a", ids_a) + queues(B, ids_b)}}


def crash_phases() -> list[list[dict]]:
    g, t1, t2 = "g-crash", T0 + 1_000, T0 + 2_000
    before = [route("TopicX", group=g, brokers={"broker-a": 8, B: 8})]
    before += [hb(c, ["TopicX"], group=g, ts=T0 + i, view=crash_view(range(8), range(8)))
               for i, c in enumerate(("c1", "c2", "c3", "c4"))]   # joins a millisecond apart
    first_sees = [route("TopicX", group=g, ts=t1, brokers={B: 8}),
                  hb("c3", ["TopicX"], group=g, ts=t1, view=crash_view([], range(8)))]
    all_see = [hb(c, ["TopicX"], group=g, ts=t2, view=crash_view([], range(8)))
               for c in ("c1", "c2", "c4")]
    return [before, first_sees, all_see]


def labels(group, **extra):
    return {"system": "rocketmq", "group": group, **extra}


def test_seed_scenarios_appear_on_metrics_with_exact_values(spark, kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path) as monitor:
        produce_events(kafka_bootstrap, topic, seed_events())
        m = monitor.wait_for(lambda m: m.groups() >= {"g-skew", "g-433", "g-gap", "g-shared", "g-mixed"}
                             and m.value("rebalance_group_members", **labels("g-mixed")) == 3
                             and m.value("rebalance_group_members", **labels("g-shared")) == 3)
        m = monitor.catch_up()
        assert m.value("rebalance_group_members", **labels("g-skew")) == 4
        assert m.value("rebalance_skew_ratio", **labels("g-skew")) == 2.0
        assert m.value("rebalance_idle_clients", **labels("g-skew")) == 2
        assert m.series("rebalance_client_queues", group="g-skew") == {
            (("client", c), ("cluster", "default"), ("group", "g-skew"), ("system", "rocketmq")): n
            for c, n in {"c1": 2, "c2": 2, "c3": 0, "c4": 0}.items()}
        assert m.value("rebalance_double_assigned_queues", **labels("g-skew", topic="TopicX")) == 0

        assert m.value("rebalance_skew_ratio", **labels("g-433")) == 1.0
        assert [m.value("rebalance_client_queues", **labels("g-433", client=c))
                for c in ("c1", "c2", "c3")] == [4, 3, 3]

        assert m.value("rebalance_orphaned_queues", **labels("g-gap", topic="TopicB")) == 1
        assert m.value("rebalance_subscription_inconsistent", **labels("g-gap")) == 1

        assert m.value("rebalance_client_id_collisions", **labels("g-shared")) == 1
        assert m.value("rebalance_double_assigned_queues", **labels("g-shared", topic="T")) == 2
        assert m.value("rebalance_orphaned_queues", **labels("g-shared", topic="T")) == 2

        assert m.value("rebalance_strategy_inconsistent", **labels("g-mixed")) == 1
        assert m.value("rebalance_double_assigned_queues", **labels("g-mixed", topic="T")) == 1
        assert m.value("rebalance_orphaned_queues", **labels("g-mixed", topic="T")) == 1

        assert m.value("rebalance_monitor_events_total", type="heartbeat") == 16
        assert m.value("rebalance_monitor_events_total", type="route") == 7
        # Spark's own batch duration arrives through the progress listener, asynchronously.
        m = monitor.wait_for(lambda m: (m.value("rebalance_monitor_batch_duration_seconds") or 0) > 0)
        assert m.value("rebalance_monitor_last_batch_timestamp_seconds") > 1.7e9


def test_broker_crash_conflicts_begin_and_end(spark, kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    crash = labels("g-crash", topic="TopicX")
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path) as monitor:
        before, first_sees, all_see = crash_phases()
        produce_events(kafka_bootstrap, topic, before)
        monitor.wait_for(lambda m: m.value("rebalance_group_members", **labels("g-crash")) == 4)
        produce_events(kafka_bootstrap, topic, first_sees)
        m = monitor.wait_for(lambda m: m.value("rebalance_double_assigned_queues", **crash) == 2)
        assert m.value("rebalance_orphaned_queues", **crash) == 4
        assert m.value("rebalance_group_queues", **crash) == 8
        produce_events(kafka_bootstrap, topic, all_see)
        m = monitor.wait_for(lambda m: m.value("rebalance_double_assigned_queues", **crash) == 0)
        assert m.value("rebalance_orphaned_queues", **crash) == 0
        assert m.value("rebalance_conflict_age_seconds", **labels("g-crash")) == 0
        # 4 joins, the crash, and the three that report it in one millisecond (one instant).
        assert m.value("rebalance_rebalances_total", **labels("g-crash")) == 6
        assert m.value("rebalance_queue_moves_total", **labels("g-crash")) == 26
    findings = [json.loads(value) for _, value, _ in read_topic(kafka_bootstrap, topic + ".findings")]
    doubles = [(f["status"], f["queue"], f["clients"]) for f in findings
               if f["kind"] == "double_assignment"]
    assert sorted(doubles) == [("ended", [B, 4], ["c3", "c4"]), ("ended", [B, 5], ["c3", "c4"]),
                               ("started", [B, 4], ["c3", "c4"]), ("started", [B, 5], ["c3", "c4"])]


def test_a_group_that_leaves_disappears_from_metrics(spark, kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path) as monitor:
        produce_events(kafka_bootstrap, topic, [
            route("T", group="leaving", brokers={"broker-a": 4}), hb("c1", ["T"], group="leaving"),
            route("T", group="staying", brokers={"broker-a": 4}), hb("c1", ["T"], group="staying")])
        monitor.wait_for(lambda m: m.groups() == {"leaving", "staying"})
        later = T0 + 300_000  # past the session timeout, so the watermark moves beyond it
        produce_events(kafka_bootstrap, topic, [
            {"type": "unregister", "ts": T0 + 1_000, "group": "leaving", "client_id": "c1"},
            hb("c1", ["T"], group="staying", ts=later)])
        m = monitor.wait_for(lambda m: m.groups() == {"staying"})
        assert m.value("rebalance_client_queues", **labels("leaving", client="c1")) is None
        assert m.value("rebalance_monitor_groups") == 1


def test_invalid_events_are_counted_and_dead_lettered_valid_ones_unaffected(
        spark, kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    bad = [b"not json at all", b'{"type": "heartbeat", "ts": 1700000000000}',
           json.dumps({"type": "teleport", "ts": T0, "group": "g-ok"}).encode(),
           json.dumps({"type": "heartbeat", "ts": "yesterday", "group": "g-ok", "client_id": "x",
                       "topics": ["T"], "strategy": "AVG"}).encode(),
           json.dumps({"type": "heartbeat", "ts": T0, "group": "g-ok", "client_id": 7,
                       "topics": ["T"], "strategy": "AVG"}).encode(),
           json.dumps({**route("T", group="g-ok", brokers={"broker-a": 4}), "pad": "x" * 60_000}).encode()]
    good = [route("T", group="g-ok", brokers={"broker-a": 4}), hb("c1", ["T"], group="g-ok"),
            hb("c2", ["T"], group="g-ok")]
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path, max_event_bytes=50_000) as monitor:
        produce_events(kafka_bootstrap, topic, [bad[0], good[0], bad[1], bad[2], good[1], bad[3],
                                                bad[4], good[2], bad[5]])
        monitor.wait_for(lambda m: sum(m.series("rebalance_monitor_invalid_events_total").values()) == 6)
        m = monitor.scrape()
        assert m.value("rebalance_group_members", **labels("g-ok")) == 2
        assert m.value("rebalance_client_queues", **labels("g-ok", client="c1")) == 2
        assert m.value("rebalance_monitor_events_total", type="heartbeat") == 2
        reasons = {dict(k)["reason"]: v for k, v in m.series("rebalance_monitor_invalid_events_total").items()}
    dead = [(value, dict(headers).get(REASON_HEADER, b"").decode())
            for _, value, headers in read_topic(kafka_bootstrap, topic + ".dlq")]
    assert sorted(value for value, _ in dead) == sorted(bad)
    assert sorted(reason for _, reason in dead) == sorted(
        reason for reason, n in reasons.items() for _ in range(int(n)))
    assert set(reasons) <= {"not_json", "missing_group", "unknown_type", "bad_timestamp",
                            "wrong_type", "oversized", "missing_field"}
