"""CooperativeStickyAssignor: the sticky assignment, minus partitions that must be revoked first.

A partition moving from one member to another is left out of the new owner's list in this
rebalance; its old owner revokes it, and the follow-up rebalance assigns it.

Example: b joins; a (generation 1) owned all four partitions of t. t-2 and t-3 are moving to b,
so b gets nothing yet and a is told to keep t-0, t-1 (it revokes t-2, t-3).
    >>> from .model import KafkaMember, prepare
    >>> a = KafkaMember("a", None, ("t",), tuple(("t", i) for i in range(4)), 1)
    >>> b = KafkaMember("b", None, ("t",))
    >>> subscriptions, partitions_per_topic = prepare({"t": 4}, [a, b])
    >>> assign(partitions_per_topic, subscriptions)
    {'a': [('t', 0), ('t', 1)], 'b': []}
"""

from __future__ import annotations

from .java_collections import JavaHashMap, TopicPartition
from .model import KafkaMember
from .sticky import MemberData, assign_sticky

NAME = "cooperative-sticky"


def cooperative_member_data(member: KafkaMember) -> MemberData:
    """``ownedPartitions`` and the generation field of the member's Subscription."""
    return MemberData(list(member.owned), member.generation)


def _transferring(
    subscriptions: dict[str, KafkaMember], assignment: dict[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member_id, assigned in assignment.items():
        owned = subscriptions[member_id].owned
        added.update((tp, member_id) for tp in assigned if tp not in owned)
        assigned_set = set(assigned)
        revoked.update(tp for tp in owned if tp not in assigned_set)
    return {tp: member for tp, member in added.items() if tp in revoked}


def assign(
    partitions_per_topic: JavaHashMap[str, int], subscriptions: dict[str, KafkaMember]
) -> dict[str, list[TopicPartition]]:
    outcome = assign_sticky(partitions_per_topic, subscriptions, cooperative_member_data)
    transferring = outcome.transferring
    if transferring is None:
        transferring = _transferring(subscriptions, outcome.assignment)
    for tp, member in transferring.items():
        if tp in outcome.assignment[member]:
            outcome.assignment[member].remove(tp)
    return outcome.assignment
