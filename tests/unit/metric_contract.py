"""The metric names the job exports (issue 4's contract) and a PromQL metric-name extractor.

Shared by the rule and dashboard tests: a rule or panel may only read these series and the
recording rules defined in dashboards/prometheus/rules/. Not a test module itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "dashboards" / "prometheus" / "rules"
RULE_FILES = sorted(RULES_DIR.glob("*.yml"))

GROUP_METRICS = frozenset({
    "rebalance_group_members", "rebalance_group_queues", "rebalance_double_assigned_queues",
    "rebalance_orphaned_queues", "rebalance_conflict_age_seconds", "rebalance_skew_ratio",
    "rebalance_idle_clients", "rebalance_subscription_inconsistent",
    "rebalance_strategy_inconsistent", "rebalance_client_id_collisions",
    "rebalance_view_divergent_clients", "rebalance_allocation_mismatch_clients",
    "rebalance_holdings_pending_clients", "rebalance_strategy_unknown_clients",
    "rebalance_broker_view_divergent", "rebalance_rebalances_total", "rebalance_queue_moves_total",
    "rebalance_late_events_total",
    "rebalance_alive_unknown_members_total",
    "rebalance_client_queues", "rebalance_group_info", "rebalance_assignor_changes_total",
    "rebalance_kafka_reconciling_members", "rebalance_kafka_max_epoch_lag",
    "rebalance_kafka_group_epoch", "rebalance_kafka_assignment_epoch",
    "rebalance_kafka_target_skew_ratio", "rebalance_kafka_target_unassigned_partitions",
    "rebalance_kafka_streams_not_ready", "rebalance_kafka_streams_standby_with_active_tasks",
    "rebalance_kafka_streams_standby_missing_tasks",
    "rebalance_kafka_handoff_age_seconds", "rebalance_kafka_share_max_readers",
    "rebalance_pop_max_readers", "rebalance_broker_split_queues",
})
HEALTH_METRICS = frozenset({
    "rebalance_monitor_events_total", "rebalance_monitor_invalid_events_total",
    "rebalance_monitor_batch_duration_seconds", "rebalance_monitor_last_batch_timestamp_seconds",
    "rebalance_monitor_input_lag_seconds", "rebalance_monitor_groups",
    "rebalance_monitor_source_up", "rebalance_monitor_source_errors_total",
    "rebalance_monitor_source_last_success_timestamp_seconds",
    "rebalance_monitor_produce_errors_total", "rebalance_monitor_undelivered_records_total",
    "rebalance_monitor_truncated_records_total", "rebalance_monitor_query_restarts_total",
    "rebalance_monitor_source_records_total", "rebalance_monitor_rows_dropped_by_watermark_total",
    "rebalance_monitor_unaccounted_records_total", "rebalance_monitor_state_resets_total",
    "rebalance_cluster_last_event_time_seconds",
    "rebalance_cluster_silent", "rebalance_group_stale",
})
# What the producer commands serve (producers/health.py), and Prometheus's own `up`.
PRODUCER_METRICS = frozenset({
    "up", "rebalance_observer_last_success_timestamp_seconds",
    "rebalance_observer_poll_failures_total", "rebalance_observer_group_errors_total",
    "rebalance_observer_events_total", "rebalance_observer_groups", "rebalance_observer_members",
    "rebalance_simulator_events_total", "rebalance_observer_unwatchable_group_types",
})
CONTRACT_METRICS = GROUP_METRICS | HEALTH_METRICS | PRODUCER_METRICS

_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                       "group_left", "group_right", "inf", "nan", "atan2"})
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:]|\s*\()")
# Grafana's variable query label_values(metric, label) reads `metric` (the label is not a name).
_LABEL_VALUES = re.compile(r"label_values\(\s*(?:(.+?)\s*,\s*)?\w+\s*\)")


def metric_names(expr: str) -> set[str]:
    """Metric names an expression reads, e.g.
    metric_names('sum by (group) (rate(rebalance_rebalances_total{group="$group"}[5m]))')
    == {"rebalance_rebalances_total"}."""
    text = _LABEL_VALUES.sub(lambda m: m.group(1) or " ", expr)
    text = _GRAFANA_VARIABLE.sub("1", text)
    for pattern in (_STRING, _MATCHERS, _RANGES, _GROUPING):
        text = pattern.sub(" ", text)
    return {name for name in _NAME.findall(text) if name not in _KEYWORDS}


def load_rules() -> list[dict]:
    rules = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            rules.extend(group["rules"])
    return rules


def recording_rule_names() -> set[str]:
    return {rule["record"] for rule in load_rules() if "record" in rule}
