"""Prometheus exposition of the monitor's per-group snapshots and its own health.

One custom Collector builds fresh metric families from the current snapshots on every scrape,
so a group that disappears leaves no stale series behind. Nothing is registered at import time:
the caller passes a registry in.

    store = SnapshotStore()
    registry = CollectorRegistry()
    registry.register(RebalanceCollector(store))
    store.replace_group("cg-orders", snapshot)      # from the streaming job's foreachBatch
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

GROUP_LABELS = ["system", "group"]

# snapshot key -> (metric name, help). Each is one gauge per group.
GROUP_GAUGES = {
    "members": ("rebalance_group_members", "Live members (processes) of the group."),
    "skew_ratio": ("rebalance_skew_ratio", "Max client load / ceil(queues / clients); 1.0 is even."),
    "idle_clients": ("rebalance_idle_clients", "Clients with no queue while another has 2 or more."),
    "subscription_inconsistent": (
        "rebalance_subscription_inconsistent", "1 when the group's clients subscribe to different topic sets."),
    "strategy_inconsistent": (
        "rebalance_strategy_inconsistent", "1 when the group's clients use different strategies or params."),
    "client_id_collisions": (
        "rebalance_client_id_collisions", "Client ids used by two or more processes (addresses)."),
    "view_divergent_clients": (
        "rebalance_view_divergent_clients", "Clients whose view (queues, client list) differs from the consensus."),
    "broker_view_divergent": (
        "rebalance_broker_view_divergent", "1 when brokers hold different member lists for the group."),
    "allocation_mismatch_clients": (
        "rebalance_allocation_mismatch_clients", "Clients whose reported queues differ from the re-run."),
}

# snapshot key -> (metric name, help). One gauge per group and topic.
TOPIC_GAUGES = {
    "queues": ("rebalance_group_queues", "Readable queues (partitions) of the topic in the current route."),
    "double_assigned": (
        "rebalance_double_assigned_queues", "Queues claimed by two or more live clients (double consumption)."),
    "orphaned": ("rebalance_orphaned_queues", "Queues of the current route that no live client claims."),
}

GROUP_COUNTERS = {
    "rebalances_total": ("rebalance_rebalances", "Times the group's allocation changed."),
    "queue_moves_total": ("rebalance_queue_moves", "Queue ownership transfers."),
}


@dataclass
class JobHealth:
    """The job's own state, updated once per micro-batch."""

    events_total: dict[str, int] = field(default_factory=dict)
    invalid_events_total: dict[str, int] = field(default_factory=dict)
    batch_duration_seconds: float = 0.0
    last_batch_timestamp_seconds: float = 0.0
    max_event_time_ms: int = 0


@dataclass(frozen=True)
class ClientSeriesPolicy:
    """Per-client series are on by default; they can be switched off or capped per group."""

    enabled: bool = True
    max_per_group: int = 500


class SnapshotStore:
    """Thread-safe latest snapshot per (system, group), plus job health. Written by the job's
    foreachBatch on the driver, read by the scrape thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: dict[tuple[str, str], dict] = {}
        self._health = JobHealth()
        self._recent_findings: deque[dict] = deque(maxlen=200)

    def replace_group(self, snapshot: Mapping) -> None:
        key = (snapshot.get("system", "rocketmq"), snapshot["group"])
        with self._lock:
            self._groups[key] = dict(snapshot)

    def remove_group(self, system: str, group: str) -> None:
        with self._lock:
            self._groups.pop((system, group), None)

    def update_health(self, **changes) -> None:
        """Change some JobHealth fields; the sink and the progress listener each own theirs."""
        with self._lock:
            self._health = replace(self._health, **changes)

    def record_finding(self, change: Mapping) -> None:
        """Keep the latest finding records (started / ended) for live views such as the demo."""
        with self._lock:
            self._recent_findings.append(dict(change))

    def recent_findings(self, limit: int = 20) -> list[dict]:
        with self._lock:
            return list(self._recent_findings)[-limit:]

    def group(self, system: str, group: str) -> dict | None:
        with self._lock:
            return self._groups.get((system, group))

    def groups(self) -> list[dict]:
        with self._lock:
            return [self._groups[k] for k in sorted(self._groups)]

    def health(self) -> JobHealth:
        with self._lock:
            return self._health


class RebalanceCollector(Collector):
    """Builds every rebalance_* family from a SnapshotStore on each scrape."""

    def __init__(self, store: SnapshotStore, clients: ClientSeriesPolicy = ClientSeriesPolicy(),
                 clock=time.time) -> None:
        self._store = store
        self._clients = clients
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        groups = self._store.groups()
        health = self._store.health()
        yield from self._group_metrics(groups, health)
        yield from self._health_metrics(groups, health)

    def describe(self) -> list[Metric]:
        """The families, without samples: lets the registry answer a scrape that asks for some
        (`/metrics?name[]=rebalance_double_assigned_queues`) with just those."""
        return list(RebalanceCollector(SnapshotStore(), self._clients, self._clock).collect())

    def _group_metrics(self, groups: list[dict], health: JobHealth) -> Iterator[Metric]:
        for key, (name, doc) in GROUP_GAUGES.items():
            family = GaugeMetricFamily(name, doc, labels=GROUP_LABELS)
            for snap in groups:
                family.add_metric(_group_labels(snap), float(snap.get(key) or 0))
            yield family
        for key, (name, doc) in TOPIC_GAUGES.items():
            family = GaugeMetricFamily(name, doc, labels=GROUP_LABELS + ["topic"])
            for snap in groups:
                for topic, value in sorted((snap.get(key) or {}).items()):
                    family.add_metric(_group_labels(snap) + [topic], float(value))
            yield family
        for key, (name, doc) in GROUP_COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=GROUP_LABELS)
            for snap in groups:
                family.add_metric(_group_labels(snap), float(snap.get(key) or 0))
            yield family
        yield _conflict_age(groups, health)
        if self._clients.enabled:
            yield self._client_queues(groups)

    def _client_queues(self, groups: list[dict]) -> Metric:
        family = GaugeMetricFamily(
            "rebalance_client_queues", "Queues the monitor's re-run gives this client.",
            labels=GROUP_LABELS + ["client"])
        for snap in groups:
            loads = sorted((snap.get("client_queues") or {}).items())
            # Keep the most loaded clients when capping: they are the ones an operator looks for.
            if len(loads) > self._clients.max_per_group:
                loads = sorted(loads, key=lambda kv: (-kv[1], kv[0]))[: self._clients.max_per_group]
            for client, value in loads:
                family.add_metric(_group_labels(snap) + [client], float(value))
        return family

    def _health_metrics(self, groups: list[dict], health: JobHealth) -> Iterator[Metric]:
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
                                "Now minus the newest event time the job has applied.", value=lag)
        yield GaugeMetricFamily("rebalance_monitor_groups", "Groups tracked.", value=len(groups))


def _group_labels(snap: Mapping) -> list[str]:
    return [snap.get("system", "rocketmq"), snap["group"]]


def _conflict_age(groups: list[dict], health: JobHealth) -> Metric:
    # Age is measured on the job's event-time clock (the newest event time it has seen), so a
    # replay or a simulated fleet gives the same ages as the live run did.
    family = GaugeMetricFamily(
        "rebalance_conflict_age_seconds",
        "Event time since the oldest current double assignment or orphan began (0 when none).",
        labels=GROUP_LABELS)
    for snap in groups:
        since = snap.get("conflict_since_ms")
        now_ms = max(health.max_event_time_ms, snap.get("event_time_ms") or 0)
        age = 0.0 if since is None else max(0.0, (now_ms - since) / 1000.0)
        family.add_metric(_group_labels(snap), age)
    return family
