"""The event contract v1: parse and validate one raw event into normalised `Event`s.

    >>> parse_event(b'{"type":"route","ts":0,"group":"g","topic":"T","brokers":{"b":2}}')
    Invalid(reason='bad_timestamp', detail='ts 0 is outside [2000-01-01, 2100-01-01)')
    >>> [e.queues for e in parse_event('{"type":"route","ts":"2024-01-01T00:00:00Z",'
    ...                                 '"groups":["g1","g2"],"topic":"T","brokers":{"b":2}}')]
    [(('b', 0), ('b', 1)), (('b', 0), ('b', 1))]

Bad input never raises: it comes back as `Invalid(reason, detail)` with a stable reason name
(INVALID_REASONS). docs/events.md documents every field.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal, TypeVar, overload

from streaming.core.contract import (
    BROKER_ASSIGNED,
    KAFKA_GROUP_TYPES,
    JsonValue,
    Owned,
    Queue2,
    StrategyBasis,
)
from streaming.core.state.fields import (
    EVENT_TYPES,
    FIELDS,
    LEADING,
    LEADING_OPTIONAL,
    LEADING_RE,
)

MAX_EVENT_BYTES = 1024 * 1024
MIN_TS_MS = 946_684_800_000      # 2000-01-01T00:00:00Z
MAX_TS_MS = 4_102_444_800_000    # 2100-01-01T00:00:00Z (excluded)
MAX_QUEUE_ID = 2**31 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

INVALID_REASONS: tuple[str, ...] = (
    "not_json", "not_object", "oversized", "missing_field", "wrong_type", "unknown_type",
    "missing_group", "bad_timestamp", "unknown_strategy", "bad_version", "unknown_system",
    "bad_value", "repeated_envelope",
)
SYSTEMS = ("rocketmq", "kafka")
# GO_*: the Go client's algorithms (streaming/core/allocation/rocketmq_go.py).
ROCKETMQ_STRATEGIES = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "MACHINE_ROOM",
                       "MACHINE_ROOM_NEARBY", "CONFIG", "GO_AVG", "GO_AVG_BY_CIRCLE",
                       "GO_CONSISTENT_HASH", "GO_MACHINE_ROOM", "GO_MACHINE_ROOM_NEARBY")
KAFKA_STRATEGIES = ("range", "roundrobin", "sticky", "cooperative-sticky")
MESSAGE_MODELS = ("CLUSTERING", "BROADCASTING")
MAX_EPOCH = 2**31 - 1

# RocketMQ clientRebalance=false: what each broker answers the client's QUERY_ASSIGNMENT, per
# topic, sorted: ((broker, ((topic, queues or None: no answer), ...)), ...).
BrokerAnswer = tuple[str, tuple[tuple[str, tuple[Queue2, ...] | None], ...]]
BrokerAnswers = tuple[BrokerAnswer, ...]


@dataclass(frozen=True)
class GroupProtocol:
    """What a Kafka broker says of a member's group beyond the classic protocol: the group type
    and, for a broker-assigned group, the member's target assignment, the epochs (KIP-848: the
    member has caught up when its epoch reaches the target assignment's epoch) and the group's
    state."""

    group_type: str = "classic"
    target: tuple[Owned, ...] | None = None
    member_epoch: int | None = None
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    group_state: str | None = None
    standby: tuple[Owned, ...] | None = None      # streams: state copies, not processing
    warmup: tuple[Owned, ...] | None = None
    process_id: str | None = None                 # streams: the instance of the thread
    standby_replicas: tuple[tuple[str, int], ...] | None = None   # streams: (task space, wanted)

    @property
    def broker_assigned(self) -> bool:
        return self.group_type in BROKER_ASSIGNED

    @property
    def epoch_lag(self) -> int:
        """Target assignment epochs the member has not caught up with (0: none, or unknown)."""
        if self.member_epoch is None or self.assignment_epoch is None:
            return 0
        return max(0, self.assignment_epoch - self.member_epoch)


CLASSIC = GroupProtocol()


# One frozen type per event type (docs/events.md; every field declared in fields.py). Keyword
# fields only: `type` is the class's, not a field.
@dataclass(frozen=True, kw_only=True)
class _Every:
    """What every event has: its time and its group (of a system)."""

    ts: int
    group: str
    system: str = "rocketmq"


@dataclass(frozen=True, kw_only=True)
class Heartbeat(_Every):
    """A member says who it is, what it sees and (maybe) what it holds."""

    type: ClassVar[Literal["heartbeat"]] = "heartbeat"
    client_id: str
    topics: tuple[str, ...] = ()
    strategy: str
    strategy_params: Mapping[str, JsonValue] = field(default_factory=dict)
    strategy_basis: StrategyBasis = "reported"
    strategy_candidates: tuple[str, ...] | None = None     # with "assumed": what its holdings allow
    message_model: str = "CLUSTERING"
    shared: bool = False
    lite_topics: tuple[str, ...] | None = None  # RocketMQ 5.5: a lite consumer's lite topics
    address: str | None = None
    broker: str | None = None
    view_clients: tuple[str, ...] | None = None
    view_queues: Mapping[str, tuple[Queue2, ...]] | None = None
    owned: tuple[Owned, ...] | None = None
    owned_ts: int | None = None                # when the client reported `owned` (default: ts)
    generation: int | None = None
    group_instance_id: str | None = None
    protocol: GroupProtocol | None = None      # Kafka heartbeats only; None: classic
    broker_assignments: BrokerAnswers | None = None   # RocketMQ clientRebalance=false only


@dataclass(frozen=True, kw_only=True)
class Unregister(_Every):
    """A clean shutdown: the member (one process, when `address` is given) leaves."""

    type: ClassVar[Literal["unregister"]] = "unregister"
    client_id: str
    address: str | None = None


@dataclass(frozen=True, kw_only=True)
class Route(_Every):
    """A topic's readable queues now."""

    type: ClassVar[Literal["route"]] = "route"
    topic: str
    queues: tuple[Queue2, ...]


@dataclass(frozen=True, kw_only=True)
class Alive(_Every):
    """A producer that knows the whole group says these members' last full heartbeats (through
    `broker`, when given) still hold: one event for what would be one heartbeat per member."""

    type: ClassVar[Literal["alive"]] = "alive"
    members: tuple[tuple[str, str], ...]       # (client_id, address or ""), sorted, distinct
    broker: str | None = None


Event = Heartbeat | Unregister | Route | Alive
EVENT_CLASSES: dict[str, type[Heartbeat] | type[Unregister] | type[Route] | type[Alive]] = {
    "heartbeat": Heartbeat, "unregister": Unregister, "route": Route, "alive": Alive}


@dataclass(frozen=True)
class Invalid:
    reason: str
    detail: str


class _Reject(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def parse_event(raw: bytes | str | Mapping[str, JsonValue]) -> list[Event] | Invalid:
    """Validate one event; a route naming `groups` fans out into one Event per group."""
    try:
        obj = _load(raw)
        events = _parse_object(obj)
        if not isinstance(raw, Mapping):
            _check_leading(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str)
                           else bytes(raw), obj, events)
        return events
    except _Reject as rejected:
        return Invalid(rejected.reason, rejected.detail)
    except (RecursionError, ValueError, TypeError, OverflowError) as error:  # belt and braces
        return Invalid("bad_value", f"{type(error).__name__}: {error}"[:200])


def _load(raw: bytes | str | Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
    if isinstance(raw, Mapping):
        return raw
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise _Reject("not_json", f"expected bytes or str, got {type(raw).__name__}")
    if len(raw) > MAX_EVENT_BYTES:
        raise _Reject("oversized", f"{len(raw)} bytes > {MAX_EVENT_BYTES}")
    try:
        obj = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise _Reject("not_json", str(error)[:200]) from None
    if not isinstance(obj, dict):
        raise _Reject("not_object", f"top-level JSON is {type(obj).__name__}")
    return obj


def led_by(raw: bytes) -> dict[str, str] | None:
    """The leading members' values by name (an optional one left out is absent) when `raw` is
    led by them: it starts with them (fields.LEADING_PATTERN), and an optional one it leaves
    out is not named later either (a producer may write `system` or `cluster` after other
    members). The job's router reads the same (streaming/spark/parse.py)."""
    lead = LEADING_RE.match(raw)
    if lead is None:
        return None
    said = {name: value.decode() for name, value in zip(LEADING, lead.groups(), strict=True)
            if value is not None}
    if any(name not in said and b'"%s"' % name.encode() in raw for name in LEADING_OPTIONAL):
        return None
    return said


def _check_leading(raw: bytes, obj: Mapping[str, JsonValue], events: list[Event]) -> None:
    """An event led by its leading members (`led_by`) is routed by them: the rest of it must
    not say otherwise, as a repeated member would (JSON's last one wins) or a route's
    `groups`."""
    said = led_by(raw)
    if said is None:
        return
    [first, *more] = events
    if (more or first.group != said["group"] or first.ts != int(said["ts"])
            or first.system != said.get("system", "rocketmq")
            or obj.get("cluster") != said.get("cluster")):
        raise _Reject("repeated_envelope", "a member after the leading ones contradicts them")


def _parse_object(obj: Mapping[str, JsonValue]) -> list[Event]:
    version = obj.get("v", 1)
    if type(version) is not int or version != 1:
        raise _Reject("bad_version", f"v={version!r}; this parser reads v 1")
    event_type = obj.get("type")
    if event_type is None:
        raise _Reject("missing_field", "type")
    if event_type not in EVENT_TYPES:
        raise _Reject("unknown_type", f"type={str(event_type)[:80]!r}")
    groups = _groups(obj)
    if obj.get("cluster") is not None:
        _name(obj["cluster"], "cluster")   # routed by the job (streaming/spark/parse.py), not kept
    if "ts" not in obj:
        raise _Reject("missing_field", "ts")
    ts = parse_ts(obj["ts"])
    system = obj.get("system", "rocketmq")
    if system not in SYSTEMS:
        raise _Reject("unknown_system", f"system={str(system)[:80]!r}")
    body = _BODY_PARSERS[event_type](obj, system)
    _check_informational(obj, event_type)
    return [EVENT_CLASSES[event_type](ts=ts, group=g, system=system, **body) for g in groups]


# The fields the job does not read but the contract declares (for people): checked for their
# JSON type all the same, as the schema checks them.
_INFORMATIONAL: dict[str, list[tuple[str, JsonValue]]] = {
    t: [(f.name, f.schema["type"]) for f in FIELDS if not f.read and t in f.types]
    for t in EVENT_TYPES}
_JSON_TYPES: dict[JsonValue, type | tuple[type, ...]] = {"string": str, "boolean": bool,
                                                       "array": list}


def _check_informational(obj: Mapping[str, JsonValue], event_type: str) -> None:
    for name, json_type in _INFORMATIONAL[event_type]:
        value = obj.get(name)
        if value is not None and not isinstance(value, _JSON_TYPES[json_type]):
            raise _Reject("wrong_type", f"{name} must be a {json_type}")


def _groups(obj: Mapping[str, JsonValue]) -> list[str]:
    names: list[str] = []
    if obj.get("group") is not None:
        names.append(_name(obj["group"], "group"))
    if obj.get("type") == "route" and obj.get("groups") is not None:
        listed = obj["groups"]
        if not isinstance(listed, list):
            raise _Reject("wrong_type", "groups must be a list of strings")
        names.extend(_name(g, "groups[]") for g in listed)
    if not names:
        raise _Reject("missing_group", "no group (or groups for a route)")
    return list(dict.fromkeys(names))


def parse_ts(value: object) -> int:
    """Epoch milliseconds (number or digit string) or an ISO-8601 string -> epoch ms."""
    if isinstance(value, bool):
        raise _Reject("wrong_type", "ts must be epoch ms or an ISO-8601 string")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise _Reject("bad_timestamp", f"ts {value!r}")
        ms = int(math.floor(value))
    elif isinstance(value, str):
        ms = _parse_ts_text(value.strip())
    else:
        raise _Reject("wrong_type", "ts must be epoch ms or an ISO-8601 string")
    if not MIN_TS_MS <= ms < MAX_TS_MS:
        raise _Reject("bad_timestamp", f"ts {ms} is outside [2000-01-01, 2100-01-01)")
    return ms


def _parse_ts_text(text: str) -> int:
    if text.lstrip("-").isdigit() and len(text) <= 17:
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise _Reject("bad_timestamp", f"ts {text[:60]!r} is not ISO-8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f]")


def _name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise _Reject("wrong_type", f"{what} must be a string")
    if not value:
        raise _Reject("missing_group" if what.startswith("group") else "bad_value",
                      f"{what} is empty")
    if _CONTROL_CHARACTER.search(value):
        raise _Reject("bad_value", f"{what} contains a control character")
    return value


def _str(obj: Mapping[str, JsonValue], key: str, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise _Reject("missing_field", key)
        return None
    return _name(value, key)


def _int(value: object, what: str, low: int = 0, high: int = MAX_QUEUE_ID) -> int:
    if type(value) is not int:
        raise _Reject("wrong_type", f"{what} must be an integer")
    if not low <= value <= high:
        raise _Reject("bad_value", f"{what}={value} is outside [{low}, {high}]")
    return value


@overload
def _list(obj: Mapping[str, JsonValue], key: str, required: Literal[True]) -> list[JsonValue]: ...
@overload
def _list(obj: Mapping[str, JsonValue], key: str,
          required: bool = False) -> list[JsonValue] | None: ...
def _list(obj: Mapping[str, JsonValue], key: str,
          required: bool = False) -> list[JsonValue] | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise _Reject("missing_field", key)
        return None
    if not isinstance(value, list):
        raise _Reject("wrong_type", f"{key} must be a list")
    return value


def _queue_list(value: object, what: str) -> tuple[Queue2, ...]:
    if not isinstance(value, list):
        raise _Reject("wrong_type", f"{what} must be a list of [broker, queue_id]")
    queues: list[Queue2] = []
    for item in value:
        if not isinstance(item, list) or len(item) != 2:
            raise _Reject("wrong_type", f"{what} items must be [broker, queue_id]")
        queues.append((_name(item[0], f"{what} broker"), _int(item[1], f"{what} queue_id")))
    return tuple(sorted(set(queues)))


def _brokers(value: object) -> tuple[Queue2, ...]:
    if not isinstance(value, dict):
        raise _Reject("wrong_type", "brokers must be an object broker -> queue count")
    queues: list[Queue2] = []
    for broker, count in value.items():
        count = _int(count, f"brokers[{broker}]", 0, 65_536)
        queues.extend((_name(broker, "broker"), qid) for qid in range(count))
    return tuple(sorted(queues))


def _heartbeat(obj: Mapping[str, JsonValue], system: str) -> dict[str, Any]:
    client_id = _str(obj, "client_id", required=True)
    topics = tuple(sorted({_name(t, "topics[]") for t in _list(obj, "topics", True)}))
    protocol = _group_protocol(obj) if system == "kafka" else None
    strategy = _strategy(obj.get("strategy"), system,
                         any_name=protocol is not None and protocol.broker_assigned)
    params = obj.get("strategy_params") or {}
    if not isinstance(params, dict):
        raise _Reject("wrong_type", "strategy_params must be an object")
    if strategy == "GO_CONSISTENT_HASH" and "virtual_nodes" not in params:
        raise _Reject("missing_field", "strategy_params.virtual_nodes (GO_CONSISTENT_HASH has "
                      "no default)")
    model = obj.get("message_model", "CLUSTERING")
    if model not in MESSAGE_MODELS:
        raise _Reject("bad_value", f"message_model={str(model)[:40]!r}")
    shared = obj.get("shared", obj.get("pop", False))
    if not isinstance(shared, bool):
        raise _Reject("wrong_type", "shared must be a boolean")
    view_clients, view_queues = _view(obj.get("view"))
    generation = obj.get("generation")
    basis = _strategy_basis(obj)
    return dict(
        client_id=client_id, topics=topics, strategy=strategy,
        strategy_params=json.loads(json.dumps(params, sort_keys=True)) if params else {},
        strategy_basis=basis,
        strategy_candidates=(tuple(_name(s, "strategy_candidates[]")
                                   for s in _list(obj, "strategy_candidates") or ())
                             if basis == "assumed" and "strategy_candidates" in obj else None),
        message_model=model, shared=shared, address=_str(obj, "address"),
        lite_topics=None if (lite := _list(obj, "lite_topics")) is None
        else tuple(sorted({_name(t, "lite_topics[]") for t in lite})),
        broker=_str(obj, "broker"), view_clients=view_clients, view_queues=view_queues,
        owned=_owned(obj.get("owned"), system),
        owned_ts=None if obj.get("owned_ts") is None else _int(obj["owned_ts"], "owned_ts", 0,
                                                                MAX_TS_MS),
        generation=None if generation is None else _int(generation, "generation", -1),
        group_instance_id=_str(obj, "group_instance_id"), protocol=protocol,
        broker_assignments=(_broker_assignments(obj.get("broker_assignments"))
                            if system == "rocketmq" else None),
    )


def _strategy_basis(obj: Mapping[str, JsonValue]) -> StrategyBasis:
    """How the producer knows the member's strategy: by at most one of the three marks."""
    marks: list[StrategyBasis] = []
    for basis, key, value, kind in (
            ("assumed", "strategy_assumed", obj.get("strategy_assumed"), bool),
            ("inferred", "strategy_inferred", obj.get("strategy_inferred"), str),
            ("named", "strategy_named", obj.get("strategy_named"), bool)):
        if value is not None and not isinstance(value, kind):
            raise _Reject("wrong_type", f"{key} must be a {_JSON_NAMES[kind]}")
        if value:
            marks.append(basis)  # type: ignore[arg-type]  # the loop's literals
    if len(marks) > 1:
        raise _Reject("bad_value", "strategy_" + " and strategy_".join(marks) +
                      " exclude each other")
    return marks[0] if marks else "reported"


_JSON_NAMES = {bool: "boolean", str: "string"}


def _broker_assignments(value: object) -> BrokerAnswers | None:
    """{broker: {topic: [[broker, queue_id], ...] or null}}: null is a broker that gives the
    client no assignment of that topic (it does not serve it, or knows no client list)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Reject("wrong_type", "broker_assignments must be an object broker -> topics")
    answers: list[BrokerAnswer] = []
    for broker, by_topic in value.items():
        if not isinstance(by_topic, dict):
            raise _Reject("wrong_type", "broker_assignments[broker] must be an object topic -> "
                          "queues")
        answers.append((_name(broker, "broker_assignments broker"), tuple(sorted(
            (_name(topic, "broker_assignments topic"),
             None if queues is None else _queue_list(queues, "broker_assignments queues"))
            for topic, queues in by_topic.items()))))
    return tuple(sorted(answers))


def _group_protocol(obj: Mapping[str, JsonValue]) -> GroupProtocol | None:
    group_type = obj.get("group_type", "classic")
    if group_type not in KAFKA_GROUP_TYPES:
        raise _Reject("bad_value", f"group_type={str(group_type)[:40]!r}")
    epochs = {name: None if obj.get(name) is None else _int(obj[name], name, -1, MAX_EPOCH)
              for name in ("member_epoch", "group_epoch", "assignment_epoch")}
    target = _owned(obj.get("target"), "kafka", "target")
    state = _optional_name(obj.get("group_state"), "group_state")
    process_id = _optional_name(obj.get("process_id"), "process_id")
    standby = _owned(obj.get("standby"), "kafka", "standby")
    warmup = _owned(obj.get("warmup"), "kafka", "warmup")
    wanted = _standby_replicas(obj.get("standby_replicas"))
    if (group_type == "classic" and target is None and all(
            v is None for v in (*epochs.values(), state, process_id, standby, warmup, wanted))):
        return None
    return GroupProtocol(group_type, target, **epochs, group_state=state, standby=standby,
                         warmup=warmup, process_id=process_id, standby_replicas=wanted)


def _standby_replicas(value: object) -> tuple[tuple[str, int], ...] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Reject("wrong_type", "standby_replicas must be an object task space -> count")
    return tuple(sorted((_name(space, "standby_replicas task space"),
                         _int(count, "standby_replicas count", 0, MAX_EPOCH))
                        for space, count in value.items()))


def _optional_name(value: object, what: str) -> str | None:
    return None if value is None else _name(value, what)


def _strategy(value: object, system: str, any_name: bool = False) -> str:
    """The strategy's canonical name; a broker-assigned Kafka group's assignor runs on the
    broker (uniform, range, simple or a plugged-in one), so any name is taken as it is."""
    if value is None:
        raise _Reject("missing_field", "strategy")
    if not isinstance(value, str):
        raise _Reject("wrong_type", "strategy must be a string")
    if any_name:
        return _name(value, "strategy")
    known = KAFKA_STRATEGIES if system == "kafka" else ROCKETMQ_STRATEGIES
    for name in known:
        if value.lower() == name.lower():
            return name
    raise _Reject("unknown_strategy", f"{system} strategy {value[:60]!r}")


def _view(value: object,
          ) -> tuple[tuple[str, ...] | None, dict[str, tuple[Queue2, ...]] | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise _Reject("wrong_type", "view must be an object")
    clients = value.get("clients")
    if clients is not None:
        if not isinstance(clients, list):
            raise _Reject("wrong_type", "view.clients must be a list")
        clients = tuple(sorted(_name(c, "view.clients[]") for c in clients))
    queues = value.get("queues")
    if queues is not None:
        if not isinstance(queues, dict):
            raise _Reject("wrong_type", "view.queues must be an object topic -> queues")
        queues = {_name(t, "view topic"): _queue_list(q, "view.queues") for t, q in queues.items()}
    return clients, queues


def _owned(value: object, system: str, what: str = "owned") -> tuple[Owned, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _Reject("wrong_type", f"{what} must be a list")
    owned: set[Owned] = set()
    for item in value:
        if system == "kafka":
            if not isinstance(item, list) or len(item) != 2:
                raise _Reject("wrong_type", f"{what} items must be [topic, partition]")
            owned.add((_name(item[0], f"{what} topic"), "", _int(item[1], f"{what} partition")))
        else:
            if not isinstance(item, list) or len(item) != 3:
                raise _Reject("wrong_type", f"{what} items must be [topic, broker, queue_id]")
            owned.add((_name(item[0], f"{what} topic"), _name(item[1], f"{what} broker"),
                       _int(item[2], f"{what} queue_id")))
    return tuple(sorted(owned))


def _unregister(obj: Mapping[str, JsonValue], system: str) -> dict[str, Any]:
    return dict(client_id=_str(obj, "client_id", required=True), address=_str(obj, "address"))


def _route(obj: Mapping[str, JsonValue], system: str) -> dict[str, Any]:
    topic = _str(obj, "topic", required=True)
    if system == "kafka" and obj.get("partitions") is not None:
        count = _int(obj["partitions"], "partitions", 0, 1_000_000)
        return dict(topic=topic, queues=tuple(("", p) for p in range(count)))
    if obj.get("queues") is not None:
        return dict(topic=topic, queues=_queue_list(obj["queues"], "queues"))
    if obj.get("brokers") is not None:
        return dict(topic=topic, queues=_brokers(obj["brokers"]))
    raise _Reject("missing_field", "partitions" if system == "kafka" else "queues or brokers")


def _alive(obj: Mapping[str, JsonValue], system: str) -> dict[str, Any]:
    members: set[tuple[str, str]] = set()
    for item in _list(obj, "members", True):
        if not isinstance(item, list) or not 1 <= len(item) <= 2:
            raise _Reject("wrong_type", "members items must be [client_id, address]")
        address = item[1] if len(item) == 2 else None
        members.add((_name(item[0], "members client_id"),
                     "" if address is None else _name(address, "members address")))
    return dict(members=tuple(sorted(members)), broker=_str(obj, "broker"))


_BODY_PARSERS = {"heartbeat": _heartbeat, "unregister": _unregister, "route": _route,
                 "alive": _alive}

# An epoch-ms "ts" member: preceded by no backslash (so the quote opens a key), digits in JSON's
# own number form, then the end of that member.
_TS_MEMBER = re.compile(rb'(?<!\\)"ts"[ \t\r\n]*:[ \t\r\n]*(-?(?:0|[1-9][0-9]*))[ \t\r\n]*[,}]')


# Distinct events an EventParser remembers: about 1.3 KB each. A steady group of 10 clients on
# 2 brokers sends 22 distinct ones (a heartbeat per client and broker, a route per topic), so
# this holds 10,000 such groups (340 MB at most).
PARSER_CACHE_EVENTS = 262_144
# A full cache takes no new event until this many events (in eighths of its size) missed it;
# then its oldest eighth goes. A fleet sends its events in a cycle (each client's heartbeat
# comes back after all the others'), so a cache that made room at every miss (emptied, or its
# oldest dropped) would never hold an event when it came back: this one keeps what it holds
# and still hits on that share of the fleet, while a fleet that changes replaces it slowly.
PARSER_CACHE_TRIM_AFTER = 4


class EventParser:
    """`parse_event` for bytes, remembering valid events by their text without the ts digits.

    A client heartbeats the same facts every few seconds; only its ts changes. A raw event whose
    text holds "ts" once, as a top-level epoch-ms integer member, is looked up with those digits
    cut out; a hit is the remembered event with the new ts, checked by the same range. Anything
    else (ISO times, "ts" twice anywhere, nesting before the ts, invalid events) takes the full
    parse, so the result always equals `parse_event(raw)`.

        >>> parser = EventParser()
        >>> raw = b'{"type":"unregister","ts":1700000000000,"group":"g","client_id":"c"}'
        >>> parser.parse(raw) == parse_event(raw), len(parser)
        (True, 1)
        >>> [e.ts for e in parser.parse(raw.replace(b"1700000000000", b"1700000000001"))]
        [1700000000001]
        >>> parser.parse(raw.replace(b"1700000000000", b"1")).reason
        'bad_timestamp'
    """

    def __init__(self, max_entries: int = PARSER_CACHE_EVENTS) -> None:
        self._events: dict[bytes, list[Event]] = {}
        self._max_entries = max_entries
        self._missed_while_full = 0

    def __len__(self) -> int:
        return len(self._events)

    def parse(self, raw: bytes) -> list[Event] | Invalid:
        return self.parse_stemmed(raw)[0]

    def parse_stemmed(self, raw: bytes) -> tuple[list[Event] | Invalid, bytes | None]:
        """`parse`, and the text's stem when it has one: the text without its ts digits, the same
        for every text that parses to these events at another time (None: no such stem)."""
        stamped = stem_and_ts(raw)
        if stamped is None:
            return parse_event(raw), None
        key, ts = stamped
        remembered = self._events.get(key)
        if remembered is None:
            return self._parse_new(raw, key, ts)
        # A hit passed the checks of _parse_new: the remembered text had "ts" once, the key is
        # that text without its ts digits, and digits add no quote nor bracket, so this text has
        # "ts" once too, with the same prefix, and differs at most in the digits and the
        # whitespace around them.
        if not MIN_TS_MS <= ts < MAX_TS_MS:
            try:
                parse_ts(ts)       # the same rejection as the full parse
            except _Reject as rejected:
                return Invalid(rejected.reason, rejected.detail), None
        return [with_ts(event, ts) for event in remembered], key

    def _parse_new(self, raw: bytes, key: bytes,
                   ts: int) -> tuple[list[Event] | Invalid, bytes | None]:
        parsed = parse_event(raw)
        at = raw.find(b'"ts"')
        if (raw.find(b'"ts"', at + 4) < 0 and _before_nesting(raw, at)
                and not isinstance(parsed, Invalid) and parsed[0].ts == ts):
            if len(self._events) < self._max_entries or self._trimmed():
                self._events[key] = parsed
            return parsed, key
        return parsed, None

    def _trimmed(self) -> bool:
        """Whether a full cache made room: after PARSER_CACHE_TRIM_AFTER eighths of its size in
        misses, its oldest eighth goes."""
        self._missed_while_full += 1
        eighth = max(1, self._max_entries // 8)
        if self._missed_while_full < PARSER_CACHE_TRIM_AFTER * eighth:
            return False
        self._missed_while_full = 0
        for key in list(itertools.islice(self._events, eighth)):
            del self._events[key]
        return True


def stem_and_ts(raw: bytes) -> tuple[bytes, int] | None:
    """The text's first "ts" member as an epoch-ms integer, cut out: the cache key of
    `EventParser`, and the digits' value. Whether the key is a stem (a valid event's, with "ts"
    once, before any nesting) is `EventParser.parse_stemmed`'s to say; a text whose key is one
    parses to that stem's events at this time, when the time is in range."""
    at = raw.find(b'"ts"')
    match = _TS_MEMBER.match(raw, at) if at >= 0 else None
    if match is None:
        return None
    start, end = match.span(1)
    return raw[:start] + raw[end:], int(raw[start:end])


def _before_nesting(raw: bytes, at: int) -> bool:
    """No object or array opens between the top-level '{' and `at`."""
    opening = raw.find(b"{")
    return (0 <= opening < at and raw.find(b"{", opening + 1, at) < 0
            and raw.find(b"[", opening + 1, at) < 0)


_E = TypeVar("_E", bound=Event)


def with_ts(event: _E, ts: int) -> _E:
    """The event at another time."""
    # A frozen dataclass copied through its __dict__: dataclasses.replace re-runs __init__ and
    # costs as much as the parse this class saves.
    copy = object.__new__(type(event))
    values = event.__dict__.copy()
    values["ts"] = ts
    object.__setattr__(copy, "__dict__", values)
    return copy
