"""A RocketMQ fleet in simulated time: name server, brokers, consumer processes.

What it models (seed article 000, RocketMQ 4.x push consumer):

- The name server holds each topic's queues per broker; a broker that dies drops out of every
  route at once (its connection to the name server closes).
- Brokers keep the members that heartbeat them (ConsumerManager). A member that has not
  heartbeated for more than `member_expiry_ms` (120 s) is dropped. A new member, a member that leaves
  (UNREGISTER_CLIENT or expiry) and a changed group subscription make the broker notify every
  member it has a connection to (NOTIFY_CONSUMER_IDS_CHANGED). A notification can be lost.
- A client process starts: it fetches its topics' routes, heartbeats every broker of those
  routes, then rebalances at once. It rebalances again on a notification and 20 s after its last
  rebalance, refreshes its route cache every 30 s (a new route is used at the next rebalance,
  not at once), heartbeats every 30 s and unregisters from every broker on a clean shutdown.
- A rebalance asks one random broker of its routes for the member list (GET_CONSUMER_LIST_BY_GROUP;
  a dead or unreachable broker means "skip this rebalance") and allocates each subscribed topic
  with the allocation engine, from that member list and its own cached route. A changed result is
  followed by a heartbeat to every broker (RebalancePushImpl.messageQueueChanged does that).

Simplifications, on purpose: one member-list query per rebalance (upstream asks per topic, the
event contract's `view` has one client list); notifications arrive `notify_delay_ms` after the
change (0 by default, so a clean change settles within one millisecond of simulated time); a
broker drops a member 1 ms past `member_expiry_ms` after its last heartbeat (upstream scans
every 10 s for `diff > timeout`), which is what the monitor assumes.

The world reports what happens to a sink (see emitter.py) and marks groups whose truth changed
(see truth.py). Everything random comes from one `random.Random`, so a seed fixes the run.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from producers.simulator.cluster import Broker, NameServer
from producers.simulator.placement import allocate_topic

Queue = tuple[str, str, int]  # (topic, broker, queue id)
ROUTE_POLL_DELAY_MS = 10
HEARTBEAT_DELAY_MS = 1_000


@dataclass(frozen=True)
class Timing:
    heartbeat_ms: int = 30_000
    member_expiry_ms: int = 120_000
    rebalance_ms: int = 20_000
    route_refresh_ms: int = 30_000
    route_publish_ms: int = 30_000  # how often the route watcher re-publishes routes (0 = never)
    notify_delay_ms: int = 0


class Client:
    """One consumer process (a member is a process: two processes may share a client_id)."""

    def __init__(self, client_id: str, group: str, topics: Sequence[str], *,
                 strategy: str = "AVG", params: Mapping | None = None,
                 address: str | None = None) -> None:
        self.client_id = client_id
        self.group = group
        self.topics = tuple(topics)
        self.topic_set = frozenset(self.topics)
        self.strategy = strategy
        self.params = dict(params or {})
        self.address = address or f"{client_id.split('@')[0]}:0"
        self.running = False
        self.cut_from: set[str] = set()  # brokers this process cannot reach
        self.route_cache: dict[str, tuple[Queue, ...]] = {}
        self.route_version = 0        # bumped when route_cache changes
        self.nameserver_version = -1  # the name server's version at the last poll
        self.view_route_version = -1  # route_version of the last allocation
        self._brokers: list[str] | None = None
        self.holdings: dict[str, tuple[Queue, ...]] = {}
        self.view_clients: tuple[str, ...] | None = None
        self.view_queues: dict[str, tuple[Queue, ...]] = {}
        self.version = 0  # bumped whenever holdings or view change (the emitter caches on it)
        self.rebalance_token = 0
        self.rebalance_pending_at: int | None = None

    def __repr__(self) -> str:
        return f"Client({self.client_id!r}, {self.address!r})"

    def brokers(self) -> list[str]:
        """brokerAddrTable: the brokers of the cached routes."""
        if self._brokers is None:
            self._brokers = sorted({q[1] for queues in self.route_cache.values() for q in queues})
        return self._brokers

    def can_reach(self, broker: Broker) -> bool:
        return broker.alive and broker.name not in self.cut_from

    def owned(self) -> list[Queue]:
        return [q for topic in self.topics for q in self.holdings.get(topic, ())]


class World:
    """The simulated fleet plus its scheduler; `run` advances simulated time step by step."""

    def __init__(self, *, timing: Timing | None = None, rng: random.Random | None = None,
                 sink=None, on_group_change: Callable[[str], None] | None = None,
                 notification_loss: float = 0.0,
                 lose_notification: Callable[[Broker, Client, int], bool] | None = None) -> None:
        self.timing = timing or Timing()
        self.rng = rng or random.Random(0)
        self.sink = sink
        self.on_group_change = on_group_change or (lambda group: None)
        self.notification_loss = notification_loss
        self.lose_notification = lose_notification
        self.nameserver = NameServer()
        self.brokers: dict[str, Broker] = {}
        self.clients: list[Client] = []
        self.topic_groups: dict[str, list[str]] = {}
        self.now = 0
        self._heap: list = []
        self._seq = 0

    # --- scheduling -------------------------------------------------------------------------
    def at(self, t: int, action: Callable, *args) -> None:
        heapq.heappush(self._heap, (t, self._seq, action, args))
        self._seq += 1

    def run(self, until_ms: int, wait: Callable[[int], None] | None = None) -> Iterator[int]:
        """Process every action up to until_ms; yield each simulated time after its actions."""
        heap = self._heap
        while heap and heap[0][0] <= until_ms:
            t = heap[0][0]
            if wait is not None:
                wait(t)
            self.now = t
            while heap and heap[0][0] == t:
                _, _, action, args = heapq.heappop(heap)
                action(*args)
            yield t

    # --- set-up -----------------------------------------------------------------------------
    def add_topic(self, topic: str, queues_per_broker: Mapping[str, int]) -> None:
        for broker in queues_per_broker:
            self.brokers.setdefault(broker, Broker(broker))
        self.nameserver.set_topic(topic, queues_per_broker)
        self.topic_groups.setdefault(topic, [])

    def add_client(self, client: Client, start_at: int | None = 0) -> Client:
        self.clients.append(client)
        for topic in client.topics:
            groups = self.topic_groups.setdefault(topic, [])
            if client.group not in groups:
                groups.append(client.group)
        if start_at is not None:
            self.at(start_at, self.start_client, client)
        return client

    def start_route_watcher(self, at: int = 0) -> None:
        self.at(at, self._publish_routes, None)

    def _publish_routes(self, topics: Sequence[str] | None) -> None:
        periodic = topics is None
        for topic in (self.topic_groups if periodic else topics):
            if self.topic_groups.get(topic):
                self.sink.route(topic, self.nameserver.queues(topic), self.topic_groups[topic],
                                self.now)
        if periodic and self.timing.route_publish_ms:
            self.at(self.now + self.timing.route_publish_ms, self._publish_routes, None)

    # --- brokers ----------------------------------------------------------------------------
    def crash_broker(self, name: str) -> None:
        broker = self.brokers[name]
        groups = list(broker.members)
        broker.crash()
        self._route_changed(self.nameserver.set_broker_down(name, True), groups)

    def restart_broker(self, name: str) -> None:
        self.brokers[name].alive = True
        self._route_changed(self.nameserver.set_broker_down(name, False), [])

    def _route_changed(self, topics: list[str], groups: list[str]) -> None:
        self._publish_routes(topics)
        touched = set(groups)
        for topic in topics:
            touched.update(self.topic_groups.get(topic, ()))
        for group in sorted(touched):
            self.on_group_change(group)

    def _notify(self, broker: Broker, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED to every member the broker has a connection to."""
        for client in list(broker.members.get(group, ())):
            if not client.can_reach(broker) or self._lost(broker, client):
                continue
            self.request_rebalance(client, self.now + self.timing.notify_delay_ms)

    def _lost(self, broker: Broker, client: Client) -> bool:
        if self.lose_notification is not None and self.lose_notification(broker, client,
                                                                         self.now):
            return True
        return self.notification_loss > 0 and self.rng.random() < self.notification_loss

    def _schedule_expiry(self, broker: Broker) -> None:
        oldest = broker.oldest_heartbeat()
        if oldest is None or broker.expiry_check_at is not None:
            return
        broker.expiry_check_at = oldest + self.timing.member_expiry_ms + 1
        self.at(broker.expiry_check_at, self._expire, broker)

    def _expire(self, broker: Broker) -> None:
        broker.expiry_check_at = None
        if not broker.alive:
            return
        dropped = broker.expire(self.now, self.timing.member_expiry_ms)
        for group in sorted({g for g, _ in dropped}):
            self.on_group_change(group)
            self._notify(broker, group)
        self._schedule_expiry(broker)

    # --- clients ----------------------------------------------------------------------------
    def start_client(self, client: Client) -> None:
        client.running = True
        self._refresh_routes(client, periodic=False)
        self._heartbeat(client, periodic=False)
        # Upstream's scheduled tasks: route poll after 10 ms then every 30 s, heartbeat after
        # 1 s then every 30 s (start() itself already heartbeated once).
        self.at(self.now + ROUTE_POLL_DELAY_MS, self._refresh_routes, client, True)
        self.at(self.now + HEARTBEAT_DELAY_MS, self._heartbeat, client, True)
        self.request_rebalance(client, self.now)

    def stop_client(self, client: Client) -> None:
        """Clean shutdown: UNREGISTER_CLIENT to every reachable broker, then the process ends."""
        client.running = False
        for name in client.brokers():
            broker = self.brokers[name]
            if client.can_reach(broker) and broker.unregister(client):
                self._notify(broker, client.group)
        self.sink.unregister(client, self.now)
        client.holdings = {}
        client.view_clients = None
        client.version += 1
        self.on_group_change(client.group)

    def cut(self, client: Client, broker: str, cut: bool = True) -> None:
        (client.cut_from.add if cut else client.cut_from.discard)(broker)

    def _refresh_routes(self, client: Client, periodic: bool) -> None:
        if not client.running:
            return
        if client.nameserver_version != self.nameserver.version:
            client.nameserver_version = self.nameserver.version
            cache = client.route_cache
            for topic in client.topics:
                queues = self.nameserver.queues(topic)
                if cache.get(topic) is not queues:
                    cache[topic] = queues
                    client._brokers = None
                    client.route_version += 1
        if periodic:
            self.at(self.now + self.timing.route_refresh_ms, self._refresh_routes, client, True)

    def _heartbeat(self, client: Client, periodic: bool) -> None:
        if not client.running:
            return
        for name in client.brokers():
            broker = self.brokers[name]
            if not client.can_reach(broker):
                continue
            changed = broker.heartbeat(client, self.now)
            self.sink.heartbeat(client, name, self.now)
            if changed:
                self.on_group_change(client.group)
                self._notify(broker, client.group)
            if broker.expiry_check_at is None:
                self._schedule_expiry(broker)
        if periodic:
            self.at(self.now + self.timing.heartbeat_ms, self._heartbeat, client, True)

    def request_rebalance(self, client: Client, t: int) -> None:
        """Wake the RebalanceService; wake-ups before it runs coalesce into one rebalance."""
        if client.rebalance_pending_at is not None and client.rebalance_pending_at <= t:
            return
        client.rebalance_pending_at = t
        self.at(t, self._rebalance, client, None)

    def _rebalance(self, client: Client, token: int | None) -> None:
        if not client.running:
            return
        if token is None:  # a wake-up
            if client.rebalance_pending_at != self.now:
                return
            client.rebalance_pending_at = None
        elif token != client.rebalance_token:  # a periodic run superseded by a later rebalance
            return
        client.rebalance_token += 1
        self.at(self.now + self.timing.rebalance_ms, self._rebalance, client,
                client.rebalance_token)
        self._rebalance_once(client)

    def _rebalance_once(self, client: Client) -> None:
        brokers = client.brokers()
        if not brokers:
            return
        broker = self.brokers[brokers[int(self.rng.random() * len(brokers))]]
        if not client.can_reach(broker):
            return  # "get consumer id list failed": this rebalance does nothing
        cids = broker.member_ids(client.group)
        if cids == client.view_clients and client.route_version == client.view_route_version:
            return  # same inputs, same strategy: the same result
        holdings = {}
        for topic in client.topics:
            share = allocate_topic(client, cids, client.route_cache.get(topic, ()))
            holdings[topic] = client.holdings.get(topic, ()) if share is None else share
        view_queues = {t: client.route_cache.get(t) for t in client.topics}
        allocation_changed = holdings != client.holdings
        if not allocation_changed and cids == client.view_clients \
                and view_queues == client.view_queues:
            return
        client.holdings, client.view_clients, client.view_queues = holdings, cids, view_queues
        client.view_route_version = client.route_version
        client.version += 1
        self.on_group_change(client.group)
        if allocation_changed or self.sink.heartbeat_on_view_change:
            self._heartbeat(client, periodic=False)
