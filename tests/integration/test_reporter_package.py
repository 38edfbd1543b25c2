"""The Kafka reporter, meant to run inside a consumer application, installs without Spark: the
project's wheel in a clean virtualenv (no pyspark, pandas nor pyarrow, from PyPI with the
project's constraints), and a real confluent-kafka consumer in it reports, against the real
Kafka, the partitions it holds. The job's commands say in one line what they lack."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import read_values

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
JOB_PACKAGES = ("pyspark", "pandas", "pyarrow")

CONSUMER = textwrap.dedent("""
    import json, sys
    from confluent_kafka import Consumer
    from producers.kafka.reporter import RebalanceReporter

    bootstrap, topic, events, group = sys.argv[1:5]
    reporter = RebalanceReporter({"bootstrap.servers": bootstrap}, events, group, "range",
                                 cluster="packaged")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "partition.assignment.strategy": "range"})
    consumer.subscribe([topic], **reporter.hooks(consumer, [topic]))
    reporter.start()
    while not consumer.assignment():
        consumer.poll(0.2)
    held = sorted([tp.topic, tp.partition] for tp in consumer.assignment())
    reporter.heartbeat()
    print(json.dumps({"member_id": reporter.member_id, "holds": held}), flush=True)
    sys.stdin.readline()                  # until the test has read the heartbeat
    consumer.close()
    reporter.close()
""")


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600,
                          **kwargs)


@pytest.fixture(scope="module")
def reporter_venv(tmp_path_factory) -> Path:
    """A virtualenv with the project's wheel and its base dependencies only."""
    work = tmp_path_factory.mktemp("reporter-package")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work / "dist",
                REPO)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (work / "dist").glob("rebalance_monitor-*.whl")
    run(sys.executable, "-m", "venv", work / "venv").check_returncode()
    python = work / "venv" / "bin" / "python"
    installed = run(python, "-m", "pip", "install", "-q", "-c", REPO / "constraints.txt", wheel,
                    cwd=work)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return work / "venv"


def test_the_wheel_installs_without_the_jobs_packages(reporter_venv):
    listed = run(reporter_venv / "bin" / "python", "-m", "pip", "list", "--format", "json")
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "rebalance-monitor" in names and "confluent-kafka" in names
    assert not names & set(JOB_PACKAGES), names & set(JOB_PACKAGES)


def test_the_job_says_in_one_line_what_it_lacks_and_the_producers_run(reporter_venv):
    command = reporter_venv / "bin" / "rebalance-monitor"
    for job_command in ("run", "demo"):
        refused = run(command, job_command, "--help")
        assert refused.returncode == 2, refused
        assert refused.stderr.count("\n") == 1 and "rebalance-monitor[job]" in refused.stderr
        assert "Traceback" not in refused.stderr
    for producer in ("observe-kafka", "observe-rocketmq", "simulate", "allocate"):
        helped = run(command, producer, "--help")
        assert helped.returncode == 0, (producer, helped.stderr[-2000:])


def test_a_consumer_in_the_clean_venv_reports_what_it_holds(reporter_venv, kafka_bootstrap,
                                                            make_topic, tmp_path):
    topic, events = make_topic(3), make_topic(1)
    group = f"{topic}.packaged"
    script = tmp_path / "consumer.py"
    script.write_text(CONSUMER)
    consumer = subprocess.Popen(
        [str(reporter_venv / "bin" / "python"), str(script), kafka_bootstrap, topic, events,
         group], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path)
    try:
        truth = json.loads(consumer.stdout.readline() or "{}")
        assert truth.get("holds") == [[topic, p] for p in range(3)], consumer.stderr.read()

        def reported(values: list[bytes]) -> bool:
            return any(e["type"] == "heartbeat" and e["group"] == group
                       and e["client_id"] == truth["member_id"] and e["owned"] == truth["holds"]
                       for e in map(json.loads, values))

        read_values(kafka_bootstrap, events, reported, timeout=60)
    finally:
        consumer.communicate("\n", timeout=60)
    assert consumer.returncode == 0
