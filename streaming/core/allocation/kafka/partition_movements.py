"""``AbstractStickyAssignor.PartitionMovements``: which partitions moved between which members.

The general sticky path asks it which partition to move when it wants to move one from A to B:
if some partition of the same topic already moved B -> A in this rebalance, that one goes back
instead. "Some" is the first element of a ``HashSet<TopicPartition>``, so the set keeps Java's
iteration order.

Example:
    >>> moves = PartitionMovements()
    >>> moves.move(("t", 3), "a", "b")
    >>> moves.partition_to_move(("t", 5), "b", "a")   # t-3 went a -> b, so it comes back
    ('t', 3)
    >>> moves.partition_to_move(("t", 5), "a", "b")
    ('t', 5)
"""

from __future__ import annotations

from .java_collections import JavaHashMap, TopicPartition, topic_partition_hash

ConsumerPair = tuple[str, str]  # (source member, destination member)


class PartitionMovements:
    def __init__(self) -> None:
        self._by_topic: dict[str, dict[ConsumerPair, JavaHashMap[TopicPartition, None]]] = {}
        self._movements: dict[TopicPartition, ConsumerPair] = {}

    def _remove_record(self, tp: TopicPartition) -> ConsumerPair:
        pair = self._movements.pop(tp)
        per_pair = self._by_topic[tp[0]]
        per_pair[pair].remove(tp)
        if not len(per_pair[pair]):
            del per_pair[pair]
        if not per_pair:
            del self._by_topic[tp[0]]
        return pair

    def _add_record(self, tp: TopicPartition, pair: ConsumerPair) -> None:
        self._movements[tp] = pair
        per_pair = self._by_topic.setdefault(tp[0], {})
        moved = per_pair.get(pair)
        if moved is None:
            moved = per_pair[pair] = JavaHashMap(topic_partition_hash)
        moved.put(tp)

    def move(self, tp: TopicPartition, old_consumer: str, new_consumer: str) -> None:
        if tp in self._movements:
            source = self._remove_record(tp)[0]
            if source != new_consumer:  # not moving back to where it started
                self._add_record(tp, (source, new_consumer))
        else:
            self._add_record(tp, (old_consumer, new_consumer))

    def partition_to_move(
        self, tp: TopicPartition, old_consumer: str, new_consumer: str
    ) -> TopicPartition:
        per_pair = self._by_topic.get(tp[0])
        if per_pair is None:
            return tp
        if tp in self._movements:
            old_consumer = self._movements[tp][0]
        reverse = per_pair.get((new_consumer, old_consumer))
        if reverse is None:
            return tp
        return next(iter(reverse))
