"""The `alive` event (docs/events.md): the listed members' own heartbeats, restated, in one event.

Each case is checked against the same fleet heartbeating member by member, the form every
producer could always send: an `alive` must keep exactly what those heartbeats keep."""

import pytest

from tests.unit.state_helpers import T0, Run, hb, kinds, route

pytestmark = pytest.mark.unit

MEMBERS = (("c1", "h1:1"), ("c2", "h2:1"), ("c3", "h3:1"))
BROKERS = ("a", "b")


def _joined(run: Run) -> None:
    run.batch([route("T", brokers={"a": 4, "b": 4})]
              + [hb(c, ["T"], address=a, broker=b) for c, a in MEMBERS for b in BROKERS])


def _alive(ts: int, broker: str | None, members=MEMBERS) -> dict:
    event = {"type": "alive", "ts": ts, "group": "g",
             "members": [[c, a] if a else [c] for c, a in members]}
    return {**event, "broker": broker} if broker else event


def _restated(ts: int, broker: str | None, members=MEMBERS) -> list[dict]:
    return [hb(c, ["T"], ts, address=a, **({"broker": broker} if broker else {}))
            for c, a in members]


def _keepalive(form, seconds: int = 600, every: int = 30, brokers=BROKERS) -> Run:
    """The fleet joined, then only its route and keep-alives in the form given, every `every`
    s."""
    run = Run()
    _joined(run)
    for ts in range(T0 + every * 1000, T0 + seconds * 1000 + 1, every * 1000):
        run.batch([route("T", ts, brokers={"a": 4, "b": 4})]
                  + [e for b in brokers for e in form(ts, b)])
    return run


def test_an_alive_keeps_every_member_and_broker_entry_as_their_heartbeats_do():
    by_alive = _keepalive(lambda ts, b: [_alive(ts, b)])
    by_heartbeats = _keepalive(_restated)
    assert by_alive.metrics.members == by_heartbeats.metrics.members == 3
    assert by_alive.metrics.rebalances_total == by_heartbeats.metrics.rebalances_total == 1
    assert by_alive.metrics.event_time_ms == by_heartbeats.metrics.event_time_ms
    assert kinds(by_alive) == kinds(by_heartbeats) == {}
    assert by_alive.metrics.alive_unknown_members_total == 0


def test_without_a_keepalive_the_same_fleet_expires():
    """The control: the members go when nothing restates them (120 s sessions)."""
    run = _keepalive(lambda ts, b: [], seconds=300)
    assert run.metrics.members == 0


def test_an_alive_through_one_broker_only_lets_the_other_brokers_entries_expire():
    by_alive = _keepalive(lambda ts, b: [_alive(ts, b)], brokers=("a",))
    by_heartbeats = _keepalive(_restated, brokers=("a",))
    assert by_alive.metrics.members == 3
    assert by_alive.metrics.broker_view_divergent == by_heartbeats.metrics.broker_view_divergent
    assert kinds(by_alive) == kinds(by_heartbeats)


def test_a_member_an_alive_leaves_out_expires_as_if_it_had_stopped_heartbeating():
    by_alive = _keepalive(lambda ts, b: [_alive(ts, b, MEMBERS[:2])])
    by_heartbeats = _keepalive(lambda ts, b: _restated(ts, b, MEMBERS[:2]))
    assert by_alive.metrics.members == by_heartbeats.metrics.members == 2
    assert kinds(by_alive) == kinds(by_heartbeats)


def test_a_member_never_heard_in_full_is_counted_not_added():
    run = Run()
    _joined(run)
    out = run.batch([_alive(T0 + 30_000, "a", (*MEMBERS, ("c9", None)))])
    assert out.metrics.members == 3
    assert out.metrics.alive_unknown_members_total == 1
    assert out.metrics.rebalances_total == 1


def test_an_alive_older_than_an_unregister_does_not_bring_the_member_back():
    run = Run()
    _joined(run)
    run.batch([{"type": "unregister", "ts": T0 + 10_000, "group": "g", "client_id": "c3",
                "address": "h3:1"}])
    out = run.batch([_alive(T0 + 9_000, "a")])
    assert out.metrics.members == 2
    assert out.metrics.alive_unknown_members_total == 0   # an unregistered member is no surprise


def test_an_alive_through_a_new_broker_adds_the_members_entries_there():
    by_alive, by_heartbeats = Run(), Run()
    for run in (by_alive, by_heartbeats):
        run.batch([route("T", brokers={"a": 4})]
                  + [hb(c, ["T"], address=a, broker="a") for c, a in MEMBERS])
    by_alive.batch([_alive(T0 + 1_000, "b")])
    by_heartbeats.batch(_restated(T0 + 1_000, "b"))
    for ts in range(T0 + 30_000, T0 + 300_001, 30_000):
        by_alive.batch([_alive(ts, "a")])
        by_heartbeats.batch(_restated(ts, "a"))
    assert by_alive.metrics.broker_view_divergent == by_heartbeats.metrics.broker_view_divergent
    assert kinds(by_alive) == kinds(by_heartbeats)
