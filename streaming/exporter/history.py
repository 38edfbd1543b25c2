"""Each group's recent history, on the driver, for the group API and pages: its last findings,
each from its start to its end, and its last rebalances.

Built from what the sink already receives, so the job's state keeps nothing more: the finding
records it publishes (a start, then an end that carries the start again, so an end whose start
came before the job's start still shows both), and each group's metrics, whose rebalance and
queue-move counters tell how many rebalances a batch brought and between which event times.
Kept in memory only: a restart starts every history afresh, and the history says since when it
is kept. Bounded: the last LIMIT entries of each group, rebalances in a row within
REBALANCES_MERGED_MS as one entry (so a rebalance storm does not push its group's findings
out), and nothing for a group removed.

    >>> from streaming.core.contract import FindingIdentity, FindingRecord
    >>> histories = GroupHistories(kept_since_ms=0)
    >>> key, double = GroupKey("rocketmq", "g"), FindingIdentity("double_assignment", "T")
    >>> histories.record_finding(FindingRecord.of("started", double, key, 5, 5))
    >>> histories.record_finding(FindingRecord.of("ended", double, key, 5, 9))
    >>> histories.get(key).entries
    (FindingSpan(identity=FindingIdentity(kind='double_assignment', topic='T', queue=None, \
clients=(), address=None, brokers=()), started_ms=5, ended_ms=9),)
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field, replace

from streaming.core.contract import (
    FindingIdentity,
    FindingRecord,
    GroupKey,
    GroupMetrics,
    Identified,
)

LIMIT = 20
REBALANCES_MERGED_MS = 60_000


@dataclass(frozen=True, slots=True)
class FindingSpan(Identified):
    """A finding from its start to its end (event times; ended_ms None: still open)."""

    identity: FindingIdentity
    started_ms: int
    ended_ms: int | None = None

    @property
    def at_ms(self) -> int:
        return self.started_ms


@dataclass(frozen=True, slots=True)
class Rebalances:
    """Rebalances of the group after event time `after_ms` and by `at_ms` (the group's event
    times at the batches before and after them), with the queues that changed owner.
    `after_ms` None: since the group appeared (after the job's start)."""

    after_ms: int | None
    at_ms: int
    rebalances: int
    queue_moves: int


Entry = FindingSpan | Rebalances


@dataclass(frozen=True)
class GroupHistory:
    """A group's history as shown: newest first; kept since `kept_since_ms` (wall clock, the
    job's start); `dropped`: older entries were let go for the bound."""

    kept_since_ms: int
    entries: tuple[Entry, ...] = ()
    dropped: bool = False


@dataclass(slots=True)
class _Kept:
    entries: list[Entry] = field(default_factory=list)      # in the order they came
    dropped: bool = False


class GroupHistories:
    """Thread-safe: written by the job's foreachBatch, read by the HTTP server's threads."""

    def __init__(self, limit: int = LIMIT, kept_since_ms: int | None = None) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self.kept_since_ms = (time.time_ns() // 1_000_000 if kept_since_ms is None
                              else kept_since_ms)
        self._groups: dict[GroupKey, _Kept] = {}

    def record_finding(self, record: FindingRecord) -> None:
        """A record of the findings topic: a start opens a span, an end closes its span (or
        adds it whole, its start being from before). A record seen again (a batch re-run after
        a failure) changes nothing."""
        with self._lock:
            kept = self._groups.setdefault(record.key, _Kept())
            entries = kept.entries
            index = next((i for i, entry in enumerate(entries) if isinstance(entry, FindingSpan)
                          and entry.identity == record.identity
                          and entry.started_ms == record.since), None)
            if index is not None:
                if record.status == "ended":
                    entries[index] = replace(entries[index], ended_ms=record.at)
                return
            ended = record.at if record.status == "ended" else None
            entries.append(FindingSpan(_interned(record.identity), record.since, ended))
            self._trim(kept)

    def record_metrics(self, before: GroupMetrics | None, after: GroupMetrics,
                       restored: bool = False) -> None:
        """A group's new metrics against those it replaces (None: its first since the start):
        the rebalances in between. A group's first metrics from the job count every rebalance
        since it appeared; restored from the checkpoint, they count from before the start."""
        if before is None:
            if restored or after.rebalances_total <= 0:
                return
            entry = Rebalances(None, after.event_time_ms, after.rebalances_total,
                               after.queue_moves_total)
        else:
            rebalances = after.rebalances_total - before.rebalances_total
            if rebalances <= 0:       # none, or counters that restarted with a reset state
                return
            entry = Rebalances(before.event_time_ms, after.event_time_ms, rebalances,
                               max(0, after.queue_moves_total - before.queue_moves_total))
        with self._lock:
            kept = self._groups.setdefault(after.key, _Kept())
            last = kept.entries[-1] if kept.entries else None
            if (isinstance(last, Rebalances) and last.after_ms is not None
                    and last.at_ms == entry.after_ms
                    and entry.at_ms - last.after_ms <= REBALANCES_MERGED_MS):
                kept.entries[-1] = Rebalances(last.after_ms, entry.at_ms,
                                              last.rebalances + entry.rebalances,
                                              last.queue_moves + entry.queue_moves)
                return
            kept.entries.append(entry)
            self._trim(kept)

    def remove(self, key: GroupKey) -> None:
        with self._lock:
            self._groups.pop(key, None)

    def get(self, key: GroupKey) -> GroupHistory:
        with self._lock:
            kept = self._groups.get(key)
            if kept is None:
                return GroupHistory(self.kept_since_ms)
            entries = list(kept.entries)
            dropped = kept.dropped
        entries.sort(key=lambda entry: entry.at_ms, reverse=True)
        return GroupHistory(self.kept_since_ms, tuple(entries), dropped)

    def __len__(self) -> int:
        with self._lock:
            return len(self._groups)

    def _trim(self, kept: _Kept) -> None:
        if len(kept.entries) > self._limit:
            del kept.entries[:len(kept.entries) - self._limit]
            kept.dropped = True


def _interned(identity: FindingIdentity) -> FindingIdentity:
    """The identity with its names shared: a group's findings name the same topics, brokers and
    clients again and again, and each record read from JSON brings its own copies."""
    names = sys.intern
    return FindingIdentity(
        names(identity.kind), None if identity.topic is None else names(identity.topic),
        None if identity.queue is None else (names(identity.queue[0]), identity.queue[1]),
        tuple(map(names, identity.clients)),
        None if identity.address is None else names(identity.address),
        tuple(map(names, identity.brokers)))
