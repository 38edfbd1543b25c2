"""The long-running producer commands against a real broker that stops answering (SIGSTOP, then
SIGCONT): observe-kafka and simulate as real processes with their own /metrics, the reporter in
this process as in a user's consumer. Each goes on through the outage, counts its failures by
cause on /metrics, logs each change of state once, and gets its events through afterwards.
Every broker here is the test's own (pausing the session's would stall every other test).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from producers.kafka.reporter import RebalanceReporter
from producers.simulator import cli as simulator_cli
from producers.simulator.clock import FastClock
from streaming.common.options import OneLineParser
from streaming.common.topics import create_topic
from streaming.embedded_broker import EmbeddedBroker
from tests.integration.producer_process import ProducerProcess, paused
from tests.support import read_values

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def own_broker():
    with EmbeddedBroker() as broker:
        yield broker


def commit_offsets(bootstrap: str, group: str, topic: str) -> None:
    """A consumer group the cluster lists (it has committed offsets on `topic`)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    finally:
        consumer.close()


def log_lines(text: str, fragment: str) -> list[str]:
    return [line for line in text.splitlines() if fragment in line]


def test_observe_kafka_polls_through_a_broker_pause_and_resumes(own_broker, tmp_path):
    bootstrap = own_broker.bootstrap_servers
    stem = uuid.uuid4().hex[:8]
    events, data, group = f"events.{stem}", f"data.{stem}", f"observed-{stem}"
    create_topic(bootstrap, events, 1)
    create_topic(bootstrap, data, 2)
    commit_offsets(bootstrap, group, data)

    def routes_after(ts_ms: int):
        def seen(values: list[bytes]) -> bool:
            return any(e["type"] == "route" and e["group"] == group and e["ts"] > ts_ms
                       for e in map(json.loads, values))
        return seen

    with ProducerProcess(["observe-kafka", "--bootstrap-servers", bootstrap, "--topic", events,
                          "--interval-seconds", "1", "--timeout-seconds", "2"], tmp_path) as observer:
        observer.wait_for(lambda m: m.value("rebalance_observer_events_total") >= 1,
                          what="a first successful poll")
        read_values(bootstrap, events, routes_after(0))
        with paused(own_broker):
            during = observer.wait_for(
                lambda m: m.total("rebalance_observer_poll_failures_total") >= 3,
                what="polls failing during the pause")
            # The outage itself lasts 20 s; meanwhile the command keeps running and answering.
            end = time.monotonic() + 20
            while time.monotonic() < end:
                observer.wait_for(lambda m: True, what="/metrics during the pause")
                time.sleep(1)
            paused_scrape = observer.wait_for(lambda m: True, what="/metrics at the end")
            resumed_after_ms = int(time.time() * 1000)
        after = observer.wait_for(
            lambda m: m.value("rebalance_observer_last_success_timestamp_seconds") * 1000
            > resumed_after_ms, timeout=40, what="a successful poll after the pause")
        read_values(bootstrap, events, routes_after(resumed_after_ms), timeout=40)
        assert observer.stop() == 0  # SIGTERM: a clean exit, the producer flushed
    log = observer.log()

    failures = paused_scrape.series("rebalance_observer_poll_failures_total")
    assert sum(failures.values()) >= 5, failures
    assert {dict(labels)["cause"] for labels in failures} <= {
        "RequestTimedOutError", "KafkaTimeoutError", "KafkaConnectionError", "timed_out",
        "transport", "NodeNotReadyError"}, failures
    calls = during.series("rebalance_observer_calls_total")
    assert any(dict(k)["outcome"] != "ok" for k in calls), calls
    assert after.value("rebalance_observer_groups") >= 1
    # Logged when the outage starts and when it ends, not once per failed poll: by the request
    # that failed (a poll that failed with it is not said twice), or by the poll itself.
    failing = [line for line in log.splitlines() if " failing: " in line]
    again = [line for line in log.splitlines() if " works again " in line]
    assert 1 <= len(failing) <= 3 and 1 <= len(again) <= 3, log[-3000:]
    assert len(failing) + len(again) < sum(failures.values()), log[-3000:]
    assert "Traceback" not in log, log[-3000:]


def test_simulate_goes_on_through_a_broker_pause_and_loses_nothing(own_broker, tmp_path):
    bootstrap = own_broker.bootstrap_servers
    topic = f"sim.{uuid.uuid4().hex[:8]}"
    # 1,282 events at 50 a second (in bursts of 256): about 26 s; the broker is paused for 12.
    scenario_args = ["--scenario", "steady", "--groups", "10", "--clients", "4",
                     "--simulated-seconds", "300", "--seed", "3"]
    parser = OneLineParser()
    simulator_cli.add_arguments(parser)
    expected = [value for _, value in simulator_cli.build_scenario(
        parser.parse_args(scenario_args).config).run_encoded(FastClock())]

    with ProducerProcess(["simulate", *scenario_args, "--bootstrap-servers", bootstrap,
                          "--topic", topic, "--create-topic", "2", "--rate", "50",
                          "--attempts", "50", "--kafka-option", "message.timeout.ms=2000"],
                         tmp_path) as simulate:
        simulate.wait_for(lambda m: m.value("rebalance_simulator_events_total") >= 256,
                          what="the first burst of events")
        read_values(bootstrap, topic, lambda values: len(values) >= 256)
        with paused(own_broker):
            during = simulate.wait_for(
                lambda m: (m.value("rebalance_monitor_produce_errors_total",
                                   cause="msg_timed_out", topic=topic) or 0) > 0,
                what="deliveries failing during the pause")
            end = time.monotonic() + 12  # the outage itself
            while time.monotonic() < end:
                simulate.wait_for(lambda m: True, what="/metrics during the pause")
                time.sleep(1)
        code = simulate.wait_exit(timeout=90)
    log = simulate.log()
    assert code == 0, log[-3000:]

    assert during.series("rebalance_monitor_undelivered_records_total") == {}
    (summary,) = log_lines(log, "simulate: steady:")
    assert f"{len(expected)} events to {topic}" in summary and ", 0 failed" in summary, summary
    assert "failed attempts: msg_timed_out" in summary, summary
    # Every event is in the topic (a timed-out attempt may have landed too: at least once).
    values = read_values(bootstrap, topic, lambda v: set(v) >= set(expected), timeout=40)
    assert len(values) >= len(expected)
    # Each change of the topic's state logged once, not once per failed record.
    failing = log_lines(log, f"delivery to {topic} failing")
    assert 1 <= len(failing) <= 3, log[-3000:]
    assert 1 <= len(log_lines(log, f"delivery to {topic} works again")) <= 3, log[-3000:]


def test_simulate_stopped_by_sigterm_flushes_and_says_so(kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic(1)
    with ProducerProcess(["simulate", "--scenario", "steady", "--groups", "2", "--realtime",
                          "--bootstrap-servers", kafka_bootstrap, "--topic", topic],
                         tmp_path) as simulate:
        first = simulate.wait_for(lambda m: m.value("rebalance_simulator_events_total") >= 1,
                                  what="the first events")
        assert simulate.stop() == 0
    (summary,) = log_lines(simulate.log(), "simulate: steady:")
    assert ", 0 failed" in summary, simulate.log()
    assert "simulate: stopped after" in simulate.log()
    produced = int(summary.split(": ")[2].split()[0])
    assert produced >= first.value("rebalance_simulator_events_total")
    read_values(kafka_bootstrap, topic, lambda values: len(values) >= produced)


def test_the_reporter_never_blocks_nor_raises_into_the_consumer_through_a_pause(own_broker):
    bootstrap = own_broker.bootstrap_servers
    topic = f"events.{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    reporter = RebalanceReporter({"bootstrap.servers": bootstrap,
                                  "message.timeout.ms": 1500}, topic, "orders", "range",
                                 client_id="c1", interval_s=3600)
    reporter.owned = {("A", 0)}
    reporter.start()
    reporter.heartbeat()
    read_values(bootstrap, topic, lambda values: len(values) >= 1)
    sent, slowest = 1, 0.0
    with paused(own_broker):
        # The consumer's callbacks heartbeat through the 8 s outage: each returns at once.
        end = time.monotonic() + 8
        while time.monotonic() < end:
            started = time.monotonic()
            reporter.heartbeat()
            slowest = max(slowest, time.monotonic() - started)
            sent += 1
            time.sleep(0.25)  # the consumer's own pace between rebalances, not a wait
        during = reporter.stats.snapshot()
    reporter.heartbeat()
    sent += 1
    reporter.close(timeout_s=30)
    sent += 1  # the unregister
    after = reporter.stats.snapshot()

    assert slowest < 0.5
    assert during.errors.get((topic, "msg_timed_out"), 0) > 0, during
    # Nothing lost silently: every heartbeat is delivered or counted as given up on.
    delivered = after.delivered.get(topic, 0)
    undelivered = sum(after.undelivered.values())
    assert delivered + undelivered == sent, after
    assert set(after.undelivered) <= {(topic, "msg_timed_out")}, after
    values = read_values(bootstrap, topic, lambda v: len(v) >= delivered)
    # A retried heartbeat may land after the unregister: its older ts never undoes it
    # (docs/events.md, "Ordering").
    (unregister,) = [e for e in map(json.loads, values) if e["type"] == "unregister"]
    assert all(e["ts"] <= unregister["ts"] for e in map(json.loads, values))
