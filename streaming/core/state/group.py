"""GroupState: one consumer group's members, routes and last computed allocation.

`apply_event` folds one event in and says what it changed; `expire_until` removes members (and
brokers' entries for them) whose session timed out, as of an event time. Both are pure functions
of the state and their arguments, so a replay in (ts, offset) order is deterministic.

    >>> from streaming.core.state.events import parse_event
    >>> state = GroupState("g", "rocketmq", session_timeout_ms=120_000)
    >>> [hb] = parse_event({"type": "heartbeat", "ts": 1_700_000_000_000, "group": "g",
    ...                     "client_id": "c1", "topics": ["T"], "strategy": "AVG"})
    >>> apply_event(state, hb)
    Change(alloc=True, members=None, brokers=False)
    >>> apply_event(state, hb)      # same facts again: no re-run needed
    Change(alloc=False, members=frozenset(), brokers=False)
    >>> [t for t, _ in expire_until(state, 1_700_000_120_001)]
    [1700000120001]
    >>> len(state.members)
    0
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

from streaming.core.contract import JsonValue, Owned, Queue2, StrategyBasis
from streaming.core.state.events import (
    Alive,
    BrokerAnswers,
    Event,
    GroupProtocol,
    Heartbeat,
    Route,
    Unregister,
)
from streaming.core.times import NEVER

if TYPE_CHECKING:
    from streaming.core.contract import FindingIdentity  # contract imports this module

MemberKey = tuple[str, str]         # (client_id, address or "")


@dataclass
class Member:
    """One process of the group, as its latest heartbeat describes it."""

    client_id: str
    address: str
    last_seen: int
    joined: int                      # join order: Kafka's leader builds its member map in it
    topics: tuple[str, ...] = ()
    strategy: str = "AVG"
    params: dict[str, JsonValue] = field(default_factory=dict)
    strategy_basis: StrategyBasis = "reported"
    strategy_candidates: tuple[str, ...] | None = None
    model: str = "CLUSTERING"
    shared: bool = False
    lite_topics: tuple[str, ...] | None = None
    view_clients: tuple[str, ...] | None = None
    view_queues: dict[str, tuple[Queue2, ...]] | None = None
    owned: tuple[Owned, ...] | None = None
    owned_ts: int | None = None      # when the client reported `owned`; None: as of last_seen
    generation: int | None = None
    instance_id: str | None = None
    protocol: GroupProtocol | None = None    # Kafka: the broker's target and epochs
    broker_assignments: BrokerAnswers | None = None   # RocketMQ: each broker's QUERY_ASSIGNMENT
    brokers: dict[str, int] = field(default_factory=dict)   # broker -> last heartbeat via it
    key: MemberKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = (self.client_id, self.address)

    @property
    def clustering(self) -> bool:
        """Takes part in conflicts: BROADCASTING and shared (POP) readers never conflict."""
        return self.model == "CLUSTERING" and not self.shared

    def inputs(self) -> tuple[object, ...]:
        """Everything of this member that the allocation (re-run, claims, findings) depends
        on: its heartbeat's facts, in FACTS' order."""
        return _MEMBER_FACTS(self)

    @property
    def broker_assigned(self) -> bool:
        """A KIP-848 or share group's member: the broker computes its assignment."""
        return self.protocol is not None and self.protocol.broker_assigned


# A member's facts, each as (Member attribute, Heartbeat attribute): what a heartbeat sets, what
# a restating heartbeat is compared on, and what a kept refresh is rebuilt from (refresh.py).
FACTS: tuple[tuple[str, str], ...] = (
    ("topics", "topics"), ("strategy", "strategy"), ("params", "strategy_params"),
    ("strategy_basis", "strategy_basis"), ("strategy_candidates", "strategy_candidates"),
    ("model", "message_model"), ("shared", "shared"), ("lite_topics", "lite_topics"),
    ("view_clients", "view_clients"),
    ("view_queues", "view_queues"), ("owned", "owned"), ("owned_ts", "owned_ts"),
    ("generation", "generation"), ("instance_id", "group_instance_id"),
    ("protocol", "protocol"), ("broker_assignments", "broker_assignments"))
_MEMBER_FACTS = attrgetter(*(member for member, _ in FACTS))
_EVENT_FACTS = attrgetter(*(event for _, event in FACTS))
_COPIED = frozenset({"params", "view_queues"})      # the member's own dicts


class Change(NamedTuple):
    """What an event changed. alloc: re-run needed; members: which members (None = all)."""

    alloc: bool
    members: frozenset[MemberKey] | None
    brokers: bool

    @property
    def any(self) -> bool:
        return self.alloc or self.brokers


NO_CHANGE = Change(False, frozenset(), False)
BROKERS_ONLY = Change(False, frozenset(), True)


@dataclass
class GroupState:
    group: str
    system: str
    session_timeout_ms: int
    members: dict[MemberKey, Member] = field(default_factory=dict)
    routes: dict[str, tuple[int, tuple[Queue2, ...]]] = field(default_factory=dict)
    route_changed: dict[str, int] = field(default_factory=dict)   # topic -> when its queues changed
    tombstones: dict[tuple[str, str | None], int] = field(default_factory=dict)
    clock: int = 0                   # max event time applied
    now: int = 0                     # event time up to which expiry has been processed
    joins: int = 0
    computed: dict[MemberKey, dict[str, tuple[Queue2, ...]]] = field(default_factory=dict)
    since: dict[FindingIdentity, int] = field(default_factory=dict)   # identity -> start time
    rebalances: int = 0
    queue_moves: int = 0
    late_events: int = 0
    alive_unknown: int = 0           # members an `alive` named that the group did not hold
    assignor: str | None = None      # the group's strategy as last found (most members' one)
    assignor_changes: int = 0
    deadline_bound: int = NEVER      # lower bound of the next expiry; refreshes only raise it

    def live_members(self) -> list[Member]:
        """Members in a canonical order (client_id, address)."""
        return [self.members[k] for k in sorted(self.members)]


def apply_event(state: GroupState, event: Event) -> Change:
    """Fold one event in. An event older than what is known about its member or topic never
    undoes the newer fact (it still refreshes nothing)."""
    if event.system != state.system:
        # State is keyed by (system, group): the job never routes another system's event here.
        raise ValueError(f"a {event.system} event for the {state.system} group {state.group!r}")
    state.clock = max(state.clock, event.ts)
    if isinstance(event, Route):
        return _apply_route(state, event)
    if isinstance(event, Unregister):
        return _apply_unregister(state, event)
    if isinstance(event, Alive):
        return _apply_alive(state, event)
    return _apply_heartbeat(state, event)


def _apply_route(state: GroupState, event: Route) -> Change:
    known = state.routes.get(event.topic)
    if known is not None and event.ts < known[0]:
        return NO_CHANGE
    state.routes[event.topic] = (event.ts, event.queues)
    if known is not None and known[1] == event.queues:
        return NO_CHANGE
    if known is not None:
        state.route_changed[event.topic] = event.ts
    return Change(True, None, False)


def _apply_unregister(state: GroupState, event: Unregister) -> Change:
    tomb_key = (event.client_id, event.address)
    state.tombstones[tomb_key] = max(state.tombstones.get(tomb_key, event.ts), event.ts)
    gone = [k for k, m in state.members.items()
            if k[0] == event.client_id and (event.address is None or k[1] == event.address)
            and m.last_seen <= event.ts]
    for key in gone:
        _remove(state, key)
    return Change(True, None, False) if gone else NO_CHANGE


def _apply_heartbeat(state: GroupState, event: Heartbeat) -> Change:
    key = (event.client_id, event.address or "")
    if _tombstoned(state, key, event.ts):
        return NO_CHANGE
    member = state.members.get(key)
    if member is None:
        member = Member(event.client_id, key[1], event.ts, state.joins)
        state.joins += 1
        state.members[key] = member
        state.deadline_bound = min(state.deadline_bound, _deadline(state, event.ts))
        _set_facts(member, event)
        return Change(True, None, _note_broker(state, member, event))
    if event.ts < member.last_seen:          # late: newer facts win; only a broker entry may move
        return BROKERS_ONLY if _note_broker(state, member, event) else NO_CHANGE
    member.last_seen = event.ts
    brokers_changed = _note_broker(state, member, event)
    if member.inputs() == _stated(event):    # the facts it heartbeats every few seconds
        return BROKERS_ONLY if brokers_changed else NO_CHANGE
    _set_facts(member, event)
    if member.strategy == "MACHINE_ROOM_NEARBY" or "machine_room" in member.params:
        return Change(True, None, brokers_changed)   # its room feeds every member's re-run
    return Change(True, frozenset([key]), brokers_changed)


def _apply_alive(state: GroupState, event: Alive) -> Change:
    """Each member named is heartbeating its facts again, as `_apply_heartbeat` takes a heartbeat
    that restates them; a member not held (never heard in full, or gone) cannot be, and is
    counted."""
    brokers_changed = False
    for key in event.members:
        if _tombstoned(state, key, event.ts):
            continue
        member = state.members.get(key)
        if member is None:
            state.alive_unknown += 1
            continue
        if event.ts >= member.last_seen:
            member.last_seen = event.ts
        brokers_changed |= _note_broker(state, member, event)
    return BROKERS_ONLY if brokers_changed else NO_CHANGE


def apply_restating(state: GroupState, events: Iterable[Event]) -> None:
    """`apply_event` of each event, in order, when each restates the state (a refresh,
    streaming.core.state.refresh: a member's heartbeat through a broker it uses, a route or an
    `alive` of members held, at or after every time the state holds): each then changes no
    fact and reports no change, and only moves the times it names up to its own. Who calls
    this must know that no session expires before any of the events (a refresh's deadline)."""
    clock = state.clock
    members, routes = state.members, state.routes
    for event in events:
        ts = event.ts
        if isinstance(event, Heartbeat):
            _restated_at(members[(event.client_id, event.address or "")], event.broker, ts)
        elif isinstance(event, Alive):
            for key in event.members:
                _restated_at(members[key], event.broker, ts)
        elif isinstance(event, Route):
            seen, queues = routes[event.topic]
            if ts >= seen:
                routes[event.topic] = (ts, queues)
        else:
            raise ValueError(f"an {event.type} event restates nothing")
        if ts > clock:
            clock = ts
    state.clock = clock


def _restated_at(member: Member, broker: str | None, ts: int) -> None:
    if ts > member.last_seen:
        member.last_seen = ts
    if broker is not None and ts > member.brokers[broker]:
        member.brokers[broker] = ts


def _tombstoned(state: GroupState, key: MemberKey, ts: int) -> bool:
    """An event of the member older than its unregister (of the process or of its client id)."""
    return bool(state.tombstones) and ts < max(state.tombstones.get((key[0], None), -1),
                                               state.tombstones.get((key[0], key[1] or None), -1))


def _stated(event: Heartbeat) -> tuple[object, ...]:
    """The event's facts in the order of `Member.inputs` (mappings compare equal to the
    member's dict copies)."""
    return _EVENT_FACTS(event)


def _set_facts(member: Member, event: Heartbeat) -> None:
    for (attr, _), value in zip(FACTS, _EVENT_FACTS(event), strict=True):
        setattr(member, attr, dict(value) if attr in _COPIED and value is not None else value)


def _note_broker(state: GroupState, member: Member, event: Heartbeat | Alive) -> bool:
    """Record the heartbeat on the broker that received it; True if the broker's list changed."""
    if event.broker is None:
        return False
    seen = member.brokers.get(event.broker)
    member.brokers[event.broker] = max(seen if seen is not None else event.ts, event.ts)
    if seen is None:
        state.deadline_bound = min(state.deadline_bound, _deadline(state, event.ts))
    return seen is None


def _remove(state: GroupState, key: MemberKey) -> None:
    del state.members[key]
    state.computed.pop(key, None)


def _deadline(state: GroupState, last_seen: int) -> int:
    return deadline_after(last_seen, state.session_timeout_ms)


def deadline_after(last_seen: int, session_timeout_ms: int) -> int:
    """First event time at which a session last refreshed at last_seen has expired."""
    return last_seen + session_timeout_ms + 1


# A session that expires: a member's own (broker None) or its entry at one broker; None is the
# group itself, which expires a session timeout after its last event once no member is left.
Session = tuple[MemberKey, str | None] | None


def session_times(members: Mapping[MemberKey, Member], clock: int) -> dict[Session, int]:
    """Each session `next_deadline` watches, with its last heartbeat (or event)."""
    if not members:
        return {None: clock}
    return {session: seen for key, member in members.items()
            for session, seen in (((key, None), member.last_seen),
                                  *(((key, b), t) for b, t in member.brokers.items()))}


def expire_until(state: GroupState, until: int) -> list[tuple[int, Change]]:
    """Expire, in deadline order, every session whose deadline is <= until.
    Returns (deadline, change) per distinct deadline."""
    out = []
    while (expired := expire_next(state, until)) is not None:
        out.append(expired)
    return out


def expire_next(state: GroupState, until: int) -> tuple[int, Change] | None:
    """Expire the sessions of the earliest deadline if it is <= until, and only those, so that
    the caller re-runs with the members of that moment (a later deadline's are still there)."""
    if state.deadline_bound > until:
        return None
    first, bound = NEVER, NEVER
    due: list[tuple[MemberKey, str | None]] = []
    for key, member in state.members.items():
        for broker, seen in (*member.brokers.items(), (None, member.last_seen)):
            deadline = _deadline(state, seen)
            if deadline < first:
                first, bound, due = deadline, first, [(key, broker)]
            elif deadline == first:
                due.append((key, broker))
            elif deadline < bound:
                bound = deadline
    if first > until:
        state.deadline_bound = first
        return None
    state.deadline_bound = bound
    return first, _expire(state, due)


def _expire(state: GroupState, entries: list[tuple[MemberKey, str | None]]) -> Change:
    members_gone = False
    for key, broker in sorted(entries, key=lambda e: (e[0], e[1] is None, e[1] or "")):
        if broker is not None:
            state.members[key].brokers.pop(broker, None)
        else:
            _remove(state, key)
            members_gone = True
    return Change(members_gone, None, True) if members_gone else BROKERS_ONLY


def next_deadline(state: GroupState) -> int:
    """The next event time at which something expires: a member, a broker's entry for one, or,
    with no member left, the group itself (no event for a session timeout)."""
    return _deadline(state, min(session_times(state.members, state.clock).values()))


def forget_tombstones(state: GroupState, before: int) -> None:
    """Tombstones only guard against late heartbeats; after a session timeout they are moot."""
    for key, ts in list(state.tombstones.items()):
        if ts + state.session_timeout_ms < before:
            del state.tombstones[key]
