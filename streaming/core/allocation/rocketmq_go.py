"""RocketMQ queue allocation as the Go client computes it (apache/rocketmq-client-go v2).

Ports of `consumer/strategy.go` where it differs from the Java client, registered as `GO_*`:

- every strategy opens with a guard that returns nil, never an error: an empty client id, an
  empty queue or client list, or a client outside cidAll gets nothing (Java throws for the
  first three, and RebalanceImpl then keeps the old share; Go drops it);
- `defaultConsumer.doBalance` sorts its inputs by UTF-8 bytes (`sort.Strings`,
  `strings.Compare`) and keeps duplicate queues: use `sort_queues_go` / `sort_client_ids_go`;
- GO_AVG and GO_AVG_BY_CIRCLE: Java's arithmetic, Go's guard and sort;
- GO_MACHINE_ROOM_NEARBY: `AllocateByMachineNearby` is a TODO that calls AllocateByAveragely;
- GO_CONSISTENT_HASH: a stathat.com/c/consistent v1.0.0 ring (`StathatRing`), not Java's MD5;
- GO_MACHINE_ROOM: Go's `strings.Split`, a consumer idc list (not a set), and the share's block
  read from mqAll instead of the eligible queues (an upstream bug, reproduced).

A Go runtime panic raises `GoPanic`, whose text is "panic: " + the recovered value.

>>> from streaming.core.allocation.rocketmq import allocate
>>> queues = sort_queues_go([("T", "b@y", 0), ("T", "a@x", 0)])
>>> allocate("GO_MACHINE_ROOM", {"consumer_idcs": ["b"]}, "c1", queues, ["c1"])
[('T', 'a@x', 0)]
>>> allocate("MACHINE_ROOM", {"consumer_idcs": ["b"]}, "c1", queues, ["c1"])
[('T', 'b@y', 0)]
>>> allocate("GO_AVG", {}, "", queues, ["c1"])
[]
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from zlib import crc32

from streaming.core.allocation.consistent_hash import queue_key
from streaming.core.allocation.javaorder import is_code_point_order_safe, java_order_key
from streaming.core.allocation.rocketmq import (
    AllocationError,
    Averagely,
    AveragelyByCircle,
    Params,
    Queue,
    Strategy,
    first_index_by_id,
)

_REPLACEMENT = "\ufffd"


class GoPanic(AllocationError):
    """A runtime panic of the Go strategy; str(e) is "panic: runtime error: ..."."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, f"panic: runtime error: {message}")
        self.message = message


def go_bytes(s: str) -> bytes:
    """The UTF-8 bytes of `s` as a Go string holds it: a lone surrogate is U+FFFD.

    Go decodes text (JSON, gjson) that way; Python keeps lone surrogates, so re-pair the
    surrogate pairs it holds as two code points and replace only the unpaired ones.
    """
    try:
        return s.encode()
    except UnicodeEncodeError:
        paired = java_order_key(s).decode("utf-16-be", "surrogatepass")
        return "".join(_REPLACEMENT if "\ud800" <= c <= "\udfff" else c for c in paired).encode()


def sort_client_ids_go(client_ids: Iterable[str]) -> list[str]:
    """cidAll as `sort.Strings` leaves it: UTF-8 byte order, duplicates kept."""
    items = list(client_ids)
    return sorted(items) if is_code_point_order_safe(items) else sorted(items, key=go_bytes)


def sort_queues_go(queues: Iterable[Queue]) -> list[Queue]:
    """mqAll as doBalance's `sort.SliceStable` leaves it: (topic, broker) by UTF-8 bytes, then
    queue id; duplicates kept (the topic's queues are a slice in Go, not a set).

    Raises TypeError for a name that is not a str.
    """
    items = list(queues)
    names = set(chain(map(itemgetter(0), items), map(itemgetter(1), items)))
    if is_code_point_order_safe(names):
        # Equal tuples are equal queues, so a plain sort is as good as a stable one.
        return sorted(items)
    keys = {name: go_bytes(name) for name in names}
    return sorted(items, key=lambda q: (keys[q[0]], keys[q[1]], q[2]))


def crc32_ieee(key: str) -> int:
    """`crc32.ChecksumIEEE` of the string's bytes (zlib's CRC-32 is the IEEE polynomial)."""
    return crc32(go_bytes(key))


class StathatRing:
    """`consistent.Consistent` of stathat.com/c/consistent v1.0.0, as the Go client uses it.

    `add(elt)` puts CRC-32 (IEEE) of `strconv.Itoa(i) + elt` for i < replicas on the ring (a
    later element takes over an equal hash); `get` returns the owner of the first hash strictly
    greater than the key's, wrapping to the first. v1.0.0 has no FNV option. An empty ring's
    `Get` returns ("", ErrEmptyCircle): None here. Adding with 0 replicas panics, because
    `updateSortedHashes` divides by `NumberOfReplicas * 4`.

    >>> ring = StathatRing(replicas=20)
    >>> ring.add("c1")
    >>> ring.get("MessageQueue [topic=T, brokerName=b, queueId=0]")
    'c1'
    >>> StathatRing(replicas=20).get("anything") is None
    True
    """

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas
        self._circle: dict[int, str] = {}
        self._hashes: list[int] | None = []
        self._owners: list[str] = []

    def add(self, elt: str) -> None:
        for i in range(self.replicas):
            self._circle[crc32_ieee(f"{i}{elt}")] = elt
        if self.replicas == 0:
            raise GoPanic("integer divide by zero")
        self._hashes = None

    def _ring(self) -> tuple[list[int], list[str]]:
        if self._hashes is None:
            self._hashes = sorted(self._circle)
            self._owners = [self._circle[h] for h in self._hashes]
        return self._hashes, self._owners

    def get(self, name: str) -> str | None:
        return self.get_all([name])[0]

    def get_all(self, names: Iterable[str]) -> list[str | None]:
        """`get` for many keys in one pass."""
        hashes, owners = self._ring()
        if not hashes:
            return [None for _ in names]
        # sort.Search for the first hash > key; index len(hashes) wraps to 0.
        wrapped = owners + owners[:1]
        return [wrapped[bisect_right(hashes, crc32_ieee(name))] for name in names]


class GoStrategy(Strategy):
    """The guard all Go strategies open with, and the group-level call that keeps panics apart."""

    def check(self, current_cid: str, mq_all: Sequence[Queue], cid_all: Sequence[str]) -> bool:
        return bool(current_cid and mq_all and cid_all) and current_cid in cid_all

    def outcomes(self, mq_all: list[Queue], cid_all: Sequence[str], members: list[str],
                 ) -> tuple[Mapping[str, list[Queue] | None], dict[str, str]]:
        """(share or None, panic text) of each member; a panic may hit only some members."""
        try:
            return self.shares(mq_all, cid_all, members), {}
        except GoPanic:
            pass  # whose call panics: one call per member tells
        results: dict[str, list[Queue] | None] = {}
        errors: dict[str, str] = {}
        for cid in members:
            try:
                results.update(self.shares(mq_all, cid_all, [cid]))
            except GoPanic as panic:
                results[cid], errors[cid] = None, str(panic)
        return results, errors


class GoAveragely(GoStrategy, Averagely):
    """AllocateByAveragely: Java's blocks (its `% mqSize` never wraps), Go's guard."""

    name = "GO_AVG"


class GoAveragelyByCircle(GoStrategy, AveragelyByCircle):
    """AllocateByAveragelyCircle: Java's rounds, Go's guard."""

    name = "GO_AVG_BY_CIRCLE"


class GoMachineNearby(GoAveragely):
    """AllocateByMachineNearby: a TODO upstream that returns AllocateByAveragely's share."""

    name = "GO_MACHINE_ROOM_NEARBY"


class GoConsistentHash(GoStrategy):
    """AllocateByConsistentHash(virtual_nodes): a queue goes to the StathatRing owner of
    `mq.String()`; shares keep mqAll order. `virtual_nodes` has no default in Go; a negative
    count leaves the ring empty, so nobody gets anything."""

    name = "GO_CONSISTENT_HASH"

    def __init__(self, params: Params | None = None) -> None:
        super().__init__(params)
        if "virtual_nodes" not in self.params:
            raise ValueError("GO_CONSISTENT_HASH needs virtual_nodes (Go has no default)")
        self.virtual_nodes: int = self.params["virtual_nodes"]
        self._ring_cache: tuple[tuple[str, ...], StathatRing] | None = None

    def build_ring(self, cid_all: Sequence[str]) -> StathatRing:
        ring = StathatRing(self.virtual_nodes)
        for cid in cid_all:
            ring.add(cid)
        return ring

    def ring(self, cid_all: Sequence[str]) -> StathatRing:
        """The ring for this cidAll; reused while the instance sees the same list (topics)."""
        key = tuple(cid_all)
        if self._ring_cache is None or self._ring_cache[0] != key:
            self._ring_cache = (key, self.build_ring(cid_all))
        return self._ring_cache[1]

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        if not self.check(current_cid, mq_all, cid_all):
            return []
        owners = self.build_ring(cid_all).get_all(queue_key(*mq) for mq in mq_all)
        return [mq for mq, owner in zip(mq_all, owners, strict=True) if owner == current_cid]

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        owners = self.ring(cid_all).get_all(queue_key(*mq) for mq in mq_all)
        buckets: dict[str, list[Queue]] = {cid: [] for cid in cid_all}
        for mq, owner in zip(mq_all, owners, strict=True):
            if owner is not None:
                buckets[owner].append(mq)
        return buckets if members is None else {c: buckets[c] for c in members}


class GoByMachineRoom(GoStrategy):
    """AllocateByMachineRoom(consumer_idcs), bug for bug.

    premqAll holds each queue whose broker name `strings.Split`s on "@" into exactly 2 parts
    (empty parts count: "idc@" qualifies, unlike Java) once per idc of the list equal to part 0.
    Slot i takes `mqAll[mod*i : mod*(i+1)]` (sic: mqAll, not premqAll; mod = len(premqAll) //
    len(cidAll)) plus premqAll[i + mod*len(cidAll)] when i < the remainder. A block past the end
    of mqAll (a repeated idc makes premqAll longer) panics with index out of range.
    """

    name = "GO_MACHINE_ROOM"

    def __init__(self, params: Params | None = None) -> None:
        super().__init__(params)
        # A list: Go loops over it, so a repeated idc repeats the queue in premqAll.
        self.consumer_idcs: list[str] = list(self.params.get("consumer_idcs") or ())

    def eligible(self, mq_all: Sequence[Queue]) -> list[Queue]:
        """premqAll."""
        counts = Counter(self.consumer_idcs)
        repeats = {}
        for broker in {mq[1] for mq in mq_all}:
            parts = broker.split("@")  # str.split keeps empty parts, as strings.Split does
            repeats[broker] = counts[parts[0]] if len(parts) == 2 else 0
        return [mq for mq in mq_all for _ in range(repeats[mq[1]])]

    @staticmethod
    def slot_share(mq_all: Sequence[Queue], premq: Sequence[Queue], m: int,
                   index: int) -> list[Queue]:
        mod, rem = divmod(len(premq), m)
        start, end = mod * index, mod * index + mod
        if end > len(mq_all):
            raise GoPanic(f"index out of range [{max(start, len(mq_all))}] "
                          f"with length {len(mq_all)}")
        share = list(mq_all[start:end])
        if rem > index:
            share.append(premq[index + mod * m])
        return share

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        if not self.check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return self.slot_share(mq_all, self.eligible(mq_all), len(cid_all), index)

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        premq, first = self.eligible(mq_all), first_index_by_id(cid_all)
        wanted = first if members is None else members
        return {cid: self.slot_share(mq_all, premq, len(cid_all), first[cid]) for cid in wanted}


GO_STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (GoAveragely, GoAveragelyByCircle, GoConsistentHash, GoByMachineRoom,
                GoMachineNearby)
}

# Go strategies whose shares are the Java one's (apart from the sort of non-ASCII names and the
# empty-input guard): a group that mixes them with it has chosen one strategy, not two.
SAME_AS_JAVA = {"GO_AVG": "AVG", "GO_AVG_BY_CIRCLE": "AVG_BY_CIRCLE",
                "GO_MACHINE_ROOM_NEARBY": "AVG"}


def chosen_strategy(name: str) -> str:
    """The strategy a client's operator chose, whichever SDK runs it: GO_AVG is AVG, while
    GO_CONSISTENT_HASH stays itself (its ring is not Java's)."""
    return SAME_AS_JAVA.get(name, name)
