"""The RocketMQ fleet simulator: each scenario's ground truth is what the scenario says.

Expected values are derived by hand from the seed articles' mechanics (AVG over sorted queues
and sorted client ids), not read back from the simulator.
"""

from __future__ import annotations

import json

import pytest

from producers.simulator.clock import DEFAULT_EPOCH_MS, FastClock, RealtimeClock
from producers.simulator.scenarios import SCENARIOS, Steady
from producers.simulator.truth import ExpectedFinding
from streaming.core.state.events import Event, parse_event
from tests.unit.finding_intervals import expected_intervals, intervals_of

pytestmark = pytest.mark.unit

T0 = DEFAULT_EPOCH_MS
S = 1000


def c(host: int, pid: int = 1, net: str = "10.0.0") -> str:
    return f"{net}.{host}@{pid}"


def found(group, kind, begins_s, ends_s, topic=None, queue=None, clients=(), brokers=()):
    return ExpectedFinding(kind, group, topic, queue, tuple(clients), T0 + round(begins_s * S),
                           None if ends_s is None else T0 + round(ends_s * S), tuple(brokers))


def truth(name: str, **kw) -> set[ExpectedFinding]:
    return set(SCENARIOS[name](seed=1, **kw).ground_truth())


@pytest.mark.parametrize("with_view", [True, False])
def test_multi_topic_skew_two_idle_clients_skew_two(with_view):
    # TopicX, TopicY x 2 queues, 4 clients: AVG gives each topic's 2 queues to the first two
    # clients, so c1, c2 hold 2 each, c3, c4 nothing: ideal ceil(4/4) = 1, max 2 -> skew 2.0.
    g = "skew-group"
    assert truth("multi-topic-skew", with_view=with_view) == {
        found(g, "skew", 0, None),
        found(g, "idle_client", 0, None, clients=[c(3)]),
        found(g, "idle_client", 0, None, clients=[c(4)]),
    }


def test_broker_crash_conflicts_until_the_last_client_catches_up():
    # 16 queues (a0-a7, b0-b7), 3 clients: c1 a0-a5, c2 a6 a7 b0-b2, c3 b3-b7. broker-a dies at
    # 62 s. Route polls: c2 at 70.01 s, c3 at 85.01 s, c1 at 90.01 s; the group rebalances at
    # 65, 85, 105 s. At 85 s only c2 uses the new route (8 queues): c2 takes b3-b5 (still held
    # by c3) and drops b0-b2 (c1 still holds the dead a0-a5). At 105 s all have caught up.
    g, x = "crash-group", "TopicX"
    conflicts = {found(g, "double_assignment", 85, 105, x, ("broker-b", q), [c(2), c(3)])
                 for q in (3, 4, 5)}
    conflicts |= {found(g, "orphaned_queue", 85, 105, x, ("broker-b", q)) for q in (0, 1, 2)}
    # From the crash until each client allocates from the new route its view differs, and c1
    # holds no live queue while c3 holds 5 (ideal ceil(8/3) = 3).
    stale = {found(g, "view_divergent", 62, 105, clients=[c(1)]),
             found(g, "view_divergent", 62, 85, clients=[c(2)]),
             found(g, "view_divergent", 62, 105, clients=[c(3)]),
             found(g, "idle_client", 62, 105, clients=[c(1)]),
             found(g, "skew", 62, 105)}
    assert truth("broker-crash", with_view=True) == conflicts | stale


def test_broker_crash_without_views_has_nothing_a_monitor_could_see():
    assert truth("broker-crash", with_view=False) == set()


def test_lost_notification_stale_share_until_the_periodic_rebalance():
    # 8 queues, c1..c3: c1 a0-a2, c2 a3 b0 b1, c3 b2 b3. c4 joins at 45 s; c2 misses both
    # notifications and keeps a3 b0 b1 until its periodic rebalance at 60 s, while the others
    # take c1 a0 a1, c3 b0 b1, c4 b2 b3: b0 b1 doubled (c2, c3), a2 orphaned.
    g, x = "lost-group", "TopicX"
    assert truth("lost-notification", with_view=True) == {
        found(g, "double_assignment", 45, 60, x, ("broker-b", 0), [c(2), c(3)]),
        found(g, "double_assignment", 45, 60, x, ("broker-b", 1), [c(2), c(3)]),
        found(g, "orphaned_queue", 45, 60, x, ("broker-a", 2)),
        found(g, "view_divergent", 45, 60, clients=[c(2)]),
        found(g, "skew", 45, 60),  # c2 holds 3 live queues, ideal ceil(8/4) = 2
    }
    assert truth("lost-notification", with_view=False) == set()


@pytest.mark.parametrize("with_view", [True, False])
def test_client_id_collision_first_slot_doubled_second_orphaned(with_view):
    # cidAll [x, x, y, z] (x shared by two containers): indexOf(x) = 0 in both processes.
    g, x, shared = "collide-group", "TopicX", c(2, net="172.17.0")
    assert truth("client-id-collision", with_view=with_view) == {
        found(g, "client_id_collision", 0, None, clients=[shared]),
        found(g, "double_assignment", 0, None, x, ("broker-a", 0), [shared, shared]),
        found(g, "double_assignment", 0, None, x, ("broker-a", 1), [shared, shared]),
        found(g, "orphaned_queue", 0, None, x, ("broker-a", 2)),
        found(g, "orphaned_queue", 0, None, x, ("broker-a", 3)),
    }


@pytest.mark.parametrize("with_view", [True, False])
def test_subscription_mismatch_orphans_the_missing_clients_share(with_view):
    # TopicB's 6 queues are split over every client of the group (3): the redeployed client
    # (TopicA only) does not take its slot, queues 4 and 5.
    g = "sub-group"
    assert truth("subscription-mismatch", with_view=with_view) == {
        found(g, "orphaned_queue", 60, None, "TopicB", ("broker-a", 4)),
        found(g, "orphaned_queue", 60, None, "TopicB", ("broker-a", 5)),
        found(g, "subscription_inconsistent", 60, None, clients=[c(3, pid=2)]),
    }


@pytest.mark.parametrize("with_view", [True, False])
def test_strategy_change_conflicts_while_strategies_are_mixed(with_view):
    # 6 queues, 3 clients. AVG: [0,1] [2,3] [4,5]; AVG_BY_CIRCLE: [0,3] [1,4] [2,5].
    # 60 s: c1 circles -> 3 doubled (c1', c2), 1 orphaned. 120 s: c2 circles -> 4 doubled
    # (c2', c3), 2 orphaned. 180 s: all circle, nothing.
    g, x = "strategy-group", "TopicX"
    assert truth("strategy-change", with_view=with_view) == {
        found(g, "double_assignment", 60, 120, x, ("broker-a", 3), [c(1, 2), c(2)]),
        found(g, "orphaned_queue", 60, 120, x, ("broker-a", 1)),
        found(g, "strategy_inconsistent", 60, 120, clients=[c(1, 2)]),
        found(g, "double_assignment", 120, 180, x, ("broker-a", 4), [c(2, 2), c(3)]),
        found(g, "orphaned_queue", 120, 180, x, ("broker-a", 2)),
        found(g, "strategy_inconsistent", 120, 180, clients=[c(3)]),
    }


@pytest.mark.parametrize("with_view", [True, False])
def test_rolling_deploy_with_clean_shutdowns_is_silent(with_view):
    scenario = SCENARIOS["rolling-deploy"](seed=1, with_view=with_view)
    events = list(scenario.run())
    assert scenario.ground_truth() == []
    assert [e["client_id"] for e in events if e["type"] == "unregister"] == [
        c(1), c(2), c(3), c(4)]


def test_network_partition_brokers_disagree_until_healed():
    # c3 is cut from broker-a at 30.5 s (its last heartbeat there: 1 s) so broker-a expires it
    # when more than 120 s have passed, at 121.001 s; the cut heals at 300.5 s and c3's
    # heartbeat at 301 s re-registers it.
    g = "partition-group"
    with_view = truth("network-partition", with_view=True)
    divergent = found(g, "broker_view_divergent", 121.001, 301, clients=[c(3)],
                      brokers=["broker-a"])
    assert truth("network-partition", with_view=False) == {divergent}
    assert divergent in with_view
    conflicts = [f for f in with_view if f.kind in ("double_assignment", "orphaned_queue")]
    assert conflicts, "clients asking broker-a see 2 members, the others 3"
    assert all(T0 + 121_001 <= f.begins_ms and f.ends_ms <= T0 + 301 * S for f in conflicts)


def test_steady_is_healthy_and_loads_are_even():
    scenario = Steady(groups=3, clients=4, topics=2, queues=8, duration_ms=120 * S)
    events = list(scenario.run())
    assert scenario.ground_truth() == []
    groups = {e["group"] for e in events}
    assert groups == {"steady-00000", "steady-00001", "steady-00002"}


def _routes_then_heartbeats(events):
    return [e for e in events if e["type"] == "route"], [
        e for e in events if e["type"] == "heartbeat"]


def test_heartbeats_carry_broker_and_optionally_view_and_owned():
    plain = list(SCENARIOS["multi-topic-skew"](seed=1).run())
    viewed = list(SCENARIOS["multi-topic-skew"](seed=1, with_view=True).run())
    routes, beats = _routes_then_heartbeats(plain)
    assert {r["topic"]: r["queues"] for r in routes} == {
        "TopicX": [["broker-a", 0], ["broker-a", 1]], "TopicY": [["broker-a", 0], ["broker-a", 1]]}
    assert all(b["broker"] == "broker-a" and "view" not in b and "owned" not in b for b in beats)
    last = {b["client_id"]: b for b in viewed if b["type"] == "heartbeat" and "owned" in b}
    assert last[c(1)]["owned"] == [["TopicX", "broker-a", 0], ["TopicY", "broker-a", 0]]
    assert last[c(3)]["owned"] == []
    assert last[c(3)]["view"] == {
        "clients": [c(1), c(2), c(3), c(4)],
        "queues": {"TopicX": [["broker-a", 0], ["broker-a", 1]],
                   "TopicY": [["broker-a", 0], ["broker-a", 1]]}}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("with_view", [True, False])
def test_every_event_parses_and_encoded_equals_dicts(name, with_view):
    kw = dict(groups=4, duration_ms=90 * S) if name == "steady" else {}
    dicts = list(SCENARIOS[name](seed=3, with_view=with_view, **kw).run())
    encoded = list(SCENARIOS[name](seed=3, with_view=with_view, **kw).run_encoded())
    assert [json.loads(v) for _, v in encoded] == dicts
    assert [k.decode() for k, _ in encoded] == [d["group"] for d in dicts]
    for event in dicts:
        parsed = parse_event(event)
        assert isinstance(parsed, list) and all(isinstance(p, Event) for p in parsed), parsed
    assert dicts == sorted(dicts, key=lambda e: e["ts"])


def test_route_events_may_name_groups():
    events = list(SCENARIOS["broker-crash"](seed=1, route_groups_list=True).run())
    crash = [e for e in events if e["type"] == "route" and e["ts"] == T0 + 62 * S]
    assert crash == [{"v": 1, "type": "route", "ts": T0 + 62 * S, "groups": ["crash-group"],
                      "topic": "TopicX", "queues": [["broker-b", q] for q in range(8)]}]


def test_a_seed_fixes_the_run():
    def run(seed):
        return list(SCENARIOS["network-partition"](seed=seed, with_view=True).run_encoded())
    assert run(7) == run(7)
    assert run(7) != run(8)  # the random member-list broker changes who holds what


def test_random_notification_loss_is_seeded():
    def run(seed):
        s = Steady(groups=5, seed=seed, notification_loss=0.5, with_view=True,
                   duration_ms=60 * S)
        return list(s.run_encoded()), s.ground_truth()
    assert run(2) == run(2)


def test_realtime_clock_gives_the_same_events_shifted():
    fast = list(SCENARIOS["multi-topic-skew"](seed=1, duration_ms=40 * S).run(FastClock()))
    clock = RealtimeClock(speed=20_000)
    paced = list(SCENARIOS["multi-topic-skew"](seed=1, duration_ms=40 * S).run(clock))
    shift = clock.epoch_ms - T0
    assert [{**e, "ts": e["ts"] - shift} for e in paced] == fast


def test_ground_truth_follows_the_clock_epoch():
    scenario = SCENARIOS["strategy-change"](seed=1)
    list(scenario.run(FastClock(epoch_ms=1_800_000_000_000)))
    assert min(f.begins_ms for f in scenario.ground_truth()) == 1_800_000_060_000


# --- the pure monitor core rediscovers the ground truth from the events alone ---------------

def _monitor_findings(events) -> set[tuple]:
    """Feed streaming.core.step one batch per event millisecond; (identity, since, ended at)."""
    from itertools import groupby

    from streaming.core.step import step

    blobs: dict[str, bytes | None] = {}
    changes: list[dict] = []
    offset = 0
    for _, batch in groupby(events, key=lambda e: e["ts"]):
        per_group: dict[str, list] = {}
        for raw in batch:
            for event in parse_event(raw):
                per_group.setdefault(event.group, []).append((event, offset))
            offset += 1
        for group, group_events in per_group.items():
            out = step(blobs.get(group), group_events)
            blobs[group] = out.blob
            changes.extend(json.loads(record.to_json()) for record in out.findings)
    return intervals_of(changes)


def _expected(scenario) -> set[tuple]:
    return expected_intervals(scenario.ground_truth())


@pytest.mark.parametrize("name", sorted(set(SCENARIOS) - {"steady"}))
@pytest.mark.parametrize("with_view", [True, False])
def test_core_monitor_rediscovers_the_ground_truth(name, with_view):
    scenario = SCENARIOS[name](seed=1, with_view=with_view)
    assert _monitor_findings(list(scenario.run())) == _expected(scenario)


def test_core_monitor_ignores_a_crashed_brokers_member_list():
    scenario = SCENARIOS["broker-crash"](seed=1, with_view=True)
    assert _monitor_findings(list(scenario.run())) == _expected(scenario)
