"""Inputs shared by the Kafka assignors: a member's subscription and the group's metadata view.

``prepare`` does what ``AbstractPartitionAssignor.assign(Cluster, GroupSubscription)`` does
before it calls an assignor: it keeps the leader's ``HashMap`` of subscriptions (iterated in
Java order) and builds ``partitionsPerTopic`` from the topics that some member subscribes to and
that have partitions in the metadata (a ``HashSet`` walked into a ``HashMap``: Java order again).

Example:
    >>> a = KafkaMember("m1", None, ("orders", "missing"))
    >>> subs, ppt = prepare({"orders": 3, "unused": 2}, [a])
    >>> list(subs), list(ppt.items())
    (['m1'], [('orders', 3)])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .java_collections import JavaHashMap, TopicPartition, java_string_hash, java_string_key


@dataclass(frozen=True)
class KafkaMember:
    """One member's ``Subscription`` as the group leader sees it.

    ``owned``/``generation`` are what the member's own assignor put in its subscription:
    for ``sticky`` the userData (null when generation is -1), for ``cooperative-sticky`` the
    ownedPartitions and generation fields. ``range`` and ``roundrobin`` ignore them.
    """

    member_id: str
    group_instance_id: str | None
    topics: tuple[str, ...]
    owned: tuple[tuple[str, int], ...] = ()
    generation: int = -1


class KafkaAssignError(ValueError):
    """Input the assignors cannot take, or a state upstream answers with an exception."""


def member_info_key(member: KafkaMember) -> tuple[int, bytes]:
    """``MemberInfo.compareTo``: static members first by group.instance.id, then member.id."""
    if member.group_instance_id is not None:
        return (0, java_string_key(member.group_instance_id))
    return (1, java_string_key(member.member_id))


def prepare(
    partitions_per_topic: Mapping[str, int], members: Sequence[KafkaMember]
) -> tuple[dict[str, KafkaMember], JavaHashMap[str, int]]:
    """(subscriptions in Java ``HashMap`` order, ``partitionsPerTopic`` as a Java ``HashMap``)."""
    table: JavaHashMap[str, KafkaMember] = JavaHashMap(java_string_hash)
    for member in members:
        table.put(member.member_id, member)  # a repeated id replaces the value, keeps the slot
    subscriptions = {member_id: table[member_id] for member_id in table}

    subscribed: JavaHashMap[str, None] = JavaHashMap(java_string_hash)
    for member in subscriptions.values():
        for topic in member.topics:
            subscribed.put(topic)
    counts: JavaHashMap[str, int] = JavaHashMap(java_string_hash)
    for topic in subscribed:
        count = partitions_per_topic.get(topic)
        if count is not None and count > 0:
            counts.put(topic, count)
    return subscriptions, counts


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [(topic, i) for i in range(count)]
