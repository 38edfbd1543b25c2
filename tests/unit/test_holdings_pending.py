"""Holdings reported before a route change (a scale-out, a broker lost) are not the member's claim
on that topic: the monitor says they are pending and raises no orphan or double from them, until
the member reports again (`owned_ts` later than the change)."""

from __future__ import annotations

import pytest

from tests.unit.state_helpers import T0, Run, hb, kinds, route

pytestmark = pytest.mark.unit

TOPIC = "DynT"


def owned(ids) -> list:
    return [[TOPIC, "broker-a", i] for i in ids]


def beat(client: str, ids, owned_ts: int, ts: int) -> dict:
    return hb(client, [TOPIC], ts=ts, owned=owned(ids), owned_ts=owned_ts)


def test_holdings_older_than_a_scale_out_are_pending_until_asked_again():
    run = Run()
    run.batch([route(TOPIC, brokers={"broker-a": 4}),
               beat("c1", [0, 1], T0, T0), beat("c2", [2, 3], T0, T0)])
    assert kinds(run) == {}

    # The topic grows to 8 queues; the members' holdings were asked before that.
    run.batch([route(TOPIC, ts=T0 + 10_000, brokers={"broker-a": 8}),
               beat("c1", [0, 1], T0, T0 + 10_000), beat("c2", [2, 3], T0, T0 + 10_000)])
    assert sorted(clients for _, _, clients in kinds(run)["holdings_pending"]) == [
        ("c1",), ("c2",)]
    assert "orphaned_queue" not in kinds(run) and "allocation_mismatch" not in kinds(run)
    assert run.metrics.holdings_pending_clients == 2

    # Asked again before the clients moved: the new queues really are nobody's.
    run.batch([beat("c1", [0, 1], T0 + 12_000, T0 + 12_000),
               beat("c2", [2, 3], T0 + 12_000, T0 + 12_000)])
    assert sorted(queue for _, queue, _ in kinds(run)["orphaned_queue"]) == [
        ("broker-a", i) for i in range(4, 8)]
    assert "holdings_pending" not in kinds(run) and run.metrics.holdings_pending_clients == 0

    # They moved: AVG over 8.
    run.batch([beat("c1", [0, 1, 2, 3], T0 + 30_000, T0 + 30_000),
               beat("c2", [4, 5, 6, 7], T0 + 30_000, T0 + 30_000)])
    assert kinds(run) == {}


def test_holdings_sent_fresh_with_every_heartbeat_are_never_pending():
    run = Run()
    run.batch([route(TOPIC, brokers={"broker-a": 4}),
               hb("c1", [TOPIC], owned=owned([0, 1, 2, 3]))])
    run.batch([route(TOPIC, ts=T0 + 10_000, brokers={"broker-a": 8})])
    assert sorted(queue for _, queue, _ in kinds(run)["orphaned_queue"]) == [
        ("broker-a", i) for i in range(4, 8)]
    assert "holdings_pending" not in kinds(run)


def test_a_queue_reported_by_one_and_predicted_for_a_pending_one_is_no_double():
    """Broker-b is lost (12 queues to 8). c1's holdings are asked after that, but c1 has not
    rebalanced yet: it still holds what AVG gave it over 12 (a0-a5). c2's were asked before:
    pending, its claim the re-run's (a4-a7). The real clients never shared a4 and a5; the
    monitor raised them as doubled (seen in CI, test_rocketmq_route_changes). Two reports of
    one queue are a double still."""
    every = {"broker-a": 8, "broker-b": 4}
    run = Run()
    run.batch([route(TOPIC, brokers=every),
               beat("c1", range(6), T0, T0),
               hb("c2", [TOPIC], ts=T0, owned=[[TOPIC, "broker-a", 6], [TOPIC, "broker-a", 7]]
                  + [[TOPIC, "broker-b", q] for q in range(4)], owned_ts=T0)])
    assert kinds(run) == {}
    run.batch([route(TOPIC, ts=T0 + 10_000, brokers={"broker-a": 8}),
               beat("c1", range(6), T0 + 10_000, T0 + 10_000),
               hb("c2", [TOPIC], ts=T0 + 10_000, owned_ts=T0,
                  owned=[[TOPIC, "broker-a", 6], [TOPIC, "broker-a", 7]]
                  + [[TOPIC, "broker-b", q] for q in range(4)])])
    found = kinds(run)
    assert "double_assignment" not in found and "orphaned_queue" not in found
    assert found["holdings_pending"] == [(None, (), ("c2",))]

    # c2 reports again, still holding a4 (it has not seen the change either): a double.
    run.batch([beat("c2", [4, 6, 7], T0 + 12_000, T0 + 12_000)])
    assert kinds(run)["double_assignment"] == [(TOPIC, ("broker-a", 4), ("c1", "c2"))]
