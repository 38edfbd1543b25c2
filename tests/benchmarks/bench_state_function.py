"""Benchmark: where the Python worker's time goes in one micro-batch, stage by stage.

Run: .venv/bin/python -m tests.benchmarks.bench_state_function [--groups 2000] [--clients 10]
     [--queues 8] [--backlog-seconds 90] [--trigger-seconds 2] [--steady-batches 10]
     [--shards 128] [--instant-ms 1] [--forms member,alive] [--catch-up-batch EVENTS]
     [--restart-before N] [--known-stems on|off] [--thin-kept on|off]

The job's state function (streaming.spark.state_function, the very function Spark calls) on
the simulator's `steady` fleet, called as Spark calls it: per state shard, with the shard's
rows as a pandas frame in the router's columns and the shard's state in PySpark's own
GroupState. No JVM: what Spark does before (the Kafka read, the JSON routing, Arrow) and after
(the state store) is `bench_job --operator-floor`'s. Two batches:

1. the backlog: every member's join and `--backlog-seconds` of heartbeats and routes;
2. the steady batches after it: `--steady-batches` of `--trigger-seconds` each of the same
   fleet, which restates it (summed).

Each stage's time is summed over the batch's shards and given per event: reading the frame
into rows (pandas), parsing the events (JSON and the contract), the core's `advance` (the
group's step, or its refreshes kept), the output rows (each payload's JSON), the output frame
(pandas) and the shard's state (its entries read and written). The baseline, in the same run:
`json.loads` of every event alone, the least any Python parse of them costs.

`--catch-up-batch EVENTS`: instead, the job's capped catch-up of the same events (member form
only): the backlog and the steady batches' events one after another in production order, cut
every EVENTS events (the job's `--max-offsets-per-trigger` cuts each Kafka partition in
proportion, and the events are produced in event-time order, so the cut falls at about the
same event time), each batch with the watermark Spark gives it (the previous batch's newest
event time less the job's `--watermark-delay-ms`). Each batch is printed: what a capped
catch-up costs the Python workers, without the JVM (`bench_job` prints the same batches'
Spark stages). `--restart-before N`: batch N runs on a worker that has seen none before (its
parser's and refresh caches emptied), as a restarted job's first batch does. `--thin-kept
off`: a group at its cap of kept refreshes steps instead of thinning them (the twin).

`--forms`: the steady fleet as each member heartbeats it (`member`: one heartbeat per member
and broker every 30 s, as the simulator, the reporter and third-party producers send it), or
as an observer that knows whole groups sends it (`alive`: each group's unchanged members in one
`alive` per broker and 30 s window, producers.restate). Each form runs the backlog and the
steady batches on a state of its own; the steady figures are also given per member keep-alive
(a member's heartbeat through one broker, which one `alive` names), the cost that has to grow
with the groups, not the members.
"""

from __future__ import annotations

import argparse
import json
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields

import pandas as pd

from producers import events as producer_events
from producers.simulator.clock import DEFAULT_EPOCH_MS, FastClock
from producers.simulator.scenarios import Steady
from streaming.core.state.events import EventParser
from streaming.core.step import StepConfig
from streaming.core.switches import parse_bool
from streaming.spark import state_function as sf
from streaming.spark.config import JobConfig
from tests.benchmarks.machine import describe_machine
from tests.unit.spark_key_state import SparkKeyState

STAGES = {                       # the state function's own helpers, timed where it calls them
    "rows (pandas -> lists)": "_rows_by_group",
    "parse (JSON + contract)": "_decode",
    "stems of known rows (unparsed)": "_known_stems",
    "advance (the core)": "advance",
    "known rows kept (the core)": "keep_stemmed",
    "output rows (JSON payloads)": "_step_rows",
    "output frame (pandas)": "_frame",
    "state read (shard entries)": "_stored_entries",
    "state write (shard entries)": "_store",
}


KEEPALIVE_MS = 30_000


def fleet_batches(args, form: str) -> list[list[bytes]]:
    """The backlog's events, then each steady batch's, each in production order; the steady
    fleet in the form asked."""
    steady_ms = args.steady_batches * args.trigger_seconds * 1000
    scenario = Steady(groups=args.groups, clients=args.clients, topics=2, queues=args.queues,
                      duration_ms=args.backlog_seconds * 1000 + steady_ms, seed=1)
    end = DEFAULT_EPOCH_MS + args.backlog_seconds * 1000
    produced = [(json.loads(v)["ts"], v) for _, v in scenario.run_encoded(FastClock(DEFAULT_EPOCH_MS))]
    backlog = [v for ts, v in produced if ts < end]
    steady = [v for ts, v in produced if ts >= end]
    if form == "alive":
        steady = alive_form(backlog, steady, end, end + steady_ms)
    batches: list[list[bytes]] = [backlog] + [[] for _ in range(args.steady_batches)]
    for value in steady:
        index = (json.loads(value)["ts"] - end) // (args.trigger_seconds * 1000)
        batches[1 + min(index, args.steady_batches - 1)].append(value)  # the run's last instant
    return batches


def alive_form(backlog: list[bytes], steady: list[bytes], start: int, end: int) -> list[bytes]:
    """The steady fleet as an observer sends it: each group's members through each broker, as
    the backlog and the fleet heartbeat them, named in one `alive` every 30 s (at a phase of the
    group's own, as an observer's keep-alives fall where it first saw the group), in place of
    their restating heartbeats; every other event as it was."""
    members: dict[tuple, set[tuple[str, str | None]]] = defaultdict(set)
    out: list[tuple[int, bytes]] = []
    for value in backlog + steady:
        event = json.loads(value)
        if event["type"] == "heartbeat":
            members[(event.get("system"), event.get("cluster"), event["group"],
                     event.get("broker"))].add((event["client_id"], event.get("address")))
        elif event["ts"] >= start:
            out.append((event["ts"], value))
    for (system, cluster, group, broker), named in members.items():
        phase = zlib.crc32(group.encode()) % KEEPALIVE_MS
        for ts in range(start + phase, end, KEEPALIVE_MS):
            alive = producer_events.alive(ts, group, sorted(named, key=repr), broker=broker,
                                          system=system)
            if cluster is not None:
                alive = producer_events.stamped(alive, cluster)
            out.append((ts, json.dumps(alive, separators=(",", ":")).encode()))
    return [value for _, value in sorted(out, key=lambda item: item[0])]


def shard_frames(values: list[bytes], shards: int, first_offset: int) -> dict[int, pd.DataFrame]:
    """The router's rows (streaming.spark.parse.route_events) by shard. Python's hash stands in
    for Spark's xxhash64: only the spread of groups over shards matters here."""
    rows: dict[int, list[tuple]] = defaultdict(list)
    for offset, value in enumerate(values, start=first_offset):
        envelope = json.loads(value)
        groups = envelope.get("groups") or [envelope["group"]]
        for copy, group in enumerate(groups):
            system = envelope.get("system", "rocketmq")
            rows[hash((system, group)) % shards].append(
                (system, group, envelope.get("cluster", "default"), value, offset,
                 envelope["ts"], copy))
    return {shard: pd.DataFrame(found, columns=list(sf.ROUTED_COLUMNS))
            for shard, found in rows.items()}


@contextmanager
def timed_stages(totals: dict[str, float]) -> Iterator[None]:
    """Wrap each stage's helper in state_function so that its time adds to `totals`."""
    originals = {name: getattr(sf, name) for name in STAGES.values()}

    def timing(label: str, function: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                totals[label] += time.perf_counter() - start
        return wrapper

    for label, name in STAGES.items():
        setattr(sf, name, timing(label, originals[name]))
    try:
        yield
    finally:
        for name, function in originals.items():
            setattr(sf, name, function)


def run_batch(apply_shard, frames: dict[int, pd.DataFrame], states: dict[int, SparkKeyState],
              watermark: int | None) -> tuple[float, dict[str, float]]:
    """One micro-batch: every shard with rows, as Spark calls it. Returns the batch's seconds
    and each stage's."""
    totals: dict[str, float] = defaultdict(float)
    with timed_stages(totals):
        start = time.perf_counter()
        for shard, frame in sorted(frames.items()):
            kept = states.setdefault(shard, SparkKeyState())
            state = kept.group_state(watermark, timed_out=False)
            for _ in apply_shard((shard,), iter([frame]), state):
                pass
            kept.keep(state)
        elapsed = time.perf_counter() - start
    return elapsed, totals


def json_baseline(values: list[bytes]) -> float:
    start = time.perf_counter()
    for value in values:
        json.loads(value)
    return time.perf_counter() - start


def report(name: str, events: int, elapsed: float, stages: dict[str, float],
           baseline: float, keepalives: int | None = None) -> None:
    print(f"{name}: {events:,} events, {elapsed:.2f} s, {elapsed / events * 1e6:.1f} us an "
          f"event; baseline json.loads {baseline / events * 1e6:.1f} us an event "
          f"(ratio {elapsed / baseline:.1f}x)")
    if keepalives:
        print(f"  per member keep-alive ({keepalives:,}): {elapsed / keepalives * 1e6:.2f} us")
    timed = sum(stages.values())
    for label in STAGES:
        seconds = stages.get(label, 0.0)
        print(f"  {label:<30} {seconds / events * 1e6:7.1f} us  {seconds / elapsed:6.1%}")
    print(f"  {'the rest (the loop, counts)':<30} {(elapsed - timed) / events * 1e6:7.1f} us  "
          f"{(elapsed - timed) / elapsed:6.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--queues", type=int, default=8, help="queues per topic (2 topics)")
    parser.add_argument("--backlog-seconds", type=int, default=90)
    parser.add_argument("--trigger-seconds", type=int, default=2)
    parser.add_argument("--steady-batches", type=int, default=10)
    parser.add_argument("--shards", type=int, default=128)
    parser.add_argument("--instant-ms", type=int, default=1)
    parser.add_argument("--forms", default="member,alive")
    parser.add_argument("--catch-up-batch", type=int, default=0,
                        help="events per batch of the job's capped catch-up (0: off)")
    parser.add_argument("--known-stems", type=lambda text: parse_bool(text, "--known-stems",
                                                                      default=True),
                        default=True, help="on (default) or off: the state function's "
                        "known_stems (off: every row is parsed, the twin)")
    parser.add_argument("--thin-kept", type=lambda text: parse_bool(text, "--thin-kept",
                                                                    default=True),
                        default=True, help="on (default) or off: a group at its cap of kept "
                        "refreshes thins them before it steps (off: it steps, the twin)")
    parser.add_argument("--restart-before", type=int, default=-1, metavar="N",
                        help="with --catch-up-batch: batch N (from 0) on a worker that has "
                        "seen none before, as a restarted job's (its caches emptied)")
    args = parser.parse_args()
    if args.restart_before >= 0 and not args.catch_up_batch:
        parser.error("--restart-before needs --catch-up-batch")
    print(f"machine: {describe_machine()}")
    print(f"fleet: {args.groups} groups x {args.clients} clients, 2 topics x {args.queues} "
          f"queues, {args.shards} shards, --instant-ms {args.instant_ms}, known stems "
          f"{'on' if args.known_stems else 'off'}, kept refreshes thinned "
          f"{'on' if args.thin_kept else 'off'}")
    keepalives = None
    if args.catch_up_batch:
        run_catch_up(args)
        return
    for form in args.forms.split(","):
        print(f"-- form: {form}")
        keepalives = run_form(args, form, keepalives)


def run_form(args, form: str, keepalives: int | None) -> int:
    """The backlog and the steady batches in one form; the member keep-alives of the steady
    batches (counted in the member form, which must come first to give them)."""
    backlog, *steady = fleet_batches(args, form)
    if form == "member":
        keepalives = sum(json.loads(v)["type"] == "heartbeat" for b in steady for v in b)
    apply_shard = sf.make_state_function(StepConfig(exact=False, instant_ms=args.instant_ms),
                                         known_stems=args.known_stems, thin_kept=args.thin_kept)
    states: dict[int, SparkKeyState] = {}
    elapsed, stages = run_batch(apply_shard, shard_frames(backlog, args.shards, 0), states, None)
    report("backlog", len(backlog), elapsed, stages, json_baseline(backlog))
    offset, total, summed = len(backlog), 0.0, defaultdict(float)
    for values in steady:
        elapsed, stages = run_batch(apply_shard, shard_frames(values, args.shards, offset),
                                    states, None)
        offset, total = offset + len(values), total + elapsed
        for label, seconds in stages.items():
            summed[label] += seconds
    values = [value for batch in steady for value in batch]
    report(f"{len(steady)} steady batches of {args.trigger_seconds} s", len(values), total,
           summed, json_baseline(values), keepalives)
    return keepalives or 0


def new_worker(known_stems: bool) -> None:
    """The worker's caches as a new Python worker has them: empty, the refresh cache recalling
    the stored digests of stems unless known stems are off (the twin)."""
    sf._PARSER = EventParser()
    sf._REFRESHES = sf.RefreshCache(recall=known_stems)


def run_catch_up(args) -> None:
    """The member form's events as the job's capped catch-up reads them (--catch-up-batch)."""
    values = [value for batch in fleet_batches(args, "member") for value in batch]
    delay = next(each.default for each in fields(JobConfig) if each.name == "watermark_delay_ms")
    print(f"-- the job's catch-up: {len(values):,} events in batches of {args.catch_up_batch:,}, "
          f"watermark the previous batch's newest event less {delay:,} ms")
    apply_shard = sf.make_state_function(StepConfig(exact=False, instant_ms=args.instant_ms),
                                         known_stems=args.known_stems, thin_kept=args.thin_kept)
    states: dict[int, SparkKeyState] = {}
    watermark, total, summed = None, 0.0, defaultdict(float)
    for number, first in enumerate(range(0, len(values), args.catch_up_batch)):
        if number in (0, args.restart_before):
            new_worker(args.known_stems)
        batch = values[first:first + args.catch_up_batch]
        elapsed, stages = run_batch(apply_shard, shard_frames(batch, args.shards, first), states,
                                    watermark)
        newest = max(json.loads(value)["ts"] for value in batch)
        print(f"  batch at event {first:,}: {len(batch):,} events to "
              f"{(newest - DEFAULT_EPOCH_MS) / 1000:.1f} s of the fleet, {elapsed:.2f} s, "
              f"{elapsed / len(batch) * 1e6:.1f} us an event"
              f"{' (a new worker)' if number == args.restart_before else ''}")
        watermark, total = newest - delay, total + elapsed
        for label, seconds in stages.items():
            summed[label] += seconds
    report("all batches", len(values), total, summed, json_baseline(values))


if __name__ == "__main__":
    main()
