"""The latest GroupDetail of each group, on the driver, for the group API and pages.

The state function emits a group's detail only when something it shows changed, so the latest
one received is the group's detail until the next. Kept as the bytes received, compressed
(about 550 bytes for a group of 10 clients and 32 queues, 3.3 KB as JSON; what a page asks for
is parsed then), with a small summary taken once on arrival: the open finding kinds and the
oldest `since`, which the group list sorts by. One entry per group the job has: the sink
removes it with the group. A restart puts each stored group's detail deferred (its blob, and
how to render it): rendering all of them took about half of a restart's restore at 10,000
groups (docs/benchmarks.md), and most are replaced by the group's next detail unread.

    >>> from streaming.core.contract import FindingIdentity, GroupDetail, OpenFinding
    >>> details = GroupDetails()
    >>> empty = GroupDetail("rocketmq", "g", (), (), (OpenFinding(FindingIdentity("skew"), 5),))
    >>> details.put(empty.to_json())
    >>> details.summary(GroupKey("rocketmq", "g"))
    DetailSummary(kinds=(('skew', 1),), since_ms=5)
    >>> details.remove(GroupKey("rocketmq", "g")); details.get(GroupKey("rocketmq", "g"))
"""

from __future__ import annotations

import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import NamedTuple

from streaming.core.contract import GroupDetail, GroupKey


class DetailSummary(NamedTuple):
    """A group's open findings, counted by kind (sorted by kind), and the oldest one's start."""

    kinds: tuple[tuple[str, int], ...]
    since_ms: int | None

    @classmethod
    def of(cls, findings: Iterable[tuple[str, int]]) -> DetailSummary:
        """From each open finding's (kind, since)."""
        kinds, since = Counter[str](), None
        for kind, started in findings:
            kinds[kind] += 1
            since = started if since is None else min(since, started)
        return cls(tuple(sorted(kinds.items())), since)


class Deferred(NamedTuple):
    """A detail not rendered yet: `render()` gives its GroupDetail.to_json (a restart's, until
    its page is asked for)."""

    render: Callable[[], bytes]


class GroupDetails:
    """Thread-safe: written by the job's foreachBatch, read by the HTTP server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._payloads: dict[GroupKey, bytes | Deferred] = {}
        self._summaries: dict[GroupKey, DetailSummary] = {}

    def put(self, payload: bytes) -> None:
        """A GroupDetail as the state function serialised it (GroupDetail.to_json)."""
        heading = GroupDetail.heading_from_json(payload)
        summary = DetailSummary.of((finding.kind, finding.since) for finding in heading.findings)
        self._put(heading.key, zlib.compress(payload, 1), summary)

    def put_deferred(self, key: GroupKey, summary: DetailSummary, deferred: Deferred) -> None:
        """The group's detail as `deferred.render()` gives it, rendered when it is first read
        (a restart's groups: most pages are never asked for before the group's next detail)."""
        self._put(key, deferred, summary)

    def _put(self, key: GroupKey, payload: bytes | Deferred, summary: DetailSummary) -> None:
        with self._lock:
            self._payloads[key] = payload
            self._summaries[key] = summary

    def remove(self, key: GroupKey) -> None:
        with self._lock:
            self._payloads.pop(key, None)
            self._summaries.pop(key, None)

    def get(self, key: GroupKey) -> GroupDetail | None:
        with self._lock:
            payload = self._payloads.get(key)
        if isinstance(payload, Deferred):
            text = payload.render()
            with self._lock:       # unless a newer detail came meanwhile
                if self._payloads.get(key) is payload:
                    self._payloads[key] = zlib.compress(text, 1)
            return GroupDetail.from_json(text)
        return None if payload is None else GroupDetail.from_json(zlib.decompress(payload))

    def summary(self, key: GroupKey) -> DetailSummary | None:
        with self._lock:
            return self._summaries.get(key)

    def summaries(self) -> dict[GroupKey, DetailSummary]:
        with self._lock:
            return dict(self._summaries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._payloads)
