"""Groups whose cluster went silent: kept as they were and marked stale, never expired into an
all-clear.

Every group belongs to a cluster, the cluster its producers name in their events
(docs/events.md; "default" when they name none). A cluster is silent once the job's event-time
clock, the newest event time of any cluster, is more than `silence_ms` past that cluster's newest
event. Its groups then get no events, so the core expires their members one by one, and the
orphans and endings that follow are the producer's death, not the group's. While a group's
cluster is silent the driver shows the group as it was when the cluster went silent, marks it
stale, and holds back the newest row the core wrote for it; when the cluster speaks again that
row is applied and the group follows its events as before. A cluster silent for `forget_ms` is
taken as retired: its held rows are applied and it is no longer followed.

    >>> liveness = ClusterLiveness(silence_ms=30_000, forget_ms=3_600_000)
    >>> key = GroupKey("rocketmq", "g", "a")
    >>> liveness.observe({"a": 1_000, "b": 1_000})
    >>> liveness.observe({"b": 40_000})
    >>> liveness.silent_clusters(), liveness.hold(key, "removed", b"", shown=lambda: None)
    (['a'], True)
    >>> liveness.stale_groups([key, GroupKey("rocketmq", "h", "b")])
    [GroupKey(system='rocketmq', group='g', cluster='a')]
    >>> liveness.observe({"a": 41_000})
    >>> [(k.group, f.pending) for k, f in liveness.thaw()]
    [('g', ('removed', b''))]
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from streaming.core.contract import GroupKey


@dataclass
class Frozen:
    """A held group: the metrics shown for it (JSON of GroupMetrics, None when it had none),
    and the newest row the core wrote for it meanwhile (kind, payload)."""

    shown: bytes | None
    pending: tuple[str, bytes] | None = None


class ClusterLiveness:
    """Per cluster its newest event time; the groups held while their cluster is silent.
    Written by the sink on the driver, one batch at a time."""

    def __init__(self, silence_ms: int, forget_ms: int) -> None:
        self.silence_ms = silence_ms
        self.forget_ms = forget_ms
        self.newest: dict[str, int] = {}
        self.frozen: dict[GroupKey, Frozen] = {}

    def observe(self, clusters: Mapping[str, int]) -> None:
        """One shard's `ShardCounts.clusters`: cluster -> its newest event time there."""
        for cluster, newest in clusters.items():
            self.newest[cluster] = max(self.newest.get(cluster, 0), newest)

    def clock_ms(self) -> int:
        return max(self.newest.values(), default=0)

    def is_silent(self, cluster: str) -> bool:
        newest = self.newest.get(cluster)
        return newest is not None and self.clock_ms() - newest > self.silence_ms

    def silent_clusters(self) -> list[str]:
        return sorted(cluster for cluster in self.newest if self.is_silent(cluster))

    def clusters_health(self) -> dict[str, tuple[int, bool]]:
        """cluster -> (its newest event time, whether it is silent)."""
        return {cluster: (newest, self.is_silent(cluster))
                for cluster, newest in self.newest.items()}

    def hold(self, key: GroupKey, kind: str, payload: bytes,
             shown: Callable[[], bytes | None]) -> bool:
        """Whether the core's row for the group must wait: its cluster is silent. `shown()` is
        what the group shows now, kept as it is from the first row held."""
        if not self.is_silent(key.cluster):
            return False
        frozen = self.frozen.get(key)
        if frozen is None:
            frozen = self.frozen[key] = Frozen(shown())
        frozen.pending = (kind, payload)
        return True

    def thaw(self) -> list[tuple[GroupKey, Frozen]]:
        """The held groups whose cluster speaks again, or is retired, released; a retired
        cluster is forgotten."""
        clock = self.clock_ms()
        retired = {cluster for cluster, newest in self.newest.items()
                   if clock - newest > self.forget_ms}
        for cluster in retired:
            del self.newest[cluster]
        thawed = [(key, f) for key, f in self.frozen.items() if not self.is_silent(key.cluster)]
        for key, _ in thawed:
            del self.frozen[key]
        return thawed

    def stale_groups(self, keys: Iterable[GroupKey]) -> list[GroupKey]:
        """Of these groups, those whose cluster is silent."""
        silent = set(self.silent_clusters())
        return sorted(key for key in keys if key.cluster in silent)

    def to_json(self) -> dict:
        """What a restart needs: the clusters' clocks and the held groups."""
        return {"newest": self.newest,
                "frozen": [[*key, _text(f.shown), f.pending and f.pending[0],
                            f.pending and _text(f.pending[1])] for key, f in self.frozen.items()]}

    @classmethod
    def from_json(cls, data: Mapping | None, silence_ms: int, forget_ms: int) -> ClusterLiveness:
        liveness = cls(silence_ms, forget_ms)
        if not data:
            return liveness
        liveness.newest = dict(data["newest"])
        for system, group, cluster, shown, kind, payload in data["frozen"]:
            pending = None if kind is None else (kind, _bytes(payload))
            liveness.frozen[GroupKey(system, group, cluster)] = Frozen(_bytes(shown), pending)
        return liveness


def _text(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
