"""``AbstractStickyAssignor.ConstrainedAssignmentBuilder``: every member subscribes to the same
topics.

1. Each member (in the leader's ``HashMap`` order) keeps its owned partitions, sorted by
   (partition, topic): all of them if fewer than minQuota; maxQuota of them while fewer than
   ``total % members`` members have received maxQuota; otherwise minQuota. The rest is revoked.
2. The unassigned partitions (sorted by topic, then partition) go round-robin to the members under
   minQuota (sorted by member id), then one each to members at minQuota (sorted, then in order
   of reaching minQuota) until ``total % members`` members hold maxQuota.

Example: 5 partitions of t, a owned t-0..t-3, b is new: a keeps t-0, t-1, t-2 (maxQuota 3),
t-3 is revoked, b receives t-3 and t-4.
    >>> owned = {"a": [("t", 0), ("t", 1), ("t", 2), ("t", 3)], "b": []}
    >>> moving = {}
    >>> ConstrainedAssignment({"t": 5}, owned, set(), moving).build()
    {'a': [('t', 0), ('t', 1), ('t', 2)], 'b': [('t', 3), ('t', 4)]}
    >>> moving
    {('t', 3): 'b'}
"""

from __future__ import annotations

from collections.abc import Mapping

from .java_collections import JavaHashMap, TopicPartition, java_string_key
from .model import KafkaAssignError


class ConstrainedAssignment:
    def __init__(
        self,
        partitions_per_topic: Mapping[str, int] | JavaHashMap[str, int],
        owned_by_member: dict[str, list[TopicPartition]],
        multiply_owned: set[TopicPartition],
        transferring: dict[TopicPartition, str],
    ):
        self.partitions_per_topic = dict(partitions_per_topic.items())
        self.owned_by_member = owned_by_member  # in the leader's HashMap order
        self.multiply_owned = multiply_owned
        self.transferring = transferring
        total = sum(self.partitions_per_topic.values())
        members = len(owned_by_member)
        self.min_quota, self.expected_over_min = divmod(total, members)
        self.max_quota = -(-total // members)
        self.current_over_min = 0
        self.assignment: dict[str, list[TopicPartition]] = {m: [] for m in owned_by_member}
        self.assigned: list[TopicPartition] = []
        self.revoked: set[TopicPartition] = set()
        self.under_min: list[str] = []
        self.exactly_min: list[str] = []

    def build(self) -> dict[str, list[TopicPartition]]:
        self._assign_owned()
        unassigned = self._unassigned()
        self.under_min.sort(key=java_string_key)
        self.exactly_min.sort(key=java_string_key)
        self._assign_round_robin(unassigned)
        self._verify_unfilled()
        return self.assignment

    def _keep(self, member: str, owned: list[TopicPartition], quota: int) -> None:
        self.assignment[member].extend(owned[:quota])
        self.assigned.extend(owned[:quota])
        self.revoked.update(owned[quota:])

    def _assign_owned(self) -> None:
        for member, claimed in self.owned_by_member.items():
            owned = sorted(claimed, key=lambda tp: (tp[1], java_string_key(tp[0])))
            owned = [tp for tp in owned if tp not in self.multiply_owned]
            if len(owned) < self.min_quota:
                self._keep(member, owned, len(owned))
                self.under_min.append(member)
            elif len(owned) >= self.max_quota and self.current_over_min < self.expected_over_min:
                self.current_over_min += 1
                if self.current_over_min == self.expected_over_min:
                    self.exactly_min.clear()
                self._keep(member, owned, self.max_quota)
            else:
                self._keep(member, owned, self.min_quota)
                if self.current_over_min < self.expected_over_min:
                    self.exactly_min.append(member)

    def _unassigned(self) -> list[TopicPartition]:
        """All partitions (topic, partition order) minus the kept ones, by Java's two-pointer walk."""
        topics = sorted(self.partitions_per_topic, key=java_string_key)
        every = [(t, i) for t in topics for i in range(self.partitions_per_topic[t])]
        if not self.assigned:
            return every
        kept = iter(sorted(self.assigned, key=lambda tp: (java_string_key(tp[0]), tp[1])))
        next_kept: TopicPartition | None = next(kept)
        unassigned = []
        for tp in every:
            if next_kept is None or tp != next_kept:
                unassigned.append(tp)
            else:
                next_kept = next(kept, None)
        return unassigned

    def _assign_new(self, tp: TopicPartition, member: str) -> int:
        self.assignment[member].append(tp)
        if tp in self.revoked or tp in self.multiply_owned:
            self.transferring[tp] = member
        return len(self.assignment[member])

    def _assign_round_robin(self, unassigned: list[TopicPartition]) -> None:
        # Emulates a java.util.LinkedList iterator over under_min: `cursor` is the next index,
        # `returned` the index next() last returned (what iterator.remove() unlinks).
        cursor, returned = 0, None
        for tp in unassigned:
            if cursor < len(self.under_min):
                member, returned, cursor = self.under_min[cursor], cursor, cursor + 1
            elif not self.under_min and not self.exactly_min:
                raise KafkaAssignError(
                    "java.lang.IllegalStateException: No more unfilled consumers to be assigned.")
            elif not self.under_min:
                member = self.exactly_min.pop(0)
            else:
                member, returned, cursor = self.under_min[0], 0, 1
            count = self._assign_new(tp, member)
            if count == self.min_quota:
                if returned is None:
                    raise KafkaAssignError("java.lang.IllegalStateException")
                del self.under_min[returned]
                cursor, returned = returned, None
                self.exactly_min.append(member)
            elif count == self.max_quota:
                self.current_over_min += 1

    def _verify_unfilled(self) -> None:
        if not self.under_min:
            return
        if self.current_over_min != self.expected_over_min:
            raise KafkaAssignError(
                "java.lang.IllegalStateException: We haven't reached the expected number of "
                "members with more than the minQuota partitions, but no more partitions to be "
                "assigned")
        for member in self.under_min:
            if len(self.assignment[member]) != self.min_quota:
                raise KafkaAssignError(
                    f"java.lang.IllegalStateException: Consumer: [{member}] doesn't reach "
                    "minQuota partitions, and no more partitions to be assigned")
