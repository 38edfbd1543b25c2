"""observe-kafka against a real broker.

With a Docker engine (testcontainers' Kafka, real DescribeGroups): two range consumers on two
topics; the observer's heartbeats own exactly what the consumers own. Against the embedded broker
(DescribeGroups answers without subscriptions or assignments) it names the group in a warning and
still reports the group's topics and partition counts.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from producers.kafka import cli as observe_kafka
from producers.kafka.observer import KafkaGroupObserver
from tests.integration.prometheus_harness import poll
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEADLINE_S = 60


def _consumer(bootstrap, group):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})


def _consume_one_from_each(consumers, topics) -> None:
    """Poll until every topic had a message consumed and committed (the group has offsets)."""
    seen: set[str] = set()

    def each_consumed() -> bool:
        if seen == set(topics):
            return True
        for consumer in consumers:
            message = consumer.poll(0.05)
            if message is not None and not message.error():
                consumer.commit(message, asynchronous=False)
                seen.add(message.topic())
        return False

    wait_until(each_consumed, DEADLINE_S, f"a message of each of {topics} consumed",
               interval=0, details=lambda: f"consumed only {seen}")


@pytest.fixture
def group_on_two_topics(kafka_bootstrap, make_topic, produce):
    topic_a, topic_b = make_topic(3), make_topic(2)
    produce(topic_a, [b"a"], partition=0)
    produce(topic_b, [b"b"], partition=1)
    group = f"observed-{uuid.uuid4().hex[:8]}"
    consumers = [_consumer(kafka_bootstrap, group) for _ in range(2)]
    for consumer in consumers:
        consumer.subscribe([topic_a, topic_b])
    _consume_one_from_each(consumers, [topic_a, topic_b])
    yield group, topic_a, topic_b, consumers
    for consumer in consumers:
        consumer.close()


def _read_group_events(bootstrap, topic, group, count):
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(topic, 0, 0)])
    found, deadline = [], time.monotonic() + DEADLINE_S
    while len(found) < count and time.monotonic() < deadline:
        message = reader.poll(0.1)
        if message is not None and not message.error() and message.key() == group.encode():
            found.append(json.loads(message.value()))
    reader.close()
    return found


def test_embedded_broker_reports_groups_and_partition_counts(kafka_broker_kind, kafka_bootstrap,
                                                             group_on_two_topics, make_topic,
                                                             capsys):
    if kafka_broker_kind != "embedded":
        pytest.skip("this test pins the embedded broker's DescribeGroups behaviour "
                    "(REBALANCE_MONITOR_TEST_BROKER=embedded runs it)")
    group, topic_a, topic_b, _ = group_on_two_topics
    events_topic = make_topic(1)
    options = observe_kafka.ObserveKafkaOptions(bootstrap_servers=kafka_bootstrap,
                                                topic=events_topic, once=True)
    assert observe_kafka.main(options) == 0
    out, err = capsys.readouterr()
    ours = _read_group_events(kafka_bootstrap, events_topic, group, 2)
    assert ours == [
        {"cluster": f"observe-kafka@{kafka_bootstrap.split(',')[0]}", "v": 1, "type": "route",
         "system": "kafka", "ts": ours[0]["ts"], "group": group, "topic": topic,
         "partitions": count}
        for topic, count in sorted([(topic_a, 3), (topic_b, 2)])]
    assert (f"WARNING: group {group}: the broker's DescribeGroups returned members without "
            "subscription or assignment; reporting the group's topics and partition counts only"
            ) in err.splitlines()


def test_real_kafka_members_own_what_the_consumers_own(kafka_broker_kind, kafka_bootstrap,
                                                       group_on_two_topics):
    if kafka_broker_kind == "embedded":
        pytest.skip("needs real DescribeGroups members, which the embedded broker does not "
                    "return (REBALANCE_MONITOR_TEST_BROKER=embedded chose it)")
    group, topic_a, topic_b, consumers = group_on_two_topics
    observer = KafkaGroupObserver(kafka_bootstrap)

    every_partition = sorted([[topic_a, p] for p in range(3)] + [[topic_b, p] for p in range(2)])

    def held_by_consumers():
        return sorted([tp.topic, tp.partition] for c in consumers for tp in c.assignment())

    def stable():
        # DescribeGroups gives subscriptions and assignments only while the group is Stable, and a
        # librdkafka consumer applies its share at its next poll after the broker settles: wait
        # for both, or the comparison below races the consumer's own bookkeeping.
        for consumer in consumers:
            consumer.poll(0.1)
        ours = next(r for r in observer.poll() if r.events and r.events[0]["group"] == group)
        settled = not ours.warnings and held_by_consumers() == every_partition
        return ours if settled else None

    try:
        ours = poll(stable, DEADLINE_S, what=f"group {group} described while Stable")
    finally:
        observer.close()
    owned = {c.memberid(): sorted([tp.topic, tp.partition] for tp in c.assignment())
             for c in consumers}
    beats = {e["client_id"]: e for e in ours.events if e["type"] == "heartbeat"}
    assert {m: e["owned"] for m, e in beats.items()} == owned
    assert all(e["strategy"] == "range" for e in beats.values())
    routes = {e["topic"]: e["partitions"] for e in ours.events if e["type"] == "route"}
    assert routes == {topic_a: 3, topic_b: 2}
