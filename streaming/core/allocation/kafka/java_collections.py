"""The few java.util behaviours the Kafka assignors' output depends on.

Upstream iterates ``HashMap``/``HashSet`` instances in several places, so the exact list order
(and, in one sticky path, the choice of partition) follows Java's bucket order:
bucket = ``(h ^ (h >>> 16)) & (capacity - 1)``, insertion order inside a bucket for ``put``
(newest first for ``computeIfAbsent``), capacity 16 doubling whenever ``size > 0.75 * capacity``. ``JavaHashMap`` reproduces that layout (without
treeification, which needs 9+ colliding keys in a table of at least 64 buckets).

Example:
    >>> m = JavaHashMap(java_string_hash)
    >>> for topic in ("orders", "Z", "clicks"):
    ...     m.put(topic, 1)
    >>> list(m)          # "Z" and "orders" share bucket 10; "clicks" is in bucket 9
    ['clicks', 'orders', 'Z']
    >>> g = JavaHashMap(java_string_hash)
    >>> for topic in ("orders", "Z"):
    ...     _ = g.compute_if_absent(topic, list)
    >>> list(g)
    ['Z', 'orders']
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, Generic, TypeVar, overload

from ..javaorder import java_order_key as java_string_key
from ..javaorder import java_string_hash

__all__ = ["JavaHashMap", "TopicPartition", "java_hash_order", "java_string_hash",
           "java_string_key", "table_size_for", "topic_partition_hash"]

TopicPartition = tuple[str, int]

_MASK = 0xFFFFFFFF
_DEFAULT_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


def _to_int32(value: int) -> int:
    value &= _MASK
    return value - (1 << 32) if value & 0x80000000 else value


def topic_partition_hash(tp: TopicPartition) -> int:
    """``TopicPartition.hashCode``: ``31 * (31 + partition) + topic.hashCode()``."""
    topic, partition = tp
    return _to_int32(31 * (31 + partition) + java_string_hash(topic))


def _spread(h: int) -> int:
    h &= _MASK
    return h ^ (h >> 16)


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= capacity (at least 1)."""
    size = 1
    while size < capacity:
        size <<= 1
    return size


class JavaHashMap(Generic[_K, _V]):
    """A ``java.util.HashMap`` whose iteration order is Java's (keys, values and items).

    ``initial_capacity`` mirrors ``new HashMap<>(n)``; None is the no-argument constructor.
    """

    def __init__(self, hash_fn: Callable[[_K], int], initial_capacity: int | None = None):
        self._hash_fn = hash_fn
        self._table: list[list[_K]] | None = None
        self._values: dict[_K, _V] = {}
        self._threshold = 0 if initial_capacity is None else table_size_for(initial_capacity)

    def _resize(self) -> None:
        old_cap = len(self._table) if self._table is not None else 0
        if old_cap > 0:
            new_cap = old_cap * 2
            new_thr = self._threshold * 2 if old_cap >= _DEFAULT_CAPACITY else int(new_cap * 0.75)
        elif self._threshold > 0:
            new_cap = self._threshold
            new_thr = int(new_cap * 0.75)
        else:
            new_cap, new_thr = _DEFAULT_CAPACITY, int(_DEFAULT_CAPACITY * 0.75)
        table: list[list[_K]] = [[] for _ in range(new_cap)]
        for bucket in self._table or ():
            for key in bucket:  # Java's lo/hi split keeps the relative order of a bucket
                table[_spread(self._hash_fn(key)) & (new_cap - 1)].append(key)
        self._table, self._threshold = table, new_thr

    @overload
    def put(self: JavaHashMap[_K, None], key: _K) -> None: ...   # a HashSet's add
    @overload
    def put(self, key: _K, value: _V) -> None: ...
    def put(self, key: _K, value: Any = None) -> None:   # typed by the overloads
        if key in self._values:
            self._values[key] = value  # an existing key keeps its position
            return
        if self._table is None:
            self._resize()
        assert self._table is not None
        bucket = self._table[_spread(self._hash_fn(key)) & (len(self._table) - 1)]
        bucket.append(key)
        self._values[key] = value
        if len(bucket) > _TREEIFY_THRESHOLD and len(self._table) < _MIN_TREEIFY_CAPACITY:
            self._resize()  # treeifyBin() resizes small tables instead of building a tree
        if len(self._values) > self._threshold:
            self._resize()

    def compute_if_absent(self, key: _K, make: Callable[[], _V]) -> _V:
        """``HashMap.computeIfAbsent``: unlike ``put`` it resizes *before* adding, and links the
        new node at the *head* of its bucket, so colliding keys iterate newest first."""
        if key in self._values:
            return self._values[key]
        if self._table is None or len(self._values) > self._threshold:
            self._resize()
        assert self._table is not None
        bucket = self._table[_spread(self._hash_fn(key)) & (len(self._table) - 1)]
        bucket.insert(0, key)
        value = self._values[key] = make()
        if len(bucket) > _TREEIFY_THRESHOLD and len(self._table) < _MIN_TREEIFY_CAPACITY:
            self._resize()
        return value

    def remove(self, key: _K) -> _V | None:
        if key not in self._values:
            return None
        assert self._table is not None
        self._table[_spread(self._hash_fn(key)) & (len(self._table) - 1)].remove(key)
        return self._values.pop(key)

    def get(self, key: _K, default: _V | None = None) -> _V | None:
        return self._values.get(key, default)

    def __getitem__(self, key: _K) -> _V:
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[_K]:
        for bucket in self._table or ():
            yield from bucket

    def items(self) -> Iterator[tuple[_K, _V]]:
        for key in self:
            yield key, self._values[key]

    def values(self) -> Iterator[_V]:
        for key in self:
            yield self._values[key]


def java_hash_order(keys: Iterable[_K], hash_fn: Callable[[_K], int]) -> list[_K]:
    """The iteration order of a default ``HashMap``/``HashSet`` after adding ``keys`` in order."""
    table: JavaHashMap[_K, None] = JavaHashMap(hash_fn)
    for key in keys:
        table.put(key)
    return list(table)
