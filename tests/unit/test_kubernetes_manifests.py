"""deploy/kubernetes/: each manifest is valid against its custom resource's schema, as the API
server checks it, without a cluster or a network: the schemas are the upstream CRDs' own,
vendored in tests/data/kubernetes/ (its README names their sources). A broken copy of each is
refused, so the check is live. And the manifests agree with each other and with the job: the
port Prometheus scrapes is the one the job serves, the arguments parse as `rebalance-monitor run`,
the Spark and Python versions are the image's.
"""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
import yaml

from streaming import cli
from tests.unit.kubernetes_schemas import VENDORED, errors_of, structural, with_field_set
from tests.unit.metric_contract import REPO

pytestmark = pytest.mark.unit

MANIFESTS = REPO / "deploy" / "kubernetes"
SCHEMAS = REPO / "tests" / "data" / "kubernetes"


VALIDATORS = VENDORED


def problems(document: dict) -> list[str]:
    validator = VALIDATORS[document["apiVersion"], document["kind"]]
    return errors_of(validator, document)


def manifest(kind: str) -> dict:
    (document,) = [d for path in sorted(MANIFESTS.glob("*.yaml"))
                   for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind]
    return document


def test_every_manifest_has_a_vendored_schema_and_is_valid_against_it():
    documents = [(path.name, d) for path in sorted(MANIFESTS.glob("*.yaml"))
                 for d in yaml.safe_load_all(path.read_text())]
    assert sorted(d["kind"] for _, d in documents) == ["PodMonitor", "SparkApplication"]
    for name, document in documents:
        assert (document["apiVersion"], document["kind"]) in VALIDATORS, name
        assert problems(document) == [], name


def broken(kind: str, path: str, value) -> dict:
    """A copy of the manifest with the field at `path` (dots; a number indexes a list) set."""
    return with_field_set(manifest(kind), path, value)


@pytest.mark.parametrize("kind, path, value, wanted", [
    ("SparkApplication", "spec.driver.cores", "1", "is not of type 'integer'"),
    ("SparkApplication", "spec.executor.instances", 0, "less than the minimum of 1"),
    ("SparkApplication", "spec.type", "Pyhton", "is not one of"),
    ("SparkApplication", "spec.driver.memroy", "2g", "Additional properties are not allowed"),
    ("SparkApplication", "spec.driver.ports.0.containerPort", "9108", "is not of type 'integer'"),
    ("PodMonitor", "spec.podMetricsEndpoints.0.port", 9108, "is not of type 'string'"),
    ("PodMonitor", "spec.podMetricsEndpoints.0.interval", "15 seconds", "does not match"),
    ("PodMonitor", "spec.selectr", {}, "Additional properties are not allowed"),
])
def test_a_broken_copy_is_refused(kind, path, value, wanted):
    found = problems(broken(kind, path, value))
    assert len(found) == 1 and wanted in found[0], found


def test_a_manifest_without_a_required_field_is_refused():
    document = copy.deepcopy(manifest("SparkApplication"))
    del document["spec"]["mainApplicationFile"]
    assert problems(document) == ["spec: 'mainApplicationFile' is a required property"]


def spark_application() -> dict:
    return manifest("SparkApplication")["spec"]


def job_arguments() -> dict:
    argv = spark_application()["arguments"]
    return vars(cli.build_parser(argv).parse_args(argv))


def test_the_arguments_are_the_job_commands_options():
    args = job_arguments()
    assert (args["command"], args["source"], args["checkpoint"]) == ("run", "kafka",
                                                                      "/data/checkpoint")


def test_prometheus_scrapes_the_port_the_job_serves_on_the_driver():
    spec = spark_application()
    (port,) = spec["driver"]["ports"]
    assert port["containerPort"] == job_arguments()["metrics_port"]
    assert job_arguments()["metrics_host"] == "0.0.0.0"
    monitor = manifest("PodMonitor")["spec"]
    (endpoint,) = monitor["podMetricsEndpoints"]
    assert (endpoint["port"], endpoint["path"]) == (port["name"], "/metrics")
    # Spark labels the driver pod spark-role=driver; the rest are the manifest's own labels.
    selected = monitor["selector"]["matchLabels"]
    assert selected == {**spec["driver"]["labels"], "spark-role": "driver"}
    assert spec["driver"]["labels"][monitor["jobLabel"]] == "rebalance-monitor"


def test_the_driver_and_every_executor_mount_the_checkpoint():
    spec = spark_application()
    (volume,) = spec["volumes"]
    for pod in ("driver", "executor"):
        (mount,) = spec[pod]["volumeMounts"]
        assert mount["name"] == volume["name"]
        assert job_arguments()["checkpoint"].startswith(mount["mountPath"] + "/")


def test_spark_and_python_versions_are_the_images():
    spec = spark_application()
    pinned = re.search(r"^pyspark==(\S+)$", (REPO / "constraints.txt").read_text(), re.M)
    assert spec["sparkVersion"] == pinned.group(1)
    python = re.search(r"^FROM python:(\d+\.\d+)-", (REPO / "docker" / "job.Dockerfile").read_text(),
                       re.M)
    assert spec["mainApplicationFile"] == (
        f"local:///usr/local/lib/python{python.group(1)}/site-packages/streaming/spark/job.py")
    image_dockerfile = (REPO / "docker" / "spark-kubernetes.Dockerfile").read_text()
    assert spec["image"].split(":")[0] in image_dockerfile


def test_the_schemas_readme_names_each_vendored_file():
    readme = (SCHEMAS / "README.md").read_text()
    for path in SCHEMAS.glob("*.json"):
        assert path.name in readme


def test_the_structural_rules_match_the_api_servers():
    schema = structural({"type": "object", "properties": {
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "map": {"type": "object", "additionalProperties": {"type": "string"}},
        "maybe": {"type": "string", "nullable": True}}})
    validator = jsonschema.Draft4Validator(schema)
    assert validator.is_valid({"free": {"any": 1}, "map": {"a": "b"}, "maybe": None})
    assert not validator.is_valid({"unknown": 1})
    assert not validator.is_valid({"map": {"a": 1}})
