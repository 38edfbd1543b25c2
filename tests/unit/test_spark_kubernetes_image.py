"""docker/spark-kubernetes.Dockerfile, checked without Docker: its entry point answers the
commands Spark starts its Kubernetes pods with (run here with stand-ins for spark-submit, java and
rebalance-monitor that print what they were given), and it puts exactly the Kafka connector's
jars that pyspark lacks on the classpath."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from streaming import jars
from tests.unit.metric_contract import REPO

pytestmark = pytest.mark.unit

DOCKER = REPO / "docker"
DOCKERFILE = DOCKER / "spark-kubernetes.Dockerfile"
ENTRYPOINT = DOCKER / "spark-kubernetes-entrypoint.sh"
# What Spark sets in an executor pod's environment (its BasicExecutorFeatureStep).
EXECUTOR_ENV = {"SPARK_EXECUTOR_MEMORY": "2g", "SPARK_DRIVER_URL": "spark://driver:7078",
                "SPARK_EXECUTOR_ID": "1", "SPARK_EXECUTOR_CORES": "2",
                "SPARK_APPLICATION_ID": "spark-app", "SPARK_EXECUTOR_POD_IP": "10.0.0.7",
                "SPARK_RESOURCE_PROFILE_ID": "0", "SPARK_EXECUTOR_POD_NAME": "rm-exec-1",
                "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078", "SPARK_JAVA_OPT_1": "-Da=b c"}


def stand_in(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "{path.name}" "$@"\n')
    path.chmod(0o755)


@pytest.fixture
def pod(tmp_path: Path) -> dict[str, str]:
    """A pod's environment: SPARK_HOME and JAVA_HOME with stand-ins, rebalance-monitor on PATH."""
    for program in ("spark-home/bin/spark-submit", "java-home/bin/java", "bin/rebalance-monitor"):
        stand_in(tmp_path / program)
    return {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SPARK_HOME": str(tmp_path / "spark-home"),
            "JAVA_HOME": str(tmp_path / "java-home"), "HOME": str(tmp_path)}


def started(env: dict[str, str], *args: str) -> list[str]:
    result = subprocess.run([str(ENTRYPOINT), *args], env=env, capture_output=True, text=True,
                            timeout=30, cwd=env["HOME"])
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_driver_is_spark_submit_in_client_mode_on_the_pods_address(pod):
    env = {**pod, "SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5"}
    argv = started(env, "driver", "--properties-file", "/opt/spark/conf/spark.properties",
                   "--class", "org.apache.spark.deploy.PythonRunner", "local:///job.py", "run")
    assert argv == ["spark-submit", "--conf", "spark.driver.bindAddress=10.0.0.5",
                    "--conf", "spark.executorEnv.SPARK_DRIVER_POD_IP=10.0.0.5",
                    "--deploy-mode", "client", "--properties-file",
                    "/opt/spark/conf/spark.properties", "--class",
                    "org.apache.spark.deploy.PythonRunner", "local:///job.py", "run"]


def test_an_executor_is_sparks_kubernetes_backend_on_pysparks_jars(pod):
    argv = started({**pod, **EXECUTOR_ENV}, "executor")
    assert argv[:5] == ["java", "-Dspark.driver.port=7078", "-Da=b c", "-Xms2g", "-Xmx2g"]
    classpath = argv[argv.index("-cp") + 1].split(":")
    assert f"{pod['SPARK_HOME']}/jars/*" in classpath
    backend = argv.index("org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend")
    assert argv[backend + 1:] == [
        "--driver-url", "spark://driver:7078", "--executor-id", "1", "--cores", "2",
        "--app-id", "spark-app", "--hostname", "10.0.0.7", "--resourceProfileId", "0",
        "--podName", "rm-exec-1"]


def test_any_other_command_is_rebalance_monitors(pod):
    assert started(pod, "run", "--topic", "rebalance.events") == [
        "rebalance-monitor", "run", "--topic", "rebalance.events"]


def test_the_entry_point_is_executable_and_the_image_uses_it():
    assert os.access(ENTRYPOINT, os.X_OK)
    text = DOCKERFILE.read_text()
    assert f"COPY docker/{ENTRYPOINT.name} /opt/rebalance-monitor/{ENTRYPOINT.name}" in text
    assert f'ENTRYPOINT ["/opt/rebalance-monitor/{ENTRYPOINT.name}"]' in text
    ignore = (DOCKER / "spark-kubernetes.Dockerfile.dockerignore").read_text().split()
    assert f"!docker/{ENTRYPOINT.name}" in ignore


def test_the_image_adds_the_connectors_jars_that_pyspark_lacks():
    loop = re.search(r"for artifact in (.+?); do", DOCKERFILE.read_text(), re.S)
    assert loop.group(1).replace("\\", " ").split() == list(jars.SPARK_KAFKA_ARTIFACTS)
