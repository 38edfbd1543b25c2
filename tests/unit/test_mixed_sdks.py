"""A group of Java and Go clients: each is re-run with its own SDK's algorithm, so the monitor
finds the doubles and orphans that mixing Java's and Go's CONSISTENT_HASH really makes
(apache/rocketmq-client-go#419), and none where the two SDKs compute the same (AVG)."""

from __future__ import annotations

from collections import Counter

import pytest

from streaming.core.allocation import allocate, sort_client_ids, sort_queues
from streaming.core.state.events import Invalid, parse_event
from tests.unit.state_helpers import Run, hb, kinds, route

pytestmark = pytest.mark.unit

TOPIC = "orders"
QUEUES = sort_queues([(TOPIC, broker, i) for broker in ("broker-a", "broker-b") for i in range(8)])
JAVA = {"strategy": "CONSISTENT_HASH"}
GO = {"strategy": "GO_CONSISTENT_HASH", "strategy_params": {"virtual_nodes": 10}}


def beats(members: dict[str, dict]) -> list[dict]:
    return [route(TOPIC, brokers={"broker-a": 8, "broker-b": 8}),
            *(hb(client, [TOPIC], **spec) for client, spec in members.items())]


def owners(members: dict[str, dict]) -> Counter:
    """Each queue's owners, from each client's own algorithm (ASCII names: one sort order)."""
    cids = sort_client_ids(members)
    counted = Counter({(broker, qid): 0 for _, broker, qid in QUEUES})
    for client, spec in members.items():
        for _, broker, qid in allocate(spec["strategy"], spec.get("strategy_params", {}),
                                       client, QUEUES, cids):
            counted[(broker, qid)] += 1
    return counted


def test_java_and_go_consistent_hash_double_and_orphan_what_their_rings_disagree_on():
    members = {"10.0.0.1@java-1": JAVA, "10.0.0.2@java-2": JAVA, "10.0.0.3@go-1": GO}
    counted = owners(members)
    doubled = sorted(q for q, n in counted.items() if n > 1)
    orphaned = sorted(q for q, n in counted.items() if n == 0)
    assert doubled and orphaned, "the two rings agree on this input: pick another"

    run = Run()
    run.batch(beats(members))
    found = kinds(run)
    assert sorted(queue for _, queue, _ in found["double_assignment"]) == [
        tuple(q) for q in doubled]
    assert sorted(queue for _, queue, _ in found["orphaned_queue"]) == [tuple(q) for q in orphaned]
    assert "strategy_inconsistent" in found


def test_java_and_go_avg_split_the_queues_once_and_are_one_strategy():
    members = {"10.0.0.1@java-1": {"strategy": "AVG"}, "10.0.0.2@java-2": {"strategy": "AVG"},
               "10.0.0.3@go-1": {"strategy": "GO_AVG"}}
    assert set(owners(members).values()) == {1}
    run = Run()
    run.batch(beats(members))
    assert kinds(run) == {}


def test_a_go_consistent_hash_without_its_virtual_nodes_is_refused():
    refused = parse_event({**hb("c", [TOPIC], strategy="GO_CONSISTENT_HASH"), "system": "rocketmq",
                           "v": 1})
    assert isinstance(refused, Invalid) and refused.reason == "missing_field"


def test_pop_readers_share_queues_by_design_and_are_counted_per_queue():
    every = [[TOPIC, broker, i] for broker in ("broker-a", "broker-b") for i in range(8)]
    run = Run()
    run.batch([route(TOPIC, brokers={"broker-a": 8, "broker-b": 8}),
               *(hb(f"10.0.0.{i}@pop", [TOPIC], owned=every, shared=True) for i in range(3))])
    assert kinds(run) == {}
    assert run.metrics.share_readers == {TOPIC: 3}
    assert run.metrics.double_assigned == {TOPIC: 0}


def test_a_client_no_broker_lists_is_not_in_the_client_list_the_others_allocate_from():
    """A gRPC client behind a proxy (shared, no broker) beside a remoting client: the remoting
    client's brokers list only it, so it takes every queue."""
    run = Run()
    run.batch([route(TOPIC, brokers={"broker-a": 8, "broker-b": 8}),
               hb("10.0.0.1@remoting", [TOPIC], broker="broker-a",
                  owned=[[TOPIC, q[1], q[2]] for q in QUEUES]),
               hb("vm@1@0@grpc", [TOPIC], shared=True)])
    assert kinds(run) == {}
