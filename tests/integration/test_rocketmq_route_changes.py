"""Route changes with real consumers of three strategies, on RocketMQ 4.9.8 and 5.3.3: a topic
scaled out on one broker, then a broker lost to SIGKILL. The real clients move within about a
minute (they learn routes every 30 s and rebalance every 20 s); the monitor must follow them, and
must never report an orphan or a double that the real holdings did not have in the 20 s before.

Ground truth is what each Java consumer prints that it pulls; the monitor's view is its /metrics.
The delay from the last real client's move to the monitor's agreement is printed (pytest -s):
docs/rocketmq.md gives the measured figures.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter

import pytest

from tests.integration.rocketmq_watch import fresh, group_value, watching
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")
INTERVAL_S = 2
# A count the monitor reports must have been in the real holdings within this window: two polls
# of the bridge, the job's batch and scrape, and room for a loaded 2-core machine.
WINDOW_S = 2 * INTERVAL_S + 16


class Truth:
    """The real holdings of every group's consumers: now, and every state they passed through.
    Each HOLDS line a consumer prints is a change, so a double that lasted between two of the
    test's checks still counts as real."""

    def __init__(self, topic: str, consumers: dict[str, list]) -> None:
        self.topic, self.consumers = topic, consumers

    def sample(self, queues: set) -> dict[str, tuple[int, int]]:
        return {group: _counted([c.holds(self.topic) for c in members], queues)
                for group, members in self.consumers.items()}

    def recent_max(self, group: str, queues: set) -> tuple[int, int]:
        """The most doubled and orphaned queues (doubles of any queue; orphans of `queues`) the
        monitor can have seen in the group from the real holdings of the last WINDOW_S seconds.
        The bridge asks the clients one after another, so what it holds of each was true at
        some moment of the window, not the same moment for all: every combination of one state
        a client was in during the window is one the monitor may show."""
        since = time.monotonic() - WINDOW_S
        per_client = [_states_since(c.holds_history(self.topic), since)
                      for c in self.consumers[group]]
        counted = [_counted(list(holding), queues) for holding in itertools.product(*per_client)]
        return max(d for d, _ in counted), max(o for _, o in counted)

    def last_move(self) -> float:
        return max(c.holds_changed_at for members in self.consumers.values() for c in members)


def _states_since(history, since: float) -> set[frozenset]:
    """A client's holdings at `since` and every one it changed to after (history: (at, held)
    in the order printed)."""
    states, held = set(), frozenset()
    for at, now_held in history:
        if at > since:
            states.add(held)
        held = now_held
    return states | {held}


def _counted(holding: list[frozenset], queues: set) -> tuple[int, int]:
    held = Counter(q for h in holding for q in h)
    return sum(1 for n in held.values() if n > 1), sum(1 for q in queues if held[q] == 0)


def follow(monitor, truth: Truth, queues: set, what: str, timeout: float = 300.0) -> float:
    watched = [(name, {"topic": truth.topic}) for name in (
        "rebalance_double_assigned_queues", "rebalance_orphaned_queues",
        "rebalance_group_queues")] + [(name, {}) for name in (
        "rebalance_allocation_mismatch_clients", "rebalance_holdings_pending_clients",
        "rebalance_group_members")]
    """Until the real clients hold every queue once and the monitor agrees with all of them;
    checks on the way that the monitor's doubles and orphans were real. The seconds from the
    last real move to the monitor's agreement."""
    def agreement() -> bool:
        real = truth.sample(queues)
        scrape = monitor.scrape()
        agreed = True
        for group in truth.consumers:
            doubles = group_value(scrape, "rebalance_double_assigned_queues", group,
                                  topic=truth.topic) or 0
            orphans = group_value(scrape, "rebalance_orphaned_queues", group,
                                  topic=truth.topic) or 0
            real_doubles, real_orphans = truth.recent_max(group, queues)
            assert doubles <= real_doubles and orphans <= real_orphans, (
                f"{what}: group {group} reported {doubles} doubled and {orphans} orphaned "
                f"queues; the real clients had at most {real_doubles} and {real_orphans} in the "
                f"last {WINDOW_S} s")
            agreed &= (real[group] == (0, 0) and (doubles, orphans) == (0, 0)
                       and group_value(scrape, "rebalance_group_queues", group,
                                       topic=truth.topic) == len(queues)
                       and group_value(scrape, "rebalance_allocation_mismatch_clients", group) == 0
                       and group_value(scrape, "rebalance_holdings_pending_clients", group) == 0)
        return agreed

    def shown() -> str:
        scrape = monitor.scrape()
        return f"real {truth.sample(queues)}; monitor " + str({
            group: {name.removeprefix("rebalance_"): group_value(scrape, name, group, **labels)
                    for name, labels in watched}
            for group in truth.consumers})

    wait_until(agreement, timeout, f"{what}: agreement", interval=0.25, details=shown)
    return time.monotonic() - truth.last_move()


def test_a_scale_out_and_a_lost_broker_are_followed_as_the_clients_move(
        rocketmq_kit, rocketmq_cluster_factory, real_consumer, spark, kafka_bootstrap,
        make_topic, tmp_path):
    cluster = rocketmq_cluster_factory(["broker-a", "broker-b"])
    topic = fresh("DynT")
    cluster.create_topic(topic, queues=4)
    groups = {strategy: fresh(f"g-{strategy.lower().replace('_', '-')}") for strategy in STRATEGIES}
    consumers = {group: [real_consumer(cluster.namesrv, group, topic, f"{group}-{i}",
                                       strategy=strategy) for i in range(2)]
                 for strategy, group in groups.items()}
    truth = Truth(topic, consumers)
    before = {(broker, q) for broker in ("broker-a", "broker-b") for q in range(4)}
    every = "|".join(consumers)

    with watching(cluster.namesrv, f"({every})", spark, kafka_bootstrap, make_topic,
                  tmp_path / "watch", "--interval-seconds", str(INTERVAL_S)) as (monitor, _):
        follow(monitor, truth, before, "settling")
        cluster.create_topic(topic, queues=8, brokers=["broker-a"])      # 8 + 4
        scaled = before | {("broker-a", q) for q in range(4, 8)}
        scale_out = follow(monitor, truth, scaled, "after the scale-out")
        cluster.kill_broker("broker-b")
        survivors = {q for q in scaled if q[0] == "broker-a"}
        broker_lost = follow(monitor, truth, survivors, "after broker-b was killed")
    print(f"\nRocketMQ {rocketmq_kit.version}: the monitor agreed {scale_out:.1f} s after the "
          f"last client moved on a scale-out, {broker_lost:.1f} s after a broker was lost "
          f"(--interval-seconds {INTERVAL_S})")
