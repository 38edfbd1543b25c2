"""A broker outage is a few lines, not a line per retry: the real `rebalance-monitor run`,
`simulate` and `observe-kafka` processes against a real Apache Kafka broker that is stopped (its
port refuses connections, as a crashed or restarting broker's does) and started again on the
same port. (observe-rocketmq's events producer is the same Outbox and client as theirs; its
NameServer polls log once per change, tests/unit/test_producer_health.py.)

Each process writes one line when the outage starts and one when it ends per thing that noticed
(the job: its events probe and its findings producer), none in between, and counts the failed
attempts on /metrics. The job runs with `--log-format json`: every line it writes, from the
start through the outage to its stop (SIGTERM to its process group), is a JSON object, the
JVM's included.
"""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest

from streaming.common.topics import create_topic
from streaming.kafka_broker import ApacheKafkaBroker
from tests.integration.job_process import SPARK_SUBMIT_ARGS, JobProcess, events_total
from tests.integration.producer_process import ProducerProcess
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_S = 75.0
# After this much of an outage a process says nothing more until it ends: a 10-minute outage
# writes what this one does.
FIRST_MINUTE_S = 60.0
# A process says each fault once as it starts and once as it ends. The job can say one more: when
# a batch was in flight as the outage began, its query's restarts are said in one line when the
# events topic is back (streaming/spark/batch_errors.py). A CI run wrote 6 that way.
MAX_LINES_PER_OUTAGE = 6


@pytest.fixture
def own_broker(kafka_broker_kind, tmp_path):
    """A broker of the test's own, to stop and start again (stopping the session's would fail
    every other test)."""
    if kafka_broker_kind != "apache":
        pytest.skip(f"stopping needs an Apache Kafka broker process, not {kafka_broker_kind}")
    broker = ApacheKafkaBroker(tmp_path / "own-kafka", heap="256m", tls=False).start()
    yield broker
    broker.stop()


def lines_of(path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


def test_an_outage_is_a_line_at_its_start_and_one_at_its_end_and_json_stays_json(
        own_broker, tmp_path):
    bootstrap, topic = own_broker.bootstrap_servers, f"outage.{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=2)
    job = JobProcess(bootstrap, topic, tmp_path / "checkpoint", tmp_path,
                     findings_topic=f"{topic}.findings", dead_letter_topic=f"{topic}.dlq",
                     env={"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS},
                     extra_args=("--log-format", "json")).start()
    simulate = ProducerProcess(
        ["simulate", "--realtime", "--scenario", "steady", "--groups", "5", "--clients", "2",
         "--simulated-seconds", "100000", "--rate", "20", "--bootstrap-servers", bootstrap,
         "--topic", topic], tmp_path).start()
    observer = ProducerProcess(
        ["observe-kafka", "--bootstrap-servers", bootstrap, "--topic", f"{topic}.observed",
         "--interval-seconds", "1", "--timeout-seconds", "2"], tmp_path).start()
    producers = (simulate, observer)
    logs = {"run": job.log_path, "simulate": simulate.log_path,
            "observe-kafka": observer.log_path}
    try:
        job.wait_for(lambda m: events_total(m) > 0, timeout=180)
        before = {name: len(lines_of(path)) for name, path in logs.items()}

        own_broker.stop()
        stopped_at = time.monotonic()
        wait_until(lambda: all("brokers not answering" in path.read_text()
                               for path in logs.values()), 60, "the outage's first lines")
        after_first_minute = _lines_at(logs, stopped_at + FIRST_MINUTE_S, job, producers)
        at_the_end = _lines_at(logs, stopped_at + OUTAGE_S, job, producers)
        own_broker.restart()
        ended = {"run": ("events topic", "reachable"), "simulate": ("brokers answer again",),
                 "observe-kafka": ("brokers answer again",)}
        wait_until(lambda: all(_said_after(path, before[name], ended[name])
                               for name, path in logs.items()), 90, "the outage's last lines")
        job_scrape = job.wait_for(lambda m: _client_errors(m) > 0)
        simulate_scrape = simulate.wait_for(lambda m: _client_errors(m) > 0,
                                            what="simulate's failed attempts")
        observer_scrape = observer.wait_for(
            lambda m: _client_errors(m) > 0 and sum(m.series(
                "rebalance_observer_poll_failures_total").values()) > 0,
            what="observe-kafka's failed attempts and polls")
        outage_lines = {name: lines_of(path)[before[name]:] for name, path in logs.items()}

        assert job.kill(signal.SIGTERM, timeout=30) == 0, job.log_tail()
    finally:
        job.kill()
        simulate.stop()
        observer.stop()

    for name in logs:
        shown = "\n".join(outage_lines[name])
        assert at_the_end[name] == after_first_minute[name], (name, shown)
        assert len(outage_lines[name]) <= MAX_LINES_PER_OUTAGE, (name, shown)
    assert sum(job_scrape.series("rebalance_monitor_source_errors_total").values()) > 0
    print(f"failed attempts: run {_client_errors(job_scrape):.0f}, "
          f"simulate {_client_errors(simulate_scrape):.0f}, "
          f"observe-kafka {_client_errors(observer_scrape):.0f}; outage lines: "
          f"{ {name: len(lines) for name, lines in outage_lines.items()} }")

    job_lines = lines_of(job.log_path)
    assert any("stopping" in line for line in job_lines), job.log_tail()
    for line in job_lines:
        record = json.loads(line)
        assert {"time", "level", "logger", "message"} <= record.keys(), line


def _lines_at(logs, moment: float, job, producers) -> dict[str, int]:
    """Each log's line count at `moment`, every process's /metrics answering until then."""
    while time.monotonic() < moment:
        assert job.try_scrape() is not None
        assert all(producer.try_scrape() is not None for producer in producers)
        time.sleep(min(1.0, max(0.0, moment - time.monotonic())))  # the outage goes on
    return {name: len(lines_of(path)) for name, path in logs.items()}


def _said_after(path, start: int, words: tuple[str, ...]) -> bool:
    return any(all(word in line for word in words) and "unreachable" not in line
               for line in lines_of(path)[start:])


def _client_errors(scrape) -> float:
    return sum(scrape.series("rebalance_monitor_producer_client_errors_total").values())
