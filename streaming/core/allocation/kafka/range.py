"""RangeAssignor (no racks): per topic, a contiguous range of partitions for each member.

For each topic, in the ``HashMap`` order of ``partitionsPerTopic``, the subscribed members are
sorted by ``MemberInfo.compareTo`` (static members first, by group.instance.id, then member.id)
and the first ``n % members`` of them get one extra partition. Every topic favours the same
members, which is the classic multi-topic skew.

Example: members c0, c1, c2 and topics t0, t1 with 2 partitions each:
    >>> from .model import KafkaMember, prepare
    >>> ms = [KafkaMember(c, None, ("t0", "t1")) for c in ("c0", "c1", "c2")]
    >>> subscriptions, partitions_per_topic = prepare({"t0": 2, "t1": 2}, ms)
    >>> assign(partitions_per_topic, subscriptions)
    {'c0': [('t0', 0), ('t1', 0)], 'c1': [('t0', 1), ('t1', 1)], 'c2': []}
"""

from __future__ import annotations

from .java_collections import JavaHashMap, TopicPartition
from .model import KafkaMember, member_info_key, partitions_of

NAME = "range"


def _members_per_topic(subscriptions: dict[str, KafkaMember]) -> dict[str, list[KafkaMember]]:
    per_topic: dict[str, list[KafkaMember]] = {}
    for member in subscriptions.values():
        for topic in member.topics:
            per_topic.setdefault(topic, []).append(member)
    return per_topic


def assign(
    partitions_per_topic: JavaHashMap[str, int], subscriptions: dict[str, KafkaMember]
) -> dict[str, list[TopicPartition]]:
    members_per_topic = _members_per_topic(subscriptions)
    assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
    for topic, count in partitions_per_topic.items():
        members = sorted(members_per_topic.get(topic, []), key=member_info_key)  # stable, as Java
        consumers = list(dict.fromkeys(m.member_id for m in members))  # LinkedHashMap keys
        if not consumers:
            continue
        unassigned = partitions_of(topic, count)
        per_consumer, with_extra = divmod(count, len(consumers))
        for consumer in consumers:
            if not unassigned:
                break
            take = per_consumer + (1 if with_extra > 0 else 0)
            if take == 0:
                continue
            assignment[consumer].extend(unassigned[:take])
            del unassigned[:take]
            if take > per_consumer:
                with_extra -= 1
    return assignment
