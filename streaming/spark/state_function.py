"""The applyInPandasWithState wrapper: a few lines around the pure `streaming.core.step.step`.

Per group, (system, group), and micro-batch it decodes the events, runs one step, and emits
rows for the driver: the group's metrics (or "removed"), the findings that started or ended,
dead letters, and counts. Each payload is the contract's own serialisation
(streaming.core.contract), read back by the sink. The state is one binary blob owned by the core
(Spark's Python state crashes on array/map fields).
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Iterator

import pandas as pd

from streaming.core.contract import GroupKey, StepOutput
from streaming.core.state.events import EventParser, Invalid
from streaming.core.step import StepConfig, step
from streaming.spark.parse import UNROUTABLE_KEY

STATE_SCHEMA = "blob binary"
OUTPUT_SCHEMA = "system string, group string, kind string, reason string, payload binary"
OUTPUT_COLUMNS = ["system", "group", "kind", "reason", "payload"]

# One per Python worker process: workers are reused across tasks and micro-batches, so a client's
# repeated heartbeat is fully parsed once per worker.
_PARSER = EventParser()

METRICS, REMOVED, FINDING, DEAD_LETTER, COUNTS = "metrics", "removed", "finding", "dead_letter", "counts"

# Collector thresholds for the Python worker (see _tune_worker_gc).
WORKER_GC_THRESHOLDS = (50_000, 20, 10)


def make_state_function(config: StepConfig, max_event_bytes: int = 1 << 20):
    def apply_group(key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        _tune_worker_gc()
        group_key = GroupKey(*key)
        if state.hasTimedOut:
            yield _frame(_advance(group_key, state, [], config))
            return
        events, dead, counts = _decode(group_key, batches, max_event_bytes)
        rows = [(*group_key, DEAD_LETTER, reason, raw) for raw, reason in dead]
        if group_key.group != UNROUTABLE_KEY and events:
            rows.extend(_advance(group_key, state, events, config))
        rows.append((*group_key, COUNTS, None, json.dumps(counts).encode()))
        yield _frame(rows)

    return apply_group


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


def _advance(key: GroupKey, state, events: list, config: StepConfig) -> list[tuple]:
    """One core step from the stored blob (none for a new group); store it; its output rows."""
    blob = state.get[0] if state.exists else None
    output = step(blob, events, watermark_ms=_watermark(state), config=config)
    _store(state, output)
    return _step_rows(key, output)


def _decode(key: GroupKey, batches: Iterator[pd.DataFrame], max_event_bytes: int):
    """Raw values -> (event, offset) for this key, dead letters with a reason, and counts."""
    events, dead = [], []
    valid, invalid = Counter(), Counter()
    for frame in batches:
        for value, offset in zip(frame["value"].tolist(), frame["offset"].tolist(), strict=True):
            raw = bytes(value) if value is not None else b""
            parsed = _PARSER.parse(raw) if len(raw) <= max_event_bytes else Invalid("oversized", "")
            if isinstance(parsed, Invalid):
                dead.append((raw, parsed.reason))
                invalid[parsed.reason] += 1
                continue
            if key.group == UNROUTABLE_KEY or parsed[0].system != key.system:
                # Valid to Python's json but not to Spark's envelope parser (e.g. NaN), or a
                # system the two parsers read differently: keep it.
                dead.append((raw, "unroutable"))
                invalid["unroutable"] += 1
                continue
            # A route naming several groups was fanned out by the router: keep this key's copy.
            for event in parsed:
                if event.group == key.group:
                    events.append((event, int(offset)))
                    valid[event.type] += 1
    return events, dead, {"events": dict(valid), "invalid": dict(invalid)}


def _step_rows(key: GroupKey, output: StepOutput) -> list[tuple]:
    rows = [(*key, FINDING, None, record.to_json()) for record in output.findings]
    if output.metrics is not None:
        rows.append((*key, METRICS, None, output.metrics.to_json()))
    elif output.blob is None:
        rows.append((*key, REMOVED, None, b""))
    return rows


def _store(state, output: StepOutput) -> None:
    if output.blob is None:
        if state.exists:
            state.remove()
        return
    state.update((output.blob,))
    # Spark wakes the group once the watermark passes the timeout, which must lie after it.
    state.setTimeoutTimestamp(max(output.next_timeout_ms, (_watermark(state) or 0) + 1))


def _watermark(state) -> int | None:
    watermark = state.getCurrentWatermarkMs()
    return watermark if watermark and watermark > 0 else None


def _frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)
