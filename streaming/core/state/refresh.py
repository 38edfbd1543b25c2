"""Refreshes: the heartbeats and routes that restate what a group's view already holds.

Almost every event of a steady fleet is one: a client heartbeats the same facts every 30 s
through each broker, and the route watcher republishes unchanged routes. Applied to the view,
such an event moves only times (the member's last heartbeat, the route's time, the group's
clock): no re-run, no finding, no metric but the event time. `Refreshes` is built from a view
and answers, for a new event, whether it is such a refresh (`keep`); a kept refresh is stored
as a `Kept` reference, the event rebuilt from the view when the group next steps (`events`).

What makes an event a refresh here, and why each condition:
- it sorts after the view's window and at or after its `now`, as `step` requires of events it
  puts onto the view, so it is applied after everything the view holds;
- it comes before the view's next deadline, so no session (of any member or broker entry)
  expires before it: the group's members at its time are the view's;
- it equals, field for field but its time, the event rebuilt from the view: the heartbeat of
  a member with the member's facts through a broker the member already uses, or a route with
  the queues the view has. `apply_event` then reports no change (times at or after `now` are at
  or after every member's last heartbeat, every route's time and every tombstone).

    >>> from streaming.core.state.events import parse_event
    >>> from streaming.core.step import stepped
    >>> def hb(ts, topics=("T",)):
    ...     return parse_event({"type": "heartbeat", "ts": ts, "group": "g", "client_id": "c1",
    ...                         "topics": list(topics), "strategy": "AVG", "broker": "b"})[0]
    >>> _, refreshes = stepped(None, [(hb(1_700_000_000_000), 0)])
    >>> kept = refreshes.keep(hb(1_700_000_030_000), 1)
    >>> kept, refreshes.keep(hb(1_700_000_030_000, topics=("T", "U")), 2)   # source 0: no broker
    (Kept(source=1, ts=1700000030000, offset=1), None)
    >>> refreshes.events([kept]) == [(hb(1_700_000_030_000), 1)]
    True
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from streaming.core.state.events import Alive, Event, Heartbeat, Route, with_ts
from streaming.core.state.group import FACTS, GroupState, Member, next_deadline

# A group steps once this many refreshes wait beside its blob, so that what a shard stores per
# group stays small whatever the heartbeat rate (a step takes them all).
MAX_KEPT = 256


class Kept(NamedTuple):
    """A refresh waiting beside the group's blob: which of the view's sources sent it (the index
    in `Refreshes.sources`), its time and its offset."""

    source: int
    ts: int
    offset: int


# Kept refreshes are stored packed, one record each, and appended to as bytes: a shard copies
# its groups' waiting refreshes every batch, and only a step needs them as objects.
KEPT_RECORD = struct.Struct(">Iqq")


def pack_kept(kept: Iterable[Kept]) -> bytes:
    return b"".join(KEPT_RECORD.pack(*ref) for ref in kept)


def unpack_kept(packed: bytes) -> list[Kept]:
    return [Kept(*fields) for fields in KEPT_RECORD.iter_unpack(packed)]


# A source: a member's heartbeat through one broker (or none), a topic's route, or the `alive`
# of every member that heartbeats through one broker (or of every member: no broker).
HeartbeatSource = tuple[str, str, str | None]      # client_id, address ("" for none), broker
RouteSource = str


class AliveSource(NamedTuple):
    broker: str | None


Source = HeartbeatSource | RouteSource | AliveSource


class Refreshes:
    """What one view (the state a step left, as its blob stores it) takes as a refresh.

    The sources are listed in an order that depends only on the view (members by key, each
    with no broker then its brokers by name, then routes by topic, then the alives: no broker,
    then each broker by name), so the same blob gives the same indexes in every worker and after
    a restart."""

    def __init__(self, view: GroupState, now: int, last_pending: tuple[int, int] | None,
                 accepts: bool = True) -> None:
        self.group, self.system = view.group, view.system
        self.now, self.last_pending = now, last_pending
        self.deadline = next_deadline(view)
        self.accepts = accepts
        self._members: dict[tuple[str, str], Member] = dict(view.members)
        self._routes = {topic: queues for topic, (_, queues) in view.routes.items()}
        self._sources: list[Source] | None = None
        self._index: dict[object, int] = {}
        self._templates: dict[int, Event] = {}

    @property
    def sources(self) -> list[Source]:
        return self._indexed()[0]

    def _indexed(self) -> tuple[list[Source], dict[object, int]]:
        if self._sources is None:
            heartbeats = [(client_id, address, broker)
                          for (client_id, address), member in sorted(self._members.items())
                          for broker in (None, *sorted(member.brokers))]
            brokers = sorted({b for member in self._members.values() for b in member.brokers})
            alives = [AliveSource(broker) for broker in (None, *brokers)] if self._members else []
            self._sources = [*heartbeats, *sorted(self._routes), *alives]
            self._index = {_source_key(s): i for i, s in enumerate(self._sources)}
        return self._sources, self._index

    def keep(self, event: Event, offset: int) -> Kept | None:
        """The reference to keep for `event` if it is a refresh of this view, else None."""
        ts = event.ts
        if not self.accepts or ts < self.now or ts >= self.deadline or (
                self.last_pending is not None and (ts, offset) <= self.last_pending):
            return None
        if isinstance(event, Heartbeat):
            member = self._members.get((event.client_id, event.address or ""))
            if member is None or (event.broker is not None and event.broker not in member.brokers):
                return None
            key: object = (event.client_id, event.address or "", event.broker)
        elif isinstance(event, Route) and event.topic in self._routes:
            key = ("route", event.topic)
        elif isinstance(event, Alive):
            key = AliveSource(event.broker)
        else:
            return None
        source = self._indexed()[1].get(key)
        if source is None:
            return None
        if with_ts(self._template(source), ts) != event:
            return None
        return Kept(source, ts, offset)

    def keep_all(self, events: Iterable[tuple[Event, int]], watermark_ms: int | None,
                 waiting: int) -> bytes | None:
        """The events packed as references if every one is a refresh, none of the view's
        sessions expires by the watermark (a step would expire it) and the group would not
        hold more than MAX_KEPT; else None (the group steps)."""
        if watermark_ms is not None and watermark_ms >= self.deadline:
            return None
        kept: list[Kept] = []
        for event, offset in events:
            ref = self.keep(event, offset)
            if ref is None or waiting + len(kept) >= MAX_KEPT:
                return None
            kept.append(ref)
        return pack_kept(kept)

    def events(self, kept: Sequence[Kept]) -> list[tuple[Event, int]]:
        """The kept refreshes as the events that sent them, for the group's next step."""
        count = len(self.sources)
        out = []
        for ref in kept:
            if not 0 <= ref.source < count:
                raise ValueError(f"kept refresh of source {ref.source}; the view has {count}")
            out.append((with_ts(self._template(ref.source), ref.ts), ref.offset))
        return out

    def _template(self, source: int) -> Event:
        template = self._templates.get(source)
        if template is None:
            template = self._templates[source] = self._rebuild(self.sources[source])
        return template

    def _rebuild(self, source: Source) -> Event:
        if isinstance(source, str):
            return Route(ts=0, group=self.group, system=self.system, topic=source,
                         queues=self._routes[source])
        if isinstance(source, AliveSource):
            return Alive(ts=0, group=self.group, system=self.system, broker=source.broker,
                         members=tuple(sorted(key for key, member in self._members.items()
                                              if source.broker is None
                                              or source.broker in member.brokers)))
        client_id, address, broker = source
        member = self._members[(client_id, address)]
        return Heartbeat(ts=0, group=self.group, system=self.system, client_id=client_id,
                         address=address or None, broker=broker,
                         **{event: getattr(member, attr) for attr, event in FACTS})


def _source_key(source: Source) -> object:
    """A source as `keep` looks it up (a route's topic could equal no heartbeat's key; an
    AliveSource is a 1-tuple, which no other key is)."""
    return ("route", source) if isinstance(source, str) else source
