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
- it comes before the view's next deadline as the refreshes already kept renew it (`Renewal`),
  so no session (of any member or broker entry) expires before it: the group's members at its
  time are the view's. A steady group therefore keeps its refreshes past the view's own
  deadline, and steps only when something changes, a session expires or its kept refreshes
  reach its cap and cannot be thinned (`thinned`) to well below it;
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

import hashlib
import re
import struct
import zlib
from collections.abc import Iterable, Sequence
from itertools import accumulate, pairwise
from operator import itemgetter
from typing import NamedTuple

from streaming.core.state.codec import CodecError
from streaming.core.state.events import Alive, Event, Heartbeat, Route, with_ts
from streaming.core.state.group import (
    FACTS,
    GroupState,
    Member,
    Session,
    deadline_after,
    next_deadline,
    session_times,
)

# A group steps once its cap of refreshes wait beside its blob and thinning them leaves too
# many, so that what a shard stores per group stays small whatever the heartbeat rate (a step
# takes them all). The cap lies between three quarters of MAX_KEPT and MAX_KEPT by the group's
# name: groups that started together and heartbeat at one rate would otherwise fill up, and
# step, in the same batch. (A step costs about the same whatever it folds, so a lower cap is
# more steps: half of MAX_KEPT to MAX_KEPT cost 1.3 times the steps at 100 clients.) A step's
# cost grows with the group, and so does its blob, so a group of more than MEMBERS_PER_CAP
# members keeps one cap per MEMBERS_PER_CAP of them: the core's time per refresh is then about
# the same at any size, and the kept refreshes stay a quarter to a half of the blob's bytes
# (docs/benchmarks.md, "A steady group's steps").
MAX_KEPT = 256
MEMBERS_PER_CAP = 25
# A group at its cap thins its kept refreshes before it steps (`Refreshes.thinned`): it keeps
# them if that leaves at most this share of its cap, so that it thins again only after a
# quarter of its cap more; else it steps. Measured (docs/benchmarks.md, "Kept refreshes
# thinned at the cap"): a restart's catch-up at 2,000 x 10 took 0.65 to 0.82 of the Python
# time, and a steady group of 10 clients through 2 brokers stepped 18 times an hour instead of
# 32 (its join aside).
THINNED_SHARE = 3 / 4


def kept_cap(group: str, members: int = 0) -> int:
    """How many refreshes the group keeps before it steps (stable across workers and restarts:
    its name, and its members as its blob holds them)."""
    quarter = MAX_KEPT // 4
    by_name = MAX_KEPT - zlib.crc32(group.encode("utf-8", "surrogatepass")) % (quarter + 1)
    return by_name * max(1, members // MEMBERS_PER_CAP)


class Kept(NamedTuple):
    """A refresh waiting beside the group's blob: which of the view's sources sent it (the index
    in `Refreshes.sources`), its time and its offset."""

    source: int
    ts: int
    offset: int


# Kept refreshes are stored packed and appended to as bytes: a shard copies its groups' waiting
# refreshes every batch, and only a step needs them as objects. A record is three varints: the
# source, then its time and its offset as zigzag deltas from the record before (the first from
# zero): about 6 bytes where three fixed fields took 20. The bytes matter: every batch Spark
# hands each shard's state to Python pickled byte by byte (a latin-1 string encoded as UTF-8),
# which was a quarter of the JVM's time at 10,000 groups, most of it these records.
FIXED_KEPT_RECORD = struct.Struct(">Iqq")     # shard formats 2 and 3


class KeptFormatError(CodecError):
    """Kept refreshes that do not decode: the group's stored entry is reset (`advance`)."""


def pack_kept(kept: Iterable[Kept], after: Kept | None = None) -> bytes:
    """The records packed, each as deltas from the one before; `after`: the last record of the
    packed bytes these will be appended to (so that appending equals packing the whole)."""
    out = bytearray()
    ts, offset = (after.ts, after.offset) if after is not None else (0, 0)
    for ref in kept:
        _put_varint(out, ref.source)
        _put_varint(out, _zigzag(ref.ts - ts))
        _put_varint(out, _zigzag(ref.offset - offset))
        ts, offset = ref.ts, ref.offset
    return bytes(out)


def unpack_kept(packed: bytes, after: Kept | None = None) -> list[Kept]:
    """`pack_kept`'s records (`after` as given to it). KeptFormatError if the bytes end inside a
    record."""
    return list(map(Kept, *_kept_columns(packed, after)))


class KeptTimes(NamedTuple):
    """What renewing the sessions needs of packed records: how many, the last of them (the
    next are packed after it) and each source's latest time (a refresh moves its sessions'
    times up to its own, so the latest is all that stays of a source's records)."""

    records: int
    last: Kept | None
    latest: dict[int, int]


def kept_times(packed: bytes, after: Kept | None = None) -> KeptTimes:
    """`unpack_kept`'s records summed up as KeptTimes, without a Kept for each record."""
    sources, times, offsets = _kept_columns(packed, after)
    if not sources:
        return KeptTimes(0, after, {})
    # Sorted by time, the latest of each source is the one a dict keeps.
    latest = dict(sorted(zip(sources, times, strict=True), key=itemgetter(1)))
    return KeptTimes(len(sources), Kept(sources[-1], times[-1], offsets[-1]), latest)


def _kept_columns(packed: bytes, after: Kept | None) -> tuple[list[int], list[int], list[int]]:
    """The records' sources, times and offsets, each column decoded in one pass: a new
    worker's fold of a group's records was about a tenth of a restarted job's catch-up
    (docs/benchmarks.md, "A new worker's fold of kept refreshes")."""
    numbers = [_varint(each) for each in _VARINT.findall(packed)]
    if (packed and packed[-1] & 0x80) or len(numbers) % 3:
        raise KeptFormatError(f"kept refreshes cut short ({len(packed)} bytes)")
    ts, offset = (after.ts, after.offset) if after is not None else (0, 0)
    # (n >> 1) ^ -(n & 1) undoes _zigzag.
    times = list(accumulate([(n >> 1) ^ -(n & 1) for n in numbers[1::3]], initial=ts))
    offsets = list(accumulate([(n >> 1) ^ -(n & 1) for n in numbers[2::3]], initial=offset))
    return numbers[0::3], times[1:], offsets[1:]


# One varint: bytes with the high bit set, then one without. A regex finds them faster than a
# loop over the bytes in Python (about 0.6 of its time).
_VARINT = re.compile(rb"[\x80-\xff]*[\x00-\x7f]")


def _varint(encoded: bytes) -> int:
    if len(encoded) == 1:
        return encoded[0]
    if len(encoded) == 2:
        return encoded[0] & 0x7F | encoded[1] << 7
    value = 0
    for byte in reversed(encoded):
        value = value << 7 | byte & 0x7F
    return value


def repack_fixed_kept(fixed: bytes) -> bytes:
    """Kept refreshes as shard formats 2 and 3 stored them (20 bytes each), packed anew."""
    if len(fixed) % FIXED_KEPT_RECORD.size:
        raise KeptFormatError(f"fixed kept records cut short ({len(fixed)} bytes)")
    return pack_kept(Kept(*fields) for fields in FIXED_KEPT_RECORD.iter_unpack(fixed))


def _zigzag(n: int) -> int:
    return n * 2 if n >= 0 else -n * 2 - 1


def _put_varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


# What a shard entry stores of each stem its group's view knows: its digest, so that a worker
# that has not seen the group (after a restart, or the group's last batches on the other worker)
# knows the group's rows without parsing them: without them a restarted job's first two
# batches parsed every group's rows once in each worker (docs/benchmarks.md, "A restart's first
# batches"). 8 bytes of BLAKE2b, personalised for this use: a stem that is not the one a
# recalled digest stands for matches one by chance once in 2**64 / (the group's sources), and
# a producer cannot aim at a stored digest without knowing the stem it stands for.
STEM_DIGEST_BYTES = 8
_STEM_PERSON = b"rm-stem-v1"


def stem_digest(stem: bytes) -> bytes:
    return hashlib.blake2b(stem, digest_size=STEM_DIGEST_BYTES, person=_STEM_PERSON).digest()


def pack_digests(digests: dict[int, bytes]) -> bytes:
    """Each source's digest, by source: the source as a varint, then the digest's bytes."""
    out = bytearray()
    for source in sorted(digests):
        _put_varint(out, source)
        out += digests[source]
    return bytes(out)


def unpack_digests(packed: bytes) -> dict[int, bytes] | None:
    """`pack_digests`'s map; None for bytes it did not write (cut short). What a worker then
    does not know it learns by parsing, as without them."""
    digests, at = {}, 0
    while at < len(packed):
        match = _VARINT.match(packed, at)
        if match is None or match.end() + STEM_DIGEST_BYTES > len(packed):
            return None
        at = match.end() + STEM_DIGEST_BYTES
        digests[_varint(match.group())] = packed[match.end():at]
    return digests


# A source: a member's heartbeat through one broker (or none), a topic's route, or the `alive`
# of every member that heartbeats through one broker (or of every member: no broker).
HeartbeatSource = tuple[str, str, str | None]      # client_id, address ("" for none), broker
RouteSource = str


class AliveSource(NamedTuple):
    broker: str | None


Source = HeartbeatSource | RouteSource | AliveSource

class Renewal:
    """The view's sessions with the last heartbeat the kept refreshes give each (a refresh sets
    its sessions' times to its own, as `apply_event` would: it is at or after every time the
    view holds), and the deadline that follows: `next_deadline` of the view with the kept
    refreshes applied. A refresh is kept only before that deadline, so each session's
    heartbeats leave no gap of a session timeout: no session expired at any kept time."""

    def __init__(self, sessions: dict[Session, int], timeout_ms: int) -> None:
        self.kept = b""                 # the packed refreshes renewed so far
        self.last: Kept | None = None   # the last of them (the next are packed after it)
        self.count = 0
        self._last = sessions
        self._timeout_ms = timeout_ms
        self._oldest = min(sessions.values())
        self._stale = False

    def renew(self, sessions: Iterable[Session], ts: int) -> None:
        last = self._last
        for session in sessions:
            if last[session] < ts:
                self._stale |= last[session] == self._oldest
                last[session] = ts

    @property
    def bound(self) -> int:
        """At most the deadline: its value when last computed (renewals only move it later).
        In a steady fleet each heartbeat renews the oldest session, so the exact deadline is
        computed only when an event or the watermark reaches this bound, or once a batch."""
        return deadline_after(self._oldest, self._timeout_ms)

    def deadline(self) -> int:
        """The first event time at which a session has expired."""
        if self._stale:
            self._oldest, self._stale = min(self._last.values()), False
        return self.bound


class Refreshes:
    """What one view (the state a step left, as its blob stores it) takes as a refresh.

    The sources are listed in an order that depends only on the view (members by key, each
    with no broker then its brokers by name, then routes by topic, then the alives: no broker,
    then each broker by name), so the same blob gives the same indexes in every worker and after
    a restart."""

    def __init__(self, view: GroupState, now: int, last_pending: tuple[int, int] | None,
                 reorder_reach_ms: int, accepts: bool = True) -> None:
        self.group, self.system = view.group, view.system
        self.now, self.last_pending = now, last_pending
        self.reorder_reach_ms = reorder_reach_ms    # StepConfig.reorder_reach_ms
        self.deadline = next_deadline(view)
        self.accepts = accepts
        self._members: dict[tuple[str, str], Member] = dict(view.members)
        self._routes = {topic: queues for topic, (_, queues) in view.routes.items()}
        self._sources: list[Source] | None = None
        self._index: dict[object, int] = {}
        self._templates: dict[int, Event] = {}
        self.cap = kept_cap(view.group, len(view.members))
        self._timeout_ms = view.session_timeout_ms
        self._clock = view.clock
        self._renewal: Renewal | None = None
        self._renews: dict[int, tuple[Session, ...]] = {}
        # The source of each stem whose event was a refresh: whether an event restates a source
        # does not depend on its time, and events of one stem differ only in their time.
        self._by_stem: dict[bytes, int] = {}
        # Each source's last stem's digest (what the shard entry stores: `digests`), and the
        # source of each digest recalled from the entry whose stem this view has not met yet
        # (a worker that learned every stem itself computes no digest for a stem it misses).
        self._digests: dict[int, bytes] = {}
        self._recalled: dict[bytes, int] = {}
        self._packed: bytes | None = b""

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
        """The reference to keep for `event` if it is a refresh of this view (and nothing is
        kept yet), else None."""
        return (self._reference(event.ts, offset, None, event) if event.ts < self.deadline
                else None)

    def keep_all(self, events: Iterable[tuple[Event, int]], watermark_ms: int | None,
                 kept: bytes, stems: Iterable[bytes | None] | None = None,
                 thin: bool = True) -> tuple[bytes, int] | None:
        """`kept` with the events packed after it, and the deadline they all renew (when the
        watermark must wake the group), if every event is a refresh, no session expires by
        the watermark (a step would expire it) and the group would not hold more than its
        cap (`thin`: once thinned, `thinned`); else None (the group steps). `stems`: each
        event's text without its time (EventParser.parse_stemmed), when known; an event whose
        stem restated a source before restates it again, and is not compared field by field."""
        stemmed = (zip(events, stems, strict=True) if stems is not None
                   else ((each, None) for each in events))
        return self._kept_after(kept, watermark_ms, ((event.ts, offset, stem, event)
                                                     for (event, offset), stem in stemmed), thin)

    def knows(self, stem: bytes) -> bool:
        """Whether an event of this stem restated one of the view's sources."""
        return stem in self._by_stem or (bool(self._recalled) and self._recall_stem(stem)
                                         is not None)

    def _recall_stem(self, stem: bytes) -> int | None:
        source = self._recalled.pop(stem_digest(stem), None)
        if source is not None:
            self._by_stem[stem] = source
        return source

    def _learn(self, stem: bytes, source: int) -> None:
        self._by_stem[stem] = source
        digest = stem_digest(stem)
        if self._digests.get(source) != digest:
            self._digests[source] = digest      # one stem a source: a producer's last text
            self._packed = None

    def digests(self) -> bytes:
        """The digests of the stems this view knows, for the group's shard entry (`recall`)."""
        if self._packed is None:
            self._packed = pack_digests(self._digests)
        return self._packed

    def recall(self, packed: bytes) -> None:
        """Know the stems whose digests `digests` gave for this very view (the entry's blob):
        bytes that do not unpack, or name a source the view has not, are left unknown."""
        digests = unpack_digests(packed)
        if not digests or max(digests) >= len(self.sources):
            return
        self._digests.update(digests)
        self._recalled.update((digest, source) for source, digest in digests.items())
        self._packed = None

    def learn_stems(self, earlier: Refreshes) -> None:
        """Know the stems that `earlier` (a view of the same group before a step) knew whose
        source this view holds unchanged, at the same index: an event of such a stem restates
        it here as it did there. A steady group's rows after a step are then known by their
        stems, not parsed once more to learn them."""
        if not earlier._digests:
            return
        mine, theirs = self.sources, earlier.sources
        same: dict[int, bool] = {}

        def unchanged(source: int) -> bool:
            if source not in same:
                same[source] = (source < len(mine) and mine[source] == theirs[source]
                                and self._restates(source) == earlier._restates(source))
            return same[source]

        self._digests.update((source, digest) for source, digest in earlier._digests.items()
                             if unchanged(source))
        self._recalled.update((digest, source) for digest, source in earlier._recalled.items()
                              if unchanged(source))
        self._by_stem.update((stem, source) for stem, source in earlier._by_stem.items()
                             if unchanged(source))
        self._packed = None

    def _restates(self, index: int) -> object:
        """What `_rebuild` makes the source's event of besides its key, group and system: two
        views of one group with equal such values for a source have equal `_template`s of it."""
        source = self.sources[index]
        if isinstance(source, str):
            return self._routes[source]
        if isinstance(source, AliveSource):
            return self._alive_members(source.broker)
        return self._members[source[:2]].inputs()

    def _alive_members(self, broker: str | None) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(key for key, member in self._members.items()
                            if broker is None or broker in member.brokers))

    def type_of(self, stem: bytes) -> str:
        """The type of the events of a stem this view knows: its source's kind (the type of
        the event `_rebuild` makes of it, without making it)."""
        source = self.sources[self._by_stem[stem]]
        if isinstance(source, str):
            return Route.type
        return Alive.type if isinstance(source, AliveSource) else Heartbeat.type

    def restated(self, stem: bytes, ts: int) -> Event:
        """The event of a stem this view knows, at `ts`: the event its text parses to (its
        source's, which an event of the stem equalled)."""
        return with_ts(self._template(self._by_stem[stem]), ts)

    def room(self, kept: bytes) -> int:
        """How many more refreshes the group keeps beside `kept` before its cap makes it step."""
        return self.cap - self._renewed(kept).count

    def may_keep(self, kept: bytes, count: int, thin: bool) -> bool:
        """Whether `count` more events are worth offering to keep beside `kept`: thinning may
        always make room; without it, only within the cap (past it the group steps whatever
        they are, and they are not compared)."""
        return thin or self.room(kept) >= count

    def keep_stemmed(self, stamped: Iterable[tuple[bytes, int, int]], watermark_ms: int | None,
                     kept: bytes, thin: bool = True) -> tuple[bytes, int] | None:
        """`keep_all` for events given by their stem, time and offset alone, every stem one
        that this view `knows`: the events themselves are never built."""
        return self._kept_after(kept, watermark_ms, ((ts, offset, stem, None)
                                                     for stem, ts, offset in stamped), thin)

    def _kept_after(self, kept: bytes, watermark_ms: int | None,
                    items: Iterable[tuple[int, int, bytes | None, Event | None]],
                    thin: bool) -> tuple[bytes, int] | None:
        renewal = self._renewed(kept)
        count = renewal.count
        if watermark_ms is not None and watermark_ms >= renewal.bound and (
                watermark_ms >= renewal.deadline()):
            return None
        added: list[Kept] = []
        for ts, offset, stem, event in items:
            expired = ts >= renewal.bound and ts >= renewal.deadline()
            ref = None if expired else self._reference(ts, offset, stem, event)
            if ref is not None and count + len(added) >= self.cap and thin:
                staying = self.thinned(kept, added)
                if staying is not None:
                    # The newest record of each source stays, so the sessions' times do too.
                    kept, added = pack_kept(staying), []
                    renewal.kept, renewal.last, renewal.count = kept, staying[-1], len(staying)
                    count = renewal.count
            if ref is None or count + len(added) >= self.cap:
                self._renewal = None        # it renewed what is not kept
                return None
            renewal.renew(self._renewed_by(ref.source), ts)
            added.append(ref)
        if added:
            renewal.kept = kept + pack_kept(added, renewal.last)
            renewal.last, renewal.count = added[-1], count + len(added)
        return renewal.kept, renewal.deadline()

    def thinned(self, kept: bytes, added: Sequence[Kept] = ()) -> list[Kept] | None:
        """The kept refreshes (`kept`, as `_renewed` has read and checked them, then `added`,
        references this view made) without those no step needs, in their order, if at most
        THINNED_SHARE of the cap remain; else None (the group steps). A refresh only moves the
        times of the sessions its source renews, up to its own: of a source's records, ordered
        by time, one goes when the one before it that stays (or the view's time of those
        sessions) renews them past the one after it, so no session expires where it did not,
        whatever event comes between them later, and the newest stays, so every session and
        route ends at the same time. Only records more than `reorder_reach_ms` behind the
        newest go: a later event that changes the member between a record that went and the
        one before it would meet the next one that stays, not it, and start its findings
        there; but a step every batch has moved its window's lower edge past them by then, so
        it takes such an event as late (merged into the settled state), which no kept refresh
        equals (each puts it in its place). An `alive` names members that may be gone when it
        is stepped (it is then counted as naming a member not held): its records all stay."""
        sources, times, offsets = _kept_columns(kept, None)
        for ref in added:
            sources.append(ref.source)
            times.append(ref.ts)
            offsets.append(ref.offset)
        by_source: dict[int, list[int]] = {}
        for index, source in enumerate(sources):
            by_source.setdefault(source, []).append(index)
        base = session_times(self._members, self._clock)
        reached = max(times) - self.reorder_reach_ms
        staying: list[int] = []
        for source, indexes in by_source.items():
            staying += self._needed(source, indexes, times, offsets, base, reached)
        if len(staying) > self.cap * THINNED_SHARE:
            return None
        staying.sort()
        return [Kept(sources[i], times[i], offsets[i]) for i in staying]

    def _needed(self, source: int, indexes: list[int], times: list[int], offsets: list[int],
                base: dict[Session, int], reached: int) -> list[int]:
        """The records of one source that `thinned` keeps (indexes into the columns): those
        after `reached` all stay."""
        ordered = sorted(indexes, key=lambda i: (times[i], offsets[i]))
        if isinstance(self.sources[source], AliveSource):
            return ordered
        sessions = self._renewed_by(source)
        if not sessions:                    # a route of a group with members: its time only
            return [i for i in ordered[:-1] if times[i] > reached] + ordered[-1:]
        needed, last = [], min(base[session] for session in sessions)
        for here, after in pairwise(ordered):
            if times[here] > reached or deadline_after(last, self._timeout_ms) <= times[after]:
                needed.append(here)
                last = times[here]
        needed.append(ordered[-1])
        return needed

    def _reference(self, ts: int, offset: int, stem: bytes | None = None,
                   event: Event | None = None) -> Kept | None:
        if not self.accepts or ts < self.now or (
                self.last_pending is not None and (ts, offset) <= self.last_pending):
            return None
        source = None
        if stem is not None:
            source = self._by_stem.get(stem)
            if source is None and self._recalled:
                source = self._recall_stem(stem)
        if source is None:
            source = None if event is None else self._source_restated(event)
            if source is None:
                return None
            if stem is not None:
                self._learn(stem, source)
        return Kept(source, ts, offset)

    def _source_restated(self, event: Event) -> int | None:
        """The source whose event, at the event's time, equals it; None: it restates none."""
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
        if source is None or with_ts(self._template(source), event.ts) != event:
            return None
        return source

    def _renewed(self, kept: bytes) -> Renewal:
        """The view's sessions renewed by the kept refreshes: folded on from the last call when
        `kept` extends what it folded (the group's kept refreshes only grow until it steps)."""
        renewal = self._renewal
        if renewal is None or not kept.startswith(renewal.kept):
            renewal = self._renewal = Renewal(session_times(self._members, self._clock),
                                               self._timeout_ms)
        added = kept_times(kept[len(renewal.kept):], renewal.last)
        wrong = [source for source in added.latest if not 0 <= source < len(self.sources)]
        if wrong:
            raise KeptFormatError(f"kept refresh of source {wrong[0]}; "
                                  f"the view has {len(self.sources)}")
        # Renewing each session to its sources' latest times is renewing it record by record.
        for source, ts in added.latest.items():
            renewal.renew(self._renewed_by(source), ts)
        renewal.last, renewal.count = added.last, renewal.count + added.records
        renewal.kept = kept
        return renewal

    def _renewed_by(self, source: int) -> tuple[Session, ...]:
        """The sessions a refresh of the source renews, as `apply_event` moves their times (a
        route moves only the group's clock, which is a session only without members)."""
        renews = self._renews.get(source)
        if renews is None:
            renews = self._renews[source] = self._sessions_of(source)
        return renews

    def _sessions_of(self, index: int) -> tuple[Session, ...]:
        if not self._members:
            return (None,)
        source = self.sources[index]
        if isinstance(source, str):
            return ()
        if isinstance(source, AliveSource):
            template = self._template(index)
            assert isinstance(template, Alive)
            members, broker = template.members, source.broker
        else:
            members, broker = (source[:2],), source[2]
        return tuple(session for key in members
                     for session in ((key, None), *(((key, broker),) if broker else ())))

    def events(self, kept: Sequence[Kept]) -> list[tuple[Event, int]]:
        """The kept refreshes as the events that sent them, for the group's next step."""
        count = len(self.sources)
        out = []
        for ref in kept:
            if not 0 <= ref.source < count:
                raise KeptFormatError(f"kept refresh of source {ref.source}; the view has {count}")
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
                         members=self._alive_members(source.broker))
        client_id, address, broker = source
        member = self._members[(client_id, address)]
        return Heartbeat(ts=0, group=self.group, system=self.system, client_id=client_id,
                         address=address or None, broker=broker,
                         **{event: getattr(member, attr) for attr, event in FACTS})


def _source_key(source: Source) -> object:
    """A source as `keep` looks it up (a route's topic could equal no heartbeat's key; an
    AliveSource is a 1-tuple, which no other key is)."""
    return ("route", source) if isinstance(source, str) else source
