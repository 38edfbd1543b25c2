"""The job on a real Spark standalone cluster (a Master and two Workers started here with
spark-class, an executor on each), submitted with spark-submit and --py-files, gives the same
/metrics as in local mode, with the job's tasks on both executors and events in both forms (each
member's heartbeats, and a group's members said alive in one event).

It runs alone (the `alone` marker; the Makefile runs those tests after the others): five JVMs and
their Python workers beside a RocketMQ broker's start were too much for two cores.

The driver and executors run a "deps-only" interpreter: it sees pyspark, pandas, pyarrow,
confluent-kafka and prometheus-client but not this project, so the job's code can only come
from the --py-files zip, as on a real cluster. docs/deploy.md describes the same commands.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from streaming.jars import spark_kafka_jars
from tests.environment import TEST_SOURCE
from tests.integration.job_process import WALL_CLOCK_SERIES
from tests.integration.monitor_harness import RunningMonitor, produce_events
from tests.integration.seed_scenarios import seed_events
from tests.integration.spark_cluster import (
    StandaloneCluster,
    SubmittedApp,
    deps_only_python,
    fetch_json,
    free_port,
    poll,
)
from tests.support import Scrape
from tests.unit.state_helpers import T0, route

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.alone,
              pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
SEED_GROUPS = {"g-skew", "g-433", "g-gap", "g-shared", "g-mixed"}
WORKERS = 2


def comparable(scrape: Scrape) -> dict[tuple, float]:
    """Every rebalance_* sample except the wall-clock ones (the source probe's among them), keyed
    by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in scrape.samples
            if s.name.startswith("rebalance_") and s.name not in WALL_CLOCK_SERIES
            and not s.name.endswith("_created")}


def scrape_or_none(url: str) -> Scrape | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return Scrape(response.read().decode())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def build_pyfiles(destination: Path) -> Path:
    """The Makefile's way: python scripts/build_pyfiles.py DEST."""
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_pyfiles.py"), str(destination)],
                   check=True, capture_output=True)
    names = zipfile.ZipFile(destination).namelist()
    assert {"streaming/__init__.py", "streaming/spark/job.py", "producers/__init__.py",
            "streaming/core/state/event.schema.json"} <= set(names)
    assert all(n.split("/")[0] in ("streaming", "producers") and "__pycache__" not in n
               for n in names)
    return destination


def connector_jars() -> list[str]:
    """Spark's Kafka source for spark-submit, as an operator passes it: --jars from the cache
    (or --packages with Maven Central at hand)."""
    if TEST_SOURCE != "kafka":
        return []
    return ["--jars", ",".join(str(jar) for jar in spark_kafka_jars())]


def submit_args(zip_path: Path, python: Path, bootstrap: str, topic: str, checkpoint: Path,
                metrics_port: int, ui_port: int) -> list[str]:
    return ["--conf", f"spark.pyspark.python={python}",
            "--conf", f"spark.pyspark.driver.python={python}",
            "--conf", f"spark.ui.port={ui_port}",
            "--total-executor-cores", str(WORKERS), "--executor-cores", "1",
            "--executor-memory", "512m",
            "--py-files", str(zip_path), *connector_jars(),
            str(REPO / "streaming" / "spark" / "job.py"), "run",
            "--bootstrap-servers", bootstrap, "--topic", topic, "--checkpoint", str(checkpoint),
            "--source", TEST_SOURCE, "--metrics-host", "127.0.0.1",
            "--metrics-port", str(metrics_port), "--trigger-interval-ms", "500",
            "--shuffle-partitions", "2", "--findings-topic", topic + ".cluster.findings",
            "--dead-letter-topic", topic + ".cluster.dlq"]


def local_mode_metrics(spark, bootstrap: str, topic: str, workdir: Path) -> dict[tuple, float]:
    with RunningMonitor(spark, bootstrap, topic, workdir) as monitor:
        monitor.wait_for(lambda m: m.groups() >= SEED_GROUPS
                         and m.value("rebalance_monitor_events_total", type="heartbeat") == 16)
        monitor.catch_up()
        return comparable(monitor.scrape())


def kept_alive() -> list[dict]:
    """g-433's three members said alive at 100 s, with one it never heard (c9), then its route
    at 140 s: past the 120 s sessions of the seed's heartbeats, before the other groups'
    sessions end by the watermark (30 s behind)."""
    return [{"type": "alive", "ts": T0 + 100_000, "group": "g-433",
             "members": [["c1"], ["c2"], ["c3"], ["c9"]]},
            route("T", T0 + 140_000, group="g-433", brokers={"broker-a": 10})]


def test_standalone_cluster_gives_the_same_metrics_as_local_mode(
        spark, kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    produce_events(kafka_bootstrap, topic, seed_events() + kept_alive())
    zip_path = build_pyfiles(tmp_path / "dist" / "rebalance_monitor.zip")
    python = deps_only_python(tmp_path / "deps-python", Path(sysconfig.get_path("purelib")))
    assert subprocess.run([str(python), "-c", "import streaming"], cwd=tmp_path,
                          capture_output=True).returncode == 1, "the project must come from the zip"
    port, ui_port = free_port(), free_port()
    with StandaloneCluster(tmp_path / "cluster", cores=1, memory="1g",
                           workers=WORKERS) as cluster:
        # --py-files alone: the job itself makes the shipped zip visible to Spark 4's
        # driver-side planner of Python sources (source_embedded.expose_py_files_to_driver_planner).
        env = dict(cluster.env)
        args = submit_args(zip_path, python, kafka_bootstrap, topic, tmp_path / "checkpoint",
                           port, ui_port)
        with SubmittedApp(cluster.master_url, args, tmp_path / "app", env) as app:
            expected = local_mode_metrics(spark, kafka_bootstrap, topic, tmp_path / "local")
            url = f"http://127.0.0.1:{port}/metrics"
            try:
                poll("the cluster job's /metrics to equal local mode's",
                     lambda: (m := scrape_or_none(url)) and comparable(m) == expected,
                     timeout=150, processes=[app.process])
            except AssertionError as failure:
                last = scrape_or_none(url)
                raise AssertionError(
                    f"{failure}\nexpected - actual: {sorted(set(expected.items()) - set(comparable(last).items()) if last else expected)}"
                    f"\nactual - expected: {sorted(set(comparable(last).items()) - set(expected.items())) if last else None}"
                    f"\n{cluster.executor_logs()}") from None
            assert expected[("rebalance_double_assigned_queues", (
                ("cluster", "default"), ("group", "g-shared"), ("system", "rocketmq"),
                ("topic", "T")))] == 2
            assert expected[("rebalance_monitor_groups", ())] == 5
            g433 = (("cluster", "default"), ("group", "g-433"), ("system", "rocketmq"))
            assert expected[("rebalance_group_members", g433)] == 3     # kept by the alive
            assert expected[("rebalance_alive_unknown_members_total", g433)] == 1
            app_status = cluster.running_app("rebalance-monitor")
            assert app_status is not None and app_status["cores"] == WORKERS
            assert [w["coresused"] for w in cluster.alive_workers()] == [1] * WORKERS
            poll("each worker's executor to have run some of the job's tasks",
                 lambda: (tasks := executor_tasks(ui_port)) is not None
                 and len(tasks) == WORKERS and all(tasks.values()),
                 timeout=60, processes=[app.process])

            stop_gracefully(app)


def executor_tasks(ui_port: int) -> dict[str, int] | None:
    """Each executor's completed tasks from the driver's REST API (the driver left out), or None
    while it does not answer."""
    base = f"http://127.0.0.1:{ui_port}/api/v1/applications"
    applications = fetch_json(base)
    if not applications:
        return None
    executors = fetch_json(f"{base}/{applications[0]['id']}/executors")
    if executors is None:
        return None
    return {e["id"]: e["completedTasks"] for e in executors if e["id"] != "driver"}


def stop_gracefully(app: SubmittedApp, timeout: float = 60.0) -> None:
    """SIGTERM to the Python driver: the query stops, the producer flushes, spark-submit exits 0."""
    driver = app.python_driver_pid()
    assert driver is not None, app.process.log_tail()
    started = time.monotonic()
    os.kill(driver, signal.SIGTERM)
    try:
        code = app.process.popen.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"spark-submit still running {timeout:.0f} s after SIGTERM\n"
                             f"{app.process.log_tail()}") from None
    assert code == 0, app.process.log_tail()
    assert time.monotonic() - started < timeout
