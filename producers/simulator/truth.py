"""Ground truth: the findings a correct monitor must report, from what the fleet really does.

Evaluated after every simulated millisecond in which a group changed, from the simulated
processes' true state (what each process holds, the view it allocated from, what each broker
lists), never from the events. A condition that begins and ends within one millisecond (a client
start settling) is not a finding. Definitions follow issue 3:

- double_assignment: a queue of the current route held by two or more live processes;
- orphaned_queue: a queue of the current route of a subscribed topic that no live process holds;
- skew: max load / ceil(Q / N) > 1 (Q: the group's queues, N: live processes); clients = ();
- idle_client: a process holding nothing while another holds 2 or more;
- subscription_inconsistent / strategy_inconsistent: processes differ; clients = the processes
  not in the largest camp (ties: the camp of the smallest client id stays);
- client_id_collision: one client_id used by two or more live processes;
- view_divergent: a process whose view (member list or a topic's queues) differs from the truth;
- broker_view_divergent: live brokers listing members of the group disagree; one finding per
  broker that lacks some, brokers = (that broker,), clients = the client ids it lacks.

`with_view=False` is what a monitor can know from heartbeats without `view`/`owned`: every
process is taken to hold what it would allocate from the true member list and routes, so only
the structural findings remain (no view divergence, no transient conflicts).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from producers.simulator.placement import allocate_topic


@dataclass(frozen=True)
class ExpectedFinding:
    kind: str
    group: str
    topic: str | None
    queue: tuple[str, int] | None
    clients: tuple[str, ...]
    begins_ms: int
    ends_ms: int | None  # None: still present when the scenario ended
    brokers: tuple[str, ...] = ()  # broker_view_divergent: the broker whose list lacks clients


FindingKey = tuple  # (kind, topic, queue, clients, brokers)


def group_findings(world, group: str, with_view: bool) -> set[FindingKey]:
    live = [c for c in world.clients if c.group == group and c.running]
    if not live:
        return set()
    topics = sorted({t for c in live for t in c.topics})
    routes = {t: world.nameserver.queues(t) for t in topics}
    member_ids = tuple(c.client_id for c in live)
    held = {c: _holdings(c, member_ids, routes, with_view) for c in live}
    found: set[FindingKey] = set()
    found |= _conflicts(live, held, routes)
    found |= _load_findings(live, held, routes)
    found |= _odd_ones_out("subscription_inconsistent", live, lambda c: c.topic_set)
    found |= _odd_ones_out("strategy_inconsistent", live,
                           lambda c: (c.strategy, tuple(sorted(c.params.items()))))
    found |= _collisions(live)
    if with_view:
        found |= _view_divergence(live, member_ids, routes)
    found |= _broker_divergence(world, group)
    return found


def _holdings(client, member_ids, routes, with_view: bool) -> dict:
    if with_view:
        return client.holdings
    out = {}
    for topic in client.topics:
        share = allocate_topic(client, member_ids, routes[topic])
        out[topic] = share or ()
    return out


def _conflicts(live, held, routes) -> set[FindingKey]:
    found = set()
    for topic, queues in routes.items():
        holders: dict = {q: [] for q in queues}
        for client in live:
            for q in held[client].get(topic, ()) if topic in client.topic_set else ():
                if q in holders:
                    holders[q].append(client.client_id)
        for q, cids in holders.items():
            if len(cids) >= 2:
                found.add(("double_assignment", topic, (q[1], q[2]), tuple(sorted(cids))))
            elif not cids:
                found.add(("orphaned_queue", topic, (q[1], q[2]), ()))
    return found


def _load_findings(live, held, routes) -> set[FindingKey]:
    current = {q for queues in routes.values() for q in queues}
    loads = [(c.client_id, sum(q in current for t in c.topics for q in held[c].get(t, ())))
             for c in live]
    total = len(current)
    most = max(load for _, load in loads)
    found = set()
    if total and most > -(-total // len(live)):
        found.add(("skew", None, None, ()))
    if most >= 2:
        found |= {("idle_client", None, None, (cid,)) for cid, load in loads if load == 0}
    return found


def _odd_ones_out(kind: str, live, trait) -> set[FindingKey]:
    camps = Counter(trait(c) for c in live)
    if len(camps) < 2:
        return set()
    smallest_id = {t: min(c.client_id for c in live if trait(c) == t) for t in camps}
    main = min(camps, key=lambda t: (-camps[t], smallest_id[t]))
    odd = tuple(sorted(c.client_id for c in live if trait(c) != main))
    return {(kind, None, None, odd)}


def _collisions(live) -> set[FindingKey]:
    addresses: dict[str, set] = {}
    for client in live:
        addresses.setdefault(client.client_id, set()).add(client.address)
    return {("client_id_collision", None, None, (cid,))
            for cid, seen in addresses.items() if len(seen) >= 2}


def _view_divergence(live, member_ids, routes) -> set[FindingKey]:
    truth_ids = sorted(member_ids)
    found = set()
    for client in live:
        if client.view_clients is None:
            continue
        if sorted(client.view_clients) != truth_ids or any(
                client.view_queues.get(t, ()) != routes[t] for t in client.topics):
            found.add(("view_divergent", None, None, (client.client_id,)))
    return found


def _broker_divergence(world, group: str) -> set[FindingKey]:
    lists = {name: set(broker.members.get(group, ())) for name, broker in world.brokers.items()
             if broker.alive and broker.members.get(group)}
    union = set().union(*lists.values())
    return {("broker_view_divergent", None, None,
             tuple(sorted(c.client_id for c in union - held)), (name,))
            for name, held in sorted(lists.items()) if held != union}


class TruthTracker:
    """Turns per-millisecond finding sets into begin/end intervals."""

    def __init__(self, world, with_view: bool, epoch_ms: int) -> None:
        self.world = world
        self.with_view = with_view
        self.epoch_ms = epoch_ms
        self.dirty: set[str] = set()
        self.active: dict[str, dict[FindingKey, int]] = {}
        self.closed: list[ExpectedFinding] = []

    def mark(self, group: str) -> None:
        self.dirty.add(group)

    def evaluate(self, now: int) -> None:
        for group in sorted(self.dirty):
            found = group_findings(self.world, group, self.with_view)
            active = self.active.setdefault(group, {})
            for key in [k for k in active if k not in found]:
                self.closed.append(self._finding(group, key, active.pop(key), now))
            for key in found:
                active.setdefault(key, now)
        self.dirty.clear()

    def findings(self) -> list[ExpectedFinding]:
        still = [self._finding(group, key, begun, None)
                 for group, active in self.active.items() for key, begun in active.items()]
        return sorted(self.closed + still, key=_order)

    def _finding(self, group: str, key: FindingKey, begun: int, ended: int | None):
        kind, topic, queue, clients, *brokers = key
        return ExpectedFinding(kind, group, topic, queue, clients, self.epoch_ms + begun,
                               None if ended is None else self.epoch_ms + ended,
                               brokers[0] if brokers else ())


def _order(f: ExpectedFinding):
    return (f.begins_ms, f.group, f.kind, f.topic or "", f.queue or ("", -1), f.clients)
