"""The applyInPandasWithState wrapper: a few lines around the pure `streaming.core.step.step`.

Spark's key is a shard of groups (streaming.core.state.shard says why): per shard and
micro-batch it sorts the rows by group, (system, group), decodes each group's events, runs one
step for each group that has events or whose timeout the watermark passed, and emits rows for the
driver: each stepped group's metrics (or "removed"), the findings that started or ended, dead
letters, and the shard's counts. A step per group, with the watermark Spark gives the shard, is
what the group's own key was given before: the groups of a shard never see each other. Each
payload is the contract's own serialisation (streaming.core.contract), read back by the sink.
The state is one binary blob (Spark's Python state crashes on array/map fields): the shard's
entries, each a group's blob from the core and its timeout.
"""

from __future__ import annotations

import gc
import json
from collections import Counter, defaultdict
from collections.abc import Iterator

import pandas as pd

from streaming.core.contract import GroupKey, StepOutput
from streaming.core.state.events import EventParser, Invalid
from streaming.core.state.shard import (
    NO_TIMEOUT,
    ShardEntry,
    decode_shard,
    earliest_timeout,
    encode_shard,
    is_due,
)
from streaming.core.step import StepConfig, step
from streaming.spark.parse import UNROUTABLE_KEY

STATE_SCHEMA = "blob binary"
OUTPUT_SCHEMA = "system string, group string, kind string, reason string, payload binary"
OUTPUT_COLUMNS = ["system", "group", "kind", "reason", "payload"]
# What the state function reads of each routed row (streaming.spark.parse.route_events).
ROUTED_COLUMNS = ("system", "group", "value", "offset")

# One per Python worker process: workers are reused across tasks and micro-batches, so a client's
# repeated heartbeat is fully parsed once per worker.
_PARSER = EventParser()

METRICS, REMOVED, FINDING, DEAD_LETTER, COUNTS = "metrics", "removed", "finding", "dead_letter", "counts"

# Collector thresholds for the Python worker (see _tune_worker_gc).
WORKER_GC_THRESHOLDS = (50_000, 20, 10)


class Counts:
    """Valid events by type and invalid ones by reason, for the shard's one counts row."""

    def __init__(self) -> None:
        self.valid, self.invalid = Counter(), Counter()

    def to_json(self) -> bytes:
        return json.dumps({"events": dict(self.valid), "invalid": dict(self.invalid)}).encode()


def make_state_function(config: StepConfig, max_event_bytes: int = 1 << 20):
    def apply_shard(key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        _tune_worker_gc()
        watermark = _watermark(state)
        entries = decode_shard(state.get[0]) if state.exists else {}
        arrived = _rows_by_group(batches)
        rows, counts, stepped = [], Counts(), set()
        for group_key in sorted(arrived):
            events, dead = _decode(group_key, arrived[group_key], max_event_bytes, counts)
            rows += [(*group_key, DEAD_LETTER, reason, raw) for raw, reason in dead]
            if group_key.group != UNROUTABLE_KEY and events:
                rows += _advance(group_key, entries, events, watermark, config)
                stepped.add(group_key)
        # A group whose rows were all dead letters is due like one without rows: its stored
        # timeout must not fall behind the watermark (Spark refuses such a timeout).
        for group_key in sorted(k for k, entry in entries.items()
                                if k not in stepped and is_due(entry, watermark)):
            rows += _advance(group_key, entries, [], watermark, config)
        if arrived:
            rows.append(("", str(key[0]), COUNTS, None, counts.to_json()))
        _store(state, entries)
        yield _frame(rows)

    return apply_shard


def _tune_worker_gc() -> None:
    """Once per Python worker process. The state function allocates a few small objects per
    event and keeps few of them; with the default thresholds (700, 10, 10) the collector ran
    every 700 allocations and rescanned what the worker imported (pyspark, pandas, pyarrow) and
    the parser's cache: 6 to 15 % of the function's time, measured. Freezing the imports
    takes them out of every scan; the larger thresholds still collect young cycles (pandas
    makes some) every 50,000 allocations and everything every 10 million."""
    if gc.get_threshold() != WORKER_GC_THRESHOLDS:
        gc.freeze()
        gc.set_threshold(*WORKER_GC_THRESHOLDS)


def _rows_by_group(batches: Iterator[pd.DataFrame]) -> dict[GroupKey, list[tuple]]:
    """The shard's rows, (value, offset) in arrival order, by group."""
    by_group = defaultdict(list)
    for frame in batches:
        columns = (frame[name].tolist() for name in ROUTED_COLUMNS)
        for system, group, value, offset in zip(*columns, strict=True):
            by_group[GroupKey(system, group)].append((value, offset))
    return by_group


def _advance(key: GroupKey, entries: dict, events: list, watermark: int | None,
             config: StepConfig) -> list[tuple]:
    """One core step from the group's stored blob (none for a new group); keep its new blob in
    the shard's entries (or drop the group); its output rows."""
    entry = entries.get(key)
    output = step(entry.blob if entry else None, events, watermark_ms=watermark, config=config)
    if output.blob is None:
        entries.pop(key, None)
    else:
        entries[key] = ShardEntry(output.blob, _timeout(output, watermark))
    return _step_rows(key, output)


def _timeout(output: StepOutput, watermark: int | None) -> int:
    """When the watermark wakes the group, which must lie after the watermark (as Spark required
    of the group's own key)."""
    if output.next_timeout_ms is None:
        return NO_TIMEOUT
    return max(output.next_timeout_ms, (watermark or 0) + 1)


def _decode(key: GroupKey, rows: list[tuple], max_event_bytes: int, counts: Counts):
    """Raw values -> (event, offset) for this group, and dead letters with a reason."""
    events, dead = [], []
    for value, offset in rows:
        raw = bytes(value) if value is not None else b""
        parsed = _PARSER.parse(raw) if len(raw) <= max_event_bytes else Invalid("oversized", "")
        if isinstance(parsed, Invalid):
            dead.append((raw, parsed.reason))
            counts.invalid[parsed.reason] += 1
            continue
        if key.group == UNROUTABLE_KEY or parsed[0].system != key.system:
            # Valid to Python's json but not to Spark's envelope parser (e.g. NaN), or a
            # system the two parsers read differently: keep it.
            dead.append((raw, "unroutable"))
            counts.invalid["unroutable"] += 1
            continue
        # A route naming several groups was fanned out by the router: keep this group's copy.
        for event in parsed:
            if event.group == key.group:
                events.append((event, int(offset)))
                counts.valid[event.type] += 1
    return events, dead


def _step_rows(key: GroupKey, output: StepOutput) -> list[tuple]:
    rows = [(*key, FINDING, None, record.to_json()) for record in output.findings]
    if output.metrics is not None:
        rows.append((*key, METRICS, None, output.metrics.to_json()))
    elif output.blob is None:
        rows.append((*key, REMOVED, None, b""))
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
