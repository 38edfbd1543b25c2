"""The seed articles' cases, with exact expected findings, through step() as Spark calls it."""

import pytest

from streaming.core.step import StepConfig
from tests.unit.state_helpers import T0, Run, hb, kinds, queues, route

pytestmark = pytest.mark.unit

B = "broker-b"


def test_two_topics_two_queues_four_clients_skew_2_and_two_idle():
    run = Run()
    run.batch([route("TopicX", brokers={"broker-a": 2}), route("TopicY", brokers={"broker-a": 2})]
              + [hb(c, ["TopicX", "TopicY"]) for c in ("c1", "c2", "c3", "c4")])
    snap = run.metrics
    assert snap.client_queues == {"c1": 2, "c2": 2, "c3": 0, "c4": 0}
    assert snap.skew_ratio == 2.0
    assert snap.idle_clients == 2
    assert snap.queues == {"TopicX": 2, "TopicY": 2}
    assert snap.double_assigned == {"TopicX": 0, "TopicY": 0}
    assert snap.orphaned == {"TopicX": 0, "TopicY": 0}
    assert kinds(run) == {"idle_client": [(None, (), ("c3",)), (None, (), ("c4",))],
                          "skew": [(None, (), ())]}
    skew = next(r for r in run.findings if r.kind == "skew")
    assert skew.detail == {"skew_ratio": 2.0, "ideal": 1, "max_load": 2,
                              "busiest": ["c1", "c2"]}
    assert skew.since == T0


def test_ten_queues_three_clients_4_3_3_no_skew():
    run = Run()
    run.batch([route("T", brokers={"broker-a": 10})] + [hb(c, ["T"]) for c in ("c1", "c2", "c3")])
    assert run.metrics.client_queues == {"c1": 4, "c2": 3, "c3": 3}
    assert run.metrics.skew_ratio == 1.0
    assert run.metrics.idle_clients == 0
    assert run.findings == []


def _view(ids_a, ids_b) -> dict:
    return {"queues": {"TopicX": queues("broker-a", ids_a) + queues(B, ids_b)}}


def test_broker_crash_seen_by_one_client_first():
    run = Run()
    sixteen = _view(range(8), range(8))
    run.batch([route("TopicX", brokers={"broker-a": 8, B: 8})]
              + [hb(c, ["TopicX"], ts=T0 + i, view=sixteen)
                 for i, c in enumerate(("c1", "c2", "c3", "c4"))])
    assert run.findings == []
    # 1 + 8 + 7 + 9 queue moves as c1..c4 join one by one, a millisecond apart (AVG, 16 queues).
    assert (run.metrics.rebalances_total, run.metrics.queue_moves_total) == (4, 24)

    t1 = T0 + 1_000
    run.batch([route("TopicX", ts=t1, brokers={B: 8}),
               hb("c3", ["TopicX"], ts=t1, view=_view([], range(8)))])
    snap = run.metrics
    assert kinds(run) == {
        "double_assignment": [("TopicX", (B, 4), ("c3", "c4")), ("TopicX", (B, 5), ("c3", "c4"))],
        "orphaned_queue": [("TopicX", (B, q), ()) for q in range(4)],
        "view_divergent": [(None, (), ("c1",)), (None, (), ("c2",)), (None, (), ("c4",))],
        "skew": [(None, (), ())],
        "idle_client": [(None, (), ("c1",)), (None, (), ("c2",))],
    }
    assert snap.double_assigned == {"TopicX": 2}
    assert snap.orphaned == {"TopicX": 4}
    assert snap.conflict_since_ms == t1
    assert snap.client_queues == {"c1": 0, "c2": 0, "c3": 2, "c4": 4}
    assert (snap.rebalances_total, snap.queue_moves_total) == (5, 26)

    t2 = T0 + 2_000
    run.batch([hb(c, ["TopicX"], ts=t2, view=_view([], range(8))) for c in ("c1", "c2", "c4")])
    assert kinds(run) == {}
    snap = run.metrics
    assert snap.client_queues == {"c1": 2, "c2": 2, "c3": 2, "c4": 2}
    assert snap.double_assigned == {"TopicX": 0} and snap.orphaned == {"TopicX": 0}
    assert snap.conflict_since_ms is None
    # c1, c2 and c4 report in one millisecond: one instant, one rebalance.
    assert (snap.rebalances_total, snap.queue_moves_total) == (6, 26)
    ended = [r for r in run.out.findings if r.kind == "double_assignment"]
    assert [(r.status, r.queue, r.since, r.at) for r in ended] == [
        ("ended", (B, 4), t1, t2), ("ended", (B, 5), t1, t2)]


def test_client_subscribing_one_topic_fewer_orphans_its_share():
    run = Run()
    run.batch([route("TopicA", brokers={"broker-a": 4}), route("TopicB", brokers={"broker-a": 4}),
               hb("c1", ["TopicA", "TopicB"]), hb("c2", ["TopicA", "TopicB"]),
               hb("c3", ["TopicA"])])
    assert kinds(run) == {
        "orphaned_queue": [("TopicB", ("broker-a", 3), ())],
        "subscription_inconsistent": [(None, (), ("c3",))],
        "skew": [(None, (), ())],
    }
    snap = run.metrics
    assert snap.client_queues == {"c1": 4, "c2": 2, "c3": 1}
    assert snap.skew_ratio == 4 / 3
    assert snap.orphaned == {"TopicA": 0, "TopicB": 1}
    assert snap.subscription_inconsistent == 1


def test_two_processes_sharing_one_client_id():
    run = Run()
    run.batch([route("T", brokers={"broker-a": 6}),
               hb("c1", ["T"], address="10.0.0.1:5000"), hb("c1", ["T"], address="10.0.0.2:5000"),
               hb("c2", ["T"], address="10.0.0.3:5000")])
    assert kinds(run) == {
        "client_id_collision": [(None, (), ("c1",))],
        "double_assignment": [("T", ("broker-a", 0), ("c1", "c1")),
                              ("T", ("broker-a", 1), ("c1", "c1"))],
        "orphaned_queue": [("T", ("broker-a", 2), ()), ("T", ("broker-a", 3), ())],
    }
    snap = run.metrics
    assert snap.members == 3
    assert snap.client_id_collisions == 1
    assert snap.client_queues == {"c1": 4, "c2": 2}
    collision = next(r for r in run.findings if r.kind == "client_id_collision")
    assert collision.detail == {"addresses": ["10.0.0.1:5000", "10.0.0.2:5000"]}


def test_client_on_a_different_strategy():
    run = Run()
    run.batch([route("T", brokers={"broker-a": 6}), hb("c1", ["T"]), hb("c2", ["T"]),
               hb("c3", ["T"], strategy="AVG_BY_CIRCLE")])
    assert kinds(run) == {
        "double_assignment": [("T", ("broker-a", 2), ("c2", "c3"))],
        "orphaned_queue": [("T", ("broker-a", 4), ())],
        "strategy_inconsistent": [(None, (), ("c3",))],
    }
    assert run.metrics.strategy_inconsistent == 1
    assert run.metrics.client_queues == {"c1": 2, "c2": 2, "c3": 2}


def test_broadcasting_group_has_no_conflicts():
    run = Run()
    run.batch([route("T", brokers={"broker-a": 4})]
              + [hb(c, ["T"], message_model="BROADCASTING") for c in ("c1", "c2")])
    assert kinds(run) == {}
    assert run.metrics.client_queues == {"c1": 4, "c2": 4}


def test_broker_view_divergence_from_the_heartbeats_each_broker_received():
    run = Run()
    run.batch([route("T", brokers={"broker-a": 1, B: 1}),
               hb("c1", ["T"], broker="broker-a"), hb("c1", ["T"], broker=B),
               hb("c2", ["T"], broker="broker-a")])
    assert kinds(run) == {"broker_view_divergent": [((B,), ("c2",))]}
    assert run.metrics.broker_view_divergent == 1
    run.batch([hb("c2", ["T"], ts=T0 + 5, broker=B)])
    assert kinds(run) == {}
    # broker-c is in no route (crashed): what it last heard misleads nobody.
    run.batch([hb("c1", ["T"], ts=T0 + 6, broker="broker-c")])
    assert kinds(run) == {}


def test_owned_differing_from_the_rerun_is_a_mismatch_and_counts_as_claimed():
    run = Run()
    run.batch([route("T", brokers={"broker-a": 4}), hb("c1", ["T"]),
               hb("c2", ["T"], owned=[["T", "broker-a", q] for q in (1, 2, 3)])])
    assert kinds(run) == {
        "allocation_mismatch": [(None, (), ("c2",))],
        "double_assignment": [("T", ("broker-a", 1), ("c1", "c2"))],
        "skew": [(None, (), ())],       # c2 holds 3 of 4 queues: 3 / ceil(4 / 2)
    }
    assert run.metrics.skew_ratio == 1.5


def test_kafka_group_owned_compared_with_the_leaders_assignment():
    run = Run()
    kafka = {"system": "kafka"}
    run.batch([route("T", partitions=4, **kafka),
               hb("m1", ["T"], strategy="range", owned=[["T", 0], ["T", 1], ["T", 2]], **kafka),
               hb("m2", ["T"], strategy="range", **kafka)])
    assert kinds(run) == {
        "allocation_mismatch": [(None, (), ("m1",))],
        "double_assignment": [("T", ("", 2), ("m1", "m2"))],
        "skew": [(None, (), ())],
    }
    assert run.metrics.system == "kafka"
    assert run.metrics.client_queues == {"m1": 3, "m2": 2}


def test_member_expiry_by_event_time_then_group_removed_with_ended_records():
    run = Run(StepConfig(session_timeout_ms=120_000))
    run.batch([route("T", brokers={"broker-a": 4}), hb("c1", ["T"]), hb("c2", ["T"])])
    run.batch([hb("c1", ["T"], ts=T0 + 100_000, owned=[])])
    assert kinds(run)["orphaned_queue"] == [("T", ("broker-a", q), ()) for q in (0, 1)]
    out = run.batch([hb("c1", ["T"], ts=T0 + 120_001, owned=[])])    # c2's session is over
    assert out.metrics.members == 1
    assert out.metrics.orphaned == {"T": 4}
    assert out.metrics.conflict_since_ms == T0 + 100_000
    # The first batch's joins (one millisecond: one rebalance), c1's empty holdings, c2's expiry.
    assert out.metrics.rebalances_total == 3
    last = T0 + 120_001
    out = run.batch([], watermark_ms=last + 120_000)         # c1 still inside its session
    assert out.metrics.members == 1 and out.findings == []
    assert out.next_timeout_ms == last + 120_001
    out = run.batch([], watermark_ms=last + 120_001)
    assert out.blob is None and out.metrics is None
    assert sorted((r.status, r.kind, tuple(r.queue or ())) for r in out.findings) == [
        ("ended", "allocation_mismatch", ())] + [
        ("ended", "orphaned_queue", ("broker-a", q)) for q in range(4)]
    assert {r.at for r in out.findings} == {last + 120_001}
