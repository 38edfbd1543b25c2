"""RoundRobinAssignor: all partitions in topic order, dealt to the sorted members in turn.

Topics are walked in ``TreeSet`` (Java String) order, partitions ascending; members are sorted by
``MemberInfo.compareTo`` and a circular iterator skips members not subscribed to the topic.

Example: c0 subscribes to t0; c1 to t0, t1; c2 to t0, t1, t2 (1, 2 and 3 partitions):
    >>> from .model import KafkaMember, prepare
    >>> ms = [KafkaMember("c0", None, ("t0",)), KafkaMember("c1", None, ("t0", "t1")),
    ...       KafkaMember("c2", None, ("t0", "t1", "t2"))]
    >>> subscriptions, partitions_per_topic = prepare({"t0": 1, "t1": 2, "t2": 3}, ms)
    >>> assign(partitions_per_topic, subscriptions)
    {'c0': [('t0', 0)], 'c1': [('t1', 0)], 'c2': [('t1', 1), ('t2', 0), ('t2', 1), ('t2', 2)]}
"""

from __future__ import annotations

from .java_collections import JavaHashMap, TopicPartition, java_string_key
from .model import KafkaMember, member_info_key, partitions_of

NAME = "roundrobin"


def assign(
    partitions_per_topic: JavaHashMap[str, int], subscriptions: dict[str, KafkaMember]
) -> dict[str, list[TopicPartition]]:
    assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
    ring = sorted(subscriptions.values(), key=member_info_key)
    topics = sorted({t for m in subscriptions.values() for t in m.topics}, key=java_string_key)
    position = 0
    for topic in topics:
        count = partitions_per_topic.get(topic)
        if count is None:
            continue
        for partition in partitions_of(topic, count):
            while topic not in ring[position].topics:
                position = (position + 1) % len(ring)
            assignment[ring[position].member_id].append(partition)
            position = (position + 1) % len(ring)
    return assignment
