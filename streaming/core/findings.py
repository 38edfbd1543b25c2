"""Findings of one group: what is wrong with it as it stands (detection). What goes to the
findings topic is streaming.core.publication's; its metrics, streaming.core.group_metrics'.

    >>> from streaming.core.state.events import parse_event
    >>> from streaming.core.state.group import GroupState, apply_event
    >>> from streaming.core.state.rerun import rerun
    >>> state = GroupState("g", "rocketmq", 120_000)
    >>> for raw in ([{"type": "route", "ts": 1e12, "group": "g", "topic": t, "brokers": {"b": 2}}
    ...              for t in ("TopicX", "TopicY")] +
    ...             [{"type": "heartbeat", "ts": 1e12, "group": "g", "client_id": f"c{i}",
    ...               "topics": ["TopicX", "TopicY"], "strategy": "AVG"} for i in range(1, 5)]):
    ...     _ = apply_event(state, parse_event(raw)[0])
    >>> rerun(state)
    >>> result = compute(state)
    >>> result.skew_ratio, [f.clients for f in result.findings if f.kind == "idle_client"]
    (2.0, [('c3',), ('c4',)])
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, get_args

from streaming.core.contract import (
    FindingIdentity,
    FindingKind,
    Identified,
    JsonValue,
    Queue2,
)
from streaming.core.state.group import GroupState, Member, MemberKey
from streaming.core.state.rerun import (
    Claims,
    claims_of,
    consensus_clients,
    consensus_queues,
    holdings_behind,
    shared_params,
)

KINDS: tuple[FindingKind, ...] = get_args(FindingKind)
CONFLICT_KINDS: tuple[FindingKind, ...] = ("double_assignment", "orphaned_queue")


@dataclass(frozen=True)
class Finding(Identified):
    """One finding of the group as it stands: its identity, and what it says beyond it."""

    identity: FindingIdentity
    detail: dict[str, JsonValue] = field(default_factory=dict, compare=False, hash=False)


def finding(kind: FindingKind, *subject: Any, detail: dict[str, JsonValue] | None = None,
            **named: Any) -> Finding:
    """A Finding of `kind` whose identity's other fields are `subject` and `named` (as
    FindingIdentity declares them)."""
    return Finding(FindingIdentity(kind, *subject, **named), detail or {})


@dataclass
class GroupFindings:
    findings: list[Finding]
    queues: dict[str, int]
    loads: dict[MemberKey, int]
    skew_ratio: float
    target_skew_ratio: float = 1.0
    share_readers: dict[str, int] = field(default_factory=dict)   # share groups: topic -> max

    def count(self, kind: str, topic: str | None = None) -> int:
        return sum(1 for f in self.findings if f.kind == kind and (topic is None or f.topic == topic))


def compute(state: GroupState) -> GroupFindings:
    """Every finding of the group as it stands (claims from the last re-run)."""
    claims = claims_of(state)
    active = active_members(state)
    topics = sorted({t for m in state.members.values() for t in m.topics})
    route = {t: q for t in topics if (q := consensus_queues(state, t)) is not None}
    contested = {t: route[t] for t in sorted({t for m in active for t in m.topics}) if t in route}
    findings: list[Finding] = []
    loads = {m.key: 0 for m in state.live_members()}
    share = group_type(state) == "share"
    behind = {m.key: late for m in state.live_members()
              if (late := holdings_behind(state, m))}
    guessed = _guessed(active, behind)
    findings += _queue_findings(contested, active, claims, loads, exclusive=not share,
                                predicted=behind, guessed=guessed)
    for member in state.live_members():
        if not member.clustering:
            loads[member.key] = sum(len(route.get(t, ())) for t in member.topics)
    skew_ratio, skew = (1.0, []) if share else _skew(contested, active, loads, guessed)
    findings += skew
    findings += _inconsistency("subscription_inconsistent", active, lambda m: m.topics)
    findings += _inconsistency("strategy_inconsistent",
                               [m for m in active if m.strategy_basis != "assumed"], shared_params)
    findings += _collisions(state)
    if state.system == "rocketmq":
        findings += _view_divergence(state, active)
        findings += _broker_splits(state, active)
    target_skew_ratio = 1.0
    if any(m.broker_assigned for m in active):
        runs = _processes_holding(active, _active_tasks)   # streams: where each task runs
        findings += _handoffs(active) + _streams_not_ready(active)
        findings += _standby_with_active(active, runs) + _standby_missing(route, active, runs)
        if not share:
            unassigned, target_skew_ratio, skewed = _target_findings(contested, active)
            findings += unassigned + skewed
    findings += _broker_divergence(state)
    findings += _mismatches(state, behind)
    findings += _holdings_pending(state, behind)
    findings += _strategies_unknown(active)
    return GroupFindings(findings, {t: len(q) for t, q in route.items()}, loads, skew_ratio,
                         target_skew_ratio,
                         _share_readers(contested, active, claims) if share
                         else _pop_readers(state, route, claims))


def group_type(state: GroupState) -> str:
    """A Kafka group's type as its members' broker describes it ("" for RocketMQ): a group
    with any KIP-848 member is a consumer group (one migrating from classic has both kinds)."""
    if state.system != "kafka":
        return ""
    types = {m.protocol.group_type for m in state.members.values() if m.protocol is not None}
    return next((kind for kind in ("share", "streams", "consumer") if kind in types), "classic")


def group_assignor(state: GroupState) -> str | None:
    """The strategy most members use (the leader's assignor for a classic Kafka group; the
    broker's for a KIP-848 one); ties go to the first name."""
    votes = Counter(m.strategy for m in state.members.values() if m.clustering)
    return min(votes, key=lambda name: (-votes[name], name)) if votes else None


def with_new_broker_lists(state: GroupState, previous: GroupFindings) -> GroupFindings:
    """`compute(state)` when only the brokers' member lists changed since `previous` (a
    heartbeat through a new broker, or a broker's entry expiring): only the
    broker_view_divergent findings can differ; they keep their place in the order."""
    head = [f for f in previous.findings
            if f.kind != "broker_view_divergent" and f.kind not in _AFTER_DIVERGENCE]
    tail = [f for f in previous.findings if f.kind in _AFTER_DIVERGENCE]
    return replace(previous, findings=head + _broker_divergence(state) + tail)


# What compute() finds after _broker_divergence, none of it from the brokers' lists
# (test_step_properties holds the shortcut to compute's order).
_AFTER_DIVERGENCE = ("allocation_mismatch", "holdings_pending", "strategy_unknown")

TopicQueues = Mapping[str, tuple[Queue2, ...]]     # topic -> its queues


def _queue_findings(contested: TopicQueues, active: list[Member], claims: Claims,
                    loads: dict[MemberKey, int], exclusive: bool = True,
                    predicted: Mapping[MemberKey, tuple[str, ...]] | None = None,
                    guessed: Mapping[MemberKey, tuple[str, ...]] | None = None,
                    ) -> list[Finding]:
    """Orphans and (where a queue has one owner by design: not a share group) doubles.
    `predicted`: the topics on which a member's claims are the re-run's (holdings_pending). A
    queue that one member reports holding and another is only predicted to take is no double:
    the one reporting it may not have seen the route change yet, and gives it up when it does
    (two reporting it, or two predicted to take it, are). `guessed`: the topics on which a
    member's claims are a re-run with a guessed strategy: they make no double (unless another
    holder shares its client id, which takes the same share under any strategy), and the
    topic has no orphan (the member may hold any queue)."""
    predicted, guessed = predicted or {}, guessed or {}
    unsure = {t for topics in guessed.values() for t in topics}
    in_route = {t: set(q) for t, q in contested.items()}
    owners: dict[str, dict[Queue2, list[Member]]] = {t: {} for t in contested}
    for member in active:
        load = 0
        for topic, queues in claims.get(member.key, {}).items():
            valid, held = in_route.get(topic), owners.get(topic)
            if valid is None:           # else held is not None: owners has in_route's topics
                continue
            for queue in queues:
                if queue in valid:
                    held.setdefault(queue, []).append(member)  # type: ignore[union-attr]
                    load += 1
        loads[member.key] = load
    found = []
    for topic, queues in contested.items():
        held = owners[topic]
        for queue in queues:
            holders = held.get(queue)
            if not holders:
                if topic not in unsure:
                    found.append(finding("orphaned_queue", topic, queue))
            elif len(holders) > 1 and exclusive and _doubled(holders, topic, predicted, guessed):
                found.append(finding("double_assignment", topic, queue,
                                     tuple(sorted(m.client_id for m in holders)),
                                     detail={"addresses": sorted(m.address for m in holders)}))
    return found


def _skew(route: TopicQueues, active: list[Member], loads: Mapping[MemberKey, int],
          guessed: Mapping[MemberKey, tuple[str, ...]]) -> tuple[float, list[Finding]]:
    total = sum(len(q) for q in route.values())
    if not total or not active:
        return 1.0, []
    ideal = math.ceil(total / len(active))
    peak = max(loads[m.key] for m in active)
    ratio = peak / ideal
    found = []
    if ratio > 1.0:
        busiest = sorted({m.client_id for m in active if loads[m.key] == peak})
        found.append(finding("skew", detail={"skew_ratio": ratio, "ideal": ideal,
                                             "max_load": peak, "busiest": busiest}))
    if peak >= 2:
        found += [finding("idle_client", clients=(m.client_id,), address=m.address)
                  for m in active if loads[m.key] == 0 and m.key not in guessed]
    return ratio, found


def _pop_readers(state: GroupState, route: TopicQueues, claims: Claims) -> dict[str, int]:
    """A RocketMQ group's shared (POP) readers: per topic, the most reading one queue."""
    popping = [m for m in state.live_members()
               if m.shared and m.model == "CLUSTERING" and m.owned is not None]
    if state.system != "rocketmq" or not popping:
        return {}
    topics = {t: route[t] for t in sorted({t for m in popping for t in m.topics}) if t in route}
    return _share_readers(topics, popping, claims)


def _share_readers(route: TopicQueues, active: list[Member], claims: Claims) -> dict[str, int]:
    """A share group's topics: the most members reading one partition (several by design)."""
    readers: dict[str, int] = {}
    for topic, queues in route.items():
        counts = Counter(q for m in active for q in claims.get(m.key, {}).get(topic, ()))
        readers[topic] = max((counts[q] for q in queues), default=0)
    return readers


def _handoffs(active: list[Member]) -> list[Finding]:
    """KIP-848: members not yet at their target (a partition still to give up or still to get,
    or an epoch not caught up). Each reconciles in a heartbeat or two; one that does not is a
    stuck hand-off, which the age of the finding shows."""
    found = []
    for member in active:
        protocol = member.protocol
        if protocol is None or protocol.target is None:
            continue
        owned = set(member.owned or ())
        target = set(protocol.target)
        lag = protocol.epoch_lag
        if owned != target or lag:
            found.append(finding("handoff_pending", clients=(member.client_id,),
                                 address=member.address,
                                 detail={"to_revoke": len(owned - target),
                                         "to_receive": len(target - owned), "epoch_lag": lag,
                                         "member_epoch": protocol.member_epoch,
                                         "assignment_epoch": protocol.assignment_epoch}))
    return found


def _streams_not_ready(active: list[Member]) -> list[Finding]:
    """A streams group the broker has no configured topology for (its source or internal topics
    missing or wrongly partitioned): it assigns no task, so the application processes nothing,
    and with no task in any route nothing else would say so."""
    states = {m.protocol.group_state for m in active
              if m.protocol is not None and m.protocol.group_type == "streams"}
    return [finding("streams_not_ready", detail={"state": "NotReady"})] \
        if "NotReady" in states else []


def _standby_with_active(active: list[Member], runs: Mapping[Task, set[str]]) -> list[Finding]:
    """A streams task whose standby or warm-up copy is on the process of its active owner: the
    copy shares the owner's disk and fate, so losing that process loses both and the task's
    state is rebuilt from its changelog. The broker's sticky assignor never targets one there,
    so one seen there is a thread that kept its copy after the task moved to another thread of
    its process (a hand-off not finished), or an assignor that breaks the rule. `runs`: task
    -> the processes running it active."""
    found = []
    for member in active:
        protocol = member.protocol
        if protocol is None or protocol.process_id is None:
            continue
        for kind, copies in (("standby", protocol.standby), ("warmup", protocol.warmup)):
            for topic, broker, queue_id in copies or ():
                if protocol.process_id in runs.get((topic, broker, queue_id), ()):
                    found.append(finding("standby_with_active", topic, (broker, queue_id),
                                         clients=(member.client_id,), address=member.address,
                                         detail={"copy": kind,
                                                 "process_id": protocol.process_id}))
    return found


def _standby_missing(route: TopicQueues, active: list[Member],
                     runs: Mapping[Task, set[str]]) -> list[Finding]:
    """A streams task whose state is copied on fewer processes (besides its active owner's)
    than the group's standby replicas ask: losing its owner means rebuilding the state from
    the changelog. The broker places a copy only on another process, so a group with fewer
    processes than copies wanted plus one runs without them, and says so only in its log."""
    wanted = wanted_copies(active)
    copies = _processes_holding(active, _copies)
    found = []
    for topic, count in sorted(wanted.items()):
        if not count or topic not in route:
            continue
        for queue in route[topic]:
            task = (topic, *queue)
            kept = len(copies.get(task, set()) - runs.get(task, set()))
            if kept < count:
                found.append(finding("standby_missing", topic, queue,
                                     detail={"wanted": count, "kept": kept}))
    return found


def wanted_copies(active: list[Member]) -> dict[str, int]:
    """task space -> the copies of each of its tasks the group wants, as its members state it
    (`standby_replicas`); a task space no member states is unknown and left out."""
    wanted: dict[str, int] = {}
    for member in active:
        for space, count in (member.protocol and member.protocol.standby_replicas) or ():
            wanted[space] = max(wanted.get(space, 0), count)
    return wanted


def active_members(state: GroupState) -> list[Member]:
    """The live members the findings judge: those that take part in the allocation."""
    return [m for m in state.live_members() if m.clustering]


Task = tuple[str, str, int]


def _active_tasks(member: Member) -> tuple[Task, ...]:
    return member.owned or ()


def _copies(member: Member) -> tuple[Task, ...]:
    protocol = member.protocol
    return () if protocol is None else (*(protocol.standby or ()), *(protocol.warmup or ()))


def _processes_holding(active: list[Member], held: Callable[[Member], tuple[Task, ...]]
                       ) -> dict[Task, set[str]]:
    """task -> the processes (streams instances) of the members whose held(member) names it."""
    out: dict[Task, set[str]] = {}
    for member in active:
        process = member.protocol.process_id if member.protocol is not None else None
        if process is not None:
            for task in held(member):
                out.setdefault(task, set()).add(process)
    return out


def _target_findings(route: TopicQueues,
                     active: list[Member]) -> tuple[list[Finding], float, list[Finding]]:
    """The broker's target assignment: partitions it gives nobody, and its skew."""
    targeted = [m for m in active if m.protocol is not None and m.protocol.target is not None]
    # mypy does not carry that filter over to the uses of m.protocol.target below.
    planned = {(t, q) for m in targeted for t, _, q in m.protocol.target}  # type: ignore[union-attr]
    unassigned = [finding("target_unassigned", topic, queue) for topic, queues in route.items()
                  for queue in queues if (topic, queue[1]) not in planned]
    total = sum(len(q) for q in route.values())
    if not total or not targeted:
        return unassigned, 1.0, []
    in_route = {(t, q) for t, queues in route.items() for _, q in queues}
    loads = {m.client_id: sum((t, q) in in_route for t, _, q in m.protocol.target)  # type: ignore[union-attr]
             for m in targeted}
    ideal = math.ceil(total / len(targeted))
    peak = max(loads.values())
    ratio = peak / ideal
    if ratio <= 1.0:
        return unassigned, ratio, []
    busiest = sorted(c for c, load in loads.items() if load == peak)
    return unassigned, ratio, [finding("target_skew", detail={
        "skew_ratio": ratio, "ideal": ideal, "max_load": peak, "busiest": busiest})]


def _inconsistency(kind: FindingKind, active: list[Member],
                   facet: Callable[[Member], tuple[object, ...]]) -> list[Finding]:
    """One finding naming the members whose facet differs from the most common one."""
    votes = Counter(facet(m) for m in active)
    if len(votes) < 2:
        return []
    usual = min(votes, key=lambda value: (-votes[value], repr(value)))
    odd = [m for m in active if facet(m) != usual]
    return [finding(kind, clients=tuple(sorted(m.client_id for m in odd)),
                    detail={"usual": repr(usual) if kind != "subscription_inconsistent"
                            else list(usual)})]


def _collisions(state: GroupState) -> list[Finding]:
    addresses: dict[str, list[str]] = {}
    for client_id, address in sorted(state.members):
        addresses.setdefault(client_id, []).append(address)
    return [finding("client_id_collision", clients=(cid,), detail={"addresses": found})
            for cid, found in addresses.items() if len(found) > 1]


def _view_divergence(state: GroupState, active: list[Member]) -> list[Finding]:
    cids = sorted(consensus_clients(state))
    found = []
    for member in active:
        parts = []
        if member.view_clients is not None and sorted(member.view_clients) != cids:
            parts.append("clients")
        for topic, queues in sorted((member.view_queues or {}).items()):
            if topic in member.topics and queues != consensus_queues(state, topic):
                parts.append(topic)
        if parts:
            found.append(finding("view_divergent", clients=(member.client_id,),
                                 address=member.address, detail={"differs": parts}))
    return found


def _broker_divergence(state: GroupState) -> list[Finding]:
    lists: dict[str, set[MemberKey]] = {}
    for key, member in state.members.items():
        for broker in member.brokers:
            lists.setdefault(broker, set()).add(key)
    if state.system == "rocketmq" and state.routes:
        # A client asks a broker of the topic's route for cidAll: a broker in no route (crashed,
        # or serving none of the group's topics) cannot mislead anyone.
        serving = {broker for _, queues in state.routes.values() for broker, _ in queues}
        lists = {broker: held for broker, held in lists.items() if broker in serving}
    if len(lists) < 2 or len({frozenset(s) for s in lists.values()}) < 2:
        return []
    union = set().union(*lists.values())
    return [finding("broker_view_divergent", brokers=(broker,),
                    clients=tuple(sorted(k[0] for k in union - held)))
            for broker, held in sorted(lists.items()) if held != union]


def _broker_splits(state: GroupState, active: list[Member]) -> list[Finding]:
    """RocketMQ clientRebalance=false: each rebalance, a client takes the QUERY_ASSIGNMENT answer
    of one broker of the topic's route, picked at random. Where two brokers give a queue to
    different clients, it is doubled or orphaned whenever the clients happen to ask different
    brokers: one finding per such queue, with each broker's owners."""
    asking = [m for m in active if m.broker_assignments is not None]
    found = []
    for topic in sorted({t for m in asking for t in m.topics}):
        subscribers = [m for m in asking if topic in m.topics]
        views = _broker_views(topic, subscribers, state.routes.get(topic))
        if len(views) < 2:
            continue
        brokers = tuple(sorted(views))
        for queue in sorted({q for owners in views.values() for q in owners}):
            owners = {b: sorted(views[b].get(queue, ())) for b in brokers}
            if len({tuple(o) for o in owners.values()}) > 1:
                clients = tuple(sorted({c for o in owners.values() for c in o}))
                found.append(finding("broker_split_view", topic, queue, clients, brokers=brokers,
                                     detail={"owners": owners}))
    return found


def _broker_views(topic: str, subscribers: list[Member],
                  route: tuple[int, tuple[Queue2, ...]] | None,
                  ) -> dict[str, dict[Queue2, set[str]]]:
    """broker -> queue -> the clients it gives that queue, for each broker of the topic's route
    that answered every subscriber (a broker that gives no answer leaves a client as it was)."""
    serving = None if route is None else {broker for broker, _ in route[1]}
    # Every subscriber has broker_assignments (_broker_splits asks only those), here and below.
    brokers = {b for m in subscribers for b, _ in m.broker_assignments}  # type: ignore[union-attr]
    views = {}
    for broker in sorted(brokers):
        if serving is not None and broker not in serving:
            continue   # no client of the topic asks it
        answers = [dict(dict(m.broker_assignments).get(broker, ())).get(topic)  # type: ignore[arg-type]
                   for m in subscribers]
        if any(a is None for a in answers):
            continue
        owners: dict[Queue2, set[str]] = {}
        for member, queues in zip(subscribers, answers, strict=True):
            for queue in queues:  # type: ignore[union-attr]  # no None: skipped above
                owners.setdefault(queue, set()).add(member.client_id)
        views[broker] = owners
    return views


def _doubled(holders: list[Member], topic: str,
             predicted: Mapping[MemberKey, tuple[str, ...]],
             guessed: Mapping[MemberKey, tuple[str, ...]]) -> bool:
    """Whether two of the holders report the queue, or two are predicted to take it; a holder
    whose claim rests on a guessed strategy counts only beside a holder of its client id."""
    if guessed:
        ids = Counter(m.client_id for m in holders)
        holders = [m for m in holders
                   if topic not in guessed.get(m.key, ()) or ids[m.client_id] > 1]
    guesses = sum(1 for m in holders if topic in predicted.get(m.key, ()))
    return guesses >= 2 or len(holders) - guesses >= 2


def _guessed(active: list[Member],
             behind: Mapping[MemberKey, tuple[str, ...]]) -> dict[MemberKey, tuple[str, ...]]:
    """Members whose strategy is a guess: the topics on which their claims are the re-run's
    (every topic without `owned`; else those whose holdings predate a route change)."""
    guessed = {m.key: m.topics if m.owned is None else behind.get(m.key, ())
               for m in active if m.strategy_basis == "assumed"}
    return {key: topics for key, topics in guessed.items() if topics}


def _strategies_unknown(active: list[Member]) -> list[Finding]:
    """Members whose strategy is a guess: nothing that rests on their re-run is raised."""
    return [finding("strategy_unknown", clients=(m.client_id,), address=m.address,
                    detail={"assumed": m.strategy,
                            "candidates": None if m.strategy_candidates is None
                            else list(m.strategy_candidates)})
            for m in active if m.strategy_basis == "assumed"]


def _holdings_pending(state: GroupState,
                      behind: Mapping[MemberKey, tuple[str, ...]]) -> list[Finding]:
    """Members whose reported holdings predate a route change of their topics: their claims on
    those topics are the re-run's until they report again (no conflict is raised from them)."""
    return [finding("holdings_pending", clients=(member.client_id,), address=member.address,
                    detail={"topics": list(behind[member.key])})
            for member in state.live_members() if member.key in behind]


def _mismatches(state: GroupState,
                behind: Mapping[MemberKey, tuple[str, ...]]) -> list[Finding]:
    found = []
    for member in state.live_members():
        if (member.owned is None or not member.clustering or member.broker_assigned
                or member.key in behind or member.strategy_basis == "assumed"):
            continue
        computed = {(t, b, q) for t, share in state.computed.get(member.key, {}).items()
                    for b, q in share}
        owned = set(member.owned)
        if owned != computed:
            found.append(finding("allocation_mismatch", clients=(member.client_id,),
                                 address=member.address,
                                 detail={"missing": len(computed - owned),
                                         "extra": len(owned - computed)}))
    return found
