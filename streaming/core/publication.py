"""Publication: the started / ended records that take the findings topic from one set of open
findings to another, each at its own event time.

    >>> from streaming.core.contract import FindingIdentity, GroupKey
    >>> double = FindingIdentity("double_assignment", "T", ("b", 0), ("c1", "c2"), None, ())
    >>> [(r.status, r.since, r.at) for r in diff({}, {double: 5}, {}, GroupKey("rocketmq", "g"), 5)]
    [('started', 5, 5)]
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby
from operator import attrgetter
from typing import NamedTuple

from streaming.core.contract import FindingIdentity, FindingRecord, GroupKey, JsonValue
from streaming.core.findings import Finding


def diff(before: Mapping[FindingIdentity, int], after: Mapping[FindingIdentity, int],
         current: Mapping[FindingIdentity, Finding], key: GroupKey, at: int) -> list[FindingRecord]:
    """Records for the findings that ended (in before, not after) and started (the reverse).
    A finding that ended and began again in between (a new `since`) yields both."""
    ended = [FindingRecord.of("ended", i, key, s, at)
             for i, s in sorted(before.items(), key=_order) if after.get(i) != s]
    started = [FindingRecord.of("started", i, key, s, at, current[i].detail if i in current else None)
               for i, s in sorted(after.items(), key=_order) if before.get(i) != s]
    return ended + started


class Transition(NamedTuple):
    """A finding starting or ending at event time `at`, caused by the event at `offset` (-1: a
    session expiry, which comes before the events of the same time)."""

    at: int
    offset: int
    status: str                 # "started" or "ended"
    identity: FindingIdentity
    since: int
    detail: dict[str, JsonValue] | None


def transitions(before: Mapping[FindingIdentity, int], after: Mapping[FindingIdentity, int],
                found: list[Finding], at: int, offset: int) -> list[Transition]:
    """What changed between two open sets (identity -> since) at one event: ended, then started."""
    ended = [i for i in before if i not in after]
    if not ended and len(after) == len(before):
        return []
    out = [Transition(at, offset, "ended", i, before[i], None) for i in sorted(ended, key=repr)]
    if len(after) > len(before) - len(ended):
        started = [f for f in found if f.identity not in before]
        out += [Transition(at, offset, "started", f.identity, at, f.detail)
                for f in sorted(started, key=_identity_repr)]
    return out


def _identity_repr(finding: Finding) -> str:
    return repr(finding.identity)


def publish(published: Mapping[FindingIdentity, int], log: list[Transition],
            open_now: dict[FindingIdentity, int], current: Mapping[FindingIdentity, Finding],
            key: GroupKey, cursor_at: int) -> list[FindingRecord]:
    """The records that take the findings topic from `published` (open as published so far) to
    `open_now`: first a correction of history already published (the open set at the cursor,
    rebuilt by undoing `log` from `open_now`, diffed against `published`, stamped `cursor_at`),
    then every transition after the cursor, in event-time order, each at its own time."""
    at_cursor = open_now
    if log:
        at_cursor = dict(open_now)
        for change in reversed(log):
            if change.status == "started":
                at_cursor.pop(change.identity, None)
            else:
                at_cursor[change.identity] = change.since
    out = diff(published, at_cursor, current, key, cursor_at) if at_cursor != published else []
    for at, changes in groupby(log, key=attrgetter("at")):
        out += _net(list(changes), key, at)
    return out


def _net(changes: list[Transition], key: GroupKey, at: int) -> list[FindingRecord]:
    """One instant's records: what was open before it against what is open after it, so a
    finding that starts and ends within one millisecond (events of one instant applied one by
    one) is no finding."""
    before: dict[FindingIdentity, int | None] = {}
    last: dict[FindingIdentity, Transition] = {}
    for change in changes:
        if change.identity not in before:
            before[change.identity] = change.since if change.status == "ended" else None
        last[change.identity] = change
    out, started = [], []
    for identity, change in sorted(last.items(), key=_order):
        since = before[identity]
        after = change.since if change.status == "started" else None
        if since is not None and after != since:
            out.append(FindingRecord.of("ended", identity, key, since, at))
        if after is not None and after != since:
            started.append(FindingRecord.of("started", identity, key, after, at, change.detail))
    return out + started


def _order(item: tuple[FindingIdentity, object]) -> str:
    return repr(item[0])
