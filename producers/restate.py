"""Which of a poll's heartbeats an observer sends in full, and which as its group's `alive`.

An observer sees every member of a group at each poll. A member goes out in full the first time,
whenever a fact changes, and when its last full heartbeat is `restate_s` old; in between, an
unchanged member whose keep-alive is due is named in one `alive` event per group and broker
(docs/events.md), so a steady fleet costs the events topic a few events per group, not one per
member and broker. `restate_s=0` sends every keep-alive in full: one heartbeat per member, the
form every producer can send.

    >>> restate = Restatements(keepalive_s=30, restate_s=600)
    >>> beat = {"type": "heartbeat", "ts": 1, "group": "g", "client_id": "c1", "topics": ["T"],
    ...         "strategy": "AVG", "address": "h:1", "broker": "b"}
    >>> [e["type"] for e in restate.due([beat], now=0, ts_ms=1)]
    ['heartbeat']
    >>> restate.due([beat], now=10, ts_ms=2)          # unchanged, keep-alive not due
    []
    >>> restate.due([beat], now=30, ts_ms=3)
    [{'v': 1, 'type': 'alive', 'ts': 3, 'group': 'g', 'members': [['c1', 'h:1']], 'broker': 'b'}]
    >>> [e["type"] for e in restate.due([{**beat, "topics": ["T", "U"]}], now=31, ts_ms=4)]
    ['heartbeat']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from producers import events
from streaming.common import option_values as values
from streaming.common.options import option


@dataclass(frozen=True)
class RestateOptions:
    """The observers' one option of it (each declares it from here: declared_in)."""

    restate_seconds: float = option(
        "seconds between full heartbeats of an unchanged member; its keep-alives in between go "
        "in its group's alive event (one per group, and per broker for RocketMQ; "
        "docs/events.md). 0: every keep-alive in full, one heartbeat per member",
        values.number(minimum=0), default=600.0, metavar="SECONDS")

# A heartbeat's source: (group, client_id, address, broker).
SourceKey = tuple[str, str, str | None, str | None]


def facts_of(event: dict) -> object:
    """What a heartbeat says beyond its time."""
    return repr(sorted((k, repr(v)) for k, v in event.items() if k != "ts"))


class _Sent(NamedTuple):
    facts: object
    at: float           # last sent, in full or named in an alive
    full_at: float      # last sent in full


# A group's members through one broker (or none), of one system: what one `alive` names.
GroupBroker = tuple[str, str | None, str | None]


class Restatements:
    def __init__(self, keepalive_s: float, restate_s: float) -> None:
        if keepalive_s < 0 or restate_s < 0:
            raise ValueError("keepalive_s and restate_s must be >= 0")
        self.keepalive_s, self.restate_s = keepalive_s, restate_s
        self._sent: dict[SourceKey, _Sent] = {}

    def due(self, heartbeats: Iterable[dict], now: float, ts_ms: int,
            facts: Callable[[dict], object] = facts_of) -> list[dict]:
        """The events to send now: the new or changed members in full, then, for each group and
        broker with a member whose keep-alive is due, the full heartbeats of the members whose
        restate is due and one `alive` (at ts_ms) naming every member of it in this poll. An
        `alive` names them all, so that its text, and what the job compares it with, stays the
        same from one keep-alive to the next."""
        full: list[dict] = []
        fresh: set[SourceKey] = set()        # sent in full this poll as new or changed
        by_group: dict[GroupBroker, list[tuple[SourceKey, dict, object]]] = {}
        due: set[GroupBroker] = set()
        for event in heartbeats:
            key = (event["group"], event["client_id"], event.get("address"), event.get("broker"))
            said, last = facts(event), self._sent.get(key)
            group = (key[0], key[3], event.get("system"))
            by_group.setdefault(group, []).append((key, event, said))
            if last is None or last.facts != said:
                self._sent[key] = _Sent(said, now, now)
                full.append(event)
                fresh.add(key)
            elif now - last.at >= self.keepalive_s:
                due.add(group)
        alive = []
        for group, members in by_group.items():
            if group in due:
                alive += self._keepalive(group, members, now, ts_ms, full, fresh)
        return full + alive

    def _keepalive(self, group: GroupBroker, members: list[tuple[SourceKey, dict, object]],
                   now: float, ts_ms: int, full: list[dict], fresh: set[SourceKey]) -> list[dict]:
        """A due group's keep-alive: restates in full where due, the rest in one `alive`; the
        `fresh` members went in full this poll already."""
        named_only = False
        for key, event, said in members:
            if key in fresh:
                continue
            last = self._sent[key]
            if now - last.full_at >= self.restate_s:
                self._sent[key] = _Sent(said, now, now)
                full.append(event)
            else:
                self._sent[key] = _Sent(said, now, last.full_at)
                named_only = True
        if not named_only:
            return []
        name, broker, system = group
        return [events.alive(ts_ms, name, [(key[1], key[2]) for key, _, _ in members],
                             broker=broker, system=system)]

    def forget(self, gone: Callable[[SourceKey], bool]) -> None:
        """Forget the sources `gone` says left: they go out in full if they come back."""
        self._sent = {k: v for k, v in self._sent.items() if not gone(k)}
