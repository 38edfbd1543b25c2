"""Groups whose producer went silent: kept as they were and marked stale, never expired into an
all-clear.

Every event names its source, the producer that wrote it (docs/events.md; "default" when it
names none). A source is silent once the job's event-time clock, the newest event time of any
source, is more than `silence_ms` past that source's newest event. Its groups then get no
events, so the core expires their members one by one, and the orphans and endings that follow
are the producer's death, not the group's. While a group's source is silent the driver shows
the group as it was when the source went silent, marks it stale, and holds back the newest
row the core wrote for it; when the source speaks again that row is applied and the group
follows its events as before.

    >>> liveness = SourceLiveness(silence_ms=30_000)
    >>> key = GroupKey("rocketmq", "g")
    >>> liveness.observe({"a": [1_000, [list(key)]], "b": [1_000, [["rocketmq", "h"]]]})
    >>> liveness.observe({"b": [40_000, []]})
    >>> liveness.silent_sources(), liveness.hold(key, "removed", b"", shown=lambda: None)
    (['a'], True)
    >>> liveness.stale_groups()
    {GroupKey(system='rocketmq', group='g'): 'a'}
    >>> liveness.observe({"a": [41_000, [list(key)]]})
    >>> [(k.group, f.pending) for k, f in liveness.thaw()]
    [('g', ('removed', b''))]
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from streaming.core.contract import GroupKey


@dataclass
class Frozen:
    """A stale group: its source, the metrics shown for it (JSON of GroupMetrics, None when it
    had none), and the newest row the core wrote for it meanwhile (kind, payload)."""

    source: str
    shown: bytes | None
    pending: tuple[str, bytes] | None = None


class SourceLiveness:
    """Per source its newest event time; per group its source; the groups held while their
    source is silent. Written by the sink on the driver, one batch at a time."""

    def __init__(self, silence_ms: int) -> None:
        self.silence_ms = silence_ms
        self.newest: dict[str, int] = {}
        self.group_source: dict[GroupKey, str] = {}
        self.frozen: dict[GroupKey, Frozen] = {}

    def observe(self, sources: Mapping[str, list]) -> None:
        """One shard's `ShardCounts.sources`: source -> [newest event time, its groups]."""
        for source, (newest, groups) in sources.items():
            self.newest[source] = max(self.newest.get(source, 0), newest)
            for system, group in groups:
                self.group_source[GroupKey(system, group)] = source

    def clock_ms(self) -> int:
        return max(self.newest.values(), default=0)

    def is_silent(self, source: str) -> bool:
        newest = self.newest.get(source)
        return newest is not None and self.clock_ms() - newest > self.silence_ms

    def silent_sources(self) -> list[str]:
        return sorted(source for source in self.newest if self.is_silent(source))

    def sources_health(self) -> dict[str, tuple[int, bool]]:
        """source -> (its newest event time, whether it is silent)."""
        return {source: (newest, self.is_silent(source)) for source, newest in self.newest.items()}

    def source_of(self, key: GroupKey) -> str | None:
        frozen = self.frozen.get(key)
        return frozen.source if frozen is not None else self.group_source.get(key)

    def hold(self, key: GroupKey, kind: str, payload: bytes,
             shown: Callable[[], bytes | None]) -> bool:
        """Whether the core's row for the group must wait: its source is silent. `shown()` is
        what the group shows now, kept as it is from the first row held."""
        source = self.source_of(key)
        if source is None or not self.is_silent(source):
            return False
        frozen = self.frozen.get(key)
        if frozen is None:
            frozen = self.frozen[key] = Frozen(source, shown())
        frozen.pending = (kind, payload)
        return True

    def thaw(self) -> list[tuple[GroupKey, Frozen]]:
        """The held groups whose source speaks again, released."""
        thawed = [(key, f) for key, f in self.frozen.items() if not self.is_silent(f.source)]
        for key, _ in thawed:
            del self.frozen[key]
        return thawed

    def stale_groups(self) -> dict[GroupKey, str]:
        """Every group of a silent source, held or not, with its source."""
        silent = set(self.silent_sources())
        stale = {key: source for key, source in self.group_source.items() if source in silent}
        stale.update((key, frozen.source) for key, frozen in self.frozen.items())
        return stale

    def to_json(self) -> dict:
        """What a restart needs: the sources' clocks, the silent sources' groups, the held
        groups (the live sources' groups are learned again from their next events)."""
        return {"newest": self.newest,
                "stale": [[*key, source] for key, source in self.stale_groups().items()],
                "frozen": [[*key, f.source, _text(f.shown), f.pending and f.pending[0],
                            f.pending and _text(f.pending[1])] for key, f in self.frozen.items()]}

    @classmethod
    def from_json(cls, data: Mapping | None, silence_ms: int) -> SourceLiveness:
        liveness = cls(silence_ms)
        if not data:
            return liveness
        liveness.newest = dict(data["newest"])
        liveness.group_source = {GroupKey(s, g): source for s, g, source in data["stale"]}
        for system, group, source, shown, kind, payload in data["frozen"]:
            pending = None if kind is None else (kind, _bytes(payload))
            liveness.frozen[GroupKey(system, group)] = Frozen(source, _bytes(shown), pending)
        return liveness


def _text(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
