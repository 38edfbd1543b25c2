"""RocketMQ queue-allocation strategies, bit-exact with the upstream Java client.

Each class mirrors one `AllocateMessageQueueStrategy` of `org.apache.rocketmq.client.consumer
.rebalance`. `allocate` is the per-client call, exactly as Java's; `shares` computes every member's
share in one pass (the group-level path in `group.py` uses it). Inputs are sorted as
`RebalanceImpl.rebalanceByTopic` sorts them (`sort_queues`, `sort_client_ids`).

>>> queues = sort_queues([("T", "broker-a", i) for i in range(10)])
>>> [len(allocate("AVG", {}, c, queues, ["c1", "c2", "c3"])) for c in ("c1", "c2", "c3")]
[4, 3, 3]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cmp_to_key
from itertools import islice, repeat
from operator import itemgetter, lt
from typing import Any, ClassVar, Literal

from streaming.core.allocation.consistent_hash import ConsistentHashRouter, queue_key
from streaming.core.allocation.javaorder import (
    is_code_point_order_safe,
    java_order_key,
    java_sorted,
    java_split,
)

Queue = tuple[str, str, int]  # (topic, broker_name, queue_id): MessageQueue
# A strategy's parameters, as the event or request gives them (JSON): each strategy reads its own.
Params = Mapping[str, Any]

_INT_MAX = (1 << 31) - 1


class AllocationError(Exception):
    """An exception the Java strategy throws; str(e) is exactly Java's `toString()`."""

    def __init__(self, message: str) -> None:
        super().__init__(f"java.lang.IllegalArgumentException: {message}")
        self.message = message


def as_queue(value: Mapping[str, Any] | Sequence[Any]) -> Queue:
    """A Queue from a (topic, broker, id) sequence or a {topic, broker, queue_id} mapping."""
    if isinstance(value, Mapping):
        return (value["topic"], value["broker"], value["queue_id"])
    topic, broker, queue_id = value
    return (topic, broker, queue_id)


def queue_string(queue: Queue) -> str:
    return queue_key(*queue)


def _java_int_compare(left: Queue, right: Queue, keys: Mapping[str, bytes]) -> int:
    """`MessageQueue.compareTo`, including its overflowing `this.queueId - o.queueId`."""
    for a, b in ((keys[left[0]], keys[right[0]]), (keys[left[1]], keys[right[1]])):
        if a != b:
            return -1 if a < b else 1
    diff = (left[2] - right[2] + (1 << 31)) % (1 << 32) - (1 << 31)
    return diff


def _stable_sort_by_name(items: list[Queue], field: Literal[0, 1], names: set[str]) -> None:
    if len(names) < 2:
        return
    if is_code_point_order_safe(names):
        items.sort(key=itemgetter(field))
    else:
        keys = {name: java_order_key(name) for name in names}
        items.sort(key=lambda q: keys[q[field]])


def sort_queues(queues: Iterable[Queue]) -> list[Queue]:
    """`Collections.sort` over the topic's queue set: (topic, broker, queue id), Java order.

    Duplicates are dropped first because RebalanceImpl sorts a copy of a `Set<MessageQueue>`.
    """
    items = list(queues)
    return sort_queue_list(items, set(map(itemgetter(0), items)),
                           set(map(itemgetter(1), items)), list(map(itemgetter(2), items)))


def sort_queue_list(items: list[Queue], topics: set[str], brokers: set[str], ids: list[int],
                    distinct: set[Queue] | None = None) -> list[Queue]:
    """`sort_queues` given the items' topic set, broker set, id list and (optionally) set."""
    overflow = bool(ids) and max(ids) - min(ids) > _INT_MAX
    code_point_safe = is_code_point_order_safe(topics | brokers)  # TypeError for a non-str name
    if not overflow and code_point_safe and all(map(lt, items, islice(items, 1, None))):
        return list(items)  # already strictly increasing: sorted and free of duplicates
    if len(set(items) if distinct is None else distinct) != len(items):
        items = list(dict.fromkeys(items))
    if overflow:
        # The subtraction overflows: reproduce the comparator (Java's TimSort may still order an
        # inconsistent comparator differently; ids this far apart do not occur in practice).
        keys = {name: java_order_key(name) for name in topics | brokers}
        # mypy cannot infer the lambda's parameter types through cmp_to_key.
        return sorted(items, key=cmp_to_key(lambda a, b: _java_int_compare(a, b, keys)))  # type: ignore[arg-type]
    # Three stable passes (id, then broker, then topic) equal one lexicographic sort and keep
    # every comparison in C: several times faster than a tuple key.
    items = sorted(items, key=itemgetter(2))
    _stable_sort_by_name(items, 1, brokers)
    _stable_sort_by_name(items, 0, topics)
    return items


def sort_client_ids(client_ids: Iterable[str]) -> list[str]:
    """cidAll as RebalanceImpl sorts it: Java String order, duplicates kept."""
    return java_sorted(client_ids)


def first_index_by_id(cid_all: Sequence[str]) -> dict[str, int]:
    """`cidAll.indexOf(id)` for every id at once: the first position of each id."""
    size = len(cid_all)
    # Reversed insertion: the earliest position of a duplicated id is written last and wins.
    return dict(zip(reversed(cid_all), range(size - 1, -1, -1), strict=True))


class Strategy:
    """One upstream strategy; a fresh instance per call, as RebalanceImpl uses them."""

    name: ClassVar[str] = ""

    def __init__(self, params: Params | None = None) -> None:
        self.params = dict(params or {})

    def check(self, current_cid: str, mq_all: Sequence[Queue], cid_all: Sequence[str]) -> bool:
        """`AbstractAllocateMessageQueueStrategy.check`, in its order of checks."""
        if not current_cid:
            raise AllocationError("currentCID is empty")
        if not mq_all:
            raise AllocationError("mqAll is null or mqAll empty")
        if not cid_all:
            raise AllocationError("cidAll is null or cidAll empty")
        return current_cid in cid_all

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        """The per-client Java method, transcribed statement by statement (no shortcuts)."""
        raise NotImplementedError

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        """The share of each member id (default: all) after `check` passed for them."""
        raise NotImplementedError


class _SliceStrategy(Strategy):
    """A strategy whose share of slot i is a slice of mqAll that depends only on (n, i, m).

    The slices are computed once and reused while the same cidAll / members list objects come
    back with the same queue count (the topics of one group), then applied in C. Callers must
    not mutate those lists between calls (group.py never does).
    """

    def __init__(self, params: Params | None = None) -> None:
        super().__init__(params)
        # (queue count, cidAll, members, ids, their slices) of the last call
        self._last: tuple[int, Sequence[str], Iterable[str] | None, list[str],
                          list[slice]] | None = None

    def slot_slices(self, n: int, m: int) -> list[slice]:
        """The share of every slot 0..m-1 as a slice of the sorted queue list."""
        raise NotImplementedError

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        n, last = len(mq_all), self._last
        if last is None or last[0] != n or last[1] is not cid_all or last[2] is not members:
            first = first_index_by_id(cid_all)
            ids = list(first) if members is None else list(members)
            by_slot = self.slot_slices(n, len(cid_all))
            slices = list(map(by_slot.__getitem__, map(first.__getitem__, ids)))
            last = self._last = (n, cid_all, members, ids, slices)
        return dict(zip(last[3], map(mq_all.__getitem__, last[4]), strict=True))


class Averagely(_SliceStrategy):
    """AllocateMessageQueueAveragely: contiguous blocks, the first `mod` clients get one more.

    10 queues, cidAll [c1, c2, c3] -> c1: q0..q3, c2: q4..q6, c3: q7..q9. A duplicated id
    takes the first slot's block at every process; its other slot's block goes to nobody.
    """

    name = "AVG"

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        if not self.check(current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        mod = len(mq_all) % len(cid_all)
        if len(mq_all) <= len(cid_all):
            average_size = 1
        elif mod > 0 and index < mod:
            average_size = len(mq_all) // len(cid_all) + 1
        else:
            average_size = len(mq_all) // len(cid_all)
        start = index * average_size if mod > 0 and index < mod else index * average_size + mod
        return [mq_all[start + i] for i in range(min(average_size, len(mq_all) - start))]

    def slot_slices(self, n: int, m: int) -> list[slice]:
        if n <= m:
            # averageSize 1: slot i < n takes queue i, the slots after it get nothing.
            starts = [*range(n), *repeat(n, m - n)]
        else:
            base, mod = divmod(n, m)
            # The first `mod` slots take base + 1 queues, the others base; blocks are contiguous.
            starts = [*range(0, mod * (base + 1), base + 1), *range(mod * (base + 1), n, base)]
        return list(map(slice, starts, [*starts[1:], n]))


class AveragelyByCircle(_SliceStrategy):
    """AllocateMessageQueueAveragelyByCircle: slot i takes queues i, i+m, i+2m, ...

    7 queues, cidAll [c1, c2, c3] -> c1: q0,q3,q6; c2: q1,q4; c3: q2,q5.
    """

    name = "AVG_BY_CIRCLE"

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        if not self.check(current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        return [mq_all[i] for i in range(index, len(mq_all)) if i % len(cid_all) == index]

    def slot_slices(self, n: int, m: int) -> list[slice]:
        return list(map(slice, range(m), repeat(None), repeat(m)))


class ConsistentHash(Strategy):
    """AllocateMessageQueueConsistentHash over an MD5 ring of `virtual_nodes` per client id.

    Each queue goes to the ring owner of `MessageQueue.toString()`; results keep mqAll order.
    A duplicated id is added twice (replicas cid-0..cid-19 for 10 vnodes), so no queue is lost.
    """

    name = "CONSISTENT_HASH"

    def __init__(self, params: Params | None = None) -> None:
        super().__init__(params)
        self.virtual_nodes: int = self.params.get("virtual_nodes", 10)
        if self.virtual_nodes < 0:
            raise AllocationError(f"illegal virtualNodeCnt :{self.virtual_nodes}")
        self._router_cache: tuple[tuple[str, ...], ConsistentHashRouter] | None = None

    def router(self, cid_all: Sequence[str]) -> ConsistentHashRouter:
        """The ring for this cidAll; reused while the instance sees the same list (topics)."""
        key = tuple(cid_all)
        if self._router_cache is None or self._router_cache[0] != key:
            self._router_cache = (key, ConsistentHashRouter(cid_all, self.virtual_nodes))
        return self._router_cache[1]

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        if not self.check(current_cid, mq_all, cid_all):
            return []
        router = ConsistentHashRouter(cid_all, self.virtual_nodes)
        owners = router.route_all(queue_string(mq) for mq in mq_all)
        return [mq for mq, owner in zip(mq_all, owners, strict=True) if owner == current_cid]

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        owners = self.router(cid_all).route_all(queue_string(mq) for mq in mq_all)
        buckets: dict[str, list[Queue]] = {cid: [] for cid in cid_all}
        for mq, owner in zip(mq_all, owners, strict=True):
            if owner is not None:
                buckets[owner].append(mq)
        return buckets if members is None else {c: buckets[c] for c in members}


class ByMachineRoom(Strategy):
    """AllocateMessageQueueByMachineRoom: only `idc@broker` queues of a consumer idc count.

    Eligible = `brokerName.split("@")` has 2 parts and part 0 is in `consumer_idcs`; they are
    split in blocks of len // m, the remainder dealt one each to the first slots.
    """

    name = "MACHINE_ROOM"

    def __init__(self, params: Params | None = None) -> None:
        super().__init__(params)
        self.consumer_idcs: frozenset[str] = frozenset(self.params.get("consumer_idcs", ()))

    def eligible(self, mq_all: Sequence[Queue]) -> list[Queue]:
        idcs, split_cache = self.consumer_idcs, {}
        for broker in {mq[1] for mq in mq_all}:
            parts = java_split(broker, "@")
            split_cache[broker] = len(parts) == 2 and parts[0] in idcs
        return [mq for mq in mq_all if split_cache[mq[1]]]

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        if not self.check(current_cid, mq_all, cid_all):
            return []
        current_index = cid_all.index(current_cid)
        premq = []
        for mq in mq_all:
            parts = java_split(mq[1], "@")
            if len(parts) == 2 and parts[0] in self.consumer_idcs:
                premq.append(mq)
        mod, rem = len(premq) // len(cid_all), len(premq) % len(cid_all)
        start = mod * current_index
        result = [premq[i] for i in range(start, start + mod)]
        if rem > current_index:
            result.append(premq[current_index + mod * len(cid_all)])
        return result

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        premq = self.eligible(mq_all)
        m = len(cid_all)
        base, rem = divmod(len(premq), m)
        first = first_index_by_id(cid_all)
        wanted = first if members is None else {c: first[c] for c in members}
        result = {}
        for cid, index in wanted.items():
            share = premq[base * index:base * index + base]
            if rem > index:
                share.append(premq[index + base * m])
            result[cid] = share
        return result


class MachineRoomNearby(Strategy):
    """AllocateMachineRoomNearby: the inner strategy inside each machine room first.

    Queues of a room with live consumers go to those consumers only; queues of a room without
    consumers are shared by everyone (inner strategy over cidAll), rooms in TreeMap order.
    Rooms come from `broker_rooms` / `client_rooms`; a missing or empty room throws.
    """

    name = "MACHINE_ROOM_NEARBY"

    def __init__(self, params: Params | None = None) -> None:
        super().__init__(params)
        inner_name = self.params.get("inner", "AVG")
        self.inner = make_strategy(inner_name, self.params.get("inner_params") or {})
        self.broker_rooms: dict[str, str | None] = dict(self.params.get("broker_rooms") or {})
        self.client_rooms: dict[str, str | None] = dict(self.params.get("client_rooms") or {})

    def _rooms(self, mq_all: Sequence[Queue], cid_all: Sequence[str],
               ) -> tuple[dict[str, list[Queue]], dict[str, list[str]]]:
        """`mr2Mq` and `mr2c` (TreeMaps), raising as Java does on the first unresolved name."""
        mr2mq: dict[str, list[Queue]] = {}
        for mq in mq_all:
            room = self.broker_rooms.get(mq[1])
            if not room:
                raise AllocationError(f"Machine room is null for mq {queue_string(mq)}")
            mr2mq.setdefault(room, []).append(mq)
        mr2c: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.client_rooms.get(cid)
            if not room:
                raise AllocationError(f"Machine room is null for consumer id {cid}")
            mr2c.setdefault(room, []).append(cid)
        return mr2mq, mr2c

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        if not self.check(current_cid, mq_all, cid_all):
            return []
        mr2mq, mr2c = self._rooms(mq_all, cid_all)
        # check() passed: current_cid is in cid_all, so _rooms found its room (a key of mr2c).
        current_room = self.client_rooms.get(current_cid)
        room_mqs = mr2mq.pop(current_room, None)  # type: ignore[arg-type]
        results: list[Queue] = []
        if room_mqs:
            results += self.inner.allocate(current_cid, room_mqs, mr2c.get(current_room))  # type: ignore[arg-type]
        for room in java_sorted(mr2mq):
            if room not in mr2c:
                results += self.inner.allocate(current_cid, mr2mq[room], cid_all)
        return results

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        mr2mq, mr2c = self._rooms(mq_all, cid_all)
        wanted = list(dict.fromkeys(cid_all if members is None else members))
        result: dict[str, list[Queue]] = {cid: [] for cid in wanted}
        # 1. Each consumer's own room, shared among that room's consumers.
        for room, room_cids in mr2c.items():
            room_mqs = mr2mq.get(room)
            if room_mqs:
                in_room = [c for c in dict.fromkeys(room_cids) if c in result]
                for cid, share in self.inner.shares(room_mqs, room_cids, in_room).items():
                    result[cid].extend(share)
        # 2. Rooms without consumers, in Java String order of room names, over cidAll.
        orphan_rooms = java_sorted(room for room in mr2mq if room not in mr2c)
        for room in orphan_rooms:
            for cid, share in self.inner.shares(mr2mq[room], cid_all, wanted).items():
                result[cid].extend(share)
        return result


class ByConfig(Strategy):
    """AllocateMessageQueueByConfig: returns the configured list, whatever the group looks like.

    No check at all (no error for an empty client id or an empty mqAll). An unconfigured list is
    null in Java, which RebalanceImpl treats as nothing allocated: [] here.
    """

    name = "CONFIG"

    def allocate(self, current_cid: str, mq_all: Sequence[Queue],
                 cid_all: Sequence[str]) -> list[Queue]:
        return [as_queue(q) for q in self.params.get("queues") or ()]

    def shares(self, mq_all: list[Queue], cid_all: Sequence[str],
               members: Iterable[str] | None = None) -> dict[str, list[Queue]]:
        configured = self.allocate("", mq_all, cid_all)
        return {cid: list(configured) for cid in (cid_all if members is None else members)}


# The Go client's strategies (rocketmq_go.GO_STRATEGIES) are added by the package __init__.
STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (Averagely, AveragelyByCircle, ConsistentHash, ByMachineRoom, MachineRoomNearby,
                ByConfig)
}


def make_strategy(strategy: str, params: Params | None = None) -> Strategy:
    """A fresh strategy instance; a Java constructor exception is raised as AllocationError."""
    return STRATEGIES[strategy](params)


def allocate(strategy: str, params: Params, client_id: str, queues_sorted: Sequence[Queue],
             cids_sorted: Sequence[str]) -> list[Queue]:
    """The per-client call, exactly `AllocateMessageQueueStrategy.allocate`; raises AllocationError.

    Inputs must already be sorted (`sort_queues`, `sort_client_ids`), as RebalanceImpl passes them.
    """
    return make_strategy(strategy, params).allocate(client_id, queues_sorted, cids_sorted)
