"""RocketMQ clientRebalance=false: each broker answers a client's QUERY_ASSIGNMENT from its own
client list, and the client takes the answer of a broker it picks at random each rebalance.
Brokers that agree give no finding; brokers that disagree give one `broker_split_view` per queue
they give to different clients, with each broker's owners, whatever the clients hold now."""

from __future__ import annotations

import pytest

from streaming.core.state.events import parse_event
from tests.unit.state_helpers import T0, Run, hb, open_findings, route

pytestmark = pytest.mark.unit

TOPIC = "T"
AVG_OF_2 = {"c1": [0, 1, 2, 3], "c2": [4, 5, 6, 7]}
ROUTE = {"broker-a": 4, "broker-b": 4}       # queue i < 4 is broker-a's i, else broker-b's i - 4


def queue(i: int) -> tuple[str, int]:
    return ("broker-a", i) if i < 4 else ("broker-b", i - 4)


def answers(by_broker: dict[str, list[int] | None]) -> dict:
    return {b: {TOPIC: None if ids is None else [list(queue(i)) for i in ids]}
            for b, ids in by_broker.items()}


def beat(client: str, by_broker: dict[str, list[int] | None], owned_ids, ts: int = T0) -> dict:
    return hb(client, [TOPIC], ts=ts, owned=[[TOPIC, *queue(i)] for i in owned_ids],
              broker_assignments=answers(by_broker))


def splits(run: Run) -> dict:
    return {identity[2]: identity[5] for identity in open_findings(run.out, run)
            if identity[0] == "broker_split_view"}


def test_brokers_that_give_every_client_the_same_queues_are_no_split():
    run = Run()
    run.batch([route(TOPIC, brokers=ROUTE),
               *(beat(c, {"broker-a": ids, "broker-b": ids}, ids) for c, ids in AVG_OF_2.items())])
    assert splits(run) == {}
    assert run.metrics.broker_split == {TOPIC: 0}


def test_a_broker_that_does_not_know_a_client_splits_the_queues_it_gives_elsewhere():
    # broker-a lists c1, c2, c3 (3/3/2); broker-b never heard of c3 (4/4, and nothing for c3).
    run = Run()
    run.batch([route(TOPIC, brokers=ROUTE),
               beat("c1", {"broker-a": [0, 1, 2], "broker-b": [0, 1, 2, 3]}, [0, 1, 2, 3]),
               beat("c2", {"broker-a": [3, 4, 5], "broker-b": [4, 5, 6, 7]}, [3, 4, 5]),
               beat("c3", {"broker-a": [6, 7], "broker-b": []}, [6, 7])])
    found = splits(run)
    assert sorted(found) == [queue(3), queue(6), queue(7)]
    assert set(found.values()) == {("broker-a", "broker-b")}
    assert run.metrics.broker_split == {TOPIC: 3}
    # Each queue the split gives two clients at once is what the clients really double.
    detail = {r.queue: r.detail for r in run.out.findings if r.kind == "broker_split_view"}
    assert detail[queue(3)]["owners"] == {"broker-a": ["c2"], "broker-b": ["c1"]}
    assert detail[queue(6)]["owners"] == {"broker-a": ["c3"], "broker-b": ["c2"]}


def test_a_broker_that_gives_no_answer_or_serves_no_queue_of_the_topic_is_left_out():
    run = Run()
    run.batch([route(TOPIC, brokers=ROUTE),
               beat("c1", {"broker-a": [0, 1, 2, 3], "broker-b": None, "broker-c": [0]}, []),
               beat("c2", {"broker-a": [4, 5, 6, 7], "broker-b": [0], "broker-c": [1]}, [])])
    assert splits(run) == {}      # broker-b: no answer for c1; broker-c: not in the route
    run.batch([route(TOPIC, ts=T0 + 1, brokers={**ROUTE, "broker-c": 1}),
               beat("c1", {"broker-a": [0, 1, 2, 3], "broker-c": [0, 1, 2, 3, 4]}, [], T0 + 1),
               beat("c2", {"broker-a": [4, 5, 6, 7], "broker-c": [5, 6, 7]}, [], T0 + 1)])
    assert sorted(splits(run)) == [queue(4)]


def test_the_split_ends_when_the_brokers_agree_again():
    run = Run()
    run.batch([route(TOPIC, brokers=ROUTE),
               beat("c1", {"broker-a": [0, 1, 2], "broker-b": [0, 1, 2, 3]}, []),
               beat("c2", {"broker-a": [3, 4, 5, 6, 7], "broker-b": [4, 5, 6, 7]}, [])])
    assert sorted(splits(run)) == [queue(3)]
    run.batch([beat(c, {"broker-a": ids, "broker-b": ids}, ids, T0 + 1_000)
               for c, ids in AVG_OF_2.items()])
    assert splits(run) == {}
    assert [r.status for r in run.out.findings if r.kind == "broker_split_view"] == ["ended"]


def test_broker_assignments_parse_check_and_survive_the_state_blob():
    raw = beat("c1", {"broker-b": [1, 0], "broker-a": None}, [0])
    [event] = parse_event(raw)
    queues = (("broker-a", 0), ("broker-a", 1))
    assert event.broker_assignments == (("broker-a", ((TOPIC, None),)),
                                        ("broker-b", ((TOPIC, queues),)))
    for bad in ([], {"broker-a": []}, {"broker-a": {TOPIC: [["broker-a", -1]]}},
                {"broker-a": {TOPIC: "0"}}):
        assert parse_event({**raw, "broker_assignments": bad}).reason in (
            "wrong_type", "bad_value"), bad
    # Kafka heartbeats never carry it.
    kafka = {**raw, "system": "kafka", "owned": [[TOPIC, 0]], "strategy": "range"}
    assert parse_event(kafka)[0].broker_assignments is None

    # The answers live in the state blob: a later batch without the client still sees them.
    run = Run()
    run.batch([route(TOPIC, brokers=ROUTE),
               beat("c1", {"broker-a": [0, 1, 2, 3], "broker-b": [0, 1, 2]}, []),
               beat("c2", {"broker-a": [4, 5, 6, 7], "broker-b": [3, 4, 5, 6, 7]}, [])])
    run.batch([route(TOPIC, ts=T0 + 1_000, brokers=ROUTE)])
    assert sorted(splits(run)) == [queue(3)]
    assert run.metrics.broker_split == {TOPIC: 1}
