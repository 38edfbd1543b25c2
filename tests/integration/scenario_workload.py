"""The workload of the restart and fault tests: three simulator scenarios with lasting findings
(broker-crash with views, client-id-collision, multi-topic-skew), merged by event time as a
real fleet would write them, and what the job must count of any records."""

from __future__ import annotations

import heapq
import json
from collections import Counter

from producers.simulator.clock import FastClock
from producers.simulator.scenarios import SCENARIOS
from streaming.core.state.events import Invalid, parse_event

WATERMARK_DELAY_MS = 30_000  # the job's default --watermark-delay


def scenario_records() -> tuple[list[tuple[bytes, bytes, int]], set[tuple[str, str]]]:
    scenarios = [SCENARIOS["broker-crash"](seed=1, with_view=True),
                 SCENARIOS["client-id-collision"](seed=1), SCENARIOS["multi-topic-skew"](seed=1)]
    streams = [[(json.loads(value)["ts"], key, value) for key, value in s.run_encoded(FastClock())]
               for s in scenarios]
    # Merged by event time, as a real fleet would write them: nothing is late for the watermark.
    merged = [(key, value, ts) for ts, key, value in heapq.merge(*streams, key=lambda r: r[0])]
    truth = {(f.kind, f.group) for s in scenarios for f in s.ground_truth()}
    return merged, truth


def expected_counts(values: list[bytes]) -> tuple[Counter, Counter]:
    events, invalid = Counter(), Counter()
    for value in values:
        parsed = parse_event(value)
        if isinstance(parsed, Invalid):
            invalid[parsed.reason] += 1
        else:
            events[parsed[0].type] += 1
    return events, invalid
