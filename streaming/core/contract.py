"""What crosses the boundaries between the core, the Spark job and the exporter.

Small frozen types, in the manner of Burrow's core/protocol: the core's step returns them, the
Spark state function serialises them once (`to_json`), the driver's sink reads them back
(`from_json`), and the exporter, the findings topic and the demo read attributes, never string
keys. Nothing here imports Spark or Kafka.

    >>> key = GroupKey("kafka", "order-service")
    >>> key < GroupKey("rocketmq", "order-service")
    True
    >>> double = FindingIdentity("double_assignment", "T", ("b", 0), ("c1", "c2"))
    >>> record = FindingRecord("started", double, "g", "rocketmq", since=5, at=5)
    >>> FindingRecord.from_json(record.to_json()) == record
    True
    >>> record.to_json()[:64]
    b'{"status": "started", "kind": "double_assignment", "topic": "T",'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from functools import cache
from types import UnionType
from typing import Any, Literal, NamedTuple, TypeVar, Union, get_args, get_origin, get_type_hints

# A leaf: nothing of the project's is imported here, so every layer can import it.

# The cluster of events that name none (docs/events.md).
DEFAULT_CLUSTER = "default"

# Kafka group types. A classic group's members assign through their leader; the broker assigns
# the others: KIP-848 "consumer" groups, KIP-932 "share" groups (several members per partition
# by design) and KIP-1071 "streams" groups (Kafka Streams tasks, each a queue of its
# subtopology's task space).
KAFKA_GROUP_TYPES = ("classic", "consumer", "share", "streams")
BROKER_ASSIGNED = ("consumer", "share", "streams")

Queue2 = tuple[str, int]          # (broker, queue_id); Kafka: ("", partition)
Owned = tuple[str, str, int]      # (topic, broker, queue_id); Kafka: (topic, "", partition)
# Decoded JSON (a raw event, a strategy's params, a state blob): its shape is checked where it
# is read, not by the type checker.
JsonValue = Any
JsonObject = dict[str, JsonValue]

System = Literal["rocketmq", "kafka"]
# Every finding the core raises (docs/events.md, findings); the two conflicts come first.
FindingKind = Literal[
    "double_assignment", "orphaned_queue", "skew", "idle_client", "subscription_inconsistent",
    "strategy_inconsistent", "client_id_collision", "view_divergent", "broker_view_divergent",
    "allocation_mismatch", "holdings_pending", "handoff_pending", "target_unassigned",
    "target_skew", "broker_split_view", "strategy_unknown", "streams_not_ready",
    "standby_with_active", "standby_missing"]
# How the producer knows a member's strategy: the client says it (or the producer runs it),
# the operator named it for the client's SDK, its holdings alone give it, or it is a guess.
StrategyBasis = Literal["reported", "named", "inferred", "assumed"]
Status = Literal["started", "ended"]
# The rows the state function gives the driver, by their kind column.
# Why a stored state was reset (rebuilt from the group's next events) instead of read: a group's
# blob written by a newer build, a group's blob that does not decode, a shard's value that does
# not (its groups after the break are lost).
ResetCause = Literal["unknown_version", "corrupt_group", "corrupt_shard"]
RESET_CAUSES: tuple[ResetCause, ...] = ("unknown_version", "corrupt_group", "corrupt_shard")

RowKind = Literal["metrics", "removed", "finding", "dead_letter", "counts", "detail"]
METRICS: RowKind = "metrics"
REMOVED: RowKind = "removed"
FINDING: RowKind = "finding"
DEAD_LETTER: RowKind = "dead_letter"
COUNTS: RowKind = "counts"
DETAIL: RowKind = "detail"


class GroupKey(NamedTuple):
    """One consumer group of one system in one cluster (as its producers name it): the
    unit of state, of series and of removal. A Kafka group and a RocketMQ group of the same
    name are two groups, and so are two clusters' groups of the same name."""

    system: str
    group: str
    cluster: str = DEFAULT_CLUSTER


class FindingIdentity(NamedTuple):
    """What makes two findings the same finding (its detail does not): declared here once, and
    carried as `identity` by every type that names a finding (the core's Finding, a published
    FindingRecord, a detail's OpenFinding, a step's Transition)."""

    kind: str
    topic: str | None = None
    queue: Queue2 | None = None
    clients: tuple[str, ...] = ()
    address: str | None = None
    brokers: tuple[str, ...] = ()


class Identified:
    """A finding's identity's fields, read through its `identity`."""

    identity: FindingIdentity

    @property
    def kind(self) -> str:
        return self.identity.kind

    @property
    def topic(self) -> str | None:
        return self.identity.topic

    @property
    def queue(self) -> Queue2 | None:
        return self.identity.queue

    @property
    def clients(self) -> tuple[str, ...]:
        return self.identity.clients

    @property
    def address(self) -> str | None:
        return self.identity.address

    @property
    def brokers(self) -> tuple[str, ...]:
        return self.identity.brokers


@dataclass(frozen=True)
class FindingRecord(Identified):
    """One record of the findings topic: a finding that started or ended at event time `at`;
    `since` is when it began. The JSON shape is docs/events.md's findings contract: the
    identity's fields in place, and `address`, `brokers` and `detail` only when they say
    something."""

    status: str                       # "started" | "ended"
    identity: FindingIdentity
    group: str
    system: str
    since: int
    at: int
    detail: Mapping[str, JsonValue] | None = None
    cluster: str = DEFAULT_CLUSTER

    @classmethod
    def of(cls, status: str, identity: FindingIdentity, key: GroupKey, since: int, at: int,
           detail: Mapping[str, JsonValue] | None = None) -> FindingRecord:
        return cls(status, identity, key.group, key.system, since, at, detail or None,
                   key.cluster)

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.system, self.group, self.cluster)

    def to_json(self) -> bytes:
        plain = to_plain(self)
        for name in _SAID_WHEN_SET:
            if not plain[name]:
                del plain[name]
        return json.dumps(plain).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> FindingRecord:
        return from_plain(cls, json.loads(payload))


_SAID_WHEN_SET = ("address", "brokers", "detail")


@dataclass(frozen=True)
class GroupMetrics:
    """Everything the exporter shows of one group: the job's per-group series (docs/metrics.md).
    Per-topic fields map topic -> value; `client_queues` maps client id -> queues."""

    system: str
    group: str
    event_time_ms: int                # the newest event time the group has applied
    members: int
    queues: Mapping[str, int]
    double_assigned: Mapping[str, int]
    orphaned: Mapping[str, int]
    conflict_since_ms: int | None     # start of the oldest open double assignment or orphan
    skew_ratio: float
    idle_clients: int
    subscription_inconsistent: int
    strategy_inconsistent: int
    client_id_collisions: int
    view_divergent_clients: int
    broker_view_divergent: int
    allocation_mismatch_clients: int
    rebalances_total: int
    queue_moves_total: int
    late_events_total: int
    client_queues: Mapping[str, int] = field(default_factory=dict)
    cluster: str = DEFAULT_CLUSTER
    # Members an `alive` event named that the group did not hold (their full heartbeat is due).
    alive_unknown_members_total: int = 0
    # Members whose reported holdings predate a route change of their topics (their claims
    # there are the re-run's until they report again).
    holdings_pending_clients: int = 0
    # Members whose strategy is a guess (no finding rests on their re-run).
    strategy_unknown_clients: int = 0
    # Every group: its assignor (the strategy most members use) and how often it changed;
    # Kafka: the group type (one of KAFKA_GROUP_TYPES; "" for RocketMQ).
    assignor: str = ""
    assignor_changes_total: int = 0
    group_type: str = ""
    # A group the broker assigns (KIP-848): its members not yet at their target, the start of
    # the oldest such hand-off, the most epochs a member lags, the group's and its target
    # assignment's epochs, the target's skew and its partitions given to nobody, by topic; a
    # share group: the most members reading one partition, by topic.
    reconciling_members: int = 0
    handoff_since_ms: int | None = None
    max_epoch_lag: int = 0
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    target_skew_ratio: float = 1.0
    target_unassigned: Mapping[str, int] = field(default_factory=dict)
    # A streams group the broker has no configured topology for (NotReady): 1, else 0.
    streams_not_ready: int = 0
    # A streams group: tasks with a standby or warm-up copy on the process of their active
    # owner (no redundancy), by task space.
    standby_with_active: Mapping[str, int] = field(default_factory=dict)
    # ... and tasks kept on fewer processes than the group's num.standby.replicas wants.
    standby_missing: Mapping[str, int] = field(default_factory=dict)
    # Kafka share groups and RocketMQ POP readers: the most members reading one queue, per topic.
    share_readers: Mapping[str, int] = field(default_factory=dict)
    # RocketMQ clientRebalance=false: queues two brokers give to different clients, per topic.
    broker_split: Mapping[str, int] = field(default_factory=dict)

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.system, self.group, self.cluster)

    @property
    def broker_assigned(self) -> bool:
        return self.group_type in BROKER_ASSIGNED

    def to_json(self) -> bytes:
        return json.dumps(to_plain(self)).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> GroupMetrics:
        return from_plain(cls, json.loads(payload))


MemberRef = tuple[str, str]           # (client_id, address or ""): one process of the group


@dataclass(frozen=True)
class QueueOwners:
    """One queue of the group and who holds it: the members whose reported holdings (`owned`)
    name it, the members the monitor's re-run gives it, and (a group the broker assigns) the
    members whose target names it; (a streams group, whose queues are tasks) the members that
    keep a standby or warm-up copy of the task's state. `in_route`: the queue is in the topic's
    current route."""

    topic: str
    broker: str                       # Kafka: ""
    queue_id: int
    in_route: bool
    reported: tuple[MemberRef, ...] = ()
    rerun: tuple[MemberRef, ...] = ()
    target: tuple[MemberRef, ...] = ()
    standby: tuple[MemberRef, ...] = ()
    warmup: tuple[MemberRef, ...] = ()


# QueueOwners' holder lists: every field after in_route.
OWNER_KINDS: tuple[str, ...] = tuple(f.name for f in fields(QueueOwners)[4:])


@dataclass(frozen=True)
class MemberDetail:
    """One member (process) as its latest heartbeat describes it. `view_clients` and
    `view_queues` are what the client itself sees (None: it does not say, the group's consensus
    is taken); `owned` is what it reports holding (None: it does not say)."""

    client_id: str
    address: str
    topics: tuple[str, ...]
    strategy: str
    model: str = "CLUSTERING"
    shared: bool = False
    view_clients: tuple[str, ...] | None = None
    view_queues: Mapping[str, tuple[Queue2, ...]] | None = None
    owned: tuple[tuple[str, str, int], ...] | None = None
    brokers: tuple[str, ...] = ()     # the brokers whose member list holds it
    strategy_basis: StrategyBasis = "reported"
    lite_topics: tuple[str, ...] | None = None   # RocketMQ 5.5: a lite consumer's lite topics


@dataclass(frozen=True)
class OpenFinding(Identified):
    """A finding open now, since event time `since`."""

    identity: FindingIdentity
    since: int
    detail: Mapping[str, JsonValue] | None = None


@dataclass(frozen=True)
class GroupDetail:
    """What an operator needs of one group after an alert: every queue with its owners, every
    member with its view and strategy, the open findings. The step emits it only when something
    it shows changed (docs/api.md); it carries no event time, so the latest one emitted is the
    group's detail until the next."""

    system: str
    group: str
    queues: tuple[QueueOwners, ...]
    members: tuple[MemberDetail, ...]
    findings: tuple[OpenFinding, ...]
    cluster: str = DEFAULT_CLUSTER

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.system, self.group, self.cluster)

    def to_json(self) -> bytes:
        return json.dumps(self, default=encodable, separators=(",", ":"),
                          ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> GroupDetail:
        return from_plain(cls, json.loads(payload))

    @classmethod
    def heading_from_json(cls, payload: bytes | str) -> GroupDetail:
        """The detail as `from_json` reads it, without its queues and members (most of it):
        its key and findings, for the sink's summary of every detail it stores."""
        plain = json.loads(payload)
        plain["queues"] = plain["members"] = ()
        return from_plain(cls, plain)


@dataclass(frozen=True)
class ShardCounts:
    """One shard's share of a micro-batch, for the job's own counters: valid events by type,
    rejected ones by reason, and the newest valid event time (0: none). The event time is here
    because a group whose events were kept for its next step emits no metrics that batch. Per
    cluster (as the events name it), its newest event time."""

    events: Mapping[str, int]
    invalid: Mapping[str, int]
    event_time_ms: int = 0
    clusters: Mapping[str, int] = field(default_factory=dict)   # cluster -> newest event time
    resets: Mapping[str, int] = field(default_factory=dict)     # ResetCause -> states reset

    def to_json(self) -> bytes:
        return json.dumps(to_plain(self)).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> ShardCounts:
        return from_plain(cls, json.loads(payload))


@dataclass(frozen=True)
class StepOutput:
    """One group's step: the state to store (None: the group is gone), its metrics (None when
    gone), the finding records to publish in order, and when Spark should wake the group next
    (event time, ms) if no event comes first."""

    blob: bytes | None
    metrics: GroupMetrics | None
    findings: list[FindingRecord]
    next_timeout_ms: int | None
    # The group's detail, when something it shows changed in this step (else None: the one
    # emitted last still holds); None when gone.
    detail: GroupDetail | None = None


# One mechanism between the contract's types and JSON, driven by their declarations: a
# dataclass is an object of its fields (an embedded FindingIdentity's fields in its place),
# tuples are arrays, mappings objects; reading back follows each field's type annotation.

_C = TypeVar("_C")


def to_plain(value: object) -> JsonValue:
    """The value as JSON data."""
    if is_dataclass(value) and not isinstance(value, type):
        if _is_flat(type(value)):
            return dict(value.__dict__)
        return {name: to_plain(item) for name, item in encodable(value).items()}
    if isinstance(value, tuple | list):
        return [to_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: to_plain(item) for key, item in value.items()}
    return value


def encodable(value: object) -> JsonValue:
    """`json.dumps`'s default for the contract's types: `to_plain` one level deep, the encoder
    converting the rest as it writes (the same JSON, without a plain copy of the whole value
    first: a group's detail is hundreds of small objects)."""
    if is_dataclass(value) and not isinstance(value, type):
        if _is_flat(type(value)):
            return value.__dict__
        out: JsonObject = {}
        for name in _field_names(type(value)):
            item = getattr(value, name)
            if isinstance(item, FindingIdentity):
                out.update(item._asdict())
            else:
                out[name] = item
        return out
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not a contract type")


@cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(each.name for each in fields(kind))


def from_plain(kind: type[_C], data: JsonValue) -> _C:
    """A value of a contract type from JSON data that `to_plain` wrote (a field the data lacks
    takes its default)."""
    return _read(kind, data)  # type: ignore[no-any-return]  # _read follows the annotations


def _read(kind: Any, data: JsonValue) -> Any:
    if kind is FindingIdentity:
        return FindingIdentity(**{name: _read(hint, data[name])
                                  for name, hint in _hints(FindingIdentity).items()
                                  if name in data})
    if isinstance(kind, type) and is_dataclass(kind):
        if _is_flat(kind):
            return kind(**data)
        hints = _hints(kind)
        values = {each.name: (_read(FindingIdentity, data)
                              if hints[each.name] is FindingIdentity
                              else _read(hints[each.name], data[each.name]))
                  for each in fields(kind)
                  if hints[each.name] is FindingIdentity or each.name in data}
        return kind(**values)
    origin, args = get_origin(kind), get_args(kind)
    if origin in (Union, UnionType):
        if data is None:
            return None
        return _read(next(arg for arg in args if arg is not type(None)), data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_read(args[0], item) for item in data)
        return tuple(_read(arg, item) for arg, item in zip(args, data, strict=True))
    if origin in (dict, Mapping):
        return {key: _read(args[1], item) for key, item in data.items()}
    return data


@cache
def _hints(kind: type) -> dict[str, Any]:
    return get_type_hints(kind)


_NATIVE = (str, int, float, bool, type(None), Any)


@cache
def _is_flat(kind: type) -> bool:
    """Every field of the dataclass is JSON as it stands (scalars, and mappings of scalars):
    its fields are its JSON object, both ways, with nothing to convert."""
    return all(_native(hint) for hint in _hints(kind).values())


def _native(hint: Any) -> bool:
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType):
        return all(_native(arg) for arg in args)
    if origin in (dict, Mapping):
        return args[0] is str and _native(args[1]) and get_origin(args[1]) is None
    return hint in _NATIVE or origin is Literal
