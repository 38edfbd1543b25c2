"""Versioned, compact bytes <-> a group's stored state.

Layout: one version byte (2), then zlib-compressed JSON with short keys. Queue lists are stored
per broker as runs of ids (`{"b": [[0, 7], 9]}` = b:0..7 and b:9), so an AVG share or a route of
thousands of queues takes a few bytes.

    >>> state = GroupState("g", "rocketmq", 120_000, clock=1_700_000_000_000)
    >>> blob = encode(Stored(state, [], 0, {}, 1_700_000_000_000))
    >>> blob[0], decode(blob).settled.clock
    (2, 1700000000000)
    >>> try:
    ...     decode(b"\\x07xyz")
    ... except CodecError as error:
    ...     print(error)
    unknown state version 7; this build reads version 2
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from streaming.core.contract import (
    FindingIdentity,
    JsonObject,
    JsonValue,
    Owned,
    Queue2,
    ResetCause,
)
from streaming.core.state.events import (
    EVENT_CLASSES,
    BrokerAnswers,
    Event,
    GroupProtocol,
    Heartbeat,
    Route,
    Unregister,
)
from streaming.core.state.group import GroupState, Member, MemberKey
from streaming.core.state.stored import Stored
from streaming.core.times import ALL_PUBLISHED, UNKNOWN_DEADLINE

# 2: state keyed by (system, group); the per-group event and ignored-event counts are gone.
VERSION = 2

# A queue list in the blob: broker -> its queue ids, a run of them as [first, last].
QueueRuns = dict[str, list[int | list[int]]]
_T = TypeVar("_T")


class CodecError(ValueError):
    """The bytes are not a state blob this build can read; `cause`: a blob of another build's
    version, or one that does not decode."""

    def __init__(self, message: str, cause: ResetCause = "corrupt_group") -> None:
        super().__init__(message)
        self.cause: ResetCause = cause


def render_state(state: GroupState) -> str:
    """The state's JSON text: a frozen copy, cheaper than a deep copy."""
    return _dumps(_state_out(state))


def encode(stored: Stored[GroupState] | Stored[str]) -> bytes:
    settled = stored.settled
    pending = [*stored.pending_raw, *([o, _event_out(e)] for e, o in stored.pending)]
    rest = {"p": pending, "h": stored.horizon,
            "n": stored.now, "o": stored.now_offset, "f": _since_out(stored.open_findings)}
    state_text = settled if isinstance(settled, str) else render_state(settled)
    text = '{"s":' + state_text + "," + _dumps(rest)[1:]
    if stored.view is not None:
        text = text[:-1] + ',"w":' + render_state(stored.view) + "}"
    return bytes([VERSION]) + zlib.compress(text.encode("utf-8", "surrogatepass"), 6)


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def decode(blob: bytes) -> Stored[GroupState]:
    return decode_body(blob).stored()


def decode_body(blob: bytes) -> StoredBody:
    if not blob:
        raise CodecError("empty state blob")
    if blob[0] != VERSION:
        raise CodecError(f"unknown state version {blob[0]}; this build reads version {VERSION}",
                         "unknown_version")
    try:
        body = json.loads(zlib.decompress(blob[1:]).decode("utf-8", "surrogatepass"))
        return StoredBody(body, body["h"], body["n"], body.get("o", ALL_PUBLISHED))
    except (zlib.error, ValueError, KeyError, TypeError, IndexError) as error:
        raise CodecError(f"corrupt state blob (version {VERSION}): {error}") from error


@dataclass(frozen=True)
class StoredBody:
    """A decoded blob as JSON values; its parts become objects only when asked for, so a step
    that leaves the settled state and the window as they are never converts them."""

    body: JsonObject
    horizon: int
    now: int
    now_offset: int

    def stored(self, with_view: bool = True) -> Stored[GroupState]:
        body = self.body
        return _converted(lambda: Stored(
            _state_in(body["s"]), [(_event_in(e), o) for o, e in body["p"]], self.horizon,
            self.open_findings(), self.now, self.now_offset, self.view() if with_view else None))

    def view(self) -> GroupState | None:
        return _converted(lambda: _state_in(self.body["w"]) if "w" in self.body else None)

    def open_findings(self) -> dict[FindingIdentity, int]:
        return _converted(lambda: _since_in(self.body["f"]))

    def system(self) -> str:
        system: str = self.body["s"]["y"]
        return system

    def view_session_timeout_ms(self) -> int | None:
        return self.body["w"]["t"] if "w" in self.body else None

    def settled_clock_and_now(self) -> tuple[int, int]:
        return self.body["s"]["c"], self.body["s"]["n"]

    def last_pending(self) -> tuple[int, int] | None:
        """(ts, offset) of the window's last event."""
        return (self.body["p"][-1][1]["ts"], self.body["p"][-1][0]) if self.body["p"] else None

    def settled_text(self) -> str:
        return _dumps(self.body["s"])

    def pending_raw(self) -> list[JsonValue]:
        pending: list[JsonValue] = self.body["p"]
        return pending


def _converted(make: Callable[[], _T]) -> _T:
    try:
        return make()
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise CodecError(f"corrupt state blob (version {VERSION}): {error}") from error


def queues_out(queues: tuple[Queue2, ...]) -> QueueRuns:
    runs: QueueRuns = {}
    for broker, qid in queues:
        out = runs.setdefault(broker, [])
        last = out[-1] if out else None
        if isinstance(last, list) and last[1] == qid - 1:
            last[1] = qid
        elif isinstance(last, int) and last == qid - 1:
            out[-1] = [last, qid]
        else:
            out.append(qid)
    return runs


def queues_in(runs: QueueRuns) -> tuple[Queue2, ...]:
    out: list[Queue2] = []
    for broker, items in runs.items():
        for item in items:
            if isinstance(item, list):
                out.extend((broker, q) for q in range(item[0], item[1] + 1))
            else:
                out.append((broker, item))
    return tuple(out)


_MEMBER_FIELDS = ("client_id", "address", "last_seen", "joined", "topics", "strategy", "params",
                  "model", "shared", "view_clients", "view_queues", "owned", "generation",
                  "instance_id", "brokers", "protocol")


def _member_out(member: Member) -> list[JsonValue]:
    row = [getattr(member, name) for name in _MEMBER_FIELDS]
    row[10] = None if member.view_queues is None else {
        t: queues_out(q) for t, q in member.view_queues.items()}
    row[11] = _owned_out(member.owned)
    if member.protocol is None:
        row.pop()                        # rows of members without one end at their brokers
    else:
        row[15] = _protocol_out(member.protocol)
    return row


def _member_in(row: Sequence[JsonValue]) -> Member:
    values = dict(zip(_MEMBER_FIELDS, row, strict=False))
    if len(row) not in (len(_MEMBER_FIELDS) - 1, len(_MEMBER_FIELDS)):
        raise ValueError(f"a member row of {len(row)} fields")
    values["protocol"] = _protocol_in(values.get("protocol"))
    values["topics"] = tuple(values["topics"])
    if values["view_clients"] is not None:
        values["view_clients"] = tuple(values["view_clients"])
    if values["view_queues"] is not None:
        values["view_queues"] = {t: queues_in(q) for t, q in values["view_queues"].items()}
    values["owned"] = _owned_in(values["owned"])
    return Member(**values)


def _protocol_out(protocol: GroupProtocol) -> list[JsonValue]:
    # Fields added after the first five come last, and trailing unknowns are left out: a row
    # written before them reads as before.
    wanted = None if protocol.standby_replicas is None else dict(protocol.standby_replicas)
    later = [protocol.group_state, _owned_out(protocol.standby), _owned_out(protocol.warmup),
             protocol.process_id, wanted]
    while later and later[-1] is None:
        later.pop()
    return [protocol.group_type, _owned_out(protocol.target), protocol.member_epoch,
            protocol.group_epoch, protocol.assignment_epoch, *later]


def _protocol_in(row: Sequence[JsonValue] | None) -> GroupProtocol | None:
    if row is None:
        return None
    group_type, target, member_epoch, group_epoch, assignment_epoch, *later = row
    state, standby, warmup, process_id, wanted = [*later, *[None] * 5][:5]
    return GroupProtocol(group_type, _owned_in(target), member_epoch, group_epoch,
                         assignment_epoch, state, _owned_in(standby), _owned_in(warmup),
                         process_id, None if wanted is None else tuple(sorted(wanted.items())))


def _owned_out(owned: tuple[Owned, ...] | None) -> dict[str, QueueRuns] | None:
    if owned is None:
        return None
    by_topic: dict[str, list[Queue2]] = {}
    for topic, broker, qid in owned:
        by_topic.setdefault(topic, []).append((broker, qid))
    return {t: queues_out(tuple(q)) for t, q in by_topic.items()}


def _owned_in(data: Mapping[str, QueueRuns] | None) -> tuple[Owned, ...] | None:
    if data is None:
        return None
    return tuple(sorted((t, b, q) for t, runs in data.items() for b, q in queues_in(runs)))


def _state_out(state: GroupState) -> JsonObject:
    keys = sorted(state.members)
    index = {key: i for i, key in enumerate(keys)}
    return {
        "g": state.group, "y": state.system, "t": state.session_timeout_ms,
        "m": [_member_out(state.members[k]) for k in keys],
        "r": {t: [ts, queues_out(q)] for t, (ts, q) in sorted(state.routes.items())},
        "x": [[c, a, ts] for (c, a), ts in sorted(state.tombstones.items(), key=repr)],
        "c": state.clock, "n": state.now, "j": state.joins,
        "ak": [index[k] for k in keys if k in state.computed],
        "a": _computed_out(keys, state.computed),
        "f": _since_out(state.since),
        "k": [state.rebalances, state.queue_moves, state.late_events, state.assignor_changes,
              state.alive_unknown],
        "as": state.assignor,
        **({"rc": dict(sorted(state.route_changed.items()))} if state.route_changed else {}),
        **({"ot": {index[k]: state.members[k].owned_ts for k in keys
                   if state.members[k].owned_ts is not None}}
           if any(m.owned_ts is not None for m in state.members.values()) else {}),
        **({"lt": {index[k]: state.members[k].lite_topics for k in keys
                   if state.members[k].lite_topics is not None}}
           if any(m.lite_topics is not None for m in state.members.values()) else {}),
        **({"sb": {index[k]: [state.members[k].strategy_basis,
                              state.members[k].strategy_candidates] for k in keys
                   if state.members[k].strategy_basis != "reported"}}
           if any(m.strategy_basis != "reported" for m in state.members.values()) else {}),
        # mypy does not carry the filter on state.members[k] over to its use.
        **({"ba": {index[k]: broker_answers_out(state.members[k].broker_assignments)  # type: ignore[arg-type]
                   for k in keys if state.members[k].broker_assignments is not None}}
           if any(m.broker_assignments is not None for m in state.members.values()) else {}),
    }


def _state_in(data: JsonObject) -> GroupState:
    members = [_member_in(row) for row in data["m"]]
    state = GroupState(data["g"], data["y"], data["t"], clock=data["c"], now=data["n"],
                       joins=data["j"])
    state.members = {m.key: m for m in members}
    state.routes = {t: (ts, queues_in(q)) for t, (ts, q) in data["r"].items()}
    state.tombstones = {(c, a): ts for c, a, ts in data["x"]}
    state.computed = _computed_in([m.key for m in members], data["ak"], data["a"])
    state.since = _since_in(data["f"])
    state.rebalances, state.queue_moves, state.late_events, *changes = data["k"]
    state.assignor_changes, state.alive_unknown = (*changes, 0, 0)[:2]
    state.assignor = data.get("as")
    state.route_changed = dict(data.get("rc", {}))
    for index, owned_ts in data.get("ot", {}).items():
        members[int(index)].owned_ts = owned_ts
    for index, lite_topics in data.get("lt", {}).items():
        members[int(index)].lite_topics = tuple(lite_topics)
    for index, (basis, candidates) in data.get("sb", {}).items():
        member = members[int(index)]
        member.strategy_basis = basis
        member.strategy_candidates = None if candidates is None else tuple(candidates)
    for index, answers in data.get("ba", {}).items():
        members[int(index)].broker_assignments = broker_answers_in(answers)
    state.deadline_bound = UNKNOWN_DEADLINE   # the next expiry scan sets it
    return state


def _computed_out(keys: list[MemberKey],
                  computed: Mapping[MemberKey, Mapping[str, tuple[Queue2, ...]]],
                  ) -> dict[str, list[list[str] | list[int]]]:
    """Per topic: [brokers, flat ints]; the ints are, per member with a share of the topic,
    member index, run count, then (broker index, first id, last id) per run."""
    topics: dict[str, tuple[dict[str, int], list[int]]] = {}
    for i, key in enumerate(keys):
        # Sorted: a member's topics are in the order its re-runs reached them, which depends
        # on the order members joined the group dict, and the blob must not.
        for topic, share in sorted(computed.get(key, {}).items()):
            brokers, flat = topics.setdefault(topic, ({}, []))
            runs: list[list[Any]] = []          # [broker, first id, last id]
            for broker, qid in share:
                if runs and runs[-1][0] == broker and runs[-1][2] == qid - 1:
                    runs[-1][2] = qid
                else:
                    runs.append([broker, qid, qid])
            flat += (i, len(runs))
            for broker, first, last in runs:
                flat += (brokers.setdefault(broker, len(brokers)), first, last)
    return {t: [list(brokers), flat] for t, (brokers, flat) in topics.items()}


def _computed_in(keys: list[MemberKey], with_entry: list[int], data: JsonObject,
                 ) -> dict[MemberKey, dict[str, tuple[Queue2, ...]]]:
    computed: dict[MemberKey, dict[str, tuple[Queue2, ...]]] = {keys[i]: {} for i in with_entry}
    for topic, (brokers, flat) in data.items():
        at = 0
        while at < len(flat):
            index, runs = flat[at], flat[at + 1]
            at += 2
            share: list[Queue2] = []
            for _ in range(runs):
                broker = brokers[flat[at]]
                share += [(broker, q) for q in range(flat[at + 1], flat[at + 2] + 1)]
                at += 3
            computed[keys[index]][topic] = tuple(share)
    return computed


# A finding identity without its queue, and the finding's start: what one row of "f" shares.
_SinceRowKey = tuple[str, str | None, tuple[str, ...], str | None, tuple[str, ...], int]


def _since_out(since: Mapping[FindingIdentity, int]) -> list[list[JsonValue]]:
    """identity -> since, with queue findings that share everything but the queue grouped into
    one row of queue runs (a lost broker orphans thousands of queues at once)."""
    rows: dict[_SinceRowKey, list[Queue2 | None]] = {}
    for (kind, topic, queue, clients, address, brokers), start in since.items():
        rows.setdefault((kind, topic, clients, address, brokers, start), []).append(queue)
    out: list[list[JsonValue]] = []
    for (kind, topic, clients, address, brokers, start), queues in rows.items():
        # A kind's findings all name a queue or none does: the queues are [None] or no None.
        runs = None if queues == [None] else queues_out(tuple(sorted(queues)))  # type: ignore[arg-type]
        out.append([kind, topic, list(clients), address, list(brokers), start, runs])
    return out


def _since_in(rows: list[list[JsonValue]]) -> dict[FindingIdentity, int]:
    since: dict[FindingIdentity, int] = {}
    for kind, topic, clients, address, brokers, start, runs in rows:
        for queue in [None] if runs is None else queues_in(runs):
            since[FindingIdentity(kind, topic, queue, tuple(clients), address, tuple(brokers))] = start
    return since


# Each type's plain fields with their defaults (a required field's is MISSING: always written);
# the fields of other forms are converted below.
_CONVERTED = ("strategy_params", "queues", "view_queues", "owned", "protocol",
              "broker_assignments")
_PLAIN_FIELDS = {cls: [(f.name, f.default) for f in fields(cls) if f.name not in _CONVERTED]
                 for cls in EVENT_CLASSES.values()}


def _event_out(event: Event) -> JsonObject:
    out: JsonObject = {"type": event.type}
    for name, default in _PLAIN_FIELDS[type(event)]:
        value = getattr(event, name)
        if value != default or name in ("ts", "group"):
            out[name] = value
    if isinstance(event, Route):
        out["queues"] = queues_out(event.queues)
    elif isinstance(event, Heartbeat):
        out.update(_heartbeat_out(event))
    return out


def _heartbeat_out(event: Heartbeat) -> JsonObject:
    out: JsonObject = {}
    if event.strategy_params:
        out["strategy_params"] = dict(event.strategy_params)
    if event.view_queues is not None:
        out["view_queues"] = {t: queues_out(q) for t, q in event.view_queues.items()}
    if event.owned is not None:
        out["owned"] = _owned_out(event.owned)
    if event.protocol is not None:
        out["protocol"] = _protocol_out(event.protocol)
    if event.broker_assignments is not None:
        out["broker_assignments"] = broker_answers_out(event.broker_assignments)
    return out


def _event_in(data: JsonObject) -> Event:
    values = dict(data)
    cls = EVENT_CLASSES[str(values.pop("type"))]
    if cls is Unregister:           # a blob of the flat Event kept every type's defaults
        values.pop("topics", None)
    for name in ("topics", "view_clients", "strategy_candidates", "lite_topics"):
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    if "members" in values:
        values["members"] = tuple((client_id, address) for client_id, address in values["members"])
    if values.get("queues") is not None:
        values["queues"] = queues_in(values["queues"])
    if values.get("view_queues") is not None:
        values["view_queues"] = {t: queues_in(q) for t, q in values["view_queues"].items()}
    if "owned" in values:
        values["owned"] = _owned_in(values["owned"])
    if "protocol" in values:
        values["protocol"] = _protocol_in(values["protocol"])
    if "broker_assignments" in values:
        values["broker_assignments"] = broker_answers_in(values["broker_assignments"])
    return cls(**values)


def broker_answers_out(answers: BrokerAnswers) -> dict[str, dict[str, QueueRuns | None]]:
    return {broker: {t: None if q is None else queues_out(q) for t, q in by_topic}
            for broker, by_topic in answers}


def broker_answers_in(data: Mapping[str, Mapping[str, QueueRuns | None]]) -> BrokerAnswers:
    return tuple(sorted((broker, tuple(sorted(
        (t, None if q is None else tuple(sorted(queues_in(q)))) for t, q in by_topic.items())))
        for broker, by_topic in data.items()))
