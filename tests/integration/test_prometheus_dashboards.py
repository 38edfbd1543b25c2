"""A real Prometheus scrapes the running job (fed by the simulator): every dashboard panel query
returns data and RebalanceDoubleAssignment reaches `firing` in Prometheus's own /api/v1/alerts.

The harness loads the real rule files but rewrites RebalanceDoubleAssignment's `for: 1m` to 3s
(HarnessConfig.for_overrides), and scrapes/evaluates every second, so `firing` is reached in
seconds; the 1m itself is proven by the promtool rule tests (tests/unit/test_alert_rules.py).

`running_monitor_metrics_url` (host:port of a live job's /metrics, fed by the simulator with a
scenario that double-assigns) comes from tests/integration/conftest.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.integration.prometheus_harness import (
    DASHBOARDS,
    KAFKA_ROW,
    PRODUCERS_ROW,
    STREAMS_ROW,
    HarnessConfig,
    HarnessError,
    PrometheusHarness,
    panel_queries,
    resolve_variables,
    rules_with_for_overrides,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAST_FOR = {"RebalanceDoubleAssignment": "3s"}
# What the dashboards' variables name: the group (system, cluster, name) and its monitor's target.
DRILL_DOWN_LABELS = ("system", "cluster", "group", "job", "instance")


def require(binary: str) -> None:
    if shutil.which(binary) is None:
        message = f"{binary} not installed (Debian package prometheus)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def live_job(request: pytest.FixtureRequest) -> str:
    try:
        return request.getfixturevalue("running_monitor_metrics_url")
    except pytest.FixtureLookupError:
        message = "fixture running_monitor_metrics_url (tests/integration/conftest.py) is missing"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def test_prometheus_harness_scrapes_loads_rules_and_stops(tmp_path: Path):
    """The harness alone (no job): Prometheus scrapes its own /metrics, the rules load with
    the overridden `for`, a recording rule is evaluated, and stop() ends the process."""
    require("prometheus")
    with PrometheusHarness(HarnessConfig(target="self", for_overrides=FAST_FOR),
                           tmp_path) as harness:
        target = harness.wait_for_target_up()
        assert target["scrapeUrl"] == f"{harness.url}/metrics"
        assert harness.wait_for_data('up{job="rebalance-monitor"} == 1')[0]["value"][1] == "1"
        groups = harness.api("/api/v1/rules")["groups"]
        rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
        assert rules["RebalanceDoubleAssignment"]["duration"] == 3
        assert rules["RebalanceOrphanedQueues"]["duration"] == 120
        assert rules["group:rebalance_problems:count"]["health"] in ("ok", "unknown")
        # absent(...) > 0 holds here: the stalled alert goes pending, as with a job that is down
        harness.wait_for_alert("RebalanceMonitorStalled", "pending", timeout=15)
    assert harness.process.returncode == 0


def test_for_overrides_touch_only_the_named_alert():
    text = "groups: [{name: g, rules: [{alert: A, expr: x > 0, for: 1m}, " \
           "{alert: B, expr: y > 0, for: 2m}, {record: r, expr: sum(x)}]}]"
    rewritten = rules_with_for_overrides(text, {"A": "3s"})
    assert "for: 3s" in rewritten and "for: 2m" in rewritten and "for: 1m" not in rewritten


def test_every_panel_returns_data_and_double_assignment_fires(request, tmp_path: Path):
    require("prometheus")
    target = live_job(request)
    config = HarnessConfig(target=target, for_overrides=FAST_FOR)
    with PrometheusHarness(config, tmp_path) as prometheus:
        prometheus.wait_for_target_up(timeout=60)
        firing = prometheus.wait_for_alert("RebalanceDoubleAssignment", "firing", timeout=180)
        alert = firing[0]
        assert alert["labels"]["severity"] == "critical"
        assert float(alert["value"]) >= 1
        # The dashboards as the alert's drill-down opens them: that group, that monitor.
        conflicted = {label: alert["labels"][label] for label in DRILL_DOWN_LABELS}
        empty = []
        for path in DASHBOARDS:
            variables = resolve_variables(path, prometheus, prefer=conflicted)
            assert variables == {name: conflicted[name] for name in variables}, path.name
            for title, expr in panel_queries(path, variables,
                                             rows=lambda row: row not in (KAFKA_ROW, STREAMS_ROW,
                                                                         PRODUCERS_ROW)):
                try:
                    prometheus.wait_for_data(expr, timeout=60)
                except HarnessError as error:  # collect every empty panel, then fail once
                    empty.append(f"{path.name} / {title}: {expr} ({error})")
        assert empty == []
        assert_the_drill_down_rows_carry_every_variable(prometheus, conflicted)


def assert_the_drill_down_rows_carry_every_variable(prometheus, conflicted: dict) -> None:
    """Each row of the overview's table names the labels its link hands the group dashboard."""
    overview = next(path for path in DASHBOARDS if path.name == "rebalance-overview.json")
    table = [expr for title, expr in panel_queries(overview, conflicted)
             if title == "Groups, worst first"]
    assert len(table) == 5
    for expr in table:
        rows = prometheus.wait_for_data(expr, timeout=60)
        assert all(set(DRILL_DOWN_LABELS) <= set(row["metric"]) for row in rows), (expr, rows)
