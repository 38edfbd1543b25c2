"""A real Prometheus (the Debian `prometheus` binary) for integration tests.

    config = HarnessConfig(target="127.0.0.1:9108",
                           for_overrides={"RebalanceDoubleAssignment": "3s"})
    with PrometheusHarness(config, tmp_path) as prometheus:
        prometheus.wait_for_target_up()
        prometheus.query("rebalance_monitor_groups")         # /api/v1/query -> result list
        prometheus.wait_for_alert("RebalanceDoubleAssignment", "firing", timeout=60)

It writes a temporary config that scrapes one target every second, copies the alert and recording
rules (optionally with shorter `for` durations, so a test reaches `firing` in seconds instead of
minutes) and evaluates them every second. Start = spawn + poll /-/ready; stop = SIGTERM, then
SIGKILL after a grace period.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support import wait_until

REPO = Path(__file__).resolve().parents[2]
RULE_FILES = tuple(sorted((REPO / "dashboards" / "prometheus" / "rules").glob("*.yml")))
DASHBOARDS = tuple(sorted((REPO / "dashboards" / "grafana" / "dashboards").glob("*.json")))
SCRAPE_JOB = "rebalance-monitor"
# Grafana's built-in variables, as a 1s-scrape Prometheus can answer them.
GRAFANA_BUILTINS = {"$__rate_interval": "1m", "$__interval": "1s", "$__range": "1h"}


class HarnessError(RuntimeError):
    pass


@dataclass(frozen=True)
class HarnessConfig:
    target: str                 # host:port serving /metrics, or "self" (Prometheus's own)
    scrape_interval: str = "1s"
    evaluation_interval: str = "1s"
    for_overrides: Mapping[str, str] = field(default_factory=dict)   # alertname -> for
    rule_files: tuple[Path, ...] = RULE_FILES
    binary: str = "prometheus"
    # job name -> local targets: scrape the shipped prometheus.yml's jobs of these names, with
    # their targets replaced by these (its other jobs are left out).
    shipped_jobs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.target != "self" and not re.fullmatch(r"[\w.\-\[\]:]+:\d+", self.target):
            raise ValueError(f"target must be host:port, got {self.target!r}")


def rules_with_for_overrides(rules_text: str, overrides: Mapping[str, str]) -> str:
    """The rules file with `for` replaced on the named alerts ("0s" removes the wait).

    >>> rules_with_for_overrides(
    ...     "groups: [{name: g, rules: [{alert: A, expr: up > 0, for: 1m}]}]", {"A": "2s"})
    'groups:\\n- name: g\\n  rules:\\n  - alert: A\\n    expr: up > 0\\n    for: 2s\\n'
    """
    document = yaml.safe_load(rules_text)
    for group in document["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") in overrides:
                rule["for"] = overrides[rule["alert"]]
    return yaml.safe_dump(document, sort_keys=False)


def shipped_scrape_configs(local_targets: Mapping[str, tuple[str, ...]]) -> list[dict]:
    """The shipped prometheus.yml's scrape jobs named in `local_targets`, each scraping those
    targets instead of its own (the compose stack's host names do not resolve here)."""
    shipped = yaml.safe_load((REPO / "dashboards" / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in shipped["scrape_configs"]}
    missing = set(local_targets) - set(jobs)
    if missing:
        raise HarnessError(f"prometheus.yml has no scrape job {sorted(missing)}")
    return [{**{k: v for k, v in jobs[name].items() if not k.endswith("_sd_configs")
                and k != "static_configs"},
             "static_configs": [{"targets": list(targets)}]}
            for name, targets in local_targets.items()]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def poll(check: Callable[[], Any], timeout: float, interval: float = 0.25,
         what: str = "condition") -> Any:
    """Call `check` until it returns something truthy, taking a failed call (Prometheus not
    answering yet) for a no; HarnessError after `timeout` seconds, with the last failure."""
    last_error: Exception | None = None

    def answered() -> Any:
        nonlocal last_error
        try:
            return check()
        except (OSError, HarnessError, ValueError) as error:
            last_error = error
            return None

    return wait_until(answered, timeout, what, interval=interval, error=HarnessError,
                      details=lambda: f"(last error: {last_error})" if last_error else "")


class PrometheusHarness:
    def __init__(self, config: HarnessConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = Path(workdir)
        self.port: int | None = None
        self.process: subprocess.Popen | None = None

    # --- lifecycle --------------------------------------------------------------------------
    def write_config(self) -> Path:
        target = self.config.target
        if target == "self":
            target = f"127.0.0.1:{self.port}"
        rules_dir = self.workdir / "rules"
        rules_dir.mkdir(parents=True, exist_ok=True)
        rule_paths = []
        for source in self.config.rule_files:
            copy = rules_dir / source.name
            copy.write_text(rules_with_for_overrides(source.read_text(), self.config.for_overrides))
            rule_paths.append(str(copy))
        config = {
            "global": {"scrape_interval": self.config.scrape_interval,
                       "evaluation_interval": self.config.evaluation_interval},
            "rule_files": rule_paths,
            "scrape_configs": [{"job_name": SCRAPE_JOB,
                                "static_configs": [{"targets": [target]}]}],
        }
        if self.config.shipped_jobs:
            config["scrape_configs"] = shipped_scrape_configs(self.config.shipped_jobs)
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def start(self, timeout: float = 30.0) -> PrometheusHarness:
        binary = shutil.which(self.config.binary)
        if binary is None:
            raise HarnessError(f"{self.config.binary} not installed (Debian package prometheus)")
        self.port = free_port()
        config_path = self.write_config()
        log = open(self.workdir / "prometheus.log", "wb")  # the child keeps its own descriptor
        self.process = subprocess.Popen(
            [binary, f"--config.file={config_path}",
             f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        poll(self._ready, timeout, what=f"Prometheus ready on port {self.port}")
        return self

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise HarnessError(f"prometheus exited with {self.process.returncode}:\n{self.log()}")
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
            return response.status == 200

    def stop(self, grace: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=grace)

    def __enter__(self) -> PrometheusHarness:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def log(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    # --- HTTP API ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise HarnessError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """Instant query: the result vector (or [] when there is no data)."""
        data = self.api("/api/v1/query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def label_values(self, label: str, match: str) -> list[str]:
        return self.api(f"/api/v1/label/{label}/values", **{"match[]": match})

    def alerts(self) -> list[dict]:
        return self.api("/api/v1/alerts")["alerts"]

    def targets(self) -> list[dict]:
        return self.api("/api/v1/targets")["activeTargets"]

    # --- waiting ----------------------------------------------------------------------------
    def wait_for_target_up(self, timeout: float = 30.0) -> dict:
        def up() -> dict | None:
            return next((t for t in self.targets() if t["health"] == "up"), None)
        return poll(up, timeout, what=f"target {self.config.target} up")

    def wait_for_data(self, expr: str, timeout: float = 30.0) -> list[dict]:
        return poll(lambda: self.query(expr), timeout, what=f"data for {expr!r}")

    def wait_for_alert(self, name: str, state: str = "firing", timeout: float = 60.0) -> list[dict]:
        def matching() -> list[dict]:
            return [a for a in self.alerts() if a["labels"]["alertname"] == name
                    and a["state"] == state]
        return poll(matching, timeout, interval=0.5, what=f"alert {name} {state}")


# --- dashboards ---------------------------------------------------------------------------------
# The group dashboard's rows of panels for groups the broker assigns and for streams groups: a
# group of another kind has no data there, so those panels are checked against a KIP-848 group
# and a streams group (test_kafka_groups.py).
KAFKA_ROW = "Kafka: groups the broker assigns (KIP-848, share, streams)"
STREAMS_ROW = "Kafka Streams groups (KIP-1071)"
# The producers' own health: the harness scrapes the job alone, no producer.
PRODUCERS_ROW = "Producers: the observers' own health"


def dashboard_panels(path: Path, rows: Callable[[str | None], bool] = lambda row: True
                     ) -> list[dict]:
    """The dashboard's panels, those folded in rows included, whose row title (None outside
    any row) `rows` accepts."""
    dashboard = json.loads(path.read_text())
    found = []
    for panel in dashboard["panels"]:
        if panel.get("type") == "row":
            if rows(panel["title"]):
                found.extend(panel.get("panels", []))
        elif rows(None):
            found.append(panel)
    return found


def panel_queries(path: Path, variables: Mapping[str, str],
                  rows: Callable[[str | None], bool] = lambda row: True) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target, with Grafana's variables substituted."""
    return [(panel["title"], with_variables(target["expr"], variables))
            for panel in dashboard_panels(path, rows) for target in panel.get("targets", [])]


def with_variables(expr: str, variables: Mapping[str, str]) -> str:
    """The query as Grafana sends it: its built-in and dashboard variables replaced. A variable
    left without a value is an error, not a query that silently matches nothing."""
    values = dict(GRAFANA_BUILTINS)
    for name, value in variables.items():
        values["${" + name + "}"] = value
        values["$" + name] = value
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace(name, values[name])
    unresolved = re.findall(r"\$\{?\w+", expr)
    if unresolved:
        raise HarnessError(f"no value for {sorted(set(unresolved))} in {expr!r}")
    return expr


def resolve_variables(path: Path, prometheus: PrometheusHarness,
                      prefer: Mapping[str, str] | None = None) -> dict[str, str]:
    """Values for the dashboard's label_values() variables, in order, each listed within the
    values chosen before it (as Grafana chains them): `prefer` when Prometheus lists it, else
    All (the variable's allValue) where the variable offers it, else the first value listed
    (as Grafana picks by default)."""
    dashboard = json.loads(path.read_text())
    chosen: dict[str, str] = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["definition"].strip())
        if match is None:
            raise HarnessError(f"unsupported variable query {variable['definition']!r}")
        values = prometheus.label_values(match.group(2), with_variables(match.group(1), chosen))
        if not values:
            raise HarnessError(f"no values for variable {variable['name']}")
        wanted = (prefer or {}).get(variable["name"])
        if wanted in values:
            chosen[variable["name"]] = wanted
        elif variable.get("includeAll"):
            chosen[variable["name"]] = variable["allValue"]
        else:
            chosen[variable["name"]] = sorted(values)[0]
    return chosen
