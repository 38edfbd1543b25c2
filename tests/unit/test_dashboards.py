"""Grafana dashboards and provisioning: valid for current Grafana, every panel titled, described
and with a unit, datasource by uid through the `datasource` variable, no hard-coded instance, and
every query reads only contract metrics or recording rules and parses (checked by promtool when
it is installed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.metric_contract import CONTRACT_METRICS, REPO, metric_names, recording_rule_names

pytestmark = pytest.mark.unit

GRAFANA = REPO / "dashboards" / "grafana"
DASHBOARD_FILES = sorted((GRAFANA / "dashboards").glob("*.json"))
DATASOURCE_UID = "prometheus"
DS_REF = {"type": "prometheus", "uid": "${datasource}"}
# What Grafana substitutes for its variables when the harness or promtool runs a panel query.
SAMPLE_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h",
                    "$group": "GID_EXAMPLE", "${group}": "GID_EXAMPLE", "$system": "rocketmq",
                    "$cluster": "default", "$job": ".*", "$instance": ".*"}


def load(name: str) -> dict:
    return json.loads((GRAFANA / "dashboards" / name).read_text())


def panels(dashboard: dict) -> list[dict]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def queries(dashboard: dict) -> list[str]:
    return [t["expr"] for p in panels(dashboard) for t in p.get("targets", [])]


def substitute(expr: str) -> str:
    for name in sorted(SAMPLE_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, SAMPLE_VARIABLES[name])
    return expr


def test_the_two_dashboards_exist_with_fixed_uids():
    assert [p.name for p in DASHBOARD_FILES] == ["rebalance-group.json", "rebalance-overview.json"]
    assert load("rebalance-overview.json")["uid"] == "rebalance-overview"
    assert load("rebalance-group.json")["uid"] == "rebalance-group"


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_dashboard_is_current_grafana_json(path: Path):
    dashboard = json.loads(path.read_text())
    assert dashboard["schemaVersion"] >= 39
    assert dashboard["title"] and dashboard["description"]
    assert "id" not in dashboard or dashboard["id"] is None, "provisioned dashboards carry no id"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_every_panel_has_title_description_unit_and_the_datasource_variable(path: Path):
    dashboard = json.loads(path.read_text())
    assert len(panels(dashboard)) >= 10
    for panel in panels(dashboard):
        if panel["type"] == "row":     # a heading that folds panels: it queries nothing
            assert panel["title"].strip() and panel["panels"], panel["id"]
            continue
        title = panel.get("title", "")
        assert title.strip(), panel["id"]
        assert len(panel.get("description", "")) >= 30, title
        assert panel["fieldConfig"]["defaults"]["unit"], title
        assert panel["datasource"] == DS_REF, title
        assert panel["targets"], title
        for target in panel["targets"]:
            assert target["datasource"] == DS_REF, title
            assert target["expr"].strip(), title


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_datasource_variable_defaults_to_the_provisioned_uid(path: Path):
    variables = {v["name"]: v for v in json.loads(path.read_text())["templating"]["list"]}
    datasource = variables["datasource"]
    assert datasource["type"] == "datasource" and datasource["query"] == "prometheus"
    assert datasource["current"]["value"] == DATASOURCE_UID


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_no_hard_coded_instance_host_or_datasource(path: Path):
    text = path.read_text()
    for expr in queries(json.loads(text)):
        filters = re.findall(r'\b(instance|job)\s*(?:=~|!~|!=|=)\s*"([^"]*)"', expr)
        assert all(value == f"${label}" for label, value in filters), expr
    assert "localhost" not in text and "http://" not in text and "https://" not in text
    uids = set(re.findall(r'"uid":\s*"([^"]*)"', text))
    assert uids <= {"${datasource}", "-- Grafana --", "rebalance-overview", "rebalance-group"}


def test_group_dashboard_has_a_group_variable_and_every_query_uses_it():
    dashboard = load("rebalance-group.json")
    group = {v["name"]: v for v in dashboard["templating"]["list"]}["group"]
    assert group["type"] == "query"
    assert group["query"]["query"] == ('label_values(rebalance_group_members{system="$system", '
                                       'cluster="$cluster"}, group)')
    assert group["datasource"] == DS_REF
    for expr in queries(dashboard):
        assert 'group="$group"' in expr, expr


def test_overview_covers_trouble_conflicts_skew_rebalance_rate_and_monitor_health():
    titles = [p["title"] for p in panels(load("rebalance-overview.json"))]
    for wanted in ("Groups in trouble", "Conflicting queues over time", "Skew ratio by group",
                   "Rebalances per minute", "Last batch age", "Monitor: events applied"):
        assert any(t.startswith(wanted) for t in titles), wanted


def test_group_dashboard_covers_members_load_topics_age_and_rebalances():
    titles = [p["title"] for p in panels(load("rebalance-group.json"))]
    for wanted in ("Members", "Queues per client", "Double-assigned queues by topic",
                   "Orphaned queues by topic", "Conflict age", "Rebalances and queue moves per minute",
                   "Group epoch", "Hand-off age", "Members reconciling and epoch lag"):
        assert wanted in titles, wanted


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_queries_read_only_contract_metrics_and_recording_rules(path: Path):
    known = CONTRACT_METRICS | recording_rule_names()
    dashboard = json.loads(path.read_text())
    exprs = queries(dashboard) + [
        v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= known, (expr, names - known)


def test_every_panel_query_parses(tmp_path: Path):
    """Each query, with Grafana's variables substituted, is loaded by promtool as a rule."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool not installed (Debian package prometheus)")
        pytest.skip("promtool not installed")
    exprs = [substitute(e) for path in DASHBOARD_FILES for e in queries(json.loads(path.read_text()))]
    rules = {"groups": [{"name": "panels", "rules": [
        {"record": f"panel:query:{i}", "expr": expr} for i, expr in enumerate(exprs)]}]}
    rule_file = tmp_path / "panels.yml"
    rule_file.write_text(yaml.safe_dump(rules))
    result = subprocess.run([promtool, "check", "rules", "--lint=none", str(rule_file)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


def test_datasource_provisioning_has_the_fixed_uid_and_the_compose_url():
    config = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    (datasource,) = config["datasources"]
    assert datasource["uid"] == DATASOURCE_UID and datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"


def test_dashboard_provisioning_points_at_the_mounted_dashboards():
    config = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "rebalance.yml").read_text())
    (provider,) = config["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
