"""StickyAssignor (eager) and the shared ``AbstractStickyAssignor.assignPartitions``.

Each member reports what it owned and its generation (the eager assignor carries both in its
userData, which is null for a member of generation -1). Claims on topics outside the metadata
are dropped; of two claims on one partition the higher generation wins and equal generations
cancel each other. Then the constrained path runs when every member lists the same topics
(``sticky_constrained``), the general path otherwise (``sticky_general``).

Example: b joins a group where a (generation 1) owned all four partitions of t.
    >>> from .model import KafkaMember, prepare
    >>> a = KafkaMember("a", None, ("t",), tuple(("t", i) for i in range(4)), 1)
    >>> b = KafkaMember("b", None, ("t",))
    >>> subscriptions, partitions_per_topic = prepare({"t": 4}, [a, b])
    >>> assign(partitions_per_topic, subscriptions)
    {'a': [('t', 0), ('t', 1)], 'b': [('t', 2), ('t', 3)]}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .java_collections import JavaHashMap, TopicPartition, java_string_hash
from .model import KafkaMember
from .sticky_constrained import ConstrainedAssignment
from .sticky_general import GeneralAssignment

NAME = "sticky"
DEFAULT_GENERATION = -1


@dataclass(frozen=True)
class MemberData:
    partitions: list[TopicPartition]
    generation: int | None  # None = Optional.empty()


MemberDataFn = Callable[[KafkaMember], MemberData]


@dataclass
class StickyOutcome:
    assignment: dict[str, list[TopicPartition]]
    transferring: dict[TopicPartition, str] | None  # None: the general path ran


def eager_member_data(member: KafkaMember) -> MemberData:
    """What ``StickyAssignor.memberData`` reads back from the member's userData."""
    if member.generation == DEFAULT_GENERATION:
        return MemberData([], None)
    # serializeTopicPartitionAssignment groups the partitions by topic with
    # HashMap.computeIfAbsent (CollectionUtils.groupPartitionsByTopic): Java's topic order
    by_topic: JavaHashMap[str, list[int]] = JavaHashMap(java_string_hash)
    for topic, partition in member.owned:
        by_topic.compute_if_absent(topic, list).append(partition)
    partitions = [(topic, p) for topic, parts in by_topic.items() for p in parts]
    return MemberData(partitions, member.generation)


def _remove_first(items: list[TopicPartition], item: TopicPartition) -> None:
    if item in items:
        items.remove(item)


@dataclass
class _OwnedClaims:
    owned_by_member: dict[str, list[TopicPartition]]
    multiply_owned: set[TopicPartition]
    all_equal: bool
    max_generation: int


def _read_claims(
    all_topics: JavaHashMap[str, int],
    subscriptions: dict[str, KafkaMember],
    member_data: MemberDataFn,
) -> _OwnedClaims:
    """``allSubscriptionsEqual``: compares topic lists and resolves the ownership claims."""
    claims = _OwnedClaims({}, set(), True, DEFAULT_GENERATION)
    subscribed: set[str] = set()
    owner_of: dict[TopicPartition, str] = {}
    for member_id, member in subscriptions.items():
        if not subscribed:
            subscribed.update(member.topics)  # an empty first list is replaced by the next one
        elif claims.all_equal and not (
            len(member.topics) == len(subscribed) and subscribed.issuperset(member.topics)
        ):
            claims.all_equal = False
        data = member_data(member)
        generation = DEFAULT_GENERATION if data.generation is None else data.generation
        claims.max_generation = max(claims.max_generation, generation)
        owned = claims.owned_by_member[member_id] = []
        for tp in data.partitions:
            if tp[0] not in all_topics:
                continue
            other = owner_of.get(tp)
            if other is None:
                owned.append(tp)
                owner_of[tp] = member_id
                continue
            other_generation = subscriptions[other].generation  # the Subscription's field
            if generation == other_generation:
                claims.multiply_owned.add(tp)
                _remove_first(claims.owned_by_member[other], tp)
                owner_of[tp] = member_id
            elif generation > other_generation:
                owned.append(tp)
                _remove_first(claims.owned_by_member[other], tp)
                owner_of[tp] = member_id
    return claims


def _previous_owners(
    subscriptions: dict[str, KafkaMember], member_data: MemberDataFn, max_generation: int
) -> dict[TopicPartition, tuple[str, int]]:
    """``prepopulateCurrentAssignments``: the newest claim below the current max generation."""
    previous: dict[TopicPartition, tuple[str, int]] = {}
    for member_id, member in subscriptions.items():
        data = member_data(member)
        if data.generation is not None and data.generation < max_generation:
            generation = data.generation
        elif data.generation is None and max_generation > DEFAULT_GENERATION:
            generation = DEFAULT_GENERATION
        else:
            continue
        for tp in data.partitions:
            if tp not in previous or generation > previous[tp][1]:
                previous[tp] = (member_id, generation)
    return previous


def assign_sticky(
    partitions_per_topic: JavaHashMap[str, int],
    subscriptions: dict[str, KafkaMember],
    member_data: MemberDataFn,
) -> StickyOutcome:
    """``AbstractStickyAssignor.assignPartitions`` on a fresh assignor instance."""
    claims = _read_claims(partitions_per_topic, subscriptions, member_data)
    if claims.all_equal:
        transferring: dict[TopicPartition, str] = {}
        builder = ConstrainedAssignment(
            partitions_per_topic, claims.owned_by_member, claims.multiply_owned, transferring)
        return StickyOutcome(builder.build(), transferring)
    previous = _previous_owners(subscriptions, member_data, claims.max_generation)
    general = GeneralAssignment(
        partitions_per_topic, claims.owned_by_member, subscriptions, previous)
    return StickyOutcome(general.build(), None)


def assign(
    partitions_per_topic: JavaHashMap[str, int], subscriptions: dict[str, KafkaMember]
) -> dict[str, list[TopicPartition]]:
    return assign_sticky(partitions_per_topic, subscriptions, eager_member_data).assignment
