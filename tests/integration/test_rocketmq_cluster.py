"""The RocketMQ harness against real 4.9.8 and 5.x clusters: real push consumers split a topic as AVG
does, and two JVMs sharing a clientId hold the same queues (the double assignment the monitor
exists to find)."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.rocketmq_cluster import RocketMQKit, process_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHARED_CLIENT_IP = "10.99.0.1"   # only an id in the clientId, never dialled
PACKAGE_LIST = Path(__file__).with_name("rocketmq-debian-packages.txt")


def fresh(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


def all_queues(broker: str, count: int) -> set[tuple[str, int]]:
    return {(broker, queue_id) for queue_id in range(count)}


def package_names(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_the_package_list_make_installs_is_the_4_9_8_kits():
    kit, reason = RocketMQKit.from_env()
    if kit is None:
        pytest.skip(reason)
    assert package_names(PACKAGE_LIST) == package_names(kit.root / "debian-packages.txt")


def test_three_consumers_split_eight_queues_three_three_two(rocketmq_cluster, real_consumer):
    topic, group = fresh("split"), fresh("g-split")
    rocketmq_cluster.create_topic(topic, queues=8)
    consumers = [real_consumer(rocketmq_cluster.namesrv, group, topic, f"c{i}") for i in range(3)]

    def split_settled(_) -> bool:
        held = [c.holds(topic) for c in consumers]
        return (sorted(map(len, held)) == [2, 3, 3]
                and set().union(*held) == all_queues("broker-a", 8)
                and all(len(c.view(topic) or ()) == 3 for c in consumers))

    consumers[0].wait_for(split_settled, what="a settled 3/3/2 split")
    holders = Counter(queue for c in consumers for queue in c.holds(topic))
    assert holders == Counter(all_queues("broker-a", 8))   # each queue held by exactly one
    assert len({c.client_id for c in consumers}) == 3
    assert {c.strategy for c in consumers} == {"AVG"}

    sent = rocketmq_cluster.produce(topic, 16)
    consumers[0].wait_for(lambda _: sum(len(c.consumed) for c in consumers) >= len(sent),
                          what="every message consumed")
    consumed = [m for c in consumers for m in c.consumed]
    assert Counter(m.body for m in consumed) == Counter(m.body for m in sent)
    for consumer in consumers:   # each message by the one consumer holding its queue
        assert {(m.broker, m.queue_id) for m in consumer.consumed} <= consumer.holds(topic)


def test_two_jvms_sharing_a_client_id_hold_the_same_queues(rocketmq_cluster, real_consumer):
    topic, group = fresh("shared-id"), fresh("g-shared-id")
    rocketmq_cluster.create_topic(topic, queues=8)
    twins = [real_consumer(rocketmq_cluster.namesrv, group, topic, "same",
                           client_ip=SHARED_CLIENT_IP) for _ in range(2)]
    same_id = f"{SHARED_CLIENT_IP}@same"
    first_half = all_queues("broker-a", 4)

    # Both find themselves at index 0 of [same, same], so AVG gives each the first half.
    twins[0].wait_for(lambda _: all(t.view(topic) == (same_id, same_id)
                                    and t.holds(topic) == first_half for t in twins),
                      what="both twins holding the first half")
    assert [t.client_id for t in twins] == [same_id, same_id]


def test_a_cluster_of_two_brokers_and_a_paused_broker(rocketmq_cluster_factory, real_consumer):
    cluster = rocketmq_cluster_factory(["broker-a", "broker-b"])
    assert cluster.broker_addr("broker-a") != cluster.broker_addr("broker-b")
    topic = fresh("two-brokers")
    cluster.create_topic(topic, queues=2)
    consumer = real_consumer(cluster.namesrv, fresh("g-two-brokers"), topic, "solo")
    consumer.wait_for(lambda c: c.holds(topic) == all_queues("broker-a", 2) | all_queues("broker-b", 2),
                      what="all four queues of both brokers")

    cluster.pause_broker("broker-b")
    try:
        assert process_state(cluster.broker_pid("broker-b")) == "T"
    finally:
        cluster.resume_broker("broker-b")
    assert process_state(cluster.broker_pid("broker-b")) != "T"


def test_the_brokers_run_the_version_of_their_kit(rocketmq_kit, rocketmq_cluster):
    """clusterList prints each broker's own version: the 5.x kit runs the pinned jars."""
    if rocketmq_kit.version.startswith("4."):
        pytest.skip("the 4.9.8 kit's broker answers clusterList's runtime-info call with "
                    "NoSuchElementException, so no version is printed")
    listed = rocketmq_cluster.mqadmin("clusterList", "-n", rocketmq_cluster.namesrv)
    assert f"V{rocketmq_kit.version.replace('.', '_')}" in listed, listed
