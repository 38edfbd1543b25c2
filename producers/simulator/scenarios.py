"""Named scenarios: a fleet, a script of what goes wrong, and the ground truth it produces.

    >>> s = SCENARIOS["multi-topic-skew"](seed=1)
    >>> events = list(s.run(FastClock()))
    >>> sorted({f.kind for f in s.ground_truth()})
    ['idle_client', 'skew']

`Scenario.run(clock)` yields event dicts (contract v1) in emission order; `run_encoded(clock)`
yields (key, value) bytes for Kafka. `ground_truth()` re-simulates the same seeded run and
returns the `ExpectedFinding`s computed from the simulated processes' true state, for the
emission mode of the scenario (`with_view`: see truth.py). Times are epoch ms of the clock the
scenario last ran with (a FastClock's fixed epoch when it never ran).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from producers.simulator.clock import DEFAULT_EPOCH_MS, FastClock
from producers.simulator.emitter import EncodedSink, EventSink
from producers.simulator.model import Client, Timing, World
from producers.simulator.truth import ExpectedFinding, TruthTracker

S = 1_000  # ms
DEFAULT_TIMING = Timing()


def cid(host: int, pid: int = 1, net: str = "10.0.0") -> str:
    """A RocketMQ client id (IP@PID, the default instance name)."""
    return f"{net}.{host}@{pid}"


class Scenario:
    name = ""
    summary = ""
    duration_ms = 240 * S

    def __init__(self, *, seed: int = 0, with_view: bool = False, duration_ms: int | None = None,
                 timing: Timing = DEFAULT_TIMING, route_groups_list: bool = False,
                 notification_loss: float = 0.0) -> None:
        self.seed = seed
        self.with_view = with_view
        if duration_ms is not None:
            self.duration_ms = duration_ms
        self.timing = timing
        self.route_groups_list = route_groups_list
        self.notification_loss = notification_loss
        self.epoch_ms = DEFAULT_EPOCH_MS
        self._truth: list[ExpectedFinding] | None = None

    # --- what a scenario defines --------------------------------------------------------------
    def build(self, world: World) -> None:
        raise NotImplementedError

    def lose_notification(self, broker, client, now: int) -> bool:
        return False

    # --- running --------------------------------------------------------------------------------
    def run(self, clock=None) -> Iterator[dict]:
        clock = clock or FastClock()
        return self._run(EventSink(clock.epoch_ms, self.with_view, self.route_groups_list), clock)

    def run_encoded(self, clock=None) -> Iterator[tuple[bytes, bytes]]:
        clock = clock or FastClock()
        sink = EncodedSink(clock.epoch_ms, self.with_view, self.route_groups_list)
        return self._run(sink, clock)

    def ground_truth(self) -> list[ExpectedFinding]:
        if self._truth is None:
            sink = EventSink(self.epoch_ms, self.with_view, self.route_groups_list)
            world = self._world(sink)
            tracker = TruthTracker(world, self.with_view, self.epoch_ms)
            world.on_group_change = tracker.mark
            for t in world.run(self.duration_ms):
                tracker.evaluate(t)
                sink.drain()
            self._truth = tracker.findings()
        return list(self._truth)

    def _world(self, sink) -> World:
        world = World(timing=self.timing, rng=random.Random(self.seed), sink=sink,
                      notification_loss=self.notification_loss,
                      lose_notification=self.lose_notification)
        self.build(world)
        return world

    def _run(self, sink, clock) -> Iterator:
        if clock.epoch_ms != self.epoch_ms:
            self.epoch_ms, self._truth = clock.epoch_ms, None
        world = self._world(sink)
        if clock.realtime:
            for _ in world.run(self.duration_ms, clock.wait_until):
                yield from sink.drain()
            return
        pending = sink.pending()
        for _ in world.run(self.duration_ms):
            if len(pending) >= 512:  # hand events over in batches when nobody waits
                yield from sink.drain()
                pending = sink.pending()
        yield from sink.drain()


def _fleet(world: World, group: str, topics, hosts, *, start_at: int = 0, **kw) -> list[Client]:
    return [world.add_client(Client(cid(h), group, topics, **kw), start_at) for h in hosts]


def _replace(world: World, old: Client, new: Client, at: int, gap_ms: int = 0) -> None:
    """A redeploy: the old process shuts down cleanly, the new one starts gap_ms later."""
    world.at(at, world.stop_client, old)
    world.add_client(new, at + gap_ms)


class MultiTopicSkew(Scenario):
    name = "multi-topic-skew"
    summary = "4 clients on TopicX and TopicY with 2 queues each: 2 idle clients, skew 2.0"
    duration_ms = 120 * S

    def build(self, world: World) -> None:
        world.add_topic("TopicX", {"broker-a": 2})
        world.add_topic("TopicY", {"broker-a": 2})
        world.start_route_watcher()
        _fleet(world, "skew-group", ["TopicX", "TopicY"], range(1, 5))


class BrokerCrash(Scenario):
    name = "broker-crash"
    summary = ("broker-a (8 of 16 queues) dies at 62 s; clients see the new route 30 s apart: "
               "double assignment and orphans until the last catches up at 105 s")

    def build(self, world: World) -> None:
        world.add_topic("TopicX", {"broker-a": 8, "broker-b": 8})
        world.start_route_watcher()
        for host, start in ((1, 0), (2, 10 * S), (3, 25 * S)):
            world.add_client(Client(cid(host), "crash-group", ["TopicX"]), start)
        world.at(62 * S, world.crash_broker, "broker-a")


class RollingDeploy(Scenario):
    name = "rolling-deploy"
    summary = "4 clients replaced one by one (clean shutdown, new PID 5 s later): no findings"
    duration_ms = 240 * S

    def build(self, world: World) -> None:
        world.add_topic("TopicX", {"broker-a": 4, "broker-b": 4})
        world.start_route_watcher()
        old = _fleet(world, "deploy-group", ["TopicX"], range(1, 5))
        for i, client in enumerate(old):
            new = Client(cid(i + 1, pid=2), "deploy-group", ["TopicX"])
            _replace(world, client, new, (60 + 30 * i) * S, gap_ms=5 * S)


class LostNotification(Scenario):
    name = "lost-notification"
    summary = ("a 4th client joins at 45 s; both brokers' notifications to 10.0.0.2@1 are lost, "
               "so it keeps its old share until its periodic rebalance at 60 s")

    def build(self, world: World) -> None:
        world.add_topic("TopicX", {"broker-a": 4, "broker-b": 4})
        world.start_route_watcher()
        _fleet(world, "lost-group", ["TopicX"], range(1, 4))
        world.add_client(Client(cid(4), "lost-group", ["TopicX"]), 45 * S)

    def lose_notification(self, broker, client, now: int) -> bool:
        return client.client_id == cid(2) and now == 45 * S


class ClientIdCollision(Scenario):
    name = "client-id-collision"
    summary = ("two containers share client id 172.17.0.2@1 (same IP@PID): both take the first "
               "slot's share, the second slot's share is orphaned")

    def build(self, world: World) -> None:
        world.add_topic("TopicX", {"broker-a": 8})
        world.start_route_watcher()
        shared = cid(2, net="172.17.0")
        for address in ("10.1.0.5:50001", "10.1.0.6:50002"):
            world.add_client(Client(shared, "collide-group", ["TopicX"], address=address), 0)
        for host in (3, 4):
            world.add_client(Client(cid(host, net="172.17.0"), "collide-group", ["TopicX"],
                                    address=f"10.1.0.{host + 4}:5000{host}"), 0)


class SubscriptionMismatch(Scenario):
    name = "subscription-mismatch"
    summary = ("at 60 s 10.0.0.3 is redeployed subscribing to TopicA only; its share of TopicB "
               "is orphaned (cid lists hold every client of the group)")

    def build(self, world: World) -> None:
        world.add_topic("TopicA", {"broker-a": 6})
        world.add_topic("TopicB", {"broker-a": 6})
        world.start_route_watcher()
        old = _fleet(world, "sub-group", ["TopicA", "TopicB"], range(1, 4))
        _replace(world, old[2], Client(cid(3, pid=2), "sub-group", ["TopicA"]), 60 * S)


class StrategyChange(Scenario):
    name = "strategy-change"
    summary = ("AVG -> AVG_BY_CIRCLE rolled out one client per minute from 60 s: double "
               "assignment and orphans until the last switches at 180 s")

    def build(self, world: World) -> None:
        world.add_topic("TopicX", {"broker-a": 6})
        world.start_route_watcher()
        old = _fleet(world, "strategy-group", ["TopicX"], range(1, 4))
        for i, client in enumerate(old):
            new = Client(cid(i + 1, pid=2), "strategy-group", ["TopicX"],
                         strategy="AVG_BY_CIRCLE")
            _replace(world, client, new, (60 + 60 * i) * S)


class NetworkPartition(Scenario):
    name = "network-partition"
    summary = ("10.0.0.3 is cut from broker-a at 30.5 s and healed at 300.5 s; broker-a expires it "
               "at 121 s, so clients asking broker-a see 2 members, those asking broker-b 3")
    duration_ms = 360 * S

    def build(self, world: World) -> None:
        world.add_topic("TopicX", {"broker-a": 4, "broker-b": 4})
        world.start_route_watcher()
        clients = _fleet(world, "partition-group", ["TopicX"], range(1, 4))
        world.at(30_500, world.cut, clients[2], "broker-a", True)
        world.at(300_500, world.cut, clients[2], "broker-a", False)


class Steady(Scenario):
    name = "steady"
    summary = "many healthy groups, for load"
    duration_ms = 300 * S

    def __init__(self, *, groups: int = 100, clients: int = 4, topics: int = 2,
                 queues: int = 8, brokers: int = 2, **kw) -> None:
        super().__init__(**kw)
        self.groups, self.clients, self.topics = groups, clients, topics
        self.queues, self.brokers = queues, brokers

    def build(self, world: World) -> None:
        spread = random.Random(self.seed)
        names = [f"broker-{chr(ord('a') + b)}" for b in range(self.brokers)]
        world.start_route_watcher()
        for g in range(self.groups):
            group = f"steady-{g:05d}"
            topics = [f"{group}-t{t}" for t in range(self.topics)]
            for topic in topics:
                base, extra = divmod(self.queues, len(names))
                world.add_topic(topic, {n: base + (i < extra) for i, n in enumerate(names)})
            for c in range(self.clients):
                host = f"10.{g // 250}.{g % 250}"
                start = spread.randrange(0, self.timing.heartbeat_ms)
                world.add_client(Client(f"{host}.{c + 1}@1", group, topics), start)


SCENARIOS: dict[str, type[Scenario]] = {
    cls.name: cls for cls in (MultiTopicSkew, BrokerCrash, RollingDeploy, LostNotification,
                              ClientIdCollision, SubscriptionMismatch, StrategyChange,
                              NetworkPartition, Steady)
}
