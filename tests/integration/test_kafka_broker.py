"""The tests' Apache Kafka broker (streaming/kafka_broker.py): KIP-848 consumer groups work on
it, its SASL listener refuses a wrong password, and it stops when asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from streaming.kafka_broker import ApacheKafkaBroker

pytestmark = pytest.mark.integration


@pytest.fixture
def apache_broker(kafka_broker_kind):
    if kafka_broker_kind != "apache":
        pytest.skip(f"this session's broker is {kafka_broker_kind}")


def balanced(members: list[Consumer], partitions: int) -> list[set[int]]:
    """Poll every member until each holds some partitions and together they hold each once."""
    while True:
        for member in members:
            member.poll(0.2)
        held = [{tp.partition for tp in member.assignment()} for member in members]
        if all(held) and sum(map(len, held)) == partitions == len(set().union(*held)):
            return held


def test_a_kip_848_group_gets_its_assignment_from_the_broker(apache_broker, kafka_bootstrap,
                                                             make_topic):
    topic = make_topic(partitions=4)
    group = f"{topic}.kip848"
    members = [Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group,
                         "group.protocol": "consumer"}) for _ in range(2)]
    try:
        for member in members:
            member.subscribe([topic])
        assert [len(held) for held in balanced(members, 4)] == [2, 2]
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})  # kept: its futures need it
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert len(described.members) == 2
    finally:
        for member in members:
            member.close()


def test_the_sasl_listener_refuses_a_wrong_password(kafka_sasl):
    errors = []
    producer = Producer({"bootstrap.servers": kafka_sasl.bootstrap,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": kafka_sasl.username, "sasl.password": "wrong",
                         "log_level": 0, "error_cb": errors.append})
    while not errors:
        producer.poll(0.2)
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]


def test_a_broker_of_its_own_starts_formatted_and_stops(apache_broker, tmp_path):
    broker = ApacheKafkaBroker(tmp_path / "own", heap="256m").start()
    pid = broker.pid
    try:
        assert AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(
            timeout=10).brokers
        assert (tmp_path / "own" / "data" / "meta.properties").is_file()
    finally:
        broker.stop()
    assert not Path(f"/proc/{pid}").exists()
