"""Where an alert's runbook is: its section of docs/metrics.md, whose heading is the alert's name,
so its anchor is the name in lower case. The alert rules' `runbook_url` annotations
(streaming/alert_rules.py) and the group pages' links to a finding's runbook are both built here.

    >>> runbook_url("https://wiki.example.com/metrics.md", alert_anchor("RebalanceStorm"))
    'https://wiki.example.com/metrics.md#rebalancestorm'
    >>> finding_runbook_url("https://wiki.example.com/metrics.md", "double_assignment")
    'https://wiki.example.com/metrics.md#rebalancedoubleassignment'
"""

from __future__ import annotations

# The alert whose runbook section tells what to do about each kind of finding: the alert the
# finding's metric raises, or, for idle_client and broker_view_divergent, the alert whose
# section names them as its symptom or cause.
FINDING_ALERTS = {
    "double_assignment": "RebalanceDoubleAssignment",
    "orphaned_queue": "RebalanceOrphanedQueues",
    "skew": "RebalanceMultiTopicSkew",
    "idle_client": "RebalanceMultiTopicSkew",
    "subscription_inconsistent": "RebalanceSubscriptionInconsistent",
    "strategy_inconsistent": "RebalanceStrategyInconsistent",
    "client_id_collision": "RebalanceClientIdCollision",
    "broker_split_view": "RebalanceBrokerSplitView",
    "broker_view_divergent": "RebalanceBrokerSplitView",
    "handoff_pending": "RebalanceKafkaHandoffStuck",
    "target_unassigned": "RebalanceKafkaTargetUnassigned",
    "target_skew": "RebalanceKafkaTargetSkew",
    "strategy_unknown": "RebalanceStrategyUnknown",
    "streams_not_ready": "RebalanceKafkaStreamsNotReady",
    "standby_with_active": "RebalanceKafkaStreamsStandbyWithActive",
    "standby_missing": "RebalanceKafkaStreamsStandbyMissing",
}
# Kinds no alert is about (their metrics are documented, with no runbook of their own).
WITHOUT_RUNBOOK = frozenset({"view_divergent", "allocation_mismatch", "holdings_pending"})


def alert_anchor(alert: str) -> str:
    return alert.lower()


def runbook_url(base_url: str, anchor: str) -> str:
    return f"{base_url}#{anchor}"


def finding_runbook_url(base_url: str, kind: str) -> str | None:
    """The runbook of a finding's kind on `base_url` (the operator's copy of docs/metrics.md);
    None for a kind without one."""
    alert = FINDING_ALERTS.get(kind)
    return None if alert is None else runbook_url(base_url, alert_anchor(alert))
