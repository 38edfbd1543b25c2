"""producers/kafka/protocol.py against the real Apache Kafka 4.3 broker: a KIP-848 group of two
confluent-kafka consumers described through ConsumerGroupDescribe (epochs, assignor, each
member's assignment as the consumer itself reports it), a classic group asked the same way (an
error code, not an exception), a KIP-932 share group of two confluent-kafka share consumers
described through ShareGroupDescribe, and ListGroups' group types."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ShareConsumer
from kafka.admin import KafkaAdminClient

from producers.kafka.protocol import (
    describe_consumer_groups,
    describe_share_groups,
    list_groups,
)
from tests.support import wait_until

pytestmark = [pytest.mark.integration]

GROUP_ID_NOT_FOUND = 69
SETTLE_S = 60.0


@pytest.fixture
def apache_broker(kafka_broker_kind):
    if kafka_broker_kind != "apache":
        pytest.skip(f"KIP-848 and KIP-932 groups need the Apache Kafka 4.3 broker; "
                    f"this session's is {kafka_broker_kind}")


@pytest.fixture
def admin(apache_broker, kafka_bootstrap):
    client = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    yield client
    client.close()


@pytest.fixture
def consumers():
    """Consumers a test makes, closed after it (a closed member leaves its group at once)."""
    made = []
    yield made
    for consumer in made:
        consumer.close()


def held(consumer) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((tp.topic, tp.partition) for tp in consumer.assignment()))


def poll_until(consumers, check, what: str):
    """Poll every consumer until check() returns something true; that is returned."""
    last = None

    def polled():
        nonlocal last
        for consumer in consumers:
            consumer.poll(0.2)
        last = check()
        return last

    return wait_until(polled, SETTLE_S, what, interval=0, details=lambda: f"last: {last!r}")


def test_a_kip_848_group_is_described_with_its_epochs_and_real_assignments(
        admin, kafka_bootstrap, make_topic, consumers):
    topic = make_topic(partitions=4)
    group = f"{topic}.kip848"
    for _ in range(2):
        consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group,
                             "group.protocol": "consumer"})
        consumer.subscribe([topic])
        consumers.append(consumer)

    def settled():
        description = describe_consumer_groups(admin, [group], timeout_s=10)[group]
        real = {consumer.memberid(): held(consumer) for consumer in consumers}
        described = {member.member_id: member.assignment for member in description.members}
        done = (len(description.members) == 2 and description.group_state == "Stable"
                and all(m.assignment == m.target_assignment and m.assignment
                        for m in description.members)
                and described == real)
        return description if done else None

    description = poll_until(consumers, settled, "2 members, each holding its target")
    assert description.error_code == 0 and description.error_message is None
    assert description.assignor_name == "uniform"
    assert description.group_epoch > 0 and description.assignment_epoch > 0
    assert description.group_epoch >= description.assignment_epoch
    every = sorted(tp for member in description.members for tp in member.assignment)
    assert every == [(topic, p) for p in range(4)]
    for member in description.members:
        assert member.member_epoch == description.assignment_epoch > 0
        assert member.member_type == "consumer"
        assert member.subscribed_topics == (topic,)
        assert member.instance_id is None and member.client_host


def test_a_classic_group_asked_as_a_consumer_group_is_an_error_code(
        admin, kafka_bootstrap, make_topic, consumers):
    topic = make_topic(partitions=2)
    group = f"{topic}.classic"
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    consumer.subscribe([topic])
    consumers.append(consumer)
    poll_until(consumers, lambda: held(consumer), "the classic consumer's assignment")

    described = describe_consumer_groups(admin, [group, f"{topic}.nobody"], timeout_s=10)
    classic, nobody = described[group], described[f"{topic}.nobody"]
    assert classic.error_code == GROUP_ID_NOT_FOUND and classic.members == ()
    assert "not a consumer group" in classic.error_message
    assert nobody.error_code == GROUP_ID_NOT_FOUND and nobody.members == ()
    # ...and the other way round: a classic group is not a share group either
    assert describe_share_groups(admin, [group], timeout_s=10)[group].error_code == (
        GROUP_ID_NOT_FOUND)


def test_list_groups_tells_consumer_classic_and_share_groups_apart(
        admin, kafka_bootstrap, make_topic, consumers):
    topic = make_topic(partitions=2)
    kinds = {f"{topic}.consumer": {"group.protocol": "consumer"}, f"{topic}.classic": {}}
    for group, settings in kinds.items():
        consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group, **settings})
        consumer.subscribe([topic])
        consumers.append(consumer)
    sharing = ShareConsumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}.share"})
    sharing.subscribe([topic])
    consumers.append(sharing)

    def listed():
        mine = {g.group_id: g for g in list_groups(admin, timeout_s=10)
                if g.group_id.startswith(topic)}
        return mine if len(mine) == 3 else None

    mine = poll_until(consumers, listed, "the three groups listed")
    assert {group: g.group_type for group, g in mine.items()} == {
        f"{topic}.consumer": "consumer", f"{topic}.classic": "classic", f"{topic}.share": "share"}
    assert {group: g.protocol_type for group, g in mine.items()} == {
        f"{topic}.consumer": "consumer", f"{topic}.classic": "consumer", f"{topic}.share": "share"}
    assert all(g.group_state for g in mine.values())


def test_a_kip_932_share_group_is_described(admin, kafka_bootstrap, make_topic, consumers):
    topic = make_topic(partitions=4)
    group = f"{topic}.share"
    for _ in range(2):
        sharing = ShareConsumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
        sharing.subscribe([topic])
        consumers.append(sharing)

    def settled():
        description = describe_share_groups(admin, [group], timeout_s=10)[group]
        done = (len(description.members) == 2 and description.group_state == "Stable"
                and all(member.assignment for member in description.members))
        return description if done else None

    description = poll_until(consumers, settled, "2 share members, each assigned partitions")
    assert description.error_code == 0 and description.assignor_name == "simple"
    assert description.group_epoch > 0 and description.assignment_epoch > 0
    every = sorted(tp for member in description.members for tp in member.assignment)
    assert set(every) == {(topic, p) for p in range(4)}
    for member in description.members:
        assert member.member_epoch == description.assignment_epoch
        assert member.subscribed_topics == (topic,)
    # a share group is not a KIP-848 consumer group
    assert describe_consumer_groups(admin, [group], timeout_s=10)[group].error_code == (
        GROUP_ID_NOT_FOUND)
