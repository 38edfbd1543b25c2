"""Alert and recording rules: promtool's own checks and unit tests, plus the rule contract.

The promtool unit tests (dashboards/prometheus/tests/*.test.yml) prove that each alert fires on
the series that should fire it, is silent while pending and on a transient shorter than its
`for`. Needs the Debian `promtool` (and `amtool` from prometheus-alertmanager): skipped locally
when missing, a failure when CI=true.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest
import yaml

from streaming.alert_rules import with_runbook_base_url
from streaming.common.runbooks import (
    FINDING_ALERTS,
    WITHOUT_RUNBOOK,
    alert_anchor,
    finding_runbook_url,
    runbook_url,
)
from streaming.core.findings import KINDS
from tests.unit.metric_contract import (
    CONTRACT_METRICS,
    REPO,
    RULE_FILES,
    load_rules,
    metric_names,
    recording_rule_names,
)

pytestmark = pytest.mark.unit

PROMETHEUS_DIR = REPO / "dashboards" / "prometheus"
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.test.yml"))
ALERTMANAGER_CONFIG = REPO / "dashboards" / "alertmanager" / "alertmanager.yml"
METRICS_DOC = REPO / "docs" / "metrics.md"
# Where the shipped rules link each alert's runbook (docs/metrics.md as published);
# `rebalance-monitor alert-rules --runbook-base-url` moves them (test_alert_rules_command.py).
SHIPPED_RUNBOOK_BASE = "https://rebalance-monitor.example/docs/metrics.md"

# alert -> (severity, for); the issue fixes these.
REQUIRED_ALERTS = {
    "RebalanceDoubleAssignment": ("critical", "1m"),
    "RebalanceOrphanedQueues": ("critical", "2m"),
    "RebalanceMultiTopicSkew": ("warning", "15m"),
    "RebalanceSubscriptionInconsistent": ("warning", "5m"),
    "RebalanceStrategyInconsistent": ("warning", "5m"),
    "RebalanceClientIdCollision": ("critical", "1m"),
    "RebalanceStorm": ("warning", "10m"),
    "RebalanceAssignorChanged": ("warning", None),
    "RebalanceAliveUnknownMembers": ("warning", None),
    "RebalanceStrategyUnknown": ("warning", "10m"),
    "RebalanceKafkaHandoffStuck": ("critical", "2m"),
    "RebalanceKafkaTargetUnassigned": ("critical", "5m"),
    "RebalanceKafkaTargetSkew": ("warning", "15m"),
    "RebalanceKafkaStreamsNotReady": ("critical", "2m"),
    "RebalanceKafkaStreamsStandbyWithActive": ("warning", "10m"),
    "RebalanceKafkaStreamsStandbyMissing": ("warning", "10m"),
    "RebalanceBrokerSplitView": ("critical", "5m"),
    "RebalanceMonitorStalled": ("critical", None),
    "RebalanceMonitorInvalidEvents": ("warning", "10m"),
    "RebalanceMonitorUndeliveredRecords": ("warning", None),
    "RebalanceMonitorQueryRestarts": ("warning", None),
    "RebalanceMonitorLostEvents": ("critical", None),
    "RebalanceMonitorStateReset": ("warning", None),
    "RebalanceClusterSilent": ("critical", "1m"),
    "RebalanceProducerDown": ("critical", "2m"),
    "RebalanceProducerNotPolling": ("critical", "3m"),
    "RebalanceProducerFailing": ("warning", "5m"),
    "RebalanceObserverGroupsUnreadable": ("warning", "10m"),
}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        message = f"{name} not installed (Debian: prometheus / prometheus-alertmanager)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def run(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def alerts() -> list[dict]:
    return [rule for rule in load_rules() if "alert" in rule]


def heading_anchors(markdown: str) -> set[str]:
    """The anchors a Markdown renderer (GitHub's, and most others) gives the headings:
    lower case, punctuation dropped, spaces to hyphens. Lines in code blocks are no headings."""
    anchors, in_code = set(), False
    for line in markdown.splitlines():
        in_code ^= line.startswith("```")
        if not in_code and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_promtool_check_rules_passes():
    result = run(tool("promtool"), "check", "rules", *RULE_FILES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


def test_promtool_check_config_accepts_the_compose_prometheus_config():
    result = run(tool("promtool"), "check", "config", PROMETHEUS_DIR / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rule files found" in result.stdout


def test_amtool_accepts_the_alertmanager_config():
    result = run(tool("amtool"), "check-config", ALERTMANAGER_CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_rule_unit_tests_pass():
    assert [p.name for p in RULE_TESTS] == ["rebalance-alerts.test.yml",
                                           "rebalance-recording.test.yml"]
    result = run(tool("promtool"), "test", "rules", *RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_TESTS)


def test_rule_tests_fail_when_a_for_duration_is_dropped(tmp_path: Path):
    """The 'transient does not fire' cases are live: without `for`, the 45s conflict fires."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    for path in RULE_FILES:
        text = path.read_text()
        if path.name == "rebalance-alerts.yml":
            marker = "expr: rebalance_double_assigned_queues > 0\n        for: 1m\n"
            assert marker in text
            text = text.replace(marker, "expr: rebalance_double_assigned_queues > 0\n")
        (tmp_path / "rules" / path.name).write_text(text)
    test_file = tmp_path / "tests" / "alerts.test.yml"
    shutil.copy(PROMETHEUS_DIR / "tests" / "rebalance-alerts.test.yml", test_file)
    result = run(tool("promtool"), "test", "rules", test_file)
    assert result.returncode == 1
    assert "alertname: RebalanceDoubleAssignment, time: 1m," in result.stderr + result.stdout


def test_every_required_alert_exists_with_severity_for_and_operator_text():
    by_name: dict[str, list[dict]] = {}
    for rule in alerts():
        by_name.setdefault(rule["alert"], []).append(rule)
    assert set(by_name) == set(REQUIRED_ALERTS)
    for name, (severity, for_duration) in REQUIRED_ALERTS.items():
        for rule in by_name[name]:
            assert rule["labels"]["severity"] == severity, name
            if for_duration is not None:
                assert rule.get("for") == for_duration, name
            annotations = rule["annotations"]
            assert set(annotations) - {"group_page_url"} == {"summary", "description",
                                                              "runbook_url"}, name
            assert annotations["runbook_url"] == runbook_url(SHIPPED_RUNBOOK_BASE, alert_anchor(name))
            assert len(annotations["description"]) > 150, f"{name}: say what to do"


def test_alert_thresholds_match_the_issue():
    exprs = {rule["alert"]: rule["expr"] for rule in alerts()}
    assert exprs["RebalanceMultiTopicSkew"] == "rebalance_skew_ratio > 1.5"
    assert exprs["RebalanceDoubleAssignment"] == "rebalance_double_assigned_queues > 0"
    assert exprs["RebalanceOrphanedQueues"] == "rebalance_orphaned_queues > 0"
    stalled = [r for r in alerts() if r["alert"] == "RebalanceMonitorStalled"]
    assert sorted(r["labels"]["stalled"] for r in stalled) == [
        "last_batch_old", "no_batch_timestamp", "source_unreachable"]
    absent_rule = next(r for r in stalled if r["labels"]["stalled"] == "no_batch_timestamp")
    assert absent_rule["expr"].startswith("absent(") and absent_rule["for"] == "5m"


def test_operator_commands_are_named_in_the_descriptions():
    text = {rule["alert"]: rule["annotations"]["description"] for rule in alerts()}
    assert "mqadmin consumerConnection" in text["RebalanceDoubleAssignment"]
    # consumerProgress keeps one client per queue: it hides the very double the alert is about.
    assert "mqadmin consumerStatus" in text["RebalanceDoubleAssignment"]
    assert "consumerProgress shows one client per queue" in text["RebalanceDoubleAssignment"]
    assert "kafka-consumer-groups.sh" in text["RebalanceDoubleAssignment"]
    assert "mqadmin consumerStatus" in text["RebalanceOrphanedQueues"]
    assert "version" in text["RebalanceStrategyInconsistent"]
    assert "restart" in text["RebalanceDoubleAssignment"]
    assert "dead-letter" in text["RebalanceMonitorInvalidEvents"]


def test_no_alert_sends_operators_to_consumer_progress():
    """mqadmin consumerProgress keeps one client per queue, so it shows a doubled queue with a
    single owner: an alert must not send anyone there to check ownership."""
    assert [rule["alert"] for rule in alerts()
            if "mqadmin consumerProgress" in rule["annotations"]["description"]] == []


def test_every_runbook_url_is_absolute_and_lands_on_a_heading_of_the_metrics_doc():
    anchors = heading_anchors(METRICS_DOC.read_text())
    for rule in alerts():
        url = urllib.parse.urlsplit(rule["annotations"]["runbook_url"])
        assert url.scheme == "https" and url.netloc, rule["alert"]
        assert url.fragment in anchors, (rule["alert"], url.fragment)


def test_every_finding_kind_has_its_alerts_runbook_or_is_known_to_have_none():
    """The group page links each finding to its runbook (streaming/common/runbooks.py): a new
    kind must be given an alert's section, or be said to have none."""
    kinds = set(KINDS)
    assert set(FINDING_ALERTS) | WITHOUT_RUNBOOK == kinds
    assert not set(FINDING_ALERTS) & WITHOUT_RUNBOOK
    anchors = heading_anchors(METRICS_DOC.read_text())
    shipped = {rule["alert"]: rule["annotations"]["runbook_url"] for rule in alerts()}
    for kind, alert in FINDING_ALERTS.items():
        url = finding_runbook_url(SHIPPED_RUNBOOK_BASE, kind)
        assert url == shipped[alert], kind          # the very link the alert carries
        assert urllib.parse.urlsplit(url).fragment in anchors, kind


def test_heading_anchors_follow_the_renderers_rule():
    markdown = ("# Metrics and alerts\n### RebalanceStorm\n## 6. /metrics: where\n"
                "not a heading\n```\n# a comment in a code block\n```\n")
    assert heading_anchors(markdown) == {"metrics-and-alerts", "rebalancestorm", "6-metrics-where"}


def test_rule_tests_fail_when_a_runbook_url_moves(tmp_path: Path):
    """The promtool tests assert each runbook_url exactly, host and anchor."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    for path in RULE_FILES:
        text = path.read_text()
        if path.name == "rebalance-alerts.yml":
            text, moved = with_runbook_base_url(text, "https://elsewhere.example/metrics.md")
            assert moved == len(alerts())
        (tmp_path / "rules" / path.name).write_text(text)
    test_file = tmp_path / "tests" / "alerts.test.yml"
    shutil.copy(PROMETHEUS_DIR / "tests" / "rebalance-alerts.test.yml", test_file)
    result = run(tool("promtool"), "test", "rules", test_file)
    assert result.returncode == 1
    assert "https://elsewhere.example/metrics.md#rebalancedoubleassignment" in (
        result.stderr + result.stdout)


def test_rules_read_only_contract_metrics_and_recorded_series():
    known = CONTRACT_METRICS | recording_rule_names()
    for rule in load_rules():
        names = metric_names(rule["expr"])
        assert names, rule
        assert names <= known, (rule.get("alert") or rule.get("record"), names - known)


def test_every_alert_has_a_firing_case_and_a_silent_case_in_the_rule_tests():
    cases = yaml.safe_load((PROMETHEUS_DIR / "tests" / "rebalance-alerts.test.yml").read_text())
    fired, silent = set(), set()
    for test in cases["tests"]:
        for check in test["alert_rule_test"]:
            (fired if check["exp_alerts"] else silent).add(check["alertname"])
    assert fired == set(REQUIRED_ALERTS)
    assert silent == set(REQUIRED_ALERTS)


def test_docs_describe_every_metric_recording_rule_and_alert_with_a_runbook_section():
    docs = METRICS_DOC.read_text()
    for name in sorted(CONTRACT_METRICS | recording_rule_names()):
        assert f"`{name}`" in docs, name
    headings = {line[4:].strip().lower() for line in docs.splitlines() if line.startswith("### ")}
    for rule in alerts():
        assert f"| {rule['alert']}" in docs, rule["alert"]
        assert rule["alert"].lower() in headings, rule["alert"]


GROUP_ALERTS = {"RebalanceDoubleAssignment", "RebalanceOrphanedQueues", "RebalanceMultiTopicSkew",
                "RebalanceSubscriptionInconsistent", "RebalanceStrategyInconsistent",
                "RebalanceClientIdCollision", "RebalanceStorm", "RebalanceAssignorChanged",
                "RebalanceAliveUnknownMembers", "RebalanceStrategyUnknown",
                "RebalanceKafkaHandoffStuck", "RebalanceKafkaTargetUnassigned",
                "RebalanceKafkaTargetSkew", "RebalanceKafkaStreamsNotReady",
                "RebalanceKafkaStreamsStandbyWithActive", "RebalanceKafkaStreamsStandbyMissing",
                "RebalanceBrokerSplitView"}


def test_every_alert_about_one_group_links_that_groups_page():
    """group_page_url: the job's page of the group (docs/api.md), on the address Prometheus
    scraped the job at; an expression that aggregates keeps the labels the link needs."""
    from streaming.exporter.views import PAGE_PREFIX

    link = ("http://{{ $labels.instance }}" + PAGE_PREFIX + "/{{ $labels.system }}/"
            '{{ or $labels.cluster "default" }}/{{ $labels.group | urlquery }}')
    for rule in alerts():
        if rule["alert"] not in GROUP_ALERTS:
            assert "group_page_url" not in rule["annotations"], rule["alert"]
            continue
        assert rule["annotations"]["group_page_url"] == link, rule["alert"]
        assert "group_page_url" in rule["annotations"]["description"], rule["alert"]
        expr = " ".join(rule["expr"].split())
        if " by (" in expr:
            kept = {label.strip() for label in expr.split(" by (")[1].split(")")[0].split(",")}
            assert {"system", "cluster", "group", "instance"} <= kept, rule["alert"]


def test_alertmanager_keeps_two_clusters_groups_of_one_name_apart():
    """Grouping and inhibition by (system, group) alone would merge, or mute, a same-named
    group of another cluster."""
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    assert {"system", "cluster", "group"} <= set(config["route"]["group_by"])
    assert all({"system", "cluster", "group"} <= set(rule["equal"])
               for rule in config["inhibit_rules"])
