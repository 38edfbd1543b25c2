"""One group's detail (contract.GroupDetail): every queue with its owners, every member with
its view and strategy, the open findings with their `since`. A pure function of the group's
state and its open findings; the step builds it when something it shows changed.

    >>> from streaming.core.step import step
    >>> from streaming.core.state.events import parse_event
    >>> raw = [{"type": "route", "ts": 1_700_000_000_000, "group": "g", "topic": "T",
    ...         "brokers": {"b": 2}}] + [
    ...        {"type": "heartbeat", "ts": 1_700_000_000_000, "group": "g", "client_id": "c1",
    ...         "address": a, "topics": ["T"], "strategy": "AVG"} for a in ("h1:1", "h2:1")]
    >>> detail = step(None, [(parse_event(r)[0], i) for i, r in enumerate(raw)]).detail
    >>> [(q.queue_id, q.rerun) for q in detail.queues]     # one client id, two processes
    [(0, (('c1', 'h1:1'), ('c1', 'h2:1'))), (1, ())]
    >>> sorted(f.kind for f in detail.findings)
    ['client_id_collision', 'double_assignment', 'orphaned_queue']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from streaming.core.contract import (
    OWNER_KINDS,
    FindingIdentity,
    GroupDetail,
    JsonValue,
    MemberDetail,
    MemberRef,
    OpenFinding,
    Queue2,
    QueueOwners,
)
from streaming.core.state.group import GroupState, Member
from streaming.core.state.rerun import consensus_queues

Holders = dict[tuple[str, Queue2], list[MemberRef]]


def group_detail(state: GroupState, open_since: Mapping[FindingIdentity, int],
                 details: Mapping[FindingIdentity, Mapping[str, JsonValue]] | None = None,
                 ) -> GroupDetail:
    """The detail of the group as `state` is, with the findings open in it (identity ->
    since) and their details (identity -> the finding's detail)."""
    members = state.live_members()
    details = details or {}
    findings = tuple(
        OpenFinding(identity, since, dict(details.get(identity) or {}) or None)
        for identity, since in sorted(open_since.items(), key=lambda item: repr(item[0])))
    return GroupDetail(state.system, state.group, _queues(state, members),
                       tuple(_member(m) for m in members), findings)


def _member(member: Member) -> MemberDetail:
    return MemberDetail(
        member.client_id, member.address, tuple(member.topics), member.strategy, member.model,
        member.shared, member.view_clients,
        None if member.view_queues is None else dict(sorted(member.view_queues.items())),
        member.owned, tuple(sorted(member.brokers)), member.strategy_basis, member.lite_topics)


def _queues(state: GroupState, members: list[Member]) -> tuple[QueueOwners, ...]:
    """Per topic of any member: the route's queues in its order, then any other queue a member
    reports or is given (a queue the route no longer has)."""
    holders: dict[str, Holders] = {kind: {} for kind in OWNER_KINDS}
    for member in members:
        for kind, held in _held(state, member):
            for topic, broker, queue_id in held:
                holders[kind].setdefault((topic, (broker, queue_id)), []).append(member.key)
    held_by_topic: dict[str, set[Queue2]] = {t: set() for m in members for t in m.topics}
    for places in holders.values():
        for topic, queue in places:
            held_by_topic.setdefault(topic, set()).add(queue)
    out = []
    for topic in sorted(held_by_topic):
        route = consensus_queues(state, topic) or ()
        in_route = set(route)
        for queue in (*route, *sorted(held_by_topic[topic] - in_route)):
            place = (topic, queue)
            out.append(QueueOwners(topic, queue[0], queue[1], queue in in_route, **{
                kind: _sorted(places.get(place)) for kind, places in holders.items()}))
    return tuple(out)


def _held(state: GroupState, member: Member) -> Iterator[tuple[str, Iterable[tuple[str, str, int]]]]:
    """Each of OWNER_KINDS with what the member holds of it."""
    protocol = member.protocol
    yield "reported", member.owned or ()
    yield "rerun", ((topic, *queue) for topic, queues in state.computed.get(member.key, {}).items()
                    for queue in queues)
    if protocol is not None:
        yield "target", protocol.target or ()
        yield "standby", protocol.standby or ()
        yield "warmup", protocol.warmup or ()


def _sorted(holders: list[MemberRef] | None) -> tuple[MemberRef, ...]:
    return tuple(sorted(holders)) if holders else ()
