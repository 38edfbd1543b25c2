"""Every named simulator scenario through the real broker and the real job: the findings topic
holds exactly the scenario's ground truth.

simulator (run_encoded, as `rebalance-monitor simulate` produces it) -> embedded broker -> the
streaming job (RunningMonitor) -> the findings topic, read back as intervals (identity, since,
ended at | None) and compared with `scenario.ground_truth()` exactly: the core applies events in
event time, so `since` and the `ended` record's `at` are event times, not the time a micro-batch
ran, and no trigger-interval slack is needed.

How the events are fed: all of them are in the topic before the job starts, so the job meets
the whole fleet's history as one backlog (as after downtime) and must still publish every
finding that began and ended inside it, each with its own event times (the core logs
transitions as they happen in event time; tests/unit/test_step_transitions.py covers batch
splits). To keep CI time down, all eight scenarios share one topic and one job per emission
mode: their groups are distinct and route events name their group, so they cannot see each
other. Each scenario's clock is shifted so that all end at the same event time: one that ended
earlier would go quiet while the others' events move event time on, and could expire.
"""

from __future__ import annotations

import heapq
import json
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer

from producers.simulator.clock import DEFAULT_EPOCH_MS, FastClock
from producers.simulator.scenarios import SCENARIOS
from tests.integration.monitor_harness import RunningMonitor
from tests.unit.finding_intervals import expected_intervals, intervals_of

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAMES = sorted(set(SCENARIOS) - {"steady"})


def aligned_scenarios(with_view: bool) -> list[tuple]:
    """(scenario, clock) per named scenario, every run ending at the same event time."""
    scenarios = [SCENARIOS[name](seed=1, with_view=with_view) for name in NAMES]
    end = max(s.duration_ms for s in scenarios)
    return [(s, FastClock(epoch_ms=DEFAULT_EPOCH_MS + end - s.duration_ms)) for s in scenarios]


def merged_events(runs: list[tuple]) -> list[tuple[int, bytes, bytes]]:
    """(ts, key, value) of every run, merged in event time."""
    streams = [((json.loads(value)["ts"], key, value) for key, value in s.run_encoded(clock))
               for s, clock in runs]
    return list(heapq.merge(*streams, key=lambda event: event[0]))


def produce_all(bootstrap: str, topic: str, events: list[tuple]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    for _, key, value in events:
        producer.produce(topic, value, key)
    if producer.flush(30):
        raise RuntimeError("scenario events not delivered within 30 s")


def read_findings(bootstrap: str, topic: str, expected_count: int, timeout: float = 30.0):
    """The topic's records: until expected_count arrived and 1 s passed with no more, or timeout.
    (The embedded broker's high watermarks are not reliable enough to read to the end by.)"""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{time.time_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    records, deadline, quiet_since = [], time.monotonic() + timeout, time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                records.append(json.loads(msg.value()))
                quiet_since = time.monotonic()
            elif len(records) >= expected_count and time.monotonic() - quiet_since > 1.0:
                break
    finally:
        consumer.close()
    return records


def describe(intervals) -> str:
    return "\n".join(f"  {identity} since {since} ended {ended}"
                     for identity, since, ended in sorted(intervals, key=repr)) or "  -"


@pytest.mark.parametrize("with_view", [True, False])
def test_every_scenario_through_broker_and_job_finds_its_ground_truth(
        with_view, spark, kafka_bootstrap, make_topic, tmp_path):
    runs = aligned_scenarios(with_view)
    events = merged_events(runs)
    truth = [f for scenario, _ in runs for f in scenario.ground_truth()]
    assert len({key for _, key, _ in events}) == len(NAMES), "scenario groups are not distinct"
    topic = make_topic(partitions=2)
    produce_all(kafka_bootstrap, topic, events)
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path,
                        trigger_interval_ms=100) as monitor:
        m = monitor.catch_up()
        assert sum(m.series("rebalance_monitor_events_total").values()) == len(events)
        assert m.groups() == {key.decode() for _, key, _ in events}
        # Spark's own count of the records it read, through the progress listener's bridge
        # (the JSON one, or PySpark's under REBALANCE_MONITOR_EXACT), which trails the batch.
        monitor.wait_for(lambda s: s.value("rebalance_monitor_source_records_total")
                         >= len(events))
        assert monitor.scrape().value("rebalance_monitor_source_records_total") == len(events)

    ended = sum(f.ends_ms is not None for f in truth)
    records = read_findings(kafka_bootstrap, topic + ".findings", len(truth) + ended)
    got, expected = intervals_of(records), expected_intervals(truth)
    assert got == expected, (f"missing:\n{describe(expected - got)}\n"
                             f"unexpected:\n{describe(got - expected)}")
    # One started record per finding, one ended record per finding that ends: nothing replayed.
    assert Counter(r["status"] for r in records) == Counter(started=len(truth), ended=ended)
