"""The applyInPandasWithState wrapper: a few lines around the pure `streaming.core.advance`.

Spark's key is a shard of groups (streaming.core.state.shard says why): per shard and
micro-batch it sorts the rows by group, (system, group), decodes each group's events, advances
each group that has events or whose timeout the watermark passed (a step, or its refreshes kept
for the next one), and emits rows for the driver: each stepped group's metrics (or "removed"),
its detail when what the detail shows changed, the findings that started or ended, dead letters,
and the shard's counts. A step per group, with the watermark Spark gives the shard, is what
the group's own key was given before: the groups of a shard never see each other. Each payload
is the contract's own serialisation (streaming.core.contract), read back by the sink. The state
is one binary blob (Spark's Python state crashes on array/map fields): the shard's entries, each
a group's blob from the core, its timeout and its kept refreshes.
"""

from __future__ import annotations

import gc
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace

import pandas as pd

from streaming.core.advance import advance, keep_stemmed
from streaming.core.contract import (
    COUNTS,
    DEAD_LETTER,
    DEFAULT_CLUSTER,
    DETAIL,
    FINDING,
    METRICS,
    REMOVED,
    GroupKey,
    ShardCounts,
    StepOutput,
)
from streaming.core.state.codec import CodecError
from streaming.core.state.events import (
    MAX_TS_MS,
    MIN_TS_MS,
    Event,
    EventParser,
    Invalid,
    parse_event,
    stem_and_ts,
)
from streaming.core.state.refresh import Refreshes
from streaming.core.state.shard import (
    ShardEntry,
    earliest_timeout,
    encode_shard,
    is_due,
    salvage_shard,
)
from streaming.core.step import StepConfig, refreshes_of
from streaming.spark.parse import UNROUTABLE_KEY

STATE_SCHEMA = "blob binary"
OUTPUT_SCHEMA = ("system string, group string, cluster string, kind string, reason string, "
                 "payload binary")
OUTPUT_COLUMNS = ["system", "group", "cluster", "kind", "reason", "payload"]
# What the state function reads of each routed row (streaming.spark.parse.route_events).
ROUTED_COLUMNS = ("system", "group", "cluster", "value", "offset", "arrival_ms", "copy")

# One per Python worker process: workers are reused across tasks and micro-batches, so a client's
# repeated heartbeat is fully parsed once per worker. Spark pickles the state function for every
# task, and an object the function holds is pickled with it: a cache held that way reaches each
# task as the driver's empty copy. The function therefore holds `_worker_parse` and
# `_worker_refreshes`, module functions pickled by name, which reach this process's own caches.
_PARSER = EventParser()


# Groups whose refreshes a Python worker remembers: about 24 KB each for a group of 10 clients
# (docs/deploy.md, Sizing). A group beyond it is decoded again when its events come.
REFRESH_CACHE_GROUPS = 65_536

# Collector thresholds for the Python worker (see _tune_worker_gc).
WORKER_GC_THRESHOLDS = (50_000, 20, 10)


class Counts:
    """Valid events by type, invalid ones by reason, stored states reset by cause, the newest
    valid event time and each cluster's, for the shard's one counts row."""

    def __init__(self) -> None:
        self.valid, self.invalid, self.resets = Counter(), Counter(), Counter()
        self.event_time_ms = 0
        self.clusters: dict[str, int] = {}

    def saw(self, cluster: str, ts: int) -> None:
        self.event_time_ms = max(self.event_time_ms, ts)
        self.clusters[cluster] = max(self.clusters.get(cluster, 0), ts)

    def to_json(self) -> bytes:
        return ShardCounts(dict(self.valid), dict(self.invalid), self.event_time_ms,
                           self.clusters, dict(self.resets)).to_json()


class RefreshCache:
    """Per Python worker: what each group's blob takes as a refresh, with the blob it was built
    from. A step leaves it for the blob it wrote; a blob this worker did not write (Spark gives
    a shard's task to either worker, or it came from the checkpoint) is decoded once. An entry
    is used only for the very bytes it was built from, so it can never describe another state
    than the one stored. One entry per group: the other worker's steps leave nothing stale
    behind (a cache keyed by blob kept both, and once it was smaller than that, least recently
    used eviction missed on every group, measured at 10,000 groups). The least recently used
    group goes first."""

    def __init__(self, max_groups: int = REFRESH_CACHE_GROUPS, recall: bool = True) -> None:
        # Keyed by the blob's stored text (ShardEntry.armoured): comparing it needs no decoding.
        self._by_group: OrderedDict[GroupKey, tuple[bytes, Refreshes]] = OrderedDict()
        self._max_groups = max_groups
        self._recall = recall

    def __len__(self) -> int:
        return len(self._by_group)

    def lookup(self, key: GroupKey, entry: ShardEntry, config: StepConfig) -> Refreshes:
        """`recall`: a blob this worker decodes knows the stems whose digests its entry
        stores (Refreshes.recall); off, the twin: it learns them by parsing the rows."""
        cached = self._by_group.get(key)
        if cached is not None and cached[0] == entry.armoured:
            self._by_group.move_to_end(key)
            return cached[1]
        refreshes = refreshes_of(entry.blob, config)
        if self._recall:
            refreshes.recall(entry.stems)
        self.remember(key, entry, refreshes)
        return refreshes

    def with_digests(self, key: GroupKey, entry: ShardEntry) -> ShardEntry:
        """The entry with the digests of the stems its view knows in this worker (the digests
        stored before when this worker holds no view of its blob)."""
        cached = self._by_group.get(key)
        if cached is None or cached[0] != entry.armoured:
            return entry
        digests = cached[1].digests()
        return entry if digests == entry.stems else entry._replace(stems=digests)

    def remember(self, key: GroupKey, entry: ShardEntry | None,
                 refreshes: Refreshes | None) -> None:
        if entry is None or refreshes is None:
            self._by_group.pop(key, None)
            return
        earlier = self._by_group.get(key)
        if earlier is not None:
            refreshes.learn_stems(earlier[1])
        self._by_group[key] = (entry.armoured, refreshes)
        self._by_group.move_to_end(key)
        if len(self._by_group) > self._max_groups:
            self._by_group.popitem(last=False)


_REFRESHES = RefreshCache()


def _worker_parse(raw: bytes) -> tuple[list[Event] | Invalid, bytes | None]:
    """This process's parser (see _PARSER), with the text's stem."""
    return _PARSER.parse_stemmed(raw)


def _parse_unstemmed(raw: bytes) -> tuple[list[Event] | Invalid, None]:
    """The contract's own parse, every text for itself (the exact twin)."""
    return parse_event(raw), None


def _worker_refreshes() -> RefreshCache:
    """This process's refresh cache (see _PARSER)."""
    return _REFRESHES


def make_state_function(config: StepConfig, max_event_bytes: int = 1 << 20,
                        max_clock_skew_ms: int = 300_000, known_stems: bool = True,
                        thin_kept: bool = True):
    """config.exact: every raw event is parsed whole and every blob decoded for itself (no
    worker's cache), and `advance` keeps nothing. `known_stems`: a group whose rows all
    restate its view by their stems alone keeps them without parsing them (_from_stems; off:
    every row is parsed, the twin that tests/unit/test_known_stems.py compares it with).
    `thin_kept`: a group at its cap of kept refreshes thins them before it steps
    (streaming.core.advance; off: it steps)."""
    judge = RecordJudge(max_event_bytes, max_clock_skew_ms,
                        _parse_unstemmed if config.exact else _worker_parse)

    def apply_shard(key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        _tune_worker_gc()
        refreshes = None if config.exact else _worker_refreshes()
        watermark = _watermark(state)
        rows, counts, stepped = [], Counts(), set()
        entries = _stored_entries(state, counts)
        arrived = _rows_by_group(batches)
        for group_key in sorted(arrived):
            known = (_known_stems(entries.get(group_key), group_key, arrived[group_key],
                                  refreshes, config, judge)
                     if known_stems and refreshes is not None else None)
            if known is not None:
                rows += _from_stems(group_key, entries, arrived[group_key], known, watermark,
                                    config, refreshes, counts, thin_kept)
                stepped.add(group_key)
                continue
            events, stems, dead = _decode(group_key, arrived[group_key], judge, counts)
            rows += [(*group_key, DEAD_LETTER, reason, raw) for raw, reason in dead]
            if group_key.group != UNROUTABLE_KEY and events:
                rows += _advance(group_key, entries, events, watermark, config, refreshes,
                                 counts, stems, thin_kept)
                stepped.add(group_key)
        # A group whose rows were all dead letters is due like one without rows: its stored
        # timeout must not fall behind the watermark (Spark refuses such a timeout).
        for group_key in sorted(k for k, entry in entries.items()
                                if k not in stepped and is_due(entry, watermark)):
            rows += _advance(group_key, entries, [], watermark, config, refreshes, counts, [],
                             thin_kept)
            stepped.add(group_key)
        if arrived or counts.resets:
            rows.append(("", str(key[0]), "", COUNTS, None, counts.to_json()))
        if refreshes is not None:
            for group_key in stepped & entries.keys():
                entries[group_key] = refreshes.with_digests(group_key, entries[group_key])
        _store(state, entries)
        yield _frame(rows)

    return apply_shard


def _tune_worker_gc() -> None:
    """At the start of each task. Spark's daemon runs a full `gc.collect()` after every task of
    a reused worker (pyspark/daemon.py), and a full collection scans every object the worker
    holds: the parser's cache and the refresh cache, about a million objects at 10,000 groups.
    Measured there with py-spy: 70 % of the Python workers' time was that collection, after
    each of a batch's 128 shard tasks. Freezing takes what is alive now out of every later scan;
    it is safe here because the daemon's collection has just run (nothing alive now is cyclic
    garbage) and the caches hold no cycles (reference counting frees what they drop). The
    larger thresholds, set once: with the default (700, 10, 10) the collector ran every 700
    allocations, 6 to 15 % of the function's time, measured; it still collects young cycles
    (pandas makes some) every 50,000 allocations."""
    gc.freeze()
    if gc.get_threshold() != WORKER_GC_THRESHOLDS:
        gc.set_threshold(*WORKER_GC_THRESHOLDS)


def _rows_by_group(batches: Iterator[pd.DataFrame]) -> dict[GroupKey, list[tuple]]:
    """The shard's rows, (value, offset, arrival_ms, copy) in arrival order, by group."""
    by_key: defaultdict[tuple, list[tuple]] = defaultdict(list)
    for frame in batches:
        system, group, cluster, *rest = (frame[name].tolist() for name in ROUTED_COLUMNS)
        for key, row in zip(zip(system, group, cluster, strict=True), zip(*rest, strict=True),
                            strict=True):
            by_key[key].append(row)
    # A GroupKey per group, not per row: it hashes and compares as the plain tuple.
    return {GroupKey(*key): rows for key, rows in by_key.items()}


def _stored_entries(state, counts: Counts) -> dict[GroupKey, ShardEntry]:
    """The shard's stored groups; a value that breaks off keeps the groups before the break
    (counted as a reset: the rest start afresh from their next events)."""
    if not state.exists:
        return {}
    salvaged = salvage_shard(state.get[0])
    if salvaged.broken:
        counts.resets["corrupt_shard"] += 1
    return salvaged.entries


def _known_stems(entry: ShardEntry | None, key: GroupKey, rows: list[tuple],
                 cache: RefreshCache, config: StepConfig, judge: RecordJudge,
                 ) -> tuple[Refreshes, list[tuple[bytes, int, int]]] | None:
    """The group's view's refreshes and each row's (stem, time, offset) when every row is a
    refresh that the view knows by its stem (Refreshes.knows) and the judge would pass by its
    stem alone; None for any other rows (they are parsed)."""
    if entry is None:
        return None
    try:
        refreshes = cache.lookup(key, entry, config)
    except CodecError:
        return None
    stamped = []
    for value, offset, arrival_ms, _ in rows:
        known = judge.stemmed(value, arrival_ms)
        if known is None or not refreshes.knows(known[0]):
            return None
        stamped.append((known[0], known[1], int(offset)))
    return refreshes, stamped


def _from_stems(key: GroupKey, entries: dict, rows: list[tuple],
                known: tuple[Refreshes, list[tuple[bytes, int, int]]], watermark: int | None,
                config: StepConfig, cache: RefreshCache, counts: Counts,
                thin_kept: bool) -> list[tuple]:
    """What _decode and _advance do with rows that _known_stems knows, without parsing them:
    the same entry, counts and output rows. A group that keeps them builds no event; one that
    steps (its cap of kept refreshes that do not thin, or a session they no longer renew)
    steps with each row's event rebuilt from its view (Refreshes.restated), equal to the
    row's parse."""
    refreshes, stamped = known
    entry = entries[key]
    # By stem, then by type: a group's rows repeat a few stems (one a source).
    counted = Counter(stem for (stem, _, _), (*_, copy) in zip(stamped, rows, strict=True)
                      if copy == 0)
    for stem, number in counted.items():
        counts.valid[refreshes.type_of(stem)] += number
    counts.saw(key.cluster, max(ts for _, ts, _ in stamped))
    try:
        offered = refreshes.may_keep(entry.kept, len(rows), thin_kept)  # a row is an event
    except CodecError:
        offered = False                         # advance resets the entry
    advanced = keep_stemmed(entry, stamped, watermark, refreshes, thin_kept) if offered else None
    if advanced is not None:
        entries[key] = advanced.entry
        return []
    events = [(refreshes.restated(stem, ts), offset) for stem, ts, offset in stamped]
    return _advance(key, entries, events, watermark, config, cache, counts,
                    [stem for stem, _, _ in stamped], thin_kept)


def _advance(key: GroupKey, entries: dict, events: list, watermark: int | None,
             config: StepConfig, cache: RefreshCache | None, counts: Counts,
             stems: list[bytes | None], thin_kept: bool) -> list[tuple]:
    """Advance the group from its stored entry (none for a new group); keep its new entry in
    the shard's entries (or drop the group); its output rows (none when its events were kept).
    Without a cache, what a blob takes as a refresh is decoded from it. An entry that could
    not be read was reset: counted by cause."""
    entry: ShardEntry | None = entries.get(key)
    refreshes_for = None if cache is None else lambda stored: cache.lookup(key, stored, config)
    advanced = advance(entry, events, watermark, config, refreshes_for, stems,
                       thin_kept=thin_kept)
    if advanced.reset is not None:
        counts.resets[advanced.reset] += 1
    if advanced.entry is None:
        entries.pop(key, None)
    else:
        entries[key] = advanced.entry
    output = advanced.output
    if output is None:
        return []
    if cache is not None:
        cache.remember(key, advanced.entry, advanced.refreshes)
    return _step_rows(key, output)


class RecordJudge:
    """What a record is: its events, or why it is invalid. Beyond the contract (the core's
    parser), a record must fit --max-event-bytes, and its event time must not be further ahead
    of its Kafka timestamp than --max-clock-skew-ms: one such event would move its group's
    clock hours ahead and expire every member that heartbeats on time."""

    def __init__(self, max_event_bytes: int, max_clock_skew_ms: int,
                 parse: Callable[[bytes], tuple[list[Event] | Invalid, bytes | None]]
                 = _parse_unstemmed) -> None:
        self.max_event_bytes = max_event_bytes
        self.max_clock_skew_ms = max_clock_skew_ms
        self._parse = parse

    def _ahead(self, ts: int, arrival_ms: int) -> bool:
        """Further ahead of the record's Kafka timestamp than --max-clock-skew-ms."""
        return ts > arrival_ms + self.max_clock_skew_ms

    def stemmed(self, value: bytes | None, arrival_ms: int) -> tuple[bytes, int] | None:
        """The record's stem and time when `judge` would pass it by them alone (its size, and
        its time in range and not too far ahead) and its text has them (events.stem_and_ts);
        None: ask `judge`."""
        if value is None or len(value) > self.max_event_bytes:
            return None
        stamped = stem_and_ts(bytes(value))
        if stamped is None or not MIN_TS_MS <= stamped[1] < MAX_TS_MS or self._ahead(
                stamped[1], arrival_ms):
            return None
        return stamped

    def judge(self, raw: bytes, arrival_ms: int) -> tuple[list[Event] | Invalid, bytes | None]:
        """The record's events, or why it is invalid, and its stem (the parser's)."""
        if len(raw) > self.max_event_bytes:
            return Invalid("oversized", ""), None
        parsed, stem = self._parse(raw)
        if not isinstance(parsed, Invalid) and self._ahead(parsed[0].ts, arrival_ms):
            return Invalid("future_timestamp", f"{parsed[0].ts - arrival_ms} ms ahead"), None
        return parsed, stem


def _decode(key: GroupKey, rows: list[tuple], judge: RecordJudge, counts: Counts):
    """Raw values -> (event, offset) for this group, each event's stem (its text's without the
    time, when known) and dead letters with a reason. A record fanned out to several groups is
    counted, and dead-lettered, on its first copy only."""
    events, stems, dead = [], [], []
    newest = None
    for value, offset, arrival_ms, copy in rows:
        raw = bytes(value) if value is not None else b""
        parsed, stem = judge.judge(raw, arrival_ms)
        if not isinstance(parsed, Invalid) and (key.group == UNROUTABLE_KEY
                                                or parsed[0].system != key.system):
            # Valid to Python's json but not to Spark's envelope parser (e.g. NaN), or a
            # system the two parsers read differently: keep it.
            parsed = Invalid("unroutable", "")
        if isinstance(parsed, Invalid):
            if copy == 0:
                dead.append((raw, parsed.reason))
                counts.invalid[parsed.reason] += 1
            continue
        # A route naming several groups was fanned out by the router: keep this group's copy.
        for event in parsed:
            if event.group == key.group:
                events.append((event, int(offset)))
                stems.append(stem)
                if newest is None or event.ts > newest:
                    newest = event.ts
        if copy == 0:
            counts.valid[parsed[0].type] += 1
    if newest is not None:
        counts.saw(key.cluster, newest)
    return events, stems, dead


def _step_rows(key: GroupKey, output: StepOutput) -> list[tuple]:
    """The step's rows, under the group's key: the core knows the group, not its cluster. The
    detail only when something it shows changed."""
    findings, metrics, detail = output.findings, output.metrics, output.detail
    if key.cluster != DEFAULT_CLUSTER:
        findings = [replace(record, cluster=key.cluster) for record in findings]
        metrics = metrics and replace(metrics, cluster=key.cluster)
        detail = detail and replace(detail, cluster=key.cluster)
    rows = [(*key, FINDING, None, record.to_json()) for record in findings]
    if metrics is not None:
        rows.append((*key, METRICS, None, metrics.to_json()))
    elif output.blob is None:
        rows.append((*key, REMOVED, None, b""))
    if detail is not None:
        rows.append((*key, DETAIL, None, detail.to_json()))
    return rows


def _store(state, entries: dict) -> None:
    if not entries:
        if state.exists:
            state.remove()
        return
    state.update((encode_shard(entries),))
    # Spark wakes the shard when the watermark passes its earliest group timeout; a shard with
    # events in a batch steps its due groups itself.
    timeout = earliest_timeout(entries)
    if timeout is not None:
        state.setTimeoutTimestamp(timeout)


def _watermark(state) -> int | None:
    watermark = state.getCurrentWatermarkMs()
    return watermark if watermark and watermark > 0 else None


def _frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)
