"""``AbstractStickyAssignor.GeneralAssignmentBuilder``: members subscribe to different topics.

1. Keep each member's valid owned partitions (drop those it no longer subscribes to).
2. Give every unassigned partition (topics ordered by how few members can take them, then name)
   to the least-loaded member that can take it (a TreeSet ordered by (load, member id)).
3. While unbalanced, move partitions from loaded to least-loaded members, back to an older
   generation's owner first; keep the result only if it improves the balance score.

Example (the upstream javadoc's second example): c0 subscribes t0; c1 t0, t1; c2 t0, t1, t2
(1, 2 and 3 partitions). Sticky gives c1 both t1 partitions, where round robin gives c2 four:
    >>> from .model import KafkaMember
    >>> subs = {"c0": KafkaMember("c0", None, ("t0",)),
    ...         "c1": KafkaMember("c1", None, ("t0", "t1")),
    ...         "c2": KafkaMember("c2", None, ("t0", "t1", "t2"))}
    >>> owned = {c: [] for c in subs}
    >>> GeneralAssignment({"t0": 1, "t1": 2, "t2": 3}, owned, subs, {}).build()
    {'c0': [('t0', 0)], 'c1': [('t1', 0), ('t1', 1)], 'c2': [('t2', 0), ('t2', 1), ('t2', 2)]}
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping

from .java_collections import JavaHashMap, TopicPartition, java_string_key
from .model import KafkaAssignError, KafkaMember
from .partition_movements import PartitionMovements


class MembersByLoad:
    """``TreeSet<String>`` with ``SubscriptionComparator``: (assignment size, member id)."""

    def __init__(self, assignment: dict[str, list[TopicPartition]]):
        self._assignment = assignment
        self._keys: list[tuple[int, bytes, str]] = []
        self._key_of: dict[str, tuple[int, bytes, str]] = {}

    def add(self, member: str) -> None:
        if member not in self._key_of:
            key = (len(self._assignment[member]), java_string_key(member), member)
            bisect.insort(self._keys, key)
            self._key_of[member] = key

    def remove(self, member: str) -> None:
        key = self._key_of.pop(member, None)
        if key is not None:
            self._keys.remove(key)

    def first(self) -> str:
        return self._keys[0][2]

    def last(self) -> str:
        return self._keys[-1][2]

    def __iter__(self) -> Iterator[str]:
        return iter([key[2] for key in self._keys])


def _balance_score(assignment: Mapping[str, list[TopicPartition]]) -> int:
    sizes = [len(p) for p in assignment.values()]
    return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1:])


class GeneralAssignment:
    def __init__(
        self,
        partitions_per_topic: Mapping[str, int] | JavaHashMap[str, int],
        owned_by_member: dict[str, list[TopicPartition]],
        subscriptions: dict[str, KafkaMember],
        previous_owner: dict[TopicPartition, tuple[str, int]],
    ):
        self.counts = dict(partitions_per_topic.items())
        self.total = sum(self.counts.values())
        self.subscriptions = subscriptions
        self.current = owned_by_member
        self.previous_owner = previous_owner  # partition -> (member, generation) of an older claim
        self.topic_members: dict[str, list[str]] = {t: [] for t in self.counts}
        self.member_topics: dict[str, list[str]] = {}
        for member_id, member in subscriptions.items():
            topics = self.member_topics[member_id] = []
            for topic in member.topics:
                if topic in self.counts:
                    topics.append(topic)
                    self.topic_members[topic].append(member_id)
            self.current.setdefault(member_id, [])
        self.owner = {tp: m for m, parts in self.current.items() for tp in parts}
        ordered_topics = sorted(self.topic_members, key=self._topic_order)
        self.all_partitions = [(t, i) for t in ordered_topics for i in range(self.counts[t])]
        self.by_load = MembersByLoad(self.current)
        self.movements = PartitionMovements()
        self.revocation_required = False

    def _topic_order(self, topic: str) -> tuple[int, bytes]:
        return (len(self.topic_members[topic]), java_string_key(topic))

    def build(self) -> dict[str, list[TopicPartition]]:
        kept = self._keep_owned()
        unassigned = self._unassigned(kept)
        for member in self.current:
            self.by_load.add(member)
        self._balance(unassigned)
        return self.current

    def _keep_owned(self) -> list[TopicPartition]:
        kept = []
        for member, parts in self.current.items():
            subscribed = self.subscriptions[member].topics
            still_owned = []
            for tp in parts:
                if tp[0] not in self.topic_members:
                    self.owner.pop(tp, None)
                elif tp[0] not in subscribed:
                    self.revocation_required = True  # upstream keeps its stale owner entry
                else:
                    still_owned.append(tp)
                    kept.append(tp)
            parts[:] = still_owned
        return kept

    def _unassigned(self, kept: list[TopicPartition]) -> list[TopicPartition]:
        if not kept:
            return self.all_partitions  # the same list object, as upstream returns it
        ordered = iter(sorted(kept, key=lambda tp: (*self._topic_order(tp[0]), tp[1])))
        next_kept: TopicPartition | None = next(ordered)
        unassigned = []
        for tp in self.all_partitions:
            if next_kept is None or tp != next_kept:
                unassigned.append(tp)
            else:
                next_kept = next(ordered, None)
        return unassigned

    def _max_size(self, topics: list[str]) -> int:
        if len(topics) == len(self.counts):
            return self.total
        return sum(self.counts[t] for t in topics)

    def _topic_movable(self, topic: str) -> bool:
        return len(self.topic_members[topic]) >= 2

    def _member_movable(self, member: str) -> bool:
        parts = self.current[member]
        if len(parts) < self._max_size(self.member_topics[member]):
            return True
        return any(self._topic_movable(tp[0]) for tp in parts)

    def _size(self, member: str | None) -> int:
        parts = self.current.get(member) if member is not None else None
        if parts is None:
            raise KafkaAssignError("java.lang.NullPointerException: member without assignment")
        return len(parts)

    def _is_balanced(self) -> bool:
        if self._size(self.by_load.first()) >= self._size(self.by_load.last()) - 1:
            return True
        owner_now = {tp: m for m, parts in self.current.items() for tp in parts}
        for member in self.by_load:
            parts = set(self.current[member])
            topics = self.member_topics[member]
            if len(self.current[member]) == self._max_size(topics):
                continue
            for topic in topics:
                for i in range(self.counts[topic]):
                    if (topic, i) in parts:
                        continue
                    if len(parts) + 1 < self._size(owner_now.get((topic, i))):
                        return False
        return True

    def _assign_to_least_loaded(self, tp: TopicPartition) -> None:
        for member in self.by_load:
            if tp[0] in self.member_topics[member]:
                self.by_load.remove(member)
                self.current[member].append(tp)
                self.owner[tp] = member
                self.by_load.add(member)
                return

    def _balance(self, unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.by_load.last()]
        for tp in unassigned:
            if self.topic_members[tp[0]]:
                self._assign_to_least_loaded(tp)
        fixed = {(t, i) for t, ms in self.topic_members.items() if len(ms) < 2
                 for i in range(self.counts[t])}
        self.all_partitions[:] = [tp for tp in self.all_partitions if tp not in fixed]
        unassigned[:] = [tp for tp in unassigned if tp not in fixed]
        fixed_assignments = {}
        for member in self.member_topics:
            if not self._member_movable(member):
                self.by_load.remove(member)
                fixed_assignments[member] = self.current.pop(member)
        before = {m: list(parts) for m, parts in self.current.items()}
        owner_before = dict(self.owner)
        if not self.revocation_required:
            self._reassign_all(unassigned)
        moved = self._reassign_all(self.all_partitions)
        if not initializing and moved and _balance_score(self.current) >= _balance_score(before):
            self.current.clear()
            self.current.update(before)
            self.owner = owner_before
        for member, parts in fixed_assignments.items():
            self.current[member] = parts
            self.by_load.add(member)

    def _reassign_all(self, movable: list[TopicPartition]) -> bool:
        moved_any = False
        modified = True
        while modified:
            modified = False
            for tp in movable:
                if self._is_balanced():
                    break
                load = self._size(self.owner.get(tp))
                previous = self.previous_owner.get(tp)
                if previous is not None and load > self._size(previous[0]) + 1:
                    self._reassign(tp, previous[0])
                    moved_any = modified = True
                    continue
                if any(load > self._size(other) + 1 for other in self.topic_members[tp[0]]):
                    self._reassign(tp, self._least_loaded_for(tp[0]))
                    moved_any = modified = True
        return moved_any

    def _least_loaded_for(self, topic: str) -> str:
        return next(m for m in self.by_load if topic in self.member_topics[m])

    def _reassign(self, tp: TopicPartition, new_member: str) -> None:
        to_move = self.movements.partition_to_move(tp, self.owner[tp], new_member)
        old_member = self.owner[to_move]
        self.by_load.remove(old_member)
        self.by_load.remove(new_member)
        self.movements.move(to_move, old_member, new_member)
        self.current[old_member].remove(to_move)
        self.current[new_member].append(to_move)
        self.owner[to_move] = new_member
        self.by_load.add(new_member)
        self.by_load.add(old_member)
