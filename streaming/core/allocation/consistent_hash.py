"""RocketMQ's `ConsistentHashRouter` with its default MD5 hash, reproduced exactly.

Ring entries are `clientId + "-" + i`; a queue routes to the first entry whose hash is >= the
queue's hash (`TreeMap.tailMap`), wrapping to the first entry. Worked example:

>>> router = ConsistentHashRouter(["c1", "c2"], virtual_nodes=10)
>>> router.route("MessageQueue [topic=T, brokerName=broker-a, queueId=0]") in ("c1", "c2")
True
>>> ConsistentHashRouter([], virtual_nodes=10).route("anything") is None
True
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from hashlib import md5

from streaming.core.allocation.javaorder import java_utf8


def md5_hash(key: str) -> int:
    """`MD5Hash.hash`: the first 4 digest bytes, big-endian, as an unsigned 32-bit value."""
    return int.from_bytes(md5(java_utf8(key)).digest()[:4], "big")


def _md5_hashes(keys: Iterable[str]) -> list[int]:
    """`md5_hash` over many keys; plain UTF-8 first, Java's '?' replacement only if needed."""
    from_bytes = int.from_bytes
    try:
        return [from_bytes(md5(key.encode()).digest()[:4], "big") for key in keys]
    except UnicodeEncodeError:
        return [md5_hash(key) for key in keys]


def queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    """`MessageQueue.toString()`, the key a queue is routed by."""
    return f"MessageQueue [topic={topic}, brokerName={broker_name}, queueId={queue_id}]"


class ConsistentHashRouter:
    """The hash ring of one client list, built as the Java constructor builds it."""

    def __init__(self, nodes: Iterable[str], virtual_nodes: int) -> None:
        self._owner_by_hash: dict[int, str] = {}
        # Virtual nodes currently on the ring per physical node (`getExistingReplicas`).
        self._replicas: Counter[str] = Counter()
        self._hashes: list[int] | None = None
        self._owners: list[str] = []
        for node in nodes:
            self.add_node(node, virtual_nodes)

    def add_node(self, node: str, virtual_nodes: int) -> None:
        """`addNode`: a node added again continues its replica numbering (`c-10`, `c-11`, ...)."""
        if virtual_nodes < 0:
            raise ValueError(f"illegal virtual node counts :{virtual_nodes}")
        existing = self._replicas[node]
        keys = [f"{node}-{i + existing}" for i in range(virtual_nodes)]
        for ring_hash in _md5_hashes(keys):
            # TreeMap.put on an equal key keeps the key and replaces the value: the later
            # virtual node wins, and the earlier owner loses one replica.
            previous = self._owner_by_hash.get(ring_hash)
            if previous is not None:
                self._replicas[previous] -= 1
            self._owner_by_hash[ring_hash] = node
            self._replicas[node] += 1
        self._hashes = None

    def _ring(self) -> tuple[list[int], list[str]]:
        if self._hashes is None:
            self._hashes = sorted(self._owner_by_hash)
            self._owners = [self._owner_by_hash[h] for h in self._hashes]
        return self._hashes, self._owners

    def route(self, object_key: str) -> str | None:
        """`routeNode`: the physical node owning `object_key`, None on an empty ring."""
        return self.route_hashes([md5_hash(object_key)])[0]

    def route_all(self, object_keys: Iterable[str]) -> list[str | None]:
        """`route` for many keys at once (one pass, no per-key overhead beyond the hash)."""
        return self.route_hashes(_md5_hashes(object_keys))

    def route_hashes(self, key_hashes: Sequence[int]) -> list[str | None]:
        hashes, owners = self._ring()
        if not hashes:
            return [None] * len(key_hashes)
        # Ceiling lookup; index len(hashes) (no entry >= hash) wraps to the ring's first entry.
        wrapped = owners + owners[:1]
        return [wrapped[bisect_left(hashes, h)] for h in key_hashes]
