"""Fixtures that need the running job (the broker and Spark fixtures are in tests/conftest.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from producers.simulator.clock import FastClock
from producers.simulator.scenarios import SCENARIOS
from tests.integration.monitor_harness import RunningMonitor


def produce_scenario(bootstrap: str, topic: str, scenario, clock=None) -> int:
    """Produce a simulator scenario's encoded events (key = group) into the topic."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    count = 0
    for key, value in scenario.run_encoded(clock or FastClock()):
        producer.produce(topic, value, key)
        count += 1
        if count % 10_000 == 0:
            producer.flush(30)
    if producer.flush(30):
        raise RuntimeError("scenario events not delivered within 30 s")
    return count


@pytest.fixture
def running_monitor_metrics_url(spark, kafka_bootstrap, make_topic, tmp_path):
    """host:port of a live job's /metrics, fed by the simulator's client-id-collision scenario
    (a lasting double assignment)."""
    topic = make_topic(partitions=2)
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path) as monitor:
        produce_scenario(kafka_bootstrap, topic, SCENARIOS["client-id-collision"](seed=1))
        monitor.wait_for(lambda m: any(
            v > 0 for v in m.series("rebalance_double_assigned_queues").values()))
        yield monitor.metrics_url.removeprefix("http://").removesuffix("/metrics")
