"""RebalanceReporter inside a user's consumer: no producer fault raises into the consumer loop;
each is counted by topic and cause (reporter.stats, reporter.collector()) and logged once per
change of state."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import CollectorRegistry, generate_latest

from producers.kafka.reporter import RebalanceReporter
from tests.unit.fake_clients import LockedFakeProducer

pytestmark = pytest.mark.unit

TOPIC = "rebalance.events"


def reporter_with(producer) -> RebalanceReporter:
    reporter = RebalanceReporter(None, TOPIC, "orders", "range", producer=producer,
                                 client_id="c1", clock=lambda: 1_700_000_000.0)
    reporter.owned = {("A", 0)}
    return reporter


def tp(topic, partition):
    return SimpleNamespace(topic=topic, partition=partition)


def fault_logs(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_refusing_topic_is_counted_and_logged_once_then_its_recovery(caplog):
    caplog.set_level(logging.INFO)
    refusing = [True]
    producer = LockedFakeProducer(
        lambda message: KafkaError.TOPIC_AUTHORIZATION_FAILED if refusing[0] else None)
    reporter = reporter_with(producer)
    for _ in range(5):
        reporter.heartbeat()
    refusing[0] = False
    reporter.heartbeat()
    snapshot = reporter.stats.snapshot()
    assert snapshot.undelivered == {(TOPIC, "topic_authorization_failed"): 5}
    assert snapshot.delivered == {TOPIC: 1}
    assert fault_logs(caplog) == [
        f"delivery to {TOPIC} failing: topic_authorization_failed",
        f"delivery to {TOPIC} works again (was failing: topic_authorization_failed, 5 time(s))"]


def test_a_full_queue_does_not_block_or_raise_into_the_callbacks():
    reporter = reporter_with(LockedFakeProducer(queue_limit=0))
    hooks = reporter.hooks(SimpleNamespace(memberid=lambda: "m1",
                                           rebalance_protocol=lambda: "EAGER"), ["A"])
    started = time.monotonic()
    hooks["on_assign"](None, [tp("A", 0), tp("A", 1)])
    hooks["on_revoke"](None, [tp("A", 1)])
    assert time.monotonic() - started < 2  # a few short backoffs, not a wait for the broker
    assert reporter.owned == {("A", 0)}
    assert reporter.stats.snapshot().undelivered == {(TOPIC, "queue_full"): 2}


def test_a_producer_that_raises_anything_is_counted_not_raised(caplog):
    caplog.set_level(logging.INFO)

    class Closed(LockedFakeProducer):
        def produce(self, *args, **kwargs):
            raise RuntimeError("Producer has been closed")

    reporter = reporter_with(Closed())
    reporter.heartbeat()
    reporter.heartbeat()
    reporter.close(timeout_s=0.1)
    assert reporter.stats.snapshot().undelivered == {(TOPIC, "RuntimeError"): 3}
    assert fault_logs(caplog) == [
        "rebalance reporter of group orders failing: RuntimeError (Producer has been closed)"]


def test_a_consumer_that_fails_to_say_its_member_id_is_counted_not_raised():
    def memberid():
        raise KafkaException(KafkaError(KafkaError._STATE))

    reporter = reporter_with(LockedFakeProducer())
    reporter.hooks(SimpleNamespace(memberid=memberid), ["A"])["on_assign"](None, [tp("A", 0)])
    assert reporter.stats.snapshot().undelivered == {(TOPIC, "state"): 1}


def test_close_waits_at_most_its_timeout_and_counts_what_is_left():
    class Stuck(LockedFakeProducer):  # a broker that never answers
        def poll(self, timeout=None):
            return 0

        def flush(self, timeout=None):
            return len(self)

    reporter = reporter_with(Stuck())
    reporter.heartbeat()
    started = time.monotonic()
    reporter.close(timeout_s=0.2)
    assert time.monotonic() - started < 5
    assert reporter.stats.snapshot().undelivered == {(TOPIC, "unflushed"): 2}


def test_the_collector_shows_the_counts_on_the_users_registry():
    reporter = reporter_with(LockedFakeProducer(lambda m: KafkaError.INVALID_RECORD))
    reporter.heartbeat()
    registry = CollectorRegistry()
    registry.register(reporter.collector())
    text = generate_latest(registry).decode()
    assert (f'rebalance_monitor_undelivered_records_total{{cause="invalid_record",topic="{TOPIC}"}}'
            ' 1.0') in text
    assert (f'rebalance_monitor_produce_errors_total{{cause="invalid_record",topic="{TOPIC}"}}'
            ' 1.0') in text


def test_a_reporter_names_its_cluster_as_the_cluster_of_its_events():
    producer = LockedFakeProducer()
    reporter = RebalanceReporter(None, TOPIC, "orders", "range", producer=producer,
                                 client_id="c1", cluster="kafka-prod-1")
    reporter.heartbeat()
    producer.flush()
    (message,) = producer.delivered
    assert json.loads(message.value())["cluster"] == "kafka-prod-1"
