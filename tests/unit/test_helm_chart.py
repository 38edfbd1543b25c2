"""deploy/helm/rebalance-monitor/: `helm lint` and `helm template` with the default values and
with every switch on (tests/data/helm/full-values.yaml, and its SparkApplication variant), each
rendered object valid against its schema as the API server would check it: built-in kinds
against Kubernetes' own JSON schemas (the kubernetes-validate package), ServiceMonitor,
PodMonitor and PrometheusRule against the prometheus-operator module's CRDs (Go's module cache,
`make helm`), SparkApplication against the vendored CRD schema (tests/data/kubernetes/). A chart
with a typo'd field is refused, so the check is live. The chart's copies of the rules and the
dashboards equal their sources (scripts/sync_helm_chart.py), the PrometheusRule's groups are the
rule files' groups, and the containers' arguments parse as the commands they run.

Needs helm (`make helm` builds it from the Go module proxy): skipped without it, failed in CI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from streaming import cli
from tests.unit.kubernetes_schemas import (
    KUBERNETES_VERSION,
    VENDORED,
    builtin_problems,
    errors_of,
    makefile_variable,
    prometheus_operator_crds,
    with_field_set,
)
from tests.unit.metric_contract import REPO

pytestmark = pytest.mark.unit

CHART = REPO / "deploy" / "helm" / "rebalance-monitor"
FULL_VALUES = REPO / "tests" / "data" / "helm" / "full-values.yaml"
RULES = REPO / "dashboards" / "prometheus" / "rules"
DASHBOARDS = REPO / "dashboards" / "grafana" / "dashboards"
SPARK_APPLICATION = ("--set", "job.mode=sparkApplication",
                     "--set", "persistence.accessModes={ReadWriteMany}")


def load_sync():
    spec = importlib.util.spec_from_file_location("sync_helm_chart",
                                                  REPO / "scripts" / "sync_helm_chart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sync_helm_chart = load_sync()


# The copies: no helm needed.

def test_the_charts_copies_equal_their_sources():
    assert sync_helm_chart.stale() == [], "run: python scripts/sync_helm_chart.py"
    copied = {copy.relative_to(CHART).as_posix() for _, copy in sync_helm_chart.pairs()}
    assert copied == {"files/rules/rebalance-alerts.yml", "files/rules/rebalance-recording.yml",
                      *(f"files/dashboards/{p.name}" for p in DASHBOARDS.glob("*.json"))}


def test_a_changed_missing_or_extra_copy_is_found(tmp_path):
    for source, copied in sync_helm_chart.pairs():
        for path in (source, copied):
            target = tmp_path / path.relative_to(REPO)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    assert sync_helm_chart.stale(tmp_path) == []
    alerts = tmp_path / "dashboards" / "prometheus" / "rules" / "rebalance-alerts.yml"
    alerts.write_text(alerts.read_text().replace("for: 1m", "for: 2m", 1))
    (tmp_path / CHART.relative_to(REPO) / "files" / "dashboards" / "rebalance-group.json").unlink()
    (tmp_path / CHART.relative_to(REPO) / "files" / "rules" / "old.yml").write_text("groups: []\n")
    assert sorted(line.split(" ", 1)[0].rsplit("/", 1)[-1] + " " + line.split(" ", 1)[1]
                  for line in sync_helm_chart.stale(tmp_path)) == [
        "old.yml has no source",
        "rebalance-alerts.yml differs from dashboards/prometheus/rules/rebalance-alerts.yml",
        "rebalance-group.json differs from dashboards/grafana/dashboards/rebalance-group.json"]
    sync_helm_chart.sync(tmp_path)
    assert sync_helm_chart.stale(tmp_path) == []


# helm

@pytest.fixture(scope="module")
def helm() -> str:
    path = os.environ.get("HELM") or makefile_variable("HELM").replace("$(HOME)", str(Path.home()))
    if not (os.access(path, os.X_OK) or shutil.which(path)):
        message = f"helm not found at {path} (make helm)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def validators() -> dict:
    try:
        return {**VENDORED, **prometheus_operator_crds()}
    except FileNotFoundError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(str(error))
        pytest.skip(str(error))


def run_helm(helm: str, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([helm, *map(str, args)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HELM_CACHE_HOME": "/nonexistent-helm-cache"})


def render(helm: str, *args: str | Path, chart: Path = CHART) -> list[dict]:
    done = run_helm(helm, "template", "rm", chart, "--namespace", "monitoring",
                    "--kube-version", KUBERNETES_VERSION, *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def problems(validators: dict, document: dict) -> list[str]:
    key = (document["apiVersion"], document["kind"])
    if key in validators:
        return errors_of(validators[key], document)
    return builtin_problems(document)


VALUE_SETS = {
    "default": (),
    "full": ("-f", FULL_VALUES),
    "full-spark-application": ("-f", FULL_VALUES, *SPARK_APPLICATION),
    "default-spark-application": SPARK_APPLICATION,
    "pod-monitor": ("-f", FULL_VALUES, "--set", "metrics.monitor=podMonitor"),
}

KINDS = {
    "default": ["ConfigMap", "ConfigMap", "Deployment", "PersistentVolumeClaim", "Service",
                "ServiceAccount"],
    "full": ["ConfigMap", "ConfigMap", "Deployment", "Deployment", "Deployment",
             "PersistentVolumeClaim", "PrometheusRule", "Service", "Service", "Service",
             "ServiceAccount", "ServiceMonitor"],
    "full-spark-application": ["ConfigMap", "ConfigMap", "Deployment", "Deployment",
                               "PersistentVolumeClaim", "PrometheusRule", "Service", "Service",
                               "Service", "ServiceAccount", "ServiceMonitor", "SparkApplication"],
    "default-spark-application": ["ConfigMap", "ConfigMap", "PersistentVolumeClaim", "Service",
                                  "ServiceAccount", "SparkApplication"],
    "pod-monitor": ["ConfigMap", "ConfigMap", "Deployment", "Deployment", "Deployment",
                    "PersistentVolumeClaim", "PodMonitor", "PrometheusRule", "Service",
                    "Service", "Service", "ServiceAccount"],
}


@pytest.mark.parametrize("values", ["default", "full"])
def test_helm_lint_passes(helm, values):
    done = run_helm(helm, "lint", CHART, "--strict", "--kube-version", KUBERNETES_VERSION,
                    *VALUE_SETS[values])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_every_rendered_object_is_valid_against_its_schema(helm, validators, values):
    documents = render(helm, *VALUE_SETS[values])
    assert sorted(d["kind"] for d in documents) == KINDS[values]
    for document in documents:
        assert problems(validators, document) == [], (document["kind"],
                                                      document["metadata"]["name"])


def broken(documents: list[dict], kind: str, path: str, value) -> dict:
    """A copy of the first rendered `kind` with the field at `path` (dots; a number indexes a
    list) set."""
    return with_field_set(next(d for d in documents if d["kind"] == kind), path, value)


@pytest.mark.parametrize("kind, path, value, wanted", [
    ("Deployment", "spec.stratgy", {"type": "Recreate"}, "Additional properties are not allowed"),
    ("Deployment", "spec.template.spec.containers.0.ports.0.containerPort", "9108",
     "is not of type 'integer'"),
    ("Service", "spec.ports.0.protocl", "TCP", "Additional properties are not allowed"),
    ("PersistentVolumeClaim", "spec.resources.request", {}, "Additional properties are not allowed"),
    ("ServiceMonitor", "spec.endpoints.0.port", 9108, "is not of type 'string'"),
    ("ServiceMonitor", "spec.endpoints.0.interval", "15 seconds", "does not match"),
    ("PrometheusRule", "spec.groups.0.rules.0.alrt", "X", "Additional properties are not allowed"),
    ("SparkApplication", "spec.driver.memroy", "2g", "Additional properties are not allowed"),
])
def test_a_broken_object_is_refused(helm, validators, kind, path, value, wanted):
    documents = render(helm, "-f", FULL_VALUES) + render(helm, "-f", FULL_VALUES,
                                                        *SPARK_APPLICATION)
    found = problems(validators, broken(documents, kind, path, value))
    assert len(found) == 1 and wanted in found[0], found


def test_a_chart_with_a_typo_is_refused(helm, validators, tmp_path):
    """The whole way: a template with a misspelt field renders, and its object is refused."""
    chart = tmp_path / "rebalance-monitor"
    shutil.copytree(CHART, chart)
    template = chart / "templates" / "job-deployment.yaml"
    template.write_text(template.read_text().replace("imagePullPolicy:", "imagePullPolicey:"))
    (deployment,) = [d for d in render(helm, chart=chart) if d["kind"] == "Deployment"]
    (found,) = problems(validators, deployment)
    assert "imagePullPolicey" in found and "Additional properties are not allowed" in found


def test_values_the_chart_refuses(helm):
    for args, wanted in [
        (("--set", "observers.rocketmq.enabled=true", "--set", "observers.rocketmq.cluster=a"),
         "observers.rocketmq.namesrv is required"),
        (("--set", "observers.kafka.enabled=true"), "observers.kafka.cluster is required"),
        (("--set", "metrics.monitor=serviceMonitors"), "metrics.monitor must be"),
    ]:
        done = run_helm(helm, "template", "rm", CHART, "--kube-version", KUBERNETES_VERSION,
                        *args)
        assert done.returncode != 0 and wanted in done.stderr, (args, done.stderr)


# What the rendered objects say.

def by_kind(documents: list[dict], kind: str) -> list[dict]:
    return [d for d in documents if d["kind"] == kind]


def rule_groups(name: str) -> list[dict]:
    return yaml.safe_load((RULES / name).read_text())["groups"]


def test_the_prometheus_rules_groups_are_the_rule_files_groups(helm):
    (rule,) = by_kind(render(helm, "--set", "prometheusRule.enabled=true"), "PrometheusRule")
    assert rule["spec"]["groups"] == (rule_groups("rebalance-alerts.yml")
                                      + rule_groups("rebalance-recording.yml"))
    (rule,) = by_kind(render(helm, "--set", "prometheusRule.enabled=true",
                             "--set", "prometheusRule.recordingRules=false"), "PrometheusRule")
    assert rule["spec"]["groups"] == rule_groups("rebalance-alerts.yml")


def test_the_links_of_the_alerts_move_to_the_given_addresses(helm):
    (rule,) = by_kind(render(helm, "-f", FULL_VALUES), "PrometheusRule")
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    originals = [r for g in rule_groups("rebalance-alerts.yml") for r in g["rules"]
                 if "alert" in r]
    assert [a["alert"] for a in alerts] == [o["alert"] for o in originals]
    for alert, original in zip(alerts, originals, strict=True):
        anchor = original["annotations"]["runbook_url"].split("#")[1]
        assert alert["annotations"]["runbook_url"] == (
            f"https://wiki.example.com/rebalance/metrics.md#{anchor}")
        assert "{{ $labels.instance }}/groups/" not in json.dumps(alert)
    assert any("https://rebalance-monitor.example.com/groups/" in json.dumps(a) for a in alerts)


def test_the_dashboards_are_configmaps_for_grafanas_sidecar(helm):
    maps = by_kind(render(helm), "ConfigMap")
    assert {name for m in maps for name in m["data"]} == {p.name for p in DASHBOARDS.glob("*.json")}
    for config_map in maps:
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        for name, text in config_map["data"].items():
            assert text == (DASHBOARDS / name).read_text()
    maps = by_kind(render(helm, "--set", "grafanaDashboards.label=dashboards",
                          "--set", "grafanaDashboards.labelValue=rebalance"), "ConfigMap")
    assert all(m["metadata"]["labels"]["dashboards"] == "rebalance" for m in maps)
    assert by_kind(render(helm, "--set", "grafanaDashboards.enabled=false"), "ConfigMap") == []


def containers(documents: list[dict]) -> dict[str, dict]:
    return {c["name"]: c for d in by_kind(documents, "Deployment")
            for c in d["spec"]["template"]["spec"]["containers"]}


def container_environment(env: list[dict]) -> dict[str, str]:
    """The container's variables as Kubernetes sets them: each secret's value stands in as
    <secret/key>, and $(VARIABLE) in a value is expanded from the variables before it."""
    values: dict[str, str] = {}
    for each in env:
        if "secretKeyRef" in each.get("valueFrom", {}):
            values[each["name"]] = "<{name}/{key}>".format(**each["valueFrom"]["secretKeyRef"])
        elif "value" in each:
            values[each["name"]] = re.sub(r"\$\((\w+)\)", lambda m: values[m[1]], each["value"])
    return values


def parsed(args: list[str], env: list[dict]) -> dict:
    """The options as the command parses them, from its arguments and its environment, after
    Kubernetes expands $(VARIABLE) in both."""
    values = container_environment(env)
    expanded = [re.sub(r"\$\((\w+)\)", lambda m: values[m[1]], arg) for arg in args]
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("REBALANCE_MONITOR_")]:
            patch.delenv(name)
        for name, value in values.items():
            patch.setenv(name, value)
        namespace = cli.build_parser(expanded).parse_args(expanded)
    return {**vars(namespace.config), "command": namespace.command}


def test_the_job_runs_in_one_pod_on_local_spark_with_the_checkpoint_on_the_claim(helm):
    documents = render(helm)
    (deployment,) = by_kind(documents, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    job = containers(documents)["job"]
    args = parsed(job["args"], job.get("env", []))
    assert (args["command"], args["master"], args["source"]) == ("run", "local[*]", "kafka")
    assert (args["bootstrap_servers"], args["topic"]) == ("kafka:9092", "rebalance.events")
    (mount,) = job["volumeMounts"]
    assert args["checkpoint"].startswith(mount["mountPath"] + "/")
    (volume,) = deployment["spec"]["template"]["spec"]["volumes"]
    (claim,) = by_kind(documents, "PersistentVolumeClaim")
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    (port,) = job["ports"]
    assert port["containerPort"] == args["metrics_port"] and args["metrics_host"] == "0.0.0.0"
    documents = render(helm, "--set", "persistence.existingClaim=mine")
    assert by_kind(documents, "PersistentVolumeClaim") == []
    (deployment,) = by_kind(documents, "Deployment")
    (volume,) = deployment["spec"]["template"]["spec"]["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == "mine"


def test_every_command_parses_its_arguments_and_credentials_come_from_secrets(helm):
    documents = render(helm, "-f", FULL_VALUES)
    found = containers(documents)
    assert sorted(found) == ["job", "observe-kafka", "observe-rocketmq"]
    job = parsed(found["job"]["args"], found["job"]["env"])
    assert ("sasl.password", "<rebalance-monitor-kafka/password>") in job["kafka_options"].settings
    assert (job["master"], job["checkpoint"]) == ("local[4]", "/var/lib/rebalance-monitor/checkpoint")
    # The group pages link where the alerts do, and to Grafana.
    assert (job["runbook_base_url"], job["dashboard_base_url"]) == (
        "https://wiki.example.com/rebalance/metrics.md", "https://grafana.example.com")
    rocketmq = parsed(found["observe-rocketmq"]["args"], found["observe-rocketmq"]["env"])
    assert (rocketmq["command"], rocketmq["cluster"], rocketmq["namesrv"]) == (
        "observe-rocketmq", "prod-rocketmq", "10.0.0.1:9876;10.0.0.2:9876")
    acl = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in found["observe-rocketmq"]["env"]
           if e["name"].startswith("ROCKETMQ_")}
    assert acl == {"ROCKETMQ_ACCESS_KEY": {"name": "rocketmq-acl", "key": "ak"},
                   "ROCKETMQ_SECRET_KEY": {"name": "rocketmq-acl", "key": "sk"}}
    kafka = parsed(found["observe-kafka"]["args"], found["observe-kafka"]["env"])
    assert (kafka["command"], kafka["cluster"], kafka["bootstrap_servers"],
            kafka["events_bootstrap_servers"]) == (
        "observe-kafka", "prod-kafka", "observed-kafka:9092", "kafka-0.kafka:9093,kafka-1.kafka:9093")
    assert ("sasl.password", "<observed-kafka/password>") in kafka["kafka_options"].settings
    assert ("sasl.password", "<rebalance-monitor-kafka/password>") in (
        kafka["events_kafka_options"].settings)
    assert ("sasl.password", "<rebalance-monitor-kafka/password>") in (
        rocketmq["kafka_options"].settings)
    # The observers' secrets reach them in their environment, never in their arguments.
    for observer in ("observe-kafka", "observe-rocketmq"):
        assert not [a for a in found[observer]["args"] if "password" in a or "$(" in a]
    # No value of any rendered object holds a password: only references to Secrets.
    rendered = json.dumps(documents)
    assert not re.search(r"password=(?!\$\()", rendered)


def test_prometheus_scrapes_every_component_as_the_rules_name_it(helm):
    documents = render(helm, "-f", FULL_VALUES)
    (monitor,) = by_kind(documents, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    jobs = {}
    for service in by_kind(documents, "Service"):
        labels = service["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in
                   monitor["spec"]["selector"]["matchLabels"].items())
        (port,) = service["spec"]["ports"]
        assert port["name"] == port["targetPort"] == endpoint["port"]
        jobs[labels["app.kubernetes.io/component"]] = labels[monitor["spec"]["jobLabel"]]
    compose = yaml.safe_load((REPO / "dashboards" / "prometheus" / "prometheus.yml").read_text())
    scrape_jobs = {c["job_name"] for c in compose["scrape_configs"]}
    assert jobs == {"job": "rebalance-monitor", "observe-rocketmq": "rebalance-observe-rocketmq",
                    "observe-kafka": "rebalance-observe-kafka"}
    assert set(jobs.values()) <= scrape_jobs
    for name, container in containers(documents).items():
        (port,) = container["ports"]
        assert port["name"] == endpoint["port"]
        labels = next(d for d in by_kind(documents, "Deployment")
                      if d["spec"]["template"]["spec"]["containers"][0]["name"] == name)[
            "spec"]["template"]["metadata"]["labels"]
        assert labels[monitor["spec"]["jobLabel"]] == jobs[name]


def test_the_spark_application_is_deploy_kubernetes_one(helm):
    """mode sparkApplication renders what deploy/kubernetes/sparkapplication.yaml has, on the
    chart's names: the same program, versions, sizes and restart policy."""
    (rendered,) = by_kind(render(helm, *SPARK_APPLICATION), "SparkApplication")
    manifest = yaml.safe_load((REPO / "deploy" / "kubernetes" / "sparkapplication.yaml").read_text())
    for field in ("type", "mode", "sparkVersion", "mainApplicationFile", "restartPolicy"):
        assert rendered["spec"][field] == manifest["spec"][field], field
    for pod, fields in (("driver", ("cores", "memory", "serviceAccount", "ports")),
                        ("executor", ("instances", "cores", "memory", "memoryOverhead"))):
        for field in fields:
            assert rendered["spec"][pod][field] == manifest["spec"][pod][field], (pod, field)
    args = vars(cli.build_parser(rendered["spec"]["arguments"]).parse_args(
        rendered["spec"]["arguments"]))
    wanted = vars(cli.build_parser(manifest["spec"]["arguments"]).parse_args(
        manifest["spec"]["arguments"]))
    assert args == wanted
    (service,) = by_kind(render(helm, *SPARK_APPLICATION), "Service")
    assert service["spec"]["selector"]["spark-role"] == "driver"
