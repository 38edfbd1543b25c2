"""Real Java Kafka consumers (tests/integration/kafka_consumers.py) in classic and KIP-848 groups
on the tests' Apache Kafka broker: every assignor settles with each partition held once, static
members come back to their partitions, a slow onPartitionsRevoked holds the hand-over up, and a
member that vanishes is dropped after the broker's 6 s session timeout."""

from __future__ import annotations

import shutil
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from streaming.common.topics import create_topic
from tests.integration.kafka_consumers import (
    JavaConsumer,
    compile_probe,
    stop_all,
    wait_for_partitions,
    wait_for_probes,
)

pytestmark = [pytest.mark.integration]

CLASSIC_ASSIGNORS = ["range", "roundrobin", "sticky", "cooperative-sticky"]
# Longer than the broker's group.consumer.session.timeout.ms (6 s, streaming/kafka_broker.py):
# a member blocked in onPartitionsRevoked that long is still not dropped.
REVOKE_DELAY_MS = 8000


@pytest.fixture
def probes(kafka_broker_kind, kafka_bootstrap, tmp_path):
    """consumer(group, topics, **options) -> a started JavaConsumer; all stopped afterwards."""
    if kafka_broker_kind != "apache":
        pytest.skip(f"this session's broker is {kafka_broker_kind}")
    if shutil.which("javac") is None:
        pytest.skip("no javac: the Java consumers cannot be compiled")
    compile_probe()
    made: list[JavaConsumer] = []

    def consumer(group: str, topics=(), **options) -> JavaConsumer:
        made.append(JavaConsumer(kafka_bootstrap, group, topics, log_dir=tmp_path, **options))
        return made[-1].start()

    yield consumer
    stop_all(made)


def last_seq(consumers) -> int:
    return max((event["seq"] for consumer in consumers for event in consumer.events), default=0)


@pytest.mark.parametrize("assignor", CLASSIC_ASSIGNORS)
def test_classic_members_share_the_partitions_with_each_assignor(probes, make_topic, assignor):
    topic = make_topic(partitions=6)
    members = [probes(f"{topic}.g", [topic], assignor=assignor) for _ in range(3)]

    held = wait_for_partitions(members, topic, 6, same_generation=True)

    assert sorted(map(len, held)) == [2, 2, 2]
    member_ids = {member.member_id for member in members}
    assert len(member_ids) == 3 and "" not in member_ids
    assert members[0].generation > 0


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_a_kip_848_group_settles_four_partitions_each(probes, make_topic, assignor):
    topic = make_topic(partitions=12)
    members = [probes(f"{topic}.g", [topic], protocol="consumer", assignor=assignor)
               for _ in range(3)]

    held = wait_for_partitions(members, topic, 12)

    assert sorted(map(len, held)) == [4, 4, 4]
    if assignor == "range":
        assert all(max(mine) - min(mine) == 3 for mine in held), held  # contiguous ranges
    assert len({member.member_id for member in members}) == 3


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_static_member_rejoins_to_its_partitions(probes, make_topic, protocol):
    topic = make_topic(partitions=4)
    group = f"{topic}.g"
    static = probes(group, [topic], protocol=protocol, assignor="range", instance_id="static-1")
    other = probes(group, [topic], protocol=protocol, assignor="range")
    wait_for_partitions([static, other], topic, 4)
    member_id, generation, holds = static.member_id, static.generation, static.holds
    others_holds, mark = other.holds, last_seq([static, other])

    assert static.close() == 0 and static.closed
    static.start()  # a new JVM, the same --instance-id, back within the session timeout
    static.wait_for(lambda c: c.holds, 30, "its partitions back")

    assert static.holds == holds
    assert static.member_id not in ("", member_id)  # a new member id for the same instance
    assert static.generation == generation          # no rebalance: same generation / epoch
    assert not other.of_kind("revoking", after=mark) and not other.of_kind("lost", after=mark)
    assert other.holds == others_holds


def test_a_slow_revocation_holds_the_partitions_back_in_a_kip_848_group(probes,
                                                                         kafka_bootstrap):
    topic = f"test.slow-revocation.{uuid.uuid4().hex[:8]}"  # made once both have joined
    group = f"{topic}.g"
    first = [probes(group, [topic], protocol="consumer", assignor="range",
                    revoke_delay_ms=REVOKE_DELAY_MS) for _ in range(2)]
    wait_for_probes(lambda: all(member.member_id for member in first), 60, "both members joined",
                    first)
    create_topic(kafka_bootstrap, topic, 6)  # 3 + 3 at once: nobody revokes on the way there
    wait_for_partitions(first, topic, 6)
    mark = last_seq(first)

    third = probes(group, [topic], protocol="consumer", assignor="range")

    def revocation_in_progress():
        for member in first:
            revocations = member.of_kind("revoking", after=mark)
            if member.revoking and revocations:
                return member, {partition for _, partition in revocations[-1]["partitions"]}
        return None

    revoker, revoked = wait_for_probes(revocation_in_progress, 60, "a revocation", [*first, third])
    assert revoked and not revoked & third.partitions(topic)
    # Inside the callback, assignment() still lists the partitions being revoked.
    assert revoked <= {partition for _, partition in revoker.of_kind("revoking")[-1]["assigned"]}

    wait_for_partitions([*first, third], topic, 6)
    for member in first:
        for revoking in member.of_kind("revoking", after=mark):
            if not revoking["partitions"]:
                continue
            done = next(e for e in member.of_kind("revoked") if e["seq"] > revoking["seq"])
            moved = {partition for _, partition in revoking["partitions"]}
            taken = min(event["seq"] for other in [*first, third] if other is not member
                        for event in other.of_kind("assignment", after=revoking["seq"])
                        if moved & {partition for _, partition in event["holds"]})
            assert taken > done["seq"], (member, revoking, done, taken)
    # Blocked in the callback longer than the session timeout, yet not dropped: the KIP-848
    # consumer heartbeats from its background thread.
    for member in first:
        assert not member.of_kind("lost")
        assert len({e["member_id"] for e in member.of_kind("assignment", after=mark)}) == 1
    for member in first:
        member.kill()  # close() would sit in onPartitionsRevoked once more


def test_a_killed_kip_848_member_leaves_after_the_session_timeout(probes, make_topic):
    topic = make_topic(partitions=4)
    survivor, victim = (probes(f"{topic}.g", [topic], protocol="consumer") for _ in range(2))
    wait_for_partitions([survivor, victim], topic, 4)

    victim.kill()

    # Within 30 s: the broker's 6 s session timeout, not the default 45 s.
    survivor.wait_for(lambda c: len(c.partitions(topic)) == 4, 30, "the killed member's share")


def test_a_paused_kip_848_member_is_fenced_and_rejoins(probes, make_topic):
    topic = make_topic(partitions=4)
    survivor, sleeper = (probes(f"{topic}.g", [topic], protocol="consumer") for _ in range(2))
    wait_for_partitions([survivor, sleeper], topic, 4)
    member_id, mark = sleeper.member_id, last_seq([survivor, sleeper])

    sleeper.pause()
    survivor.wait_for(lambda c: len(c.partitions(topic)) == 4, 30, "the paused member's share")
    sleeper.resume()

    # Woken, it learns it was fenced: its partitions are lost, not revoked (its first poll()
    # may also throw UnknownMemberIdException, which the probe reports as a poll_error).
    wait_for_partitions([survivor, sleeper], topic, 4)
    assert sleeper.of_kind("lost", after=mark) and not sleeper.of_kind("revoking", after=mark)
    assert sleeper.member_id == member_id  # a KIP-848 member rejoins under its own id


def test_a_manually_assigned_consumer_holds_what_it_was_given(probes, make_topic,
                                                               kafka_bootstrap):
    topic = make_topic(partitions=3)
    group = f"{topic}.g"
    manual = probes(group, assign=[(topic, 0), (topic, 2)])

    manual.wait_for(lambda c: c.holds, 30, "its partitions")

    assert manual.holds == {(topic, 0), (topic, 2)}
    assert (manual.member_id, manual.generation) == ("", -1)  # no group membership
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})  # kept: its futures need it
    assert not admin.describe_consumer_groups([group])[group].result(timeout=30).members
