"""A Kafka group and a RocketMQ group of the same name are two groups end to end: routing, state,
series, findings and removal, through the real broker, a real SparkSession and real /metrics.

Before state was keyed by (system, group), the second system's events landed in the first one's
state and were ignored, and removing one group deleted both systems' series."""

import json

import pytest
from confluent_kafka import Consumer

from tests.integration.monitor_harness import RunningMonitor, produce_events
from tests.unit.state_helpers import T0, hb, route

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = "order-service"
KAFKA = {"system": "kafka", "group": NAME}
ROCKETMQ = {"group": NAME}          # no system: the contract's default, rocketmq


def kafka_events(ts: int = T0) -> list[dict]:
    """A zombie: m1 still holds partitions 1 and 2 of 4 that range gave m2 (2 and 3)."""
    return [route("T", ts=ts, partitions=4, **KAFKA),
            hb("m1", ["T"], ts=ts, strategy="range", owned=[["T", 0], ["T", 1], ["T", 2]], **KAFKA),
            hb("m2", ["T"], ts=ts, strategy="range", **KAFKA)]


def rocketmq_events(ts: int = T0) -> list[dict]:
    """Two processes share clientId c1 on six queues with c2: both compute c1's share."""
    return [route("T", ts=ts, brokers={"broker-a": 6}, **ROCKETMQ),
            hb("c1", ["T"], ts=ts, address="10.0.0.1:5000", **ROCKETMQ),
            hb("c1", ["T"], ts=ts, address="10.0.0.2:5000", **ROCKETMQ),
            hb("c2", ["T"], ts=ts, address="10.0.0.3:5000", **ROCKETMQ)]


def group_series(scrape, system: str) -> dict[str, float]:
    labels = {"system": system, "group": NAME}
    return {name: scrape.value(name, **labels) for name in (
        "rebalance_group_members", "rebalance_client_id_collisions",
        "rebalance_allocation_mismatch_clients")} | {
        "double": scrape.value("rebalance_double_assigned_queues", **labels, topic="T"),
        "orphaned": scrape.value("rebalance_orphaned_queues", **labels, topic="T"),
        "queues": scrape.value("rebalance_group_queues", **labels, topic="T")}


def findings_by_system(bootstrap: str, topic: str, expected: int) -> dict[str, set]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    records = []
    try:
        while len(records) < expected:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                records.append(json.loads(message.value()))
    finally:
        consumer.close()
    out: dict[str, set] = {}
    for record in records:
        out.setdefault(record["system"], set()).add((record["status"], record["kind"]))
    return out


def test_same_named_groups_of_two_systems_are_two_sets_of_series(
        spark, kafka_bootstrap, make_topic, tmp_path):
    topic = make_topic(partitions=2)
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path) as monitor:
        produce_events(kafka_bootstrap, topic, kafka_events() + rocketmq_events())
        # Every heartbeat counted: the batch that applied them all has been exported.
        scrape = monitor.wait_for(
            lambda m: m.value("rebalance_monitor_events_total", type="heartbeat") == 5)
        assert group_series(scrape, "kafka") == {
            "rebalance_group_members": 2, "rebalance_client_id_collisions": 0,
            "rebalance_allocation_mismatch_clients": 1, "double": 1, "orphaned": 0, "queues": 4}
        assert group_series(scrape, "rocketmq") == {
            "rebalance_group_members": 3, "rebalance_client_id_collisions": 1,
            "rebalance_allocation_mismatch_clients": 0, "double": 2, "orphaned": 2, "queues": 6}
        assert scrape.value("rebalance_monitor_groups") == 2

        # The Kafka members leave; the RocketMQ clients go on heartbeating past the Kafka
        # group's session timeout, so the watermark passes it. Only the Kafka series go.
        produce_events(kafka_bootstrap, topic, [
            {"type": "unregister", "ts": T0 + 1_000, "client_id": c, **KAFKA} for c in ("m1", "m2")
        ] + [event for lag in (60_000, 120_000, 180_000) for event in rocketmq_events(T0 + lag)])
        scrape = monitor.wait_for(
            lambda m: m.value("rebalance_group_members", system="kafka", group=NAME) is None)
        assert group_series(scrape, "rocketmq") == {
            "rebalance_group_members": 3, "rebalance_client_id_collisions": 1,
            "rebalance_allocation_mismatch_clients": 0, "double": 2, "orphaned": 2, "queues": 6}
        assert scrape.value("rebalance_monitor_groups") == 1

    # Kafka: 3 findings started and ended; RocketMQ: 5 started, none ended.
    found = findings_by_system(kafka_bootstrap, topic + ".findings", expected=11)
    assert found == {
        "kafka": {(status, kind) for status in ("started", "ended")
                  for kind in ("allocation_mismatch", "double_assignment", "skew")},
        "rocketmq": {("started", kind) for kind in
                     ("client_id_collision", "double_assignment", "orphaned_queue")}}


def test_same_named_groups_of_two_clusters_are_two_groups(spark, kafka_bootstrap, make_topic,
                                                         tmp_path):
    """Two RocketMQ clusters, each with an order-service group, through one job: east's clients
    share a client id (a double assignment), west's are healthy. Before the group's key held its
    cluster, the five processes were one group's members."""
    east, west = {"group": NAME, "cluster": "east"}, {"group": NAME, "cluster": "west"}
    topic = make_topic(partitions=2)
    events = [{**event, "cluster": "east"} for event in rocketmq_events()] + [
        route("T", brokers={"broker-a": 6}, **west),
        hb("w1", ["T"], address="10.9.0.1:5000", **west),
        hb("w2", ["T"], address="10.9.0.2:5000", **west)]
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path) as monitor:
        produce_events(kafka_bootstrap, topic, events)
        scrape = monitor.wait_for(
            lambda m: m.value("rebalance_monitor_events_total", type="heartbeat") == 5)
        assert [scrape.value("rebalance_group_members", **labels) for labels in (east, west)] \
            == [3, 2]
        assert [scrape.value("rebalance_double_assigned_queues", **labels, topic="T")
                for labels in (east, west)] == [2, 0]
        assert scrape.value("rebalance_monitor_groups") == 2
