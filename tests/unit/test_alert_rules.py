"""Alert and recording rules: promtool's own checks and unit tests, plus the rule contract.

The promtool unit tests (dashboards/prometheus/tests/*.test.yml) prove that each alert fires on
the series that should fire it, is silent while pending and on a transient shorter than its
`for`. Needs the Debian `promtool` (and `amtool` from prometheus-alertmanager): skipped locally
when missing, a failure when CI=true.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

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
    "RebalanceKafkaHandoffStuck": ("critical", "2m"),
    "RebalanceKafkaTargetUnassigned": ("critical", "5m"),
    "RebalanceKafkaTargetSkew": ("warning", "15m"),
    "RebalanceMonitorStalled": ("critical", None),
    "RebalanceMonitorInvalidEvents": ("warning", "10m"),
    "RebalanceMonitorUndeliveredRecords": ("warning", None),
    "RebalanceMonitorQueryRestarts": ("warning", None),
    "RebalanceMonitorLostEvents": ("critical", None),
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
            assert set(annotations) == {"summary", "description", "runbook"}, name
            assert annotations["runbook"] == f"docs/metrics.md#{name.lower()}"
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
    assert "mqadmin consumerProgress" in text["RebalanceOrphanedQueues"]
    assert "version" in text["RebalanceStrategyInconsistent"]
    assert "restart" in text["RebalanceDoubleAssignment"]
    assert "dead-letter" in text["RebalanceMonitorInvalidEvents"]


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
    docs = (REPO / "docs" / "metrics.md").read_text()
    for name in sorted(CONTRACT_METRICS | recording_rule_names()):
        assert f"`{name}`" in docs, name
    headings = {line[4:].strip().lower() for line in docs.splitlines() if line.startswith("### ")}
    for rule in alerts():
        assert f"| {rule['alert']}" in docs, rule["alert"]
        assert rule["annotations"]["runbook"].split("#")[1] in headings, rule["alert"]
