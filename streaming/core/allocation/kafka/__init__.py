"""Kafka consumer partition assignors, Java-exact (apache/kafka 4.0.0-SNAPSHOT, no racks).

``assign`` runs one assignor the way the group leader does
(``AbstractPartitionAssignor.assign(Cluster, GroupSubscription)``) and returns every member's
list in the order Java returns it. ``members`` is the leader's ``HashMap`` insertion order;
the result's keys follow that map's Java iteration order.

Example:
    >>> ms = [KafkaMember("c1", None, ("t",)), KafkaMember("c0", None, ("t",))]
    >>> assign("range", {"t": 3}, ms)
    {'c0': [('t', 0), ('t', 1)], 'c1': [('t', 2)]}
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from . import cooperative as _cooperative
from . import range as _range
from . import roundrobin as _roundrobin
from . import sticky as _sticky
from .java_collections import JavaHashMap, TopicPartition
from .model import KafkaAssignError, KafkaMember, prepare

AssignFn = Callable[
    [JavaHashMap[str, int], dict[str, KafkaMember]], dict[str, list[TopicPartition]]
]

ASSIGNORS: dict[str, AssignFn] = {
    _range.NAME: _range.assign,
    _roundrobin.NAME: _roundrobin.assign,
    _sticky.NAME: _sticky.assign,
    _cooperative.NAME: _cooperative.assign,
}

__all__ = ["ASSIGNORS", "KafkaAssignError", "KafkaMember", "assign"]


def _validate(partitions_per_topic: Mapping[str, int], members: Sequence[KafkaMember]) -> None:
    for topic, count in partitions_per_topic.items():
        if not isinstance(topic, str) or isinstance(count, bool) or not isinstance(count, int):
            raise KafkaAssignError(f"bad partition count for topic {topic!r}: {count!r}")
    for member in members:
        if not isinstance(member, KafkaMember) or not isinstance(member.member_id, str):
            raise KafkaAssignError(f"not a KafkaMember: {member!r}")
        if not isinstance(member.topics, tuple | list) or not all(
                isinstance(t, str) for t in member.topics):
            raise KafkaAssignError(f"member {member.member_id!r}: topics must be strings")
        if member.group_instance_id is not None and not isinstance(member.group_instance_id, str):
            raise KafkaAssignError(f"member {member.member_id!r}: bad group_instance_id")
        if isinstance(member.generation, bool) or not isinstance(member.generation, int):
            raise KafkaAssignError(f"member {member.member_id!r}: bad generation")
        for tp in member.owned:
            if not (isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str)
                    and isinstance(tp[1], int) and not isinstance(tp[1], bool)):
                raise KafkaAssignError(f"member {member.member_id!r}: bad owned partition {tp!r}")


def assign(
    assignor: str, partitions_per_topic: Mapping[str, int], members: Sequence[KafkaMember]
) -> dict[str, list[TopicPartition]]:
    """member_id -> its partitions, in Java's order; every member gets a key (maybe ``[]``).

    Raises KafkaAssignError (a ValueError) for an unknown assignor or malformed input, and
    where upstream throws (e.g. the sticky NullPointerException on a stale claim), with the
    Java exception in the message.
    """
    run = ASSIGNORS.get(assignor)
    if run is None:
        raise KafkaAssignError(f"unknown assignor {assignor!r}; known: {sorted(ASSIGNORS)}")
    _validate(partitions_per_topic, members)
    if not members:
        return {}
    subscriptions, counts = prepare(partitions_per_topic, members)
    return run(counts, subscriptions)
