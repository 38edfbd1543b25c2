"""docker-compose.yml and the job's Dockerfile, checked without Docker: the YAML parses, every
reference (depends_on, volumes, mounted paths, scrape targets, datasource URL) resolves, the job
and simulator commands are the documented ones, and the Dockerfile pins the Kafka connector to the
installed pyspark. `docker compose config` runs too where a Docker CLI with compose exists."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from tests.unit.metric_contract import REPO

pytestmark = pytest.mark.unit

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = REPO / "docker" / "job.Dockerfile"
PYSPARK_JARS = Path(__import__("pyspark").__file__).parent / "jars"

JOB_COMMAND = ["run", "--bootstrap-servers", "kafka:9092", "--topic", "rebalance.events",
               "--checkpoint", "/data/checkpoint", "--metrics-host", "0.0.0.0", "--source", "kafka"]
SIMULATOR_COMMAND = ["simulate", "--bootstrap-servers", "kafka:9092",
                     "--scenario", "multi-topic-skew", "--realtime", "--cluster", "simulator",
                     "--metrics-port", "9111"]


def dockerfile_arg(name: str) -> str:
    match = re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, name
    return match.group(1)


def test_the_stack_has_every_service():
    assert set(SERVICES) == {"kafka", "topic-init", "rebalance-monitor", "simulator",
                             "prometheus", "alertmanager", "grafana"}


def test_images_are_pinned_and_kafka_is_the_official_image_in_kraft_mode():
    for name, service in SERVICES.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), name
    kafka = SERVICES["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_ADVERTISED_LISTENERS"].startswith("PLAINTEXT://kafka:9092")
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", env["CLUSTER_ID"]), "a base64 UUID"
    assert not any("zookeeper" in name for name in SERVICES)


def test_job_and_simulator_run_the_documented_commands_from_the_built_image():
    job, simulator = SERVICES["rebalance-monitor"], SERVICES["simulator"]
    assert job["command"] == JOB_COMMAND
    assert simulator["command"] == SIMULATOR_COMMAND
    for service in (job, simulator):
        assert service["build"] == {"context": ".", "dockerfile": "docker/job.Dockerfile"}
        assert service["image"] == "rebalance-monitor:local"
    assert "9108:9108" in job["ports"]
    assert DOCKERFILE.is_file()


def test_depends_on_and_named_volumes_resolve():
    for name, service in SERVICES.items():
        depends = service.get("depends_on", [])
        for target in depends:
            assert target in SERVICES, (name, target)
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith("."):
                assert source in COMPOSE["volumes"], (name, source)
    assert SERVICES["rebalance-monitor"]["depends_on"]["topic-init"]["condition"] == \
        "service_completed_successfully"
    assert SERVICES["topic-init"]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_bind_mounted_paths_exist_and_match_the_configs_inside():
    mounts = {}
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("."):
                assert (REPO / source).exists(), (name, source)
                mounts[target] = REPO / source
    prometheus_command = SERVICES["prometheus"]["command"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus_command
    assert (mounts["/etc/prometheus"] / "prometheus.yml").is_file()
    assert (mounts["/etc/alertmanager"] / "alertmanager.yml").is_file()
    dashboards = yaml.safe_load(
        (mounts["/etc/grafana/provisioning"] / "dashboards" / "rebalance.yml").read_text())
    dashboards_dir = dashboards["providers"][0]["options"]["path"]
    assert sorted(p.name for p in mounts[dashboards_dir].glob("*.json")) == [
        "rebalance-group.json", "rebalance-overview.json"]


def test_prometheus_scrapes_the_job_service_and_alerts_to_alertmanager():
    config = yaml.safe_load((REPO / "dashboards" / "prometheus" / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"]
               for job in config["scrape_configs"] if "static_configs" in job}
    assert targets["rebalance-monitor"] == ["rebalance-monitor:9108"]
    assert targets["rebalance-simulator"] == ["simulator:9111"]
    for job in config["scrape_configs"]:
        for sd in job.get("file_sd_configs", ()):
            for name in sd["files"]:
                assert yaml.safe_load((REPO / "dashboards" / "prometheus" / name).read_text()) == []
    assert SERVICES["rebalance-monitor"]["hostname"] == "rebalance-monitor"
    (alertmanager,) = config["alerting"]["alertmanagers"]
    assert alertmanager["static_configs"][0]["targets"] == ["alertmanager:9093"]
    datasource = yaml.safe_load((REPO / "dashboards" / "grafana" / "provisioning" / "datasources"
                                 / "prometheus.yml").read_text())["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090" and "9090:9090" in \
        SERVICES["prometheus"]["ports"]


def test_topic_init_creates_the_jobs_topics():
    script = SERVICES["topic-init"]["command"][0]
    for topic in ("rebalance.events", "rebalance.findings", "rebalance.events.dlq"):
        assert topic in script
    assert "--if-not-exists" in script


def pinned(package: str) -> str:
    lines = (REPO / "constraints.txt").read_text().splitlines()
    (pin,) = [line.split("==")[1] for line in lines if line.lower().startswith(package + "==")]
    return pin


def test_dockerfile_pins_the_connector_to_the_installed_pyspark():
    spark_version = dockerfile_arg("SPARK_VERSION")
    scala = dockerfile_arg("SCALA_BINARY_VERSION")
    assert spark_version == version("pyspark") == pinned("pyspark")
    assert (PYSPARK_JARS / f"spark-core_{scala}-{spark_version}.jar").is_file()
    text = DOCKERFILE.read_text()
    assert ('--packages "org.apache.spark:spark-sql-kafka-0-10_${SCALA_BINARY_VERSION}:'
            '${SPARK_VERSION}"') in text
    assert 'pip install "pyspark==${SPARK_VERSION}"' in text
    assert 'pip install -c constraints.txt "pyspark==${SPARK_VERSION}" ".[job]"' in text
    assert "SPARK_CONF_DIR=/opt/spark/conf" in text


def test_dockerignore_lets_in_what_the_dockerfile_copies():
    ignore = (REPO / "docker" / "job.Dockerfile.dockerignore").read_text().split()
    copied = re.findall(r"^COPY (.+?) \S+$", DOCKERFILE.read_text(), re.MULTILINE)
    for sources in copied:
        for source in sources.split():
            assert f"!{source}" in ignore or f"!{source}/" in ignore, source


def test_docker_compose_config_accepts_the_file_where_docker_exists():
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"],
                                        capture_output=True).returncode != 0:
        pytest.skip("no Docker CLI with the compose plugin here")
    result = subprocess.run([docker, "compose", "-f", str(REPO / "docker-compose.yml"), "config",
                             "--quiet"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
