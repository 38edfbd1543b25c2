"""The monitor's re-run of a group's allocation, and what each member claims.

RocketMQ: every member allocates, topic by topic, from its own view (missing parts = the group's
consensus) with its own strategy, against the client list a real client would get from the broker
(every live process's client_id, subscribed or not; a shared id appears twice). Members that share
a view are computed in one `allocate_group` call. Kafka: the leader's assignor runs once over every
member, in join order (the leader's HashMap insertion order); a group the broker assigns (KIP-848
consumer groups, share groups) has no re-run: its members' targets come from the broker.

A member's claims are its `owned` when it reports one, else the re-run's share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final, Literal

from streaming.core.allocation.group import InvalidAllocationInput, allocate_group
from streaming.core.allocation.rocketmq_go import chosen_strategy
from streaming.core.contract import JsonValue, Queue2
from streaming.core.state.group import GroupState, Member, MemberKey

Claims = dict[MemberKey, dict[str, tuple[Queue2, ...]]]
PER_CLIENT_PARAMS = frozenset({"machine_room", "queues"})   # differ per client by design
_CONSENSUS: Final[Literal["="]] = "="
# Members that re-run one topic together: (strategy, params, view's clients, topic, view's queues).
_Job = tuple[str, str, tuple[str, ...] | Literal["="], str, tuple[Queue2, ...] | Literal["="]]


def consensus_queues(state: GroupState, topic: str) -> tuple[Queue2, ...] | None:
    """The topic's current route; without one, the view most members state (None if none)."""
    route = state.routes.get(topic)
    if route is not None:
        return route[1]
    views = Counter(m.view_queues[topic] for m in state.members.values()
                    if m.view_queues and topic in m.view_queues)
    if not views:
        return None
    return max(sorted(views), key=lambda q: views[q])


def consensus_clients(state: GroupState) -> list[str]:
    """cidAll as the broker lists it: one client_id per live process. Where heartbeats say which
    broker lists a member, a shared member no broker lists (a gRPC client behind a proxy) is in
    no broker's list."""
    brokered = any(m.brokers for m in state.members.values())
    return [key[0] for key, m in state.members.items()
            if not (brokered and m.shared and not m.brokers)]


def shared_params(member: Member) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Strategy and params with the per-client parts removed (for the inconsistency check)."""
    params = tuple(sorted((k, repr(v)) for k, v in member.params.items()
                          if k not in PER_CLIENT_PARAMS))
    return chosen_strategy(member.strategy), params


def rerun(state: GroupState, only: Iterable[MemberKey] | None = None) -> None:
    """Recompute `state.computed` for the given members (None = all)."""
    if state.system == "kafka":
        _rerun_kafka(state)
    else:
        _rerun_rocketmq(state, None if only is None else set(only))


def claims_of(state: GroupState) -> Claims:
    """What each live member claims: its `owned` if it reports one, else the re-run's share;
    for a topic whose route changed after it reported `owned`, the re-run's share too."""
    claims: Claims = {}
    for key, member in state.members.items():
        computed = {t: q for t, q in state.computed.get(key, {}).items() if q}
        if member.owned is None:
            claims[key] = computed
            continue
        by_topic: dict[str, list[Queue2]] = {}
        for topic, broker, qid in member.owned:
            by_topic.setdefault(topic, []).append((broker, qid))
        claims[key] = {t: tuple(q) for t, q in by_topic.items()}
        for topic in holdings_behind(state, member):
            claims[key].pop(topic, None)
            if topic in computed:
                claims[key][topic] = computed[topic]
    return claims


def holdings_behind(state: GroupState, member: Member) -> tuple[str, ...]:
    """Topics of the member whose route changed after its `owned` was reported (`owned_ts`):
    what it holds of them now is not known (the client moves within its rebalance interval).
    Holdings without `owned_ts` are as fresh as each heartbeat that carries them."""
    if member.owned is None or member.owned_ts is None or not state.route_changed:
        return ()
    return tuple(t for t in member.topics if state.route_changed.get(t, -1) > member.owned_ts)


def _rerun_rocketmq(state: GroupState, only: set[MemberKey] | None) -> None:
    cids_all = consensus_clients(state)
    rooms = {m.client_id: m.params["machine_room"] for m in state.members.values()
             if isinstance(m.params.get("machine_room"), str)}
    jobs: dict[_Job, list[Member]] = {}
    previous: dict[MemberKey, dict[str, tuple[Queue2, ...]]] = {}
    for key, member in state.members.items():
        if only is not None and key not in only:
            continue
        previous[key] = state.computed.get(key, {})
        state.computed[key] = {}
        prefix = (member.strategy, repr(sorted(member.params.items())) if member.params else "",
                  _CONSENSUS if member.view_clients is None else member.view_clients)
        views = member.view_queues or {}
        for topic in member.topics:
            view_q: tuple[Queue2, ...] | Literal["="] | None = views.get(topic)
            job = (*prefix, topic, _CONSENSUS if view_q is None else view_q)
            jobs.setdefault(job, []).append(member)
    for (strategy, _, view_c, topic, view_q), members in jobs.items():
        queues = consensus_queues(state, topic) if view_q == _CONSENSUS else view_q
        if queues is None:
            continue                    # no route known: RebalanceImpl skips the topic
        cids = cids_all if view_c == _CONSENSUS else list(view_c)
        params = _effective_params(members[0], rooms)
        shares = _allocate(strategy, params, topic, queues, cids, members)
        for member in members:
            share = shares.get(member.client_id)
            if share is None:           # Java threw: RocketMQ skips the rebalance, keeps its queues
                share = previous.get(member.key, {}).get(topic, ())
            state.computed[member.key][topic] = share


def _effective_params(member: Member, rooms: dict[str, str]) -> dict[str, JsonValue]:
    params = dict(member.params)
    if member.strategy == "MACHINE_ROOM_NEARBY" and rooms:
        params["client_rooms"] = {**rooms, **(params.get("client_rooms") or {})}
    params.pop("machine_room", None)
    return params


def _allocate(strategy: str, params: Mapping[str, JsonValue], topic: str,
              queues: tuple[Queue2, ...], cids: list[str],
              members: list[Member]) -> dict[str, tuple[Queue2, ...] | None]:
    queues3 = [(topic, broker, qid) for broker, qid in queues]
    try:
        result = allocate_group(strategy, params, queues3, cids,
                                for_clients=sorted({m.client_id for m in members}))
    except InvalidAllocationInput:
        return {}
    # Shares keep Java's order (deterministic); only CONFIG can name another topic's queues.
    return {cid: None if share is None else
            tuple((q[1], q[2]) for q in share if q[0] == topic)
            for cid, share in result.results.items()}


def _rerun_kafka(state: GroupState) -> None:
    from streaming.core.allocation.kafka import KafkaAssignError, KafkaMember, assign

    members = sorted(state.members.values(), key=lambda m: m.joined)
    state.computed = {m.key: {} for m in members}
    if not members or any(m.broker_assigned for m in members):
        return      # the broker assigns (KIP-848, share groups): its target is checked instead
    votes = Counter(m.strategy for m in members)
    assignor = min(votes, key=lambda s: (-votes[s], s))
    counts = {t: len(state.routes[t][1]) for m in members for t in m.topics if t in state.routes}
    ids = Counter(m.client_id for m in members)
    member_ids = {m.key: m.client_id if ids[m.client_id] == 1 else f"{m.client_id}@{m.address}"
                  for m in members}
    kafka_members = [KafkaMember(member_ids[m.key], m.instance_id, m.topics,
                                 tuple((t, p) for t, _, p in m.owned or ()),
                                 -1 if m.generation is None else m.generation)
                     for m in members]
    try:
        assignment = assign(assignor, counts, kafka_members)
    except (KafkaAssignError, ValueError, KeyError):
        return
    for member in members:
        by_topic: dict[str, list[Queue2]] = {}
        for topic, partition in assignment.get(member_ids[member.key], []):
            by_topic.setdefault(topic, []).append(("", partition))
        state.computed[member.key] = {t: tuple(sorted(q)) for t, q in by_topic.items()}
