"""The Kafka consumer reporter against a real broker (session broker from tests/conftest.py).

Three confluent-kafka consumers, range assignor, two topics of 2 partitions each: range gives
each topic's partitions to the first two members by member id, so one member owns nothing and
the events show it. A fourth consumer assign()s two partitions by hand under the same group id
and reports them as owned. Closing a consumer shows the new assignment and its unregister.
"""

from __future__ import annotations

import json
import uuid

import pytest

from producers.kafka.reporter import RebalanceReporter
from streaming.core.allocation.kafka import KafkaMember, assign
from streaming.core.state.events import Event, parse_event
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEADLINE_S = 90


def _consumer(bootstrap, group, **extra):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, **extra})


def _poll_until(consumers, condition, what: str) -> None:
    def polled() -> bool:
        for consumer in consumers:
            consumer.poll(0.05)
        return condition()

    wait_until(polled, DEADLINE_S, what, interval=0)


def _settled(reporters, partitions) -> bool:
    owned = [r.owned for r in reporters]
    return (all(r.member_id for r in reporters)
            and sum(map(len, owned)) == len(partitions) and set().union(*owned) == partitions)


class EventReader:
    """Reads the events topic from the start; `latest()` = last heartbeat per client_id."""

    def __init__(self, bootstrap, topic):
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.events: list[dict] = []

    def read_until(self, condition, what: str) -> None:
        def read() -> bool:
            message = self.consumer.poll(0.1)
            if message is not None and not message.error():
                self.events.append(json.loads(message.value()))
                assert message.key().decode() == self.events[-1]["group"]
            return condition(self)

        wait_until(read, DEADLINE_S, f"events: {what}", interval=0)

    def latest(self) -> dict[str, dict]:
        gone = set()
        last: dict[str, dict] = {}
        for event in self.events:
            if event["type"] == "heartbeat":
                last[event["client_id"]] = event
                gone.discard(event["client_id"])
            elif event["type"] == "unregister":
                gone.add(event["client_id"])
        return {cid: e for cid, e in last.items() if cid not in gone}


def _owned(reporter):
    return sorted([t, p] for t, p in reporter.owned)


def test_reporter_shows_range_skew_manual_assign_and_rebalance(kafka_bootstrap, make_topic):
    from confluent_kafka import TopicPartition

    topic_a, topic_b, events_topic = make_topic(2), make_topic(2), make_topic(1)
    group = f"reporter-{uuid.uuid4().hex[:8]}"
    everything = {(t, p) for t in (topic_a, topic_b) for p in (0, 1)}
    consumers, reporters = [], []
    for _ in range(3):
        consumer = _consumer(kafka_bootstrap, group)
        reporter = RebalanceReporter({"bootstrap.servers": kafka_bootstrap}, events_topic,
                                     group, "range")
        consumer.subscribe([topic_a, topic_b], **reporter.hooks(consumer, [topic_a, topic_b]))
        consumers.append(consumer)
        reporters.append(reporter)
    _poll_until(consumers, lambda: _settled(reporters, everything), "3 members settle")

    # What Kafka really produced: each consumer's assignment, the range skew 2 / 2 / 0.
    real = {r.member_id: sorted([tp.topic, tp.partition] for tp in c.assignment())
            for c, r in zip(consumers, reporters, strict=True)}
    assert sorted(map(len, real.values())) == [0, 2, 2]
    members = [KafkaMember(m, None, (topic_a, topic_b)) for m in real]
    expected = assign("range", {topic_a: 2, topic_b: 2}, members)
    assert real == {m: sorted([t, p] for t, p in parts) for m, parts in expected.items()}

    reader = EventReader(kafka_bootstrap, events_topic)
    reader.read_until(lambda r: {c: e["owned"] for c, e in r.latest().items()} == real,
                      "heartbeats owning what the consumers own")
    for event in reader.latest().values():
        assert event["system"] == "kafka" and event["strategy"] == "range"
        assert event["topics"] == sorted([topic_a, topic_b])
        assert isinstance(parse_event(event)[0], Event)

    # A fourth consumer assign()s A-0 and B-0 by hand under the same group id.
    manual = _consumer(kafka_bootstrap, group)
    manual_reporter = RebalanceReporter({"bootstrap.servers": kafka_bootstrap}, events_topic,
                                        group, "range", client_id="manual-consumer")
    by_hand = [TopicPartition(topic_a, 0), TopicPartition(topic_b, 0)]
    manual.assign(by_hand)
    manual_reporter.assigned(manual, by_hand)
    reader.read_until(lambda r: "manual-consumer" in r.latest(), "the manual consumer")
    latest = reader.latest()
    assert latest["manual-consumer"]["owned"] == sorted([[topic_a, 0], [topic_b, 0]])
    assert latest["manual-consumer"]["topics"] == []
    claims = [cid for cid, e in latest.items() if [topic_a, 0] in e["owned"]]
    assert len(claims) == 2 and "manual-consumer" in claims  # claimed twice

    # Stop the consumer owning A-0 by subscription: the other two take everything, 2 each.
    leaving = next(i for i, r in enumerate(reporters) if (topic_a, 0) in r.owned)
    left_id = reporters[leaving].member_id
    consumers[leaving].close()
    reporters[leaving].close()
    staying = [i for i in range(3) if i != leaving]
    _poll_until([consumers[i] for i in staying],
                lambda: _settled([reporters[i] for i in staying], everything)
                and all(len(reporters[i].owned) == 2 for i in staying), "2 members settle")
    after = {reporters[i].member_id: _owned(reporters[i]) for i in staying}
    reader.read_until(lambda r: all(r.latest().get(m, {}).get("owned") == o
                                    for m, o in after.items()), "the new assignment")
    assert left_id not in reader.latest()
    assert any(e["type"] == "unregister" and e["client_id"] == left_id for e in reader.events)
    moved = {(t, p) for m, owned in after.items() for t, p in owned
             if [t, p] not in real.get(m, [])}
    assert moved  # partitions changed hands

    for i in staying:
        consumers[i].close()
        reporters[i].close()
    manual.close()
    manual_reporter.close()
    reader.consumer.close()


def test_kafka_python_listener_reports_member_generation_and_assignment(kafka_bootstrap,
                                                                       make_topic):
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    topic, events_topic = make_topic(3), make_topic(1)
    group = f"kp-reporter-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group,
                             partition_assignment_strategy=[RangePartitionAssignor],
                             enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
    reporter = RebalanceReporter({"bootstrap.servers": kafka_bootstrap}, events_topic, group,
                                 "range")
    # kafka-python's range assignor gives nothing of a topic its metadata lacks, and only asks
    # again at its next metadata refresh (5 min): join once the consumer sees all 3 partitions
    # (a broker busy with other tests once answered before the new topic was in its metadata).
    wait_until(lambda: len(consumer.partitions_for_topic(topic) or ()) == 3, DEADLINE_S,
               "the consumer's metadata showing the topic's 3 partitions", interval=0.2)
    consumer.subscribe([topic], listener=reporter.kafka_python_listener(consumer))

    def three_owned() -> bool:
        if len(reporter.owned) >= 3:
            return True
        consumer.poll(timeout_ms=100)
        return False

    wait_until(three_owned, DEADLINE_S, "the kafka-python member owning 3 partitions",
               interval=0, details=lambda: f"owned: {reporter.owned}")
    assert reporter.owned == {(topic, p) for p in range(3)}
    reader = EventReader(kafka_bootstrap, events_topic)
    reader.read_until(lambda r: any(e.get("owned") == [[topic, p] for p in range(3)]
                                    for e in r.latest().values()), "the kafka-python member")
    (event,) = reader.latest().values()
    generation = consumer._coordinator._generation  # what the coordinator handed out
    assert event["client_id"] == generation.member_id and event["topics"] == [topic]
    assert event["generation"] == generation.generation_id >= 0
    consumer.close()
    reporter.close()
    reader.read_until(lambda r: not r.latest(), "the unregister")
    reader.consumer.close()
