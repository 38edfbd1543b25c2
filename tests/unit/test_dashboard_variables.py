"""The dashboards' template variables and links: a group is its system, cluster and name, and
it is tracked by a monitor (the scrape's job and instance), so every panel query filters on
each of those its series carry, the variables narrow each other in order, and the drill-down
from the overview carries every one of them to the group dashboard.

Without these, a Kafka and a RocketMQ group of one name, two clusters' groups of one name, or the
groups of two monitors would be summed into one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.metric_contract import CONTRACT_METRICS, GROUP_METRICS, REPO, recording_rule_names

pytestmark = pytest.mark.unit

DASHBOARDS = REPO / "dashboards" / "grafana" / "dashboards"
DASHBOARD_FILES = sorted(DASHBOARDS.glob("*.json"))
GROUP_SERIES = GROUP_METRICS | {"rebalance_group_stale"} | {
    name for name in recording_rule_names() if name.startswith("group:")}
CLUSTER_SERIES = frozenset({"rebalance_cluster_silent", "rebalance_cluster_last_event_time_seconds"})
# Every series is scraped from one monitor's target.
TARGET_LABELS = frozenset({"job", "instance"})
WANTED = {"rebalance-overview.json": ["system", "cluster", "job", "instance"],
          "rebalance-group.json": ["system", "cluster", "group", "job", "instance"]}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def query_variables(dashboard: dict) -> list[dict]:
    return [v for v in dashboard["templating"]["list"] if v["type"] == "query"]


def matcher(variable: dict) -> str:
    """How a query filters on the variable: a regex for one that may hold several values."""
    name = variable["name"]
    regex = variable.get("multi") or variable.get("includeAll")
    return f'{name}{"=~" if regex else "="}"${name}"'


def series_labels(metric: str) -> frozenset[str]:
    if metric in GROUP_SERIES:
        return TARGET_LABELS | {"system", "cluster", "group"}
    if metric in CLUSTER_SERIES:
        return TARGET_LABELS | {"cluster"}
    return TARGET_LABELS


def selectors(expr: str) -> Iterator[tuple[str, set[str]]]:
    """(metric, its matchers) for each series the expression reads."""
    for metric in CONTRACT_METRICS | recording_rule_names():
        pattern = rf"(?<![\w:]){re.escape(metric)}(?![\w:])\s*(\{{[^}}]*\}})?"
        for found in re.finditer(pattern, expr):
            braces = (found.group(1) or "{}")[1:-1]
            yield metric, {m.strip() for m in braces.split(",") if m.strip()}


def panel_targets(dashboard: dict) -> Iterator[tuple[str, str]]:
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                yield inner["title"], target["expr"]


def urls(node) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("url"), str):
            yield node["url"]
        for value in node.values():
            yield from urls(value)
    elif isinstance(node, list):
        for value in node:
            yield from urls(value)


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_the_variables_are_the_groups_labels_and_the_monitors(path: Path):
    variables = query_variables(load(path))
    assert [v["name"] for v in variables] == WANTED[path.name]
    for variable in variables:
        definition = variable["definition"]
        assert variable["query"]["query"] == definition
        assert definition.startswith("label_values(rebalance_group_members")
        assert definition.endswith(f", {variable['name']})")
        if variable["includeAll"]:
            assert variable["allValue"] == ".*", variable["name"]


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_each_variable_lists_only_values_within_the_ones_before_it(path: Path):
    variables = query_variables(load(path))
    for position, variable in enumerate(variables):
        (_, used), = selectors(variable["definition"])
        assert used == {matcher(v) for v in variables[:position]}, variable["name"]


def test_a_group_is_one_system_cluster_and_name_and_its_monitors_may_be_all():
    variables = {v["name"]: v for v in query_variables(load(DASHBOARDS / "rebalance-group.json"))}
    for name in ("system", "cluster", "group"):
        assert not variables[name]["multi"] and not variables[name]["includeAll"], name
    for name in ("job", "instance"):
        assert variables[name]["multi"] and variables[name]["includeAll"], name


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_every_panel_query_filters_on_every_variable_its_series_carry(path: Path):
    dashboard = load(path)
    variables = query_variables(dashboard)
    missing = []
    for title, expr in panel_targets(dashboard):
        read = list(selectors(expr))
        assert read, (title, expr)
        for metric, used in read:
            wanted = {matcher(v) for v in variables if v["name"] in series_labels(metric)}
            if not wanted <= used:
                missing.append((title, metric, sorted(wanted - used)))
    assert missing == []


# Relative links: Grafana takes an href without a leading "/" as a path from its own root (its
# link interceptor routes it, and index.html's <base href> resolves it in a new tab), so `d/<uid>`
# keeps working when Grafana is served under a sub-path (root_url https://host/grafana/), where
# "/d/<uid>" would leave the sub-path to Grafana's rewriting and a full URL names one host.
@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_no_link_is_absolute(path: Path):
    for url in urls(load(path)):
        assert not url.startswith("/") and "://" not in url, url


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_dashboard_links_keep_the_time_and_the_variables(path: Path):
    for link in load(path)["links"]:
        assert link["type"] == "dashboards" and link["tags"] == ["rebalance-monitor"]
        assert link["includeVars"] and link["keepTime"]


def test_the_drill_down_carries_every_variable_of_the_group_dashboard():
    table = next(panel for panel in load(DASHBOARDS / "rebalance-overview.json")["panels"]
                 if panel["title"] == "Groups, worst first")
    (url,) = urls(table)
    path, _, query = url.partition("?")
    assert path == "d/rebalance-group/rebalance-group"
    parameters = query.split("&")
    assert "${datasource:queryparam}" in parameters and "${__url_time_range}" in parameters
    group_dashboard = load(DASHBOARDS / "rebalance-group.json")
    for variable in query_variables(group_dashboard):
        name = variable["name"]
        assert f"var-{name}=${{__data.fields.{name}}}" in parameters, name
