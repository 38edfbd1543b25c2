"""Benchmark: the streaming job end to end on this machine.

    python -m tests.benchmarks.bench_job [--groups 1000] [--clients 20] [--duration 1800]

The broker: tests/benchmarks/machine.py (Apache Kafka unless told otherwise). `--sources`
(default kafka,embedded) runs the whole benchmark once per source of the job, one after the
other in this process, each on a topic of its own loaded the same way: Spark's own Kafka source
and the project's embedded reader, measured in one run. For each:
1. baseline: a plain confluent-kafka consumer reads the whole events topic (events/s);
2. throughput: the job (local[2], that source) consumes the same pre-loaded topic: events/s
   overall (query start to caught up) and sustained (rows / batch time, first batch excluded),
   and the ratio sustained / raw read;
3. detection latency: with the job caught up and steady heartbeats still flowing, a probe
   group gets a second process with the same client id (a double assignment); the time from
   the probe's delivery to /metrics showing it, p50 / p99 over the probes;
4. with --operator-floor: the same query with an empty state function, on its own checkpoint:
   what applyInPandasWithState itself costs here.

The catch-up after an outage (`--down-after S`): the job processes the fleet's first S seconds,
stops, and starts again, in a new Spark session, on its checkpoint once the fleet has run on to
--duration; the raw read is of that backlog alone, in the same run (steps 1 and 2 for it):

    python -m tests.benchmarks.bench_job --groups 10000 --clients 10 --queues 8 --duration 900 \
        --down-after 300 --raw-reads 3 --probes 0 --sources kafka

Fleet scale (`--fleet-seconds N`): instead of a fixed background rate, the fleet's heartbeats go
on at its real rate (each event produced when the wall clock reaches its event time, so the rate
is the scenario's own) for N seconds, with the probes spread through it. The fleet's events
come from a child process, and a full /metrics scrape every 5 s from another (as Prometheus
scrapes): neither takes the driver's GIL from the job it measures. Every 10 s the run prints
how many produced events the job has not yet processed (its input lag, in events and in
seconds of the fleet's rate): bounded means the job keeps up. For example the 10,000-group
fleet for ten minutes:

    python -m tests.benchmarks.bench_job --groups 10000 --clients 10 --queues 8 --duration 90 \
        --raw-reads 1 --probes 30 --fleet-seconds 600
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql.streaming import StreamingQueryListener

from producers.simulator.cli import RateLimit, produce
from producers.simulator.clock import DEFAULT_EPOCH_MS, FastClock
from producers.simulator.scenarios import Steady
from streaming.core.contract import GroupKey
from tests.benchmarks.machine import describe_machine, start_broker
from tests.support import Scrape, wait_until


def steady(args, seed: int = 1) -> Steady:
    return Steady(groups=args.groups, clients=args.clients, topics=2, queues=args.queues,
                  duration_ms=args.duration * 1000, seed=seed)


def raw_read_rate(bootstrap: str, topic: str, partitions: int, expected: int,
                  start: dict[int, int] | None = None) -> float:
    """A plain consumer's events/s over the topic (from `start`, by partition: from 0)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{uuid.uuid4()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52_428_800})
    consumer.assign([TopicPartition(topic, p, (start or {}).get(p, 0))
                     for p in range(partitions)])
    started, count = time.perf_counter(), 0
    while count < expected:
        count += sum(1 for m in consumer.consume(10_000, timeout=1.0) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


# The simulated world starts every client within its first heartbeat interval (30 s) and the
# clients rebalance every 20 s: past 120 s of event time the backlog is a running fleet's, as
# after an outage of the job, not the world's start (a join wave: docs/benchmarks.md).
WORLD_START_MS = 120_000


class Backlog:
    """The events loaded, counting those of the world's start (event time before
    WORLD_START_MS)."""

    def __init__(self, events: Iterator[tuple[bytes, bytes]]) -> None:
        self._events = events
        self.world_start = 0

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        start_end = DEFAULT_EPOCH_MS + WORLD_START_MS
        for key, value in self._events:
            self.world_start += _event_ts(value) < start_end
            yield key, value


class Outage:
    """The world's events cut at an event time: those before it, which the job processed before
    it went down, then the rest, the backlog it finds when it starts again.

        >>> events = iter([(b"g", b'{"ts":%d,"type":"route"}' % ts) for ts in (1, 4, 5, 7)])
        >>> outage = Outage(events, down_ms=5)
        >>> [_event_ts(v) for _, v in outage.before()], [_event_ts(v) for _, v in outage.after()]
        ([1, 4], [5, 7])
    """

    def __init__(self, events: Iterator[tuple[bytes, bytes]], down_ms: int) -> None:
        self._events = events
        self._down_ms = down_ms
        self._first_after: tuple[bytes, bytes] | None = None

    def before(self) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._events:
            if _event_ts(value) >= self._down_ms:
                self._first_after = (key, value)
                return
            yield key, value

    def after(self) -> Iterator[tuple[bytes, bytes]]:
        if self._first_after is not None:
            yield self._first_after
        yield from self._events


def throughput(query, expected: int,
               world_start: int) -> tuple[float, float, int, float | None]:
    """Events/s overall (query start to caught up) and sustained (rows / batch time after the
    first batch), the batches, and the sustained rate of the batches that start after the
    world's start: the events are loaded in event-time order and Spark moves every partition on
    in proportion, so a batch that starts past the first `world_start` events reads the
    running fleet's (None: no such batch)."""
    started = time.perf_counter()
    query.processAllAvailable()
    overall = expected / (time.perf_counter() - started)
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    running = [p for p in progress if _read_before(p) >= world_start]
    return (overall, _rate(progress[1:] or progress), len(progress),
            _rate(running) if running else None)


def _rate(progress: list[dict]) -> float:
    rows = sum(p["numInputRows"] for p in progress)
    return rows / (sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000.0)


def _read_before(progress: dict) -> int:
    """The events the query had read before this batch: its start offsets, summed."""
    start = progress["sources"][0]["startOffset"]     # {topic: {partition: offset}}, or JSON
    if isinstance(start, str):
        start = json.loads(start)
    return sum(sum(offsets.values()) for offsets in start.values()) if start else 0


def probe_latencies(bootstrap: str, topic: str, url: str, store, probes: int,
                    event_ms: int, first: int = 0, timeout: float = 120.0) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    numbers = range(first, first + probes)
    for k in numbers:  # each probe group: one route and one healthy client
        produce_probe(producer, topic, k, event_ms, processes=1)
    # Polled in the job's store: a full scrape at 10,000 groups costs the driver 0.3 s.
    wait_until(lambda: all(store.group(GroupKey("rocketmq", f"probe-{k:03d}")) for k in numbers),
               timeout, "the probe groups in the job's store", interval=0.01, error=TimeoutError)
    latencies = []
    for k in numbers:
        group = f"probe-{k:03d}"
        producer.produce(topic, json.dumps(probe_heartbeat(group, event_ms, 1)).encode(),
                         group.encode())
        producer.flush(30)
        sent = time.perf_counter()
        _wait_store(store, group, timeout)
        _wait(DOUBLE_ASSIGNED.format(url=url),
              lambda m, g=group: (m.value("rebalance_double_assigned_queues", group=g) or 0) > 0,
              timeout)
        latencies.append(time.perf_counter() - sent)
    return latencies


# A scrape of 1,000 groups x 20 clients costs the driver 0.2 s (0.06 s for one family), so
# polling /metrics fast would take the CPU from the job being measured. The probe watches the
# store /metrics is rendered from (no cost), then one scrape confirms the series; the latency
# includes that scrape.
DOUBLE_ASSIGNED = "{url}?name[]=rebalance_double_assigned_queues"
POLL_S = 0.25


def _wait_store(store, group: str, timeout: float = 120.0) -> None:
    wait_until(lambda: _double_assigned(store, group), timeout,
               f"{group}: a double assignment in the job's store", interval=0.01,
               error=TimeoutError)


def _double_assigned(store, group: str) -> bool:
    metrics = store.group(GroupKey("rocketmq", group))
    return bool(metrics and any(metrics.double_assigned.values()))


def _wait(url: str, predicate, timeout: float = 120.0) -> None:
    def shown() -> bool:
        with urllib.request.urlopen(url, timeout=30) as response:
            return predicate(Scrape(response.read().decode()))

    wait_until(shown, timeout, "the job showing the expected metrics", interval=POLL_S,
               error=TimeoutError)


def scrape_seconds(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as response:
        response.read()
    return time.perf_counter() - started


def background_load(bootstrap: str, topic: str, args, stop: threading.Event) -> None:
    """Steady heartbeats of the same groups at --background-rate, continuing their event
    time."""
    scenario = steady(args, seed=2)
    scenario.duration_ms = max(scenario.duration_ms, 600_000)
    # The scenario takes its epoch from the clock it runs with (a default clock would restart
    # event time at the backlog's start: every event behind the watermark).
    events = scenario.run_encoded(FastClock(backlog_end_ms(args)))
    produce(_until(stop, events), bootstrap, topic, RateLimit(args.background_rate))


def _until(stop, events):
    return itertools.takewhile(lambda _: not stop.is_set(), events)


class FleetLoad:
    """The fleet's events at their real rate (EventTimePace), produced by a child process. In
    production the monitor's driver hosts no producer: a simulator on its thread took the
    driver's GIL from the sink and from /metrics (py-spy: 55 % of the driver's samples at
    10,000 groups, docs/benchmarks.md). `produced` and `started` are shared with the child."""

    def __init__(self, bootstrap: str, topic: str, args) -> None:
        context = multiprocessing.get_context("spawn")  # the driver has threads and a JVM
        self._produced = context.Value("q", 0, lock=False)
        self._started = context.Value("d", 0.0, lock=False)
        self._ready, self._stop = context.Event(), context.Event()
        self._process = context.Process(
            target=_produce_fleet, name="fleet-load", daemon=True,
            args=(bootstrap, topic, args, self._produced, self._started, self._ready, self._stop))

    def start(self, timeout_s: float = 600.0) -> FleetLoad:
        self._process.start()
        if not self._ready.wait(timeout_s):  # the child regenerates the backlog's part first
            raise TimeoutError("the fleet's load did not start in time")
        return self

    @property
    def produced(self) -> int:
        return self._produced.value

    @property
    def started(self) -> float:
        """When the pace started, on the machine's monotonic clock (shared by processes)."""
        return self._started.value

    def stop(self) -> None:
        self._stop.set()
        self._process.join(timeout=60)


def _produce_fleet(bootstrap, topic, args, produced, started, ready, stop) -> None:
    events = fleet_continuation(args)
    first = next(events, None)
    pace = EventTimePace(produced)
    started.value = pace.started
    ready.set()
    if first is not None:
        events = itertools.chain([first], events)
        produce(pace.paced(_until(stop, events), backlog_end_ms(args)), bootstrap, topic,
                RateLimit(None))


def backlog_end_ms(args) -> int:
    return DEFAULT_EPOCH_MS + args.duration * 1000


def fleet_continuation(args) -> Iterator[tuple[bytes, bytes]]:
    """The backlog's own world run on past it: the same clients heartbeating on schedule, with
    no second start-up (a new world would join every client again, a burst no running fleet
    has). The backlog's part is generated again and skipped here, before the pace starts."""
    scenario = steady(args)
    scenario.duration_ms = (args.duration + args.fleet_seconds + 600) * 1000
    events = scenario.run_encoded(FastClock(DEFAULT_EPOCH_MS))
    end = backlog_end_ms(args)
    for key, value in events:
        if _event_ts(value) >= end:
            return itertools.chain([(key, value)], events)
    return iter(())


class EventTimePace:
    """Hands each event over when the wall clock reaches its event time (relative to the first):
    the fleet at its real rate. Counts what it handed over in `count` (a shared value)."""

    def __init__(self, count) -> None:
        self.count = count
        self.started = time.monotonic()

    def paced(self, events, epoch_ms: int):
        count = self.count
        for key, value in events:
            if count.value % 256 == 0:
                ahead = (_event_ts(value) - epoch_ms) / 1000.0 - (time.monotonic() - self.started)
                if ahead > 0:
                    time.sleep(ahead)  # pacing to the event time, not waiting for a condition
            count.value += 1
            yield key, value


def _event_ts(value: bytes) -> int:
    at = value.index(b'"ts":') + 5
    end = value.index(b",", at)
    return int(value[at:end])


class BatchLog(StreamingQueryListener):
    """Every batch's input rows and duration, beyond the 100 Spark keeps in recentProgress."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, float, int, int]] = []   # (id, monotonic, rows, ms)

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        self.batches.append((progress.batchId, time.monotonic(), progress.numInputRows,
                             progress.durationMs.get("triggerExecution", 0)))

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def rows_after(self, batch_id: int) -> int:
        """Rows of the batches after `batch_id`. Progress reaches the listener asynchronously, so
        a batch is counted by its id, never by when its event arrived."""
        return sum(rows for bid, _, rows, _ in list(self.batches) if bid > batch_id)


def run(bootstrap: str, args, source: str) -> None:
    from streaming.common.topics import create_topic
    from streaming.spark.job import Monitor

    topic = f"bench.job.{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=args.partitions)
    if args.down_after:
        run_outage(bootstrap, args, source, topic)
        return
    backlog = Backlog(steady(args).run_encoded())
    loaded, failed = produce(backlog, bootstrap, topic, RateLimit(None))
    assert failed == 0, f"{failed} events not delivered"
    raw, reads = best_raw_read(bootstrap, topic, args, loaded)
    print(f"== source {source}")
    print(f"workload: {args.groups} groups x {args.clients} clients, 2 topics x {args.queues} "
          f"queues, {loaded:,} events in {args.partitions} partitions")
    print(f"raw read (plain confluent-kafka consumer): {raw:,.0f} events/s ({reads})")

    workdir = Path(tempfile.mkdtemp(prefix="bench-job-"))
    config = job_config(bootstrap, topic, source, workdir, args)
    spark = local_session(config)
    batch_log = BatchLog()
    spark.streams.addListener(batch_log)
    monitor = Monitor(config, spark)
    monitor.start()
    try:
        overall, sustained, batches, running = throughput(monitor.query, loaded,
                                                          backlog.world_start)
        print(f"job throughput: {overall:,.0f} events/s overall (incl. start-up), "
              f"{sustained:,.0f} events/s sustained over {batches} batches; "
              f"ratio sustained / raw read = {sustained / raw:.2f}")
        if running:
            print(f"the running fleet's backlog (batches past the world's first "
                  f"{WORLD_START_MS // 1000} s): {running:,.0f} events/s; ratio to raw read = "
                  f"{running / raw:.2f}")
        print_phases("catch-up batches",
                     [p for p in monitor.query.recentProgress if p["numInputRows"] > 0])
        print_stages(spark)
        if args.probes or args.fleet_seconds:
            detection_latency(bootstrap, topic, monitor, args, batch_log)
    finally:
        monitor.stop()
    try:
        if args.operator_floor:
            _, floor, _, floor_running = operator_floor(spark, config, workdir / "floor", loaded,
                                                        backlog.world_start, monitor.layout.keys())
            print(f"the same stream through applyInPandasWithState with an empty state function "
                  f"(2 KB state): {floor:,.0f} rows/s sustained; ratio to raw read "
                  f"{floor / raw:.2f}")
            if floor_running:
                print(f"  past the world's start: {floor_running:,.0f} rows/s; ratio to raw read "
                      f"{floor_running / raw:.2f}")
    finally:
        spark.stop()


def best_raw_read(bootstrap: str, topic: str, args, expected: int,
                  start: dict[int, int] | None = None) -> tuple[float, str]:
    """The best of --raw-reads plain reads, and each read's rate as text. The best: this
    machine's timing noise is about 15 %, and the fastest baseline makes the ratio the hardest
    to meet."""
    reads = [raw_read_rate(bootstrap, topic, args.partitions, expected, start)
             for _ in range(args.raw_reads)]
    return max(reads), f"best of {', '.join(f'{r:,.0f}' for r in reads)}"


def local_session(config):
    """The job's Spark session as the benchmark runs it: local[2], Spark's own log quiet."""
    from streaming.spark.job import build_session

    spark = build_session(config, master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def job_config(bootstrap: str, topic: str, source: str, workdir: Path, args):
    from streaming.spark.config import JobConfig

    return JobConfig(bootstrap_servers=bootstrap, topic=topic, source=source,
                     checkpoint=str(workdir / "checkpoint"), metrics_host="127.0.0.1",
                     metrics_port=0, trigger_interval_ms=args.trigger_ms,
                     max_offsets_per_trigger=args.max_offsets, shuffle_partitions=args.shuffle,
                     reorder_window_ms=args.reorder_window_ms, state_shards=args.state_shards,
                     instant_ms=args.instant_ms)


def run_outage(bootstrap: str, args, source: str, topic: str) -> None:
    """--down-after S: the catch-up after an outage of the job, as an operator has it. The job
    processes the fleet's first S seconds and stops; the fleet goes on for the rest of
    --duration while it is down; the job starts again, in a new Spark session (new JVM state,
    new Python workers, as a restarted job has), on its checkpoint and catches up. The raw
    read is of the same backlog (from the offsets the job stopped at), in the same run."""
    from streaming.spark.job import Monitor

    outage = Outage(steady(args).run_encoded(), DEFAULT_EPOCH_MS + args.down_after * 1000)
    up, failed = produce(outage.before(), bootstrap, topic, RateLimit(None))
    assert failed == 0, f"{failed} events not delivered"
    workdir = Path(tempfile.mkdtemp(prefix="bench-job-"))
    config = job_config(bootstrap, topic, source, workdir, args)
    spark = local_session(config)
    monitor = Monitor(config, spark)
    monitor.start()
    started = time.perf_counter()
    try:
        monitor.query.processAllAvailable()
        print(f"== source {source}, an outage after {args.down_after} s of the fleet")
        print(f"before the outage: {up:,} events processed in {time.perf_counter() - started:.1f} "
              f"s, {len(_with_rows(monitor.query.recentProgress))} batches")
    finally:
        monitor.stop()
        spark.stop()
    start = _end_offsets(bootstrap, topic, args.partitions)
    backlog, failed = produce(outage.after(), bootstrap, topic, RateLimit(None))
    assert failed == 0, f"{failed} events not delivered"
    raw, reads = best_raw_read(bootstrap, topic, args, backlog, start)
    print(f"workload: {args.groups} groups x {args.clients} clients, 2 topics x {args.queues} "
          f"queues; the outage's backlog: {backlog:,} events ({args.duration - args.down_after} "
          f"s of the fleet) in {args.partitions} partitions")
    print(f"raw read of the backlog (plain confluent-kafka consumer): {raw:,.0f} events/s "
          f"({reads})")
    spark = local_session(config)
    monitor = Monitor(config, spark)
    started = time.perf_counter()
    monitor.start()
    try:
        monitor.query.processAllAvailable()
        elapsed = time.perf_counter() - started
        progress = _with_rows(monitor.query.recentProgress)
        print(f"catch-up after the outage: {backlog / elapsed:,.0f} events/s from the job's "
              f"start to caught up ({elapsed:.1f} s; ratio to raw read "
              f"{backlog / elapsed / raw:.2f}); {_rate(progress):,.0f} events/s over its "
              f"{len(progress)} batches (ratio {_rate(progress) / raw:.2f})")
        print_phases("catch-up batches", progress)
        print_stages(spark)
    finally:
        monitor.stop()
        spark.stop()


def _with_rows(progress: list[dict]) -> list[dict]:
    return [p for p in progress if p["numInputRows"] > 0]


def _end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"raw-{uuid.uuid4()}"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def operator_floor(spark, config, checkpoint: Path, expected: int, world_start: int,
                   shard_keys) -> tuple[float, float, int, float | None]:
    """The job's query with a state function that does nothing: what the operator costs,
    with the job's shard keys."""
    import dataclasses

    import pandas as pd

    from streaming.spark.job import start_query
    from streaming.spark.state_function import OUTPUT_COLUMNS

    def empty(key, frames, state):
        rows = sum(len(frame) for frame in frames)
        state.update((bytes(2048),))
        state.setTimeoutTimestamp(max(state.getCurrentWatermarkMs(), 0) + 3_600_000)
        # Every output column, so the row follows the job's schema as it changes.
        row = {"group": str(key[0]), "kind": "counts", "payload": str(rows).encode()}
        yield pd.DataFrame({column: [row.get(column, "")] for column in OUTPUT_COLUMNS})

    query = start_query(spark, dataclasses.replace(config, checkpoint=str(checkpoint)),
                        lambda frame, _: frame.collect(), state_function=empty,
                        shard_keys=shard_keys)
    try:
        return throughput(query, expected, world_start)
    finally:
        query.stop()


def detection_latency(bootstrap: str, topic: str, monitor, args, batch_log: BatchLog) -> None:
    url = f"http://127.0.0.1:{monitor.metrics.port}/metrics"
    print(f"one full /metrics scrape: {scrape_seconds(url):.2f} s; one family: "
          f"{scrape_seconds(DOUBLE_ASSIGNED.format(url=url)):.2f} s")
    # The fleet's events go into the batches after the last one completed before it starts.
    first_batch = (monitor.query.lastProgress or {}).get("batchId", -1)
    if args.fleet_seconds:
        load = FleetLoad(bootstrap, topic, args).start()
        try:
            latencies = fleet_phase(bootstrap, topic, url, monitor, args, load, batch_log,
                                    first_batch)
        finally:
            load.stop()
    else:
        stop = threading.Event()
        thread = threading.Thread(target=background_load, args=(bootstrap, topic, args, stop))
        thread.start()
        try:
            latencies = probe_latencies(bootstrap, topic, url, monitor.store, args.probes,
                                        backlog_end_ms(args))
        finally:
            stop.set()
            thread.join()
    print_phases("last batches",
                 [p for p in monitor.query.recentProgress if p["numInputRows"] > 0][-5:])
    if not latencies:
        print("detection latency: no probe detected")
        return
    p50, p99 = p50_p99(latencies)
    rate = "the fleet's real rate" if args.fleet_seconds else f"{args.background_rate:,}/s"
    print(f"detection latency over {len(latencies)} probes with {rate} "
          f"background heartbeats, trigger {args.trigger_ms} ms: p50 {p50:.2f} s, p99 {p99:.2f} s, "
          f"max {max(latencies):.2f} s")


def print_phases(title: str, progress: list[dict]) -> None:
    """Where each batch's time went, as Spark's progress reports it."""
    print(f"{title} (rows, ms by phase):", [
        (p["numInputRows"], {k: v for k, v in p["durationMs"].items() if v >= 50})
        for p in progress])
    print("their state operator (update / commit ms, shards, state MiB):", [
        (op["allUpdatesTimeMs"], op["commitTimeMs"], op["numRowsTotal"],
         round(op["memoryUsedBytes"] / 2**20, 1))
        for p in progress for op in p["stateOperators"][:1]])


def print_stages(spark) -> None:
    """Each catch-up batch's two Spark stages, from Spark's REST API (the UI this session runs):
    the Kafka read and routing, then the state operator (with Python's state function) feeding
    the sink's collect, and the time from that stage's end to the next batch's first stage
    (the sink's work on the rows in the driver, Spark's commit and the next batch's planning)."""
    if spark.sparkContext.uiWebUrl is None:
        print("their Spark stages: not shown, the session runs no UI")
        return
    base = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}"
    jobs = sorted(_rest(f"{base}/jobs?status=succeeded"), key=lambda job: job["jobId"])
    by_id = {stage["stageId"]: stage for stage in _rest(f"{base}/stages?status=complete")}
    batches = []
    for job in jobs:
        stages = [by_id[stage] for stage in sorted(job["stageIds"]) if stage in by_id]
        if len(stages) == 2 and stages[0]["inputRecords"] and stages[1]["shuffleReadRecords"]:
            batches.append(stages)
    print("their Spark stages (rows; read and route s; state s, its tasks' s; then until the "
          "next batch s):", [
              (read["inputRecords"], _seconds(read), _seconds(state),
               round(state["executorRunTime"] / 1000, 1),
               round(_at(following[0]["submissionTime"]) - _at(state["completionTime"]), 1)
               if following else None)
              for (read, state), following in zip(batches, [*batches[1:], None], strict=True)])


def _rest(url: str):
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


def _at(stamp: str) -> float:
    """Spark's REST time stamp, e.g. 2026-12-05T23:11:05.123GMT, in seconds."""
    return datetime.datetime.strptime(stamp.replace("GMT", "+0000"),
                                      "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def _seconds(stage: dict) -> float:
    return round(_at(stage["completionTime"]) - _at(stage["submissionTime"]), 1)


def p50_p99(values: list[float]) -> tuple[float, float]:
    """The same percentiles for every figure the run reports."""
    p99 = (statistics.quantiles(values, n=100, method="inclusive")[98]
           if len(values) > 1 else values[0])
    return statistics.median(values), p99


def fleet_phase(bootstrap: str, topic: str, url: str, monitor, args, load: FleetLoad,
                batch_log: BatchLog, first_batch: int) -> list[float]:
    """The fleet at its real rate for --fleet-seconds: the input lag every 10 s, the probes
    spread through the phase (on their own thread, so a job that falls behind still has its lag
    reported), then the phase's batches and rate."""
    started = load.started
    ends_at = started + args.fleet_seconds
    latencies, missed = [], []
    probes = threading.Thread(target=fleet_probes, args=(
        bootstrap, topic, url, monitor, args, started, latencies, missed))
    probes.start()
    scraper = Scraper(url).start()
    lags, next_report = [], started + 10
    while (now := time.monotonic()) < ends_at:
        if now >= next_report:
            behind = load.produced - batch_log.rows_after(first_batch)
            rate = load.produced / max(now - started, 1e-9)
            lags.append(behind)
            print(f"  t={now - started:5.0f} s  produced {load.produced:,}  not yet processed "
                  f"{behind:,} events = {behind / max(rate, 1):.1f} s of the fleet's rate",
                  flush=True)
            next_report += 10
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    phase = [(rows, ms) for bid, _, rows, ms in batch_log.batches if bid > first_batch and rows]
    durations = sorted(ms for _, ms in phase)
    print(f"fleet phase: {elapsed:.0f} s, {load.produced:,} events at the fleet's real rate of "
          f"{load.produced / elapsed:,.0f} events/s; {len(phase)} batches, duration p50 "
          f"{durations[len(durations) // 2] / 1000:.1f} s, max {durations[-1] / 1000:.1f} s; "
          f"not yet processed at the 10 s marks: first {lags[0] if lags else 0:,}, max "
          f"{max(lags, default=0):,}, last {lags[-1] if lags else 0:,}")
    scrapes = scraper.stop()
    if scrapes:
        p50, p99 = p50_p99(scrapes)
        print(f"full /metrics scrapes from another process every {SCRAPE_EVERY_S:.0f} s of the "
              f"phase: {len(scrapes)}, p50 {p50:.2f} s, p99 {p99:.2f} s, max {max(scrapes):.2f} s")
    probes.join()
    if missed:
        print(f"probes not detected within {PROBE_GRACE_S} s after the phase: {len(missed)} "
              f"(numbers {missed})")
    return latencies


SCRAPE_EVERY_S = 5.0


class Scraper:
    """A full /metrics scrape every SCRAPE_EVERY_S from a child process, as Prometheus scrapes
    from its own: a client in the driver's process would take the GIL from the server it
    measures. `stop()` gives how long each scrape took."""

    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._results, self._stop = context.Queue(), context.Event()
        self._process = context.Process(target=_scrape_every, name="scraper", daemon=True,
                                        args=(url, self._stop, self._results))

    def start(self) -> Scraper:
        self._process.start()
        return self

    def stop(self) -> list[float]:
        self._stop.set()
        durations = self._results.get(timeout=120)
        self._process.join(timeout=10)
        return durations


def _scrape_every(url: str, stop, results) -> None:
    durations = []
    while not stop.wait(SCRAPE_EVERY_S):
        durations.append(scrape_seconds(url))
    results.put(durations)


# A probe still waiting when the phase ends gets this long more before it counts as missed.
PROBE_GRACE_S = 120


def fleet_probes(bootstrap: str, topic: str, url: str, monitor, args, started: float,
                 latencies: list, missed: list) -> None:
    """Probe k goes out at its time in the phase, whether or not earlier ones were seen yet (so
    a job that is behind shows its real detection time): a new group with a healthy client and
    a second process of the same client id in one go. Its latency runs from that send until the
    job's store holds the double assignment and one scrape of the family shows it."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    send_at = [started + args.fleet_seconds * (k + 1) / (args.probes + 1)
               for k in range(args.probes)]
    deadline = started + args.fleet_seconds + PROBE_GRACE_S
    waiting: dict[int, float] = {}      # probe number -> when it was sent
    found: dict[int, float] = {}        # probe number -> its latency
    while len(found) < len(send_at):
        now = time.monotonic()
        if now > deadline:
            missed += sorted(waiting)
            break
        if len(waiting) + len(found) < len(send_at) and now >= send_at[len(waiting) + len(found)]:
            k = len(waiting) + len(found)
            produce_probe(producer, topic, k, backlog_end_ms(args) + int((now - started) * 1000),
                          processes=2)
            waiting[k] = time.perf_counter()
        for k in [k for k in waiting if _double_assigned(monitor.store, f"probe-{k:03d}")]:
            _wait(DOUBLE_ASSIGNED.format(url=url), lambda m, g=f"probe-{k:03d}": (
                m.value("rebalance_double_assigned_queues", group=g) or 0) > 0)
            found[k] = time.perf_counter() - waiting.pop(k)
        time.sleep(0.01)
    latencies += [found[k] for k in sorted(found)]


def produce_probe(producer, topic: str, k: int, event_ms: int, processes: int) -> None:
    """Probe group k: its route and `processes` processes of one client id (two: a double
    assignment)."""
    group = f"probe-{k:03d}"
    route = {"type": "route", "ts": event_ms, "group": group, "topic": "P",
             "brokers": {"broker-a": 4}}
    for event in (route, *(probe_heartbeat(group, event_ms, i) for i in range(processes))):
        producer.produce(topic, json.dumps(event).encode(), group.encode())
    producer.flush(30)


def probe_heartbeat(group: str, event_ms: int, process: int) -> dict:
    """Process `process` (0, 1, ...) of the probe's one client id, a millisecond after the last."""
    return {"type": "heartbeat", "ts": event_ms + process, "group": group, "client_id": "p@1",
            "topics": ["P"], "strategy": "AVG", "address": f"10.9.0.{process + 1}:1"}


def job_default(name: str):
    from streaming.spark.config import JobConfig

    return next(each.default for each in fields(JobConfig) if each.name == name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--queues", type=int, default=20, help="queues per topic (2 topics)")
    parser.add_argument("--duration", type=int, default=1800, help="simulated seconds of load")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--shuffle", type=int, default=None, help="default: the job's (cores)")
    parser.add_argument("--trigger-ms", type=int, default=2_000)
    parser.add_argument("--max-offsets", type=int, default=job_default("max_offsets_per_trigger"),
                        help="default: the job's --max-offsets-per-trigger")
    parser.add_argument("--probes", type=int, default=30, help="0: throughput only")
    parser.add_argument("--raw-reads", type=int, default=3, help="baseline: the best of these")
    parser.add_argument("--operator-floor", action="store_true",
                        help="also run the query with an empty state function")
    parser.add_argument("--reorder-window-ms", type=int, default=10_000)
    parser.add_argument("--instant-ms", type=int, default=1, help="the job's --instant-ms")
    parser.add_argument("--background-rate", type=int, default=2_000)
    parser.add_argument("--state-shards", type=int, default=None,
                        help="the job's --state-shards (default: the job's own)")
    parser.add_argument("--fleet-seconds", type=int, default=0,
                        help="run the fleet at its real rate this long after the backlog "
                             "(instead of --background-rate), with the probes spread through it")
    parser.add_argument("--down-after", type=int, default=0,
                        help="measure the catch-up after an outage of the job that began this "
                             "many seconds into the fleet's --duration (0: the job reads the "
                             "whole --duration as one backlog from the world's start)")
    parser.add_argument("--sources", default="kafka,embedded",
                        help="the job's sources, comma-separated, measured one after the other")
    args = parser.parse_args()
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    if not sources or set(sources) - {"kafka", "embedded"}:
        parser.error(f"--sources: kafka and/or embedded, got {args.sources!r}")
    if not 0 <= args.down_after < args.duration:
        parser.error(f"--down-after: 0 or less than --duration ({args.duration}), got "
                     f"{args.down_after}")
    if args.down_after and (args.probes or args.fleet_seconds or args.operator_floor):
        parser.error("--down-after measures the catch-up alone: give --probes 0, and neither "
                     "--fleet-seconds nor --operator-floor")
    print("machine:", describe_machine())
    with start_broker() as bootstrap:
        for source in sources:
            run(bootstrap, args, source)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", __import__("sys").executable)
    main()
