"""Prometheus exposition of the monitor's per-group snapshots and its own health.

One custom Collector builds fresh metric families from the current snapshots on every scrape,
so a group that disappears leaves no stale series behind. Nothing is registered at import time:
the caller passes a registry in.

    store = SnapshotStore()
    registry = CollectorRegistry()
    registry.register(RebalanceCollector(store))
    store.replace_group(metrics)       # a GroupMetrics, from the streaming job's foreachBatch
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streaming.core.contract import RESET_CAUSES, FindingRecord, GroupKey, GroupMetrics
from streaming.exporter.details import GroupDetails
from streaming.exporter.history import GroupHistories

GROUP_LABELS = ["system", "group", "cluster"]

# (metric name, help, value of a GroupMetrics). Each is one gauge per group.
GROUP_GAUGES = (
    ("rebalance_group_members", "Live members (processes) of the group.", attrgetter("members")),
    ("rebalance_skew_ratio", "Max client load / ceil(queues / clients); 1.0 is even.",
     attrgetter("skew_ratio")),
    ("rebalance_idle_clients", "Clients with no queue while another has 2 or more.",
     attrgetter("idle_clients")),
    ("rebalance_subscription_inconsistent",
     "1 when the group's clients subscribe to different topic sets.",
     attrgetter("subscription_inconsistent")),
    ("rebalance_strategy_inconsistent",
     "1 when the group's clients use different strategies or params.",
     attrgetter("strategy_inconsistent")),
    ("rebalance_client_id_collisions", "Client ids used by two or more processes (addresses).",
     attrgetter("client_id_collisions")),
    ("rebalance_view_divergent_clients",
     "Clients whose view (queues, client list) differs from the consensus.",
     attrgetter("view_divergent_clients")),
    ("rebalance_broker_view_divergent", "1 when brokers hold different member lists for the group.",
     attrgetter("broker_view_divergent")),
    ("rebalance_allocation_mismatch_clients",
     "Clients whose reported queues differ from the re-run.",
     attrgetter("allocation_mismatch_clients")),
    ("rebalance_holdings_pending_clients",
     "Clients whose reported queues predate a route change of their topics (not yet asked again).",
     attrgetter("holdings_pending_clients")),
    ("rebalance_strategy_unknown_clients",
     "Clients whose strategy is a guess: no finding rests on their re-run.",
     attrgetter("strategy_unknown_clients")),
)

# (metric name, help, topic -> value of a GroupMetrics). One gauge per group and topic.
TOPIC_GAUGES = (
    ("rebalance_group_queues", "Readable queues (partitions) of the topic in the current route.",
     attrgetter("queues")),
    ("rebalance_double_assigned_queues",
     "Queues claimed by two or more live clients (double consumption).",
     attrgetter("double_assigned")),
    ("rebalance_orphaned_queues", "Queues of the current route that no live client claims.",
     attrgetter("orphaned")),
)

GROUP_COUNTERS = (
    ("rebalance_rebalances", "Times the group's allocation changed.", attrgetter("rebalances_total")),
    ("rebalance_assignor_changes",
     "Times the group's assignor (the strategy most members use) changed.",
     attrgetter("assignor_changes_total")),
    ("rebalance_queue_moves", "Queue ownership transfers.", attrgetter("queue_moves_total")),
    ("rebalance_late_events",
     "Events that came behind the group's reorder window and were merged (the newer fact won).",
     attrgetter("late_events_total")),
    ("rebalance_alive_unknown_members",
     "Members an alive event named that the group did not hold (never heard in full, or gone).",
     attrgetter("alive_unknown_members_total")),
)


# Groups the broker assigns (Kafka KIP-848 consumer groups, share groups, streams groups) only.
KAFKA_GROUP_GAUGES = (
    ("rebalance_kafka_reconciling_members",
     "Members whose current assignment is not yet their target, or whose epoch lags it.",
     attrgetter("reconciling_members")),
    ("rebalance_kafka_max_epoch_lag",
     "The most target-assignment epochs a member has not caught up with.",
     attrgetter("max_epoch_lag")),
    ("rebalance_kafka_group_epoch", "The group's epoch (bumped by every membership change).",
     lambda m: -1 if m.group_epoch is None else m.group_epoch),
    ("rebalance_kafka_assignment_epoch", "The epoch of the broker's target assignment.",
     lambda m: -1 if m.assignment_epoch is None else m.assignment_epoch),
    ("rebalance_kafka_target_skew_ratio",
     "Max member load in the broker's target / ceil(partitions / members); 1.0 is even.",
     attrgetter("target_skew_ratio")),
    ("rebalance_kafka_streams_not_ready",
     "1 while a streams group is NotReady: no configured topology, so no task is assigned.",
     attrgetter("streams_not_ready")),
)
# RocketMQ groups only.
ROCKETMQ_TOPIC_GAUGES = (
    ("rebalance_pop_max_readers",
     "POP consumers: the most members reading one queue of the topic (several by design).",
     attrgetter("share_readers")),
    ("rebalance_broker_split_queues",
     "clientRebalance=false: queues of the topic that two brokers assign to different clients.",
     attrgetter("broker_split")),
)
KAFKA_TOPIC_GAUGES = (
    ("rebalance_kafka_target_unassigned_partitions",
     "Partitions of the topic in no member's target assignment (consumer groups).",
     attrgetter("target_unassigned")),
    ("rebalance_kafka_share_max_readers",
     "Share groups: the most members reading one partition of the topic (several by design).",
     attrgetter("share_readers")),
    ("rebalance_kafka_streams_standby_with_active_tasks",
     "Streams groups: tasks with a standby or warm-up copy on their active owner's process.",
     attrgetter("standby_with_active")),
    ("rebalance_kafka_streams_standby_missing_tasks",
     "Streams groups: tasks copied on fewer processes than num.standby.replicas wants.",
     attrgetter("standby_missing")),
)


@dataclass
class JobHealth:
    """The job's own state, updated once per micro-batch."""

    events_total: dict[str, int] = field(default_factory=dict)
    invalid_events_total: dict[str, int] = field(default_factory=dict)
    batch_duration_seconds: float = 0.0
    last_batch_timestamp_seconds: float = 0.0
    max_event_time_ms: int = 0
    source_records_total: int = 0
    rows_dropped_by_watermark_total: int = 0
    unaccounted_records_total: int = 0
    state_resets_total: dict[str, int] = field(default_factory=dict)
    clusters: dict[str, tuple[int, bool]] = field(default_factory=dict)   # newest ms, silent
    stale_groups: list[GroupKey] = field(default_factory=list)


@dataclass(frozen=True)
class HealthView:
    """The job's health and how many groups it tracks, read together."""

    health: JobHealth
    groups: int


@dataclass(frozen=True)
class ClientSeriesPolicy:
    """Per-client series are on by default; they can be switched off or capped per group."""

    enabled: bool = True
    max_per_group: int = 500


class GroupText(Protocol):
    """What keeps the groups' exposition text (exposition.GroupFamiliesText)."""

    def put(self, metrics: GroupMetrics) -> None: ...

    def remove(self, key: GroupKey) -> None: ...


class SnapshotStore:
    """Thread-safe latest metrics per (system, group), plus job health. Written by the job's
    foreachBatch on the driver, read by the scrape thread. A `text` is kept up to date with the
    groups; `details` holds each group's latest detail and `history` its recent findings and
    rebalances (the group API's), both removed with it."""

    def __init__(self, text: GroupText | None = None,
                 history: GroupHistories | None = None) -> None:
        self._lock = threading.Lock()
        self._batch = threading.RLock()
        self._text = text
        self._groups: dict[GroupKey, GroupMetrics] = {}
        self._health = JobHealth()
        self._recent_findings: deque[FindingRecord] = deque(maxlen=200)
        self.details = GroupDetails()
        self.history = history if history is not None else GroupHistories()

    def batch(self) -> threading.RLock:
        """Held by the sink while it applies a batch: its groups, findings and counts. A reader
        that holds it sees every batch whole: never a batch's counts without its groups, nor
        its groups without its counts."""
        return self._batch

    def replace_group(self, metrics: GroupMetrics, restored: bool = False) -> None:
        """The group's latest metrics; `restored`: as a restart reads them from the checkpoint
        (their counters count from before the start)."""
        if self._text is not None:
            self._text.put(metrics)
        with self._lock:
            before = self._groups.get(metrics.key)
            self._groups[metrics.key] = metrics
        self.history.record_metrics(before, metrics, restored)

    def remove_group(self, key: GroupKey) -> None:
        if self._text is not None:
            self._text.remove(key)
        with self._lock:
            self._groups.pop(key, None)
        self.details.remove(key)
        self.history.remove(key)

    def update_health(self, **changes) -> None:
        """Change some JobHealth fields; the sink and the progress listener each own theirs."""
        with self._lock:
            self._health = replace(self._health, **changes)

    def record_finding(self, record: FindingRecord) -> None:
        """Keep the latest finding records (started / ended) for live views such as the demo,
        and in the group's history."""
        with self._lock:
            self._recent_findings.append(record)
        self.history.record_finding(record)

    def recent_findings(self, limit: int = 20) -> list[FindingRecord]:
        with self._lock:
            return list(self._recent_findings)[-limit:]

    def group_keys(self) -> list[GroupKey]:
        with self._lock:
            return list(self._groups)

    def group(self, key: GroupKey) -> GroupMetrics | None:
        with self._lock:
            return self._groups.get(key)

    def group_count(self) -> int:
        with self._lock:
            return len(self._groups)

    def groups(self) -> list[GroupMetrics]:
        with self._lock:
            return [self._groups[k] for k in sorted(self._groups)]

    def health(self) -> JobHealth:
        with self._lock:
            return self._health

    def health_view(self) -> HealthView:
        with self._lock:
            return HealthView(self._health, len(self._groups))


class RebalanceCollector(Collector):
    """Builds every rebalance_* family from a SnapshotStore on each scrape: the per-group families,
    then the job's own (JobHealthCollector). The job serves the per-group families as text kept
    rendered (exposition.GroupFamiliesText); this collector is what that text must equal."""

    def __init__(self, store: SnapshotStore, clients: ClientSeriesPolicy = ClientSeriesPolicy(),
                 clock=time.time) -> None:
        self._store = store
        self._clients = clients
        self._health = JobHealthCollector(store, clock)

    def collect(self) -> Iterator[Metric]:
        with self._store.batch():
            groups, view = self._store.groups(), self._store.health_view()
        yield from group_families(groups, view.health, self._clients)
        yield from self._health.families(view)

    def describe(self) -> list[Metric]:
        """The families, without samples: lets the registry answer a scrape that asks for some
        (`/metrics?name[]=rebalance_double_assigned_queues`) with just those."""
        return [*group_families([], JobHealth(), self._clients), *self._health.describe()]


def group_families(groups: list[GroupMetrics], health: JobHealth,
                   clients: ClientSeriesPolicy) -> Iterator[Metric]:
    """The per-group families, in exposition order, with the samples of `groups`."""
    yield from _per_group(GaugeMetricFamily, GROUP_GAUGES, groups)
    yield from _per_topic(TOPIC_GAUGES, groups)
    yield from _per_group(CounterMetricFamily, GROUP_COUNTERS, groups)
    yield conflict_age(groups, health)
    yield _group_info(groups)
    yield from _per_topic(ROCKETMQ_TOPIC_GAUGES,
                          [group for group in groups if group.system == "rocketmq"])
    assigned = [group for group in groups if group.broker_assigned]
    yield from _per_group(GaugeMetricFamily, KAFKA_GROUP_GAUGES, assigned)
    yield from _per_topic(KAFKA_TOPIC_GAUGES, assigned)
    yield handoff_age(groups, health)
    if clients.enabled:
        yield _client_queues(groups, clients.max_per_group)


def _per_group(kind, specs, groups: list[GroupMetrics]) -> Iterator[Metric]:
    """One family per (name, help, value of a GroupMetrics), a sample per group."""
    for name, doc, value_of in specs:
        family = kind(name, doc, labels=GROUP_LABELS)
        for group in groups:
            family.add_metric(list(group.key), float(value_of(group)))
        yield family


def _per_topic(specs, groups: list[GroupMetrics]) -> Iterator[Metric]:
    """One gauge family per (name, help, topic -> value of a GroupMetrics)."""
    for name, doc, values_of in specs:
        family = GaugeMetricFamily(name, doc, labels=GROUP_LABELS + ["topic"])
        for group in groups:
            for topic, value in sorted(values_of(group).items()):
                family.add_metric([*group.key, topic], float(value))
        yield family


def _group_info(groups: list[GroupMetrics]) -> Metric:
    family = GaugeMetricFamily(
        "rebalance_group_info",
        "1 per group, labelled with its assignor and (Kafka) its type: classic, consumer "
        "(KIP-848), share (KIP-932) or streams (KIP-1071).", labels=GROUP_LABELS + ["group_type", "assignor"])
    for group in groups:
        family.add_metric([*group.key, group.group_type, group.assignor], 1.0)
    return family


def _client_queues(groups: list[GroupMetrics], max_per_group: int) -> Metric:
    family = GaugeMetricFamily(
        "rebalance_client_queues", "Queues the monitor's re-run gives this client.",
        labels=GROUP_LABELS + ["client"])
    for group in groups:
        loads = sorted(group.client_queues.items())
        # Keep the most loaded clients when capping: they are the ones an operator looks for.
        if len(loads) > max_per_group:
            loads = sorted(loads, key=lambda kv: (-kv[1], kv[0]))[:max_per_group]
        for client, value in loads:
            family.add_metric([*group.key, client], float(value))
    return family


class JobHealthCollector(Collector):
    """The job's own families from a SnapshotStore's JobHealth: events, rejects, batches, lag and
    the number of groups tracked. `view`, when given, is where the health is read instead of
    the store (the view a rendered text of the groups was taken with)."""

    def __init__(self, store: SnapshotStore, clock=time.time,
                 view: Callable[[], HealthView] | None = None) -> None:
        self._view = view or store.health_view
        self._clock = clock

    def describe(self) -> list[Metric]:
        return list(JobHealthCollector(SnapshotStore(), self._clock).collect())

    def collect(self) -> Iterator[Metric]:
        return self.families(self._view())

    def families(self, view: HealthView) -> Iterator[Metric]:
        health = view.health
        events = CounterMetricFamily(
            "rebalance_monitor_events", "Valid events applied, by type.", labels=["type"])
        for event_type, count in sorted(health.events_total.items()):
            events.add_metric([event_type], float(count))
        yield events
        invalid = CounterMetricFamily(
            "rebalance_monitor_invalid_events",
            "Events rejected (and sent to the dead-letter topic), by reason.", labels=["reason"])
        for reason, count in sorted(health.invalid_events_total.items()):
            invalid.add_metric([reason], float(count))
        yield invalid
        yield CounterMetricFamily(
            "rebalance_monitor_source_records",
            "Records the source read from the events topic (Spark's numInputRows).",
            value=health.source_records_total)
        yield CounterMetricFamily(
            "rebalance_monitor_rows_dropped_by_watermark",
            "Rows Spark's stateful operator dropped behind the watermark (must stay 0).",
            value=health.rows_dropped_by_watermark_total)
        yield CounterMetricFamily(
            "rebalance_monitor_unaccounted_records",
            "Records read that were neither applied nor dead-lettered, summed over batches "
            "(must stay 0).", value=health.unaccounted_records_total)
        resets = CounterMetricFamily(
            "rebalance_monitor_state_resets",
            "Stored group states that could not be read and were rebuilt from the groups' next "
            "events, by cause (must stay 0).", labels=["cause"])
        for cause in RESET_CAUSES:
            resets.add_metric([cause], float(health.state_resets_total.get(cause, 0)))
        yield resets
        yield from _cluster_families(health)
        yield GaugeMetricFamily("rebalance_monitor_batch_duration_seconds",
                                "Wall time of the last micro-batch (Spark's triggerExecution).",
                                value=health.batch_duration_seconds)
        yield GaugeMetricFamily("rebalance_monitor_last_batch_timestamp_seconds",
                                "Unix time the last micro-batch finished.",
                                value=health.last_batch_timestamp_seconds)
        lag = 0.0
        if health.max_event_time_ms:
            lag = max(0.0, self._clock() - health.max_event_time_ms / 1000.0)
        yield GaugeMetricFamily("rebalance_monitor_input_lag_seconds",
                                "Now minus the newest valid event time the job has read.", value=lag)
        yield GaugeMetricFamily("rebalance_monitor_groups", "Groups tracked.", value=view.groups)


def _cluster_families(health: JobHealth) -> Iterator[Metric]:
    newest = GaugeMetricFamily(
        "rebalance_cluster_last_event_time_seconds",
        "Newest event time of each cluster (as its producers name it in the events).",
        labels=["cluster"])
    silent = GaugeMetricFamily(
        "rebalance_cluster_silent",
        "1 when a cluster has written nothing for --cluster-silence-ms of the job's event time.",
        labels=["cluster"])
    for cluster, (newest_ms, is_silent) in sorted(health.clusters.items()):
        newest.add_metric([cluster], newest_ms / 1000.0)
        silent.add_metric([cluster], 1.0 if is_silent else 0.0)
    stale = GaugeMetricFamily(
        "rebalance_group_stale",
        "1 for each group whose cluster is silent: it shows its state from before the silence.",
        labels=GROUP_LABELS)
    for key in health.stale_groups:
        stale.add_metric(list(key), 1.0)
    yield from (newest, silent, stale)


def conflict_age(groups: list[GroupMetrics], health: JobHealth) -> Metric:
    return _age("rebalance_conflict_age_seconds",
                "Event time since the oldest current double assignment or orphan began "
                "(0 when none).", attrgetter("conflict_since_ms"), groups, health)


def handoff_age(groups: list[GroupMetrics], health: JobHealth) -> Metric:
    """Of the groups the broker assigns."""
    return _age("rebalance_kafka_handoff_age_seconds",
                "Event time since the oldest hand-off still in progress began: a member not yet "
                "at its target assignment (0 when none).", attrgetter("handoff_since_ms"),
                [group for group in groups if group.broker_assigned], health)


# (family name, since of a GroupMetrics, the family for some groups): the families whose value
# moves with the job's clock, rendered at each scrape for the groups with an open `since`.
AGE_FAMILIES = (
    ("rebalance_conflict_age_seconds", attrgetter("conflict_since_ms"), conflict_age),
    ("rebalance_kafka_handoff_age_seconds", attrgetter("handoff_since_ms"), handoff_age),
)


def _age(name: str, doc: str, since_of, groups: list[GroupMetrics], health: JobHealth) -> Metric:
    # Age is measured on the job's event-time clock (the newest event time it has seen), so a
    # replay or a simulated fleet gives the same ages as the live run did.
    family = GaugeMetricFamily(name, doc, labels=GROUP_LABELS)
    for group in groups:
        since = since_of(group)
        now_ms = max(health.max_event_time_ms, group.event_time_ms)
        age = 0.0 if since is None else max(0.0, (now_ms - since) / 1000.0)
        family.add_metric(list(group.key), age)
    return family
