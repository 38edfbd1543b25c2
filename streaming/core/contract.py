"""What crosses the boundaries between the core, the Spark job and the exporter.

Small frozen types, in the manner of Burrow's core/protocol: the core's step returns them, the
Spark state function serialises them once (`to_json`), the driver's sink reads them back
(`from_json`), and the exporter, the findings topic and the demo read attributes, never string
keys. Nothing here imports Spark or Kafka.

    >>> key = GroupKey("kafka", "order-service")
    >>> key < GroupKey("rocketmq", "order-service")
    True
    >>> record = FindingRecord("started", "double_assignment", "g", "rocketmq", "T", ("b", 0),
    ...                        ("c1", "c2"), since=5, at=5)
    >>> FindingRecord.from_json(record.to_json()) == record
    True
    >>> record.to_json()[:60]
    b'{"status": "started", "kind": "double_assignment", "group": '
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeVar

# A leaf: nothing of the project's is imported here, so every layer can import it.

# The cluster of events that name none (docs/events.md).
DEFAULT_CLUSTER = "default"

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
    "target_skew", "broker_split_view"]
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
    """What makes two findings the same finding (its detail does not)."""

    kind: str
    topic: str | None
    queue: Queue2 | None
    clients: tuple[str, ...]
    address: str | None
    brokers: tuple[str, ...]


@dataclass(frozen=True)
class FindingRecord:
    """One record of the findings topic: a finding that started or ended at event time `at`;
    `since` is when it began. The JSON shape is docs/events.md's findings contract."""

    status: str                       # "started" | "ended"
    kind: str
    group: str
    system: str
    topic: str | None
    queue: Queue2 | None
    clients: tuple[str, ...]
    since: int
    at: int
    address: str | None = None
    brokers: tuple[str, ...] = ()
    detail: Mapping[str, JsonValue] | None = None
    cluster: str = DEFAULT_CLUSTER

    @classmethod
    def of(cls, status: str, identity: FindingIdentity, key: GroupKey, since: int, at: int,
           detail: Mapping[str, JsonValue] | None = None) -> FindingRecord:
        kind, topic, queue, clients, address, brokers = identity
        return cls(status, kind, key.group, key.system, topic, queue, tuple(clients), since, at,
                   address, tuple(brokers), detail or None, key.cluster)

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.system, self.group, self.cluster)

    @property
    def identity(self) -> FindingIdentity:
        return FindingIdentity(self.kind, self.topic, self.queue, self.clients, self.address,
                               self.brokers)

    def to_json(self) -> bytes:
        out: dict[str, object] = {
            "status": self.status, "kind": self.kind, "group": self.group,
            "system": self.system, "cluster": self.cluster, "topic": self.topic,
            "queue": None if self.queue is None else list(self.queue),
            "clients": list(self.clients), "since": self.since, "at": self.at}
        if self.address is not None:
            out["address"] = self.address
        if self.brokers:
            out["brokers"] = list(self.brokers)
        if self.detail:
            out["detail"] = self.detail
        return json.dumps(out).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> FindingRecord:
        data = json.loads(payload)
        queue = data.get("queue")
        return cls(data["status"], data["kind"], data["group"], data["system"], data.get("topic"),
                   None if queue is None else (queue[0], queue[1]), tuple(data["clients"]),
                   data["since"], data["at"], data.get("address"),
                   tuple(data.get("brokers") or ()), data.get("detail"),
                   data.get("cluster", DEFAULT_CLUSTER))


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
    # Members whose reported holdings predate a route change of their topics (their claims
    # there are the re-run's until they report again).
    holdings_pending_clients: int = 0
    # Every group: its assignor (the strategy most members use) and how often it changed;
    # Kafka: the group type ("classic", "consumer", "share"; "" for RocketMQ).
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
    # Kafka share groups and RocketMQ POP readers: the most members reading one queue, per topic.
    share_readers: Mapping[str, int] = field(default_factory=dict)
    # RocketMQ clientRebalance=false: queues two brokers give to different clients, per topic.
    broker_split: Mapping[str, int] = field(default_factory=dict)

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.system, self.group, self.cluster)

    @property
    def broker_assigned(self) -> bool:
        return self.group_type in ("consumer", "share")

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> GroupMetrics:
        return cls(**json.loads(payload))


MemberRef = tuple[str, str]           # (client_id, address or ""): one process of the group


@dataclass(frozen=True)
class QueueOwners:
    """One queue of the group and who holds it: the members whose reported holdings (`owned`)
    name it, the members the monitor's re-run gives it, and (a group the broker assigns) the
    members whose target names it. `in_route`: the queue is in the topic's current route."""

    topic: str
    broker: str                       # Kafka: ""
    queue_id: int
    in_route: bool
    reported: tuple[MemberRef, ...] = ()
    rerun: tuple[MemberRef, ...] = ()
    target: tuple[MemberRef, ...] = ()


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


@dataclass(frozen=True)
class OpenFinding:
    """A finding open now, since event time `since`; the subject is its identity's fields."""

    kind: str
    since: int
    topic: str | None = None
    queue: Queue2 | None = None
    clients: tuple[str, ...] = ()
    address: str | None = None
    brokers: tuple[str, ...] = ()
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
        return json.dumps({
            "system": self.system, "group": self.group, "cluster": self.cluster,
            "queues": [[q.topic, q.broker, q.queue_id, q.in_route, q.reported, q.rerun, q.target]
                       for q in self.queues],
            "members": [m.__dict__ for m in self.members],
            "findings": [f.__dict__ for f in self.findings]},
            separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> GroupDetail:
        data = json.loads(payload)
        queues = tuple(QueueOwners(topic, broker, queue_id, in_route, _refs(reported),
                                   _refs(rerun), _refs(target))
                       for topic, broker, queue_id, in_route, reported, rerun, target
                       in data["queues"])
        members = tuple(MemberDetail(
            m["client_id"], m["address"], tuple(m["topics"]), m["strategy"], m["model"],
            m["shared"], _tuple(m["view_clients"]),
            None if m["view_queues"] is None else
            {t: tuple(map(tuple, q)) for t, q in m["view_queues"].items()},
            None if m["owned"] is None else tuple(map(tuple, m["owned"])), tuple(m["brokers"]))
            for m in data["members"])
        findings = tuple(OpenFinding(
            f["kind"], f["since"], f["topic"], _tuple(f["queue"]), tuple(f["clients"]),
            f["address"], tuple(f["brokers"]), f["detail"]) for f in data["findings"])
        return cls(data["system"], data["group"], queues, members, findings, data["cluster"])


def _refs(rows: Iterable[Sequence[str]]) -> tuple[MemberRef, ...]:
    return tuple((client_id, address) for client_id, address in rows)


_T = TypeVar("_T")


def _tuple(value: Iterable[_T] | None) -> tuple[_T, ...] | None:
    return None if value is None else tuple(value)


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
        return json.dumps(self.__dict__).encode()

    @classmethod
    def from_json(cls, payload: bytes | str) -> ShardCounts:
        return cls(**json.loads(payload))


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
