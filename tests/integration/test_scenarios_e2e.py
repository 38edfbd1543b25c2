"""Every named simulator scenario through the real broker and the real job: the findings topic
holds exactly the scenario's ground truth.

simulator (run_encoded, as `rebalance-monitor simulate` produces it) -> embedded broker -> the
streaming job (RunningMonitor) -> the findings topic, read back as intervals (identity, since,
ended at | None) and compared with `scenario.ground_truth()` exactly: the core applies events in
event time, so `since` and the `ended` record's `at` are event times, not the time a micro-batch
ran, and no trigger-interval slack is needed.

Two things shape how the events are fed:
- The job publishes what changed between the findings open at the end of one micro-batch and at
  the end of the next, so a finding that begins and ends between two batch boundaries is never
  published (pinned below), and an `ended` record's `at` is the event time of the step that saw
  it end (docs/events.md), not when it ended. A real fleet spreads a scenario over minutes of
  500 ms batches, so `at` is within about one trigger interval of the end; the FastClock packs
  the whole scenario into one batch. So the events go in in phases cut at every time a
  ground-truth finding begins or ends (at the group's first event from then on: an expiry shows
  only when the group's next event arrives), each phase processed before the next is produced:
  every finding is open at some batch boundary, every `at` is exact, and each boundary checks
  that nothing spurious is open.
- To keep CI time down, all eight scenarios share one topic and one job per emission mode: their
  groups are distinct and route events name their group, so they cannot see each other. Each
  scenario's clock is shifted so that all end at the same event time: one that ended earlier
  would go quiet while the others' events move event time on, and could expire.
"""

from __future__ import annotations

import heapq
import json
import time
from collections import Counter
from itertools import groupby

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


def cut_times(events: list[tuple], truth) -> list[int]:
    """For each ground-truth begin and end: the first event time of that group from then on."""
    times_of = {key.decode(): [] for _, key, _ in events}
    for ts, key, _ in events:
        times_of[key.decode()].append(ts)
    cuts = set()
    for finding in truth:
        for at in (finding.begins_ms, finding.ends_ms):
            later = [ts for ts in times_of[finding.group] if at is not None and ts >= at]
            cuts.update(later[:1])
    return sorted(cuts)


def phases(events: list[tuple], cuts: list[int]) -> list[list[tuple]]:
    """Events split after each cut time (all events of one millisecond stay together)."""
    return [list(phase) for _, phase in groupby(
        events, key=lambda event: sum(event[0] > cut for cut in cuts))]


def produce_phase(producer: Producer, topic: str, phase: list[tuple]) -> None:
    # One flush of records queued under a long linger: one record batch per partition, so no
    # micro-batch sees half of a group's millisecond.
    for _, key, value in phase:
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
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 1000})
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path,
                        trigger_interval="100 milliseconds") as monitor:
        for phase in phases(events, cut_times(events, truth)):
            produce_phase(producer, topic, phase)
            monitor.monitor.query.processAllAvailable()
        m = monitor.scrape()
        assert sum(m.series("rebalance_monitor_events_total").values()) == len(events)
        assert m.groups() == {key.decode() for _, key, _ in events}

    ended = sum(f.ends_ms is not None for f in truth)
    records = read_findings(kafka_bootstrap, topic + ".findings", len(truth) + ended)
    got, expected = intervals_of(records), expected_intervals(truth)
    assert got == expected, (f"missing:\n{describe(expected - got)}\n"
                             f"unexpected:\n{describe(got - expected)}")
    # One started record per finding, one ended record per finding that ends: nothing replayed.
    assert Counter(r["status"] for r in records) == Counter(started=len(truth), ended=ended)
