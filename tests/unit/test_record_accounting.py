"""The state function counts and dead-letters each record once, whatever groups it names, and
refuses an event stamped further ahead of its Kafka timestamp than the allowed clock skew."""

import json

import pandas as pd
import pytest

from streaming.core.contract import ShardCounts
from streaming.core.step import StepConfig
from streaming.spark.state_function import (
    COUNTS,
    DEAD_LETTER,
    METRICS,
    ROUTED_COLUMNS,
    make_state_function,
)
from tests.unit.spark_key_state import SparkKeyState

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000
SKEW_MS = 60_000


def route(groups, ts=TS, **extra) -> bytes:
    return json.dumps({"v": 1, "type": "route", "ts": ts, "groups": groups, "topic": "T",
                       "brokers": {"b": 4}, **extra}).encode()


def heartbeat(group, ts=TS) -> bytes:
    return json.dumps({"v": 1, "type": "heartbeat", "ts": ts, "group": group,
                       "client_id": "c1", "topics": ["T"], "strategy": "AVG"}).encode()


def run(rows) -> list[tuple]:
    """(group, value, arrival_ms, copy) rows of one shard through the state function."""
    function = make_state_function(StepConfig(), max_clock_skew_ms=SKEW_MS)
    frame = pd.DataFrame([("rocketmq", group, "default", value, offset, arrival, copy)
                          for offset, (group, value, arrival, copy) in enumerate(rows)],
                         columns=list(ROUTED_COLUMNS))
    state = SparkKeyState().group_state(None, timed_out=False)
    return [row for out in function((0,), iter([frame]), state)
            for row in out.itertuples(index=False, name=None)]


def counts(rows) -> ShardCounts:
    (payload,) = [row[5] for row in rows if row[3] == COUNTS]
    return ShardCounts.from_json(payload)


def test_a_route_fanned_out_to_two_groups_is_one_record_applied_to_both():
    value = route(["g1", "g2"])
    out = run([("g1", value, TS, 0), ("g2", value, TS, 1)])
    assert counts(out).events == {"route": 1}
    assert {row[1] for row in out if row[3] == METRICS} == {"g1", "g2"}


def test_an_invalid_record_naming_two_groups_is_dead_lettered_once():
    value = route(["g1", "g2"], strategy=7, brokers="none")
    out = run([("g1", value, TS, 0), ("g2", value, TS, 1)])
    assert [row[3] for row in out if row[3] == DEAD_LETTER] == [DEAD_LETTER]
    assert sum(counts(out).invalid.values()) == 1


def test_an_event_ahead_of_its_arrival_by_more_than_the_skew_is_dead_lettered():
    late_clock, on_time = heartbeat("g", TS + SKEW_MS + 1), heartbeat("g", TS + SKEW_MS)
    out = run([("g", late_clock, TS, 0), ("g", on_time, TS, 0)])
    assert [(row[4], row[5]) for row in out if row[3] == DEAD_LETTER] == [
        ("future_timestamp", late_clock)]
    assert counts(out).events == {"heartbeat": 1}
