import logging

import pytest
from confluent_kafka import KafkaError, KafkaException
from prometheus_client import CollectorRegistry, generate_latest

from streaming.common.delivery import DeliveryStats
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.exporter.health import SourceCollector, query_restarts
from streaming.spark.source_probe import SourceProbe

pytestmark = pytest.mark.unit


class FakeAdmin:
    """Stand-in for confluent_kafka's AdminClient.list_topics: answers from a script of
    outcomes (None: the topic's metadata; a KafkaError code: that failure)."""

    def __init__(self, outcomes):
        self._outcomes = iter(outcomes)

    def list_topics(self, topic=None, timeout=None):
        code = next(self._outcomes)
        if code is not None:
            raise KafkaException(KafkaError(code))
        return type("Metadata", (), {"topics": {topic: type("Topic", (), {"error": None})()}})()


def scrape(*collectors) -> str:
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry).decode()


def test_the_probe_shows_an_outage_and_its_end_and_logs_each_change_once(caplog):
    probe = SourceProbe({"bootstrap.servers": "b:9092"}, "events")
    admin = FakeAdmin([None, KafkaError._TIMED_OUT, KafkaError._TIMED_OUT,
                       KafkaError._TRANSPORT, None, None])
    seen = []
    with caplog.at_level(logging.INFO, logger="streaming.spark.source_probe"):
        for _ in range(6):
            probe.probe_once(admin)
            seen.append(probe.health().up)
    assert seen == [True, False, False, False, True, True]
    assert probe.health().errors == {"timed_out": 2, "transport": 1}
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "events topic events reachable", "events topic events unreachable",
        "events topic events reachable"]


def test_source_collector_exposes_reachability_and_errors_by_cause():
    probe = SourceProbe({"bootstrap.servers": "b:9092"}, "events")
    probe.probe_once(FakeAdmin([KafkaError._ALL_BROKERS_DOWN]))
    text = scrape(SourceCollector(probe.health))
    assert "rebalance_monitor_source_up 0.0" in text
    assert 'rebalance_monitor_source_errors_total{cause="all_brokers_down"} 1.0' in text


def test_delivery_and_restart_collectors_expose_counts_by_topic_and_cause():
    stats = DeliveryStats()
    stats.count("errors", ("dlq", "invalid_record"))
    stats.count("undelivered", ("dlq", "invalid_record"))
    stats.count("truncated", "dlq")
    restarts = query_restarts()
    restarts.labels("StreamingQueryException").inc()
    text = scrape(DeliveryCollector(stats), restarts)
    assert 'rebalance_monitor_produce_errors_total{cause="invalid_record",topic="dlq"} 1.0' in text
    assert 'rebalance_monitor_undelivered_records_total{cause="invalid_record",topic="dlq"} 1.0' in text
    assert 'rebalance_monitor_truncated_records_total{topic="dlq"} 1.0' in text
    assert 'rebalance_monitor_query_restarts_total{cause="StreamingQueryException"} 1.0' in text
