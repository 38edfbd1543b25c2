"""Benchmark: findings for one group of 1,000 clients and 10,000 queues after a membership change.

Run: /work/venv/bin/python -m tests.benchmarks.bench_state [--changes 10] [--baseline-sample 50]

Measures, in the same run:
- step(): decode the blob, apply one membership change (a join or an unregister), re-run the
  group's allocation (group-level calls), recompute every finding, diff, encode. Mean per change.
- the core alone (apply + re-run + findings, no codec), mean per change.
- the state blob's size in bytes.
- baseline: a naive re-run that calls the per-client `allocate()` for every client and topic,
  sorting the inputs each time as RebalanceImpl does. Timed on a sample of clients and
  extrapolated to the whole group (said so in the output).
- a join wave (`--wave-sizes`): a new group of N members (2 topics x 8 queues, AVG) in one
  step, as an observer's poll sends it (every heartbeat in one millisecond: one instant, one
  re-run), and a millisecond apart as the members' own reporters send it, with instants of
  1,000 ms (`--instant-ms 1000`: one re-run a second); the baseline is the same members a
  millisecond apart with the default instant (one re-run per member). The cost per member of
  each, best of 3.
- a steady group's steps (`--steady-sizes`): a group of N members (2 topics x 8 queues, AVG),
  each member heartbeating every 30 s at its own phase and each topic's route sent again every
  30 s, advanced in 2 s batches as the job advances it (what a blob takes as a refresh in the
  workers' own RefreshCache) over `--steady-minutes` of event time once formed: the
  core's time per event, the steps a minute, and the mean bytes of the blob and of the kept
  refreshes; the baseline is the same group with the cap of kept refreshes of a group of 10
  (`MEMBERS_PER_CAP` switched off), in the same run.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import replace

from streaming.core.advance import advance
from streaming.core.allocation import allocate, sort_client_ids, sort_queues
from streaming.core.contract import GroupKey
from streaming.core.state import refresh
from streaming.core.state.codec import decode, encode
from streaming.core.state.events import parse_event
from streaming.core.state.group import GroupState, apply_event
from streaming.core.state.refresh import Refreshes
from streaming.core.state.rerun import rerun
from streaming.core.state.shard import ShardEntry
from streaming.core.state.stored import Stored
from streaming.core.step import Replay, StepConfig, _react, refreshes_of, step
from streaming.spark.state_function import RefreshCache
from tests.benchmarks.machine import describe_machine

T0 = 1_700_000_000_000
TOPICS = [f"Topic{i:02d}" for i in range(10)]
BROKERS = {f"broker-{b}": 250 for b in "abcd"}          # 1,000 queues per topic
SPACING_MS = 30_000                                      # changes 30 s apart (outside the window)
# Long enough that the 1,000 members built at T0 do not expire during the measured changes.
CONFIG = StepConfig(session_timeout_ms=3_600_000)



def heartbeat(cid: str, ts: int) -> dict:
    return {"type": "heartbeat", "ts": ts, "group": "big", "client_id": cid, "topics": TOPICS,
            "strategy": "AVG", "address": f"10.0.{int(cid[1:]) // 250}.{int(cid[1:]) % 250}:1"}


def one(raw: dict):
    [event] = parse_event(raw)
    return event


def build_blob(clients: int) -> bytes:
    """The group after its members joined (built directly: one re-run, not one per join)."""
    state = GroupState("big", "rocketmq", CONFIG.session_timeout_ms)
    for topic in TOPICS:
        apply_event(state, one({"type": "route", "ts": T0, "group": "big", "topic": topic,
                                "brokers": BROKERS}))
    for i in range(clients):
        apply_event(state, one(heartbeat(f"c{i:04d}", T0)))
    rerun(state)
    replay = Replay(state)
    _react(replay, apply_event(state, one(heartbeat("c0000", T0))), T0)
    state.since = {f.identity: T0 for f in replay.current_findings().findings}
    state.now = T0
    return encode(Stored(state, [], T0 - 1, dict(state.since), T0))


def changes(count: int, clients: int) -> list[dict]:
    """Alternating joins of new clients and unregisters of existing ones."""
    out = []
    for k in range(count):
        ts = T0 + (k + 1) * SPACING_MS
        if k % 2 == 0:
            out.append(heartbeat(f"c{clients + k:04d}", ts))
        else:
            out.append({"type": "unregister", "ts": ts, "group": "big", "client_id": f"c{k:04d}"})
    return out


def bench_step(blob: bytes, raws: list[dict], config: StepConfig) -> tuple[list, bytes, object]:
    times, out = [], None
    for offset, raw in enumerate(raws):
        start = time.perf_counter()
        out = step(blob, [(one(raw), offset)], config=config)
        times.append(time.perf_counter() - start)
        blob = out.blob
    return times, blob, out.metrics


def bench_core(blob: bytes, raws: list[dict]) -> list[float]:
    replay = Replay(decode(blob).settled)
    times = []
    for raw in raws:
        event = one(raw)
        start = time.perf_counter()
        _react(replay, apply_event(replay.state, event), event.ts)
        times.append(time.perf_counter() - start)
    return times


def bench_naive(blob: bytes, sample: int) -> tuple[float, int]:
    """Per-client allocate() for `sample` clients over every topic; returns (seconds, clients)."""
    state = decode(blob).settled
    cids = [key[0] for key in state.members]
    start = time.perf_counter()
    for cid in cids[:sample]:
        for topic in TOPICS:
            queues = [(topic, b, q) for b, q in state.routes[topic][1]]
            allocate("AVG", {}, cid, sort_queues(queues), sort_client_ids(cids))
    return time.perf_counter() - start, len(cids)


def wave(members: int, spacing_ms: int) -> list:
    raws = [{"type": "route", "ts": T0, "group": "wave", "topic": topic,
             "brokers": {"broker-a": 4, "broker-b": 4}} for topic in ("A", "B")]
    raws += [{"type": "heartbeat", "ts": T0 + i * spacing_ms, "group": "wave",
              "client_id": f"c{i:04d}", "topics": ["A", "B"], "strategy": "AVG",
              "address": f"10.1.{i // 250}.{i % 250}:1"} for i in range(members)]
    return [(one(raw), offset) for offset, raw in enumerate(raws)]


def bench_join_wave(members: int, spacing_ms: int, config: StepConfig) -> float:
    """Seconds per member of one step over the group's whole join, best of 3."""
    events = wave(members, spacing_ms)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        advance(None, events, None, config)
        best = min(best, time.perf_counter() - start)
    return best / members


def print_join_waves(sizes: list[int]) -> None:
    seconds = replace(CONFIG, instant_ms=1_000)
    print("join wave, one step, per member (best of 3): one poll (one millisecond) | "
          "a millisecond apart, --instant-ms 1000 | a millisecond apart (baseline); "
          "ratios baseline / each")
    for size in sizes:
        poll, spread = bench_join_wave(size, 0, CONFIG), bench_join_wave(size, 1, CONFIG)
        coarse = bench_join_wave(size, 1, seconds)
        print(f"  {size:>5} members: {poll * 1e3:.3f} ms | {coarse * 1e3:.3f} ms | "
              f"{spread * 1e3:.3f} ms; {spread / poll:.1f}x, {spread / coarse:.1f}x")


def steady_fleet_group(members: int, minutes: int) -> list[list[tuple]]:
    """2 s batches of a formed group's refreshes: the joins in the first 30 s, then each member
    and each route every 30 s, for `minutes` more."""
    end = 30_000 + minutes * 60_000
    raws = []
    for start in range(0, end, 30_000):
        raws += [{"type": "route", "ts": T0 + start, "group": "steady", "topic": topic,
                  "brokers": {"broker-a": 4, "broker-b": 4}} for topic in ("A", "B")]
        raws += [{"type": "heartbeat", "ts": T0 + start + i * 30_000 // members,
                  "group": "steady", "client_id": f"10.1.{i // 250}.{i % 250}@{i}",
                  "topics": ["A", "B"], "strategy": "AVG", "broker": "broker-a"}
                 for i in range(members)]
    events = sorted(((one(raw), offset) for offset, raw in enumerate(raws)),
                    key=lambda item: (item[0].ts, item[1]))
    batches: list[list[tuple]] = [[] for _ in range(end // 2_000)]
    for item in events:
        batches[(item[0].ts - T0) // 2_000].append(item)
    return batches


def advanced_steady(batches: list[list[tuple]], config: StepConfig):
    """Each batch the job advances the group in (with events, or due), as the job advances it
    (what a blob takes as a refresh in a worker's RefreshCache): the batch's number, its
    events, the group's Advanced and the seconds it took."""
    entry, cache, key = None, RefreshCache(), GroupKey("rocketmq", "steady")

    def refreshes_for(stored: ShardEntry) -> Refreshes:
        return cache.lookup(key, stored, config)

    for n, batch in enumerate(batches):
        watermark = T0 + n * 2_000 - 10_000
        if not batch and (entry is None or watermark < entry.timeout_ms):
            continue                  # the job advances a group only with events or when due
        start = time.perf_counter()
        advanced = advance(entry, batch, watermark, config, refreshes_for)
        if advanced.output is not None:
            cache.remember(key, advanced.entry, advanced.refreshes)
        yield n, batch, advanced, time.perf_counter() - start
        entry = advanced.entry


def bench_steady_group(batches: list[list[tuple]], config: StepConfig) -> dict[str, float]:
    """The core's seconds per event over the batches after the first minute, the steps, and
    the mean bytes of the blob and of the kept refreshes per batch."""
    seconds = events = steps = blob_bytes = kept_bytes = 0
    measured = batches[30:]
    for n, batch, advanced, took in advanced_steady(batches, config):
        if n >= 30:
            seconds += took
            events += len(batch)
            steps += advanced.output is not None
            blob_bytes += len(advanced.entry.blob)
            kept_bytes += len(advanced.entry.kept)
    minutes = len(measured) * 2 / 60
    return {"us_per_event": seconds / events * 1e6, "steps_per_minute": steps / minutes,
            "blob": blob_bytes / len(measured), "kept": kept_bytes / len(measured)}


def print_steady_groups(sizes: list[int], minutes: int) -> None:
    config = StepConfig(exact=False)
    print(f"steady group, {minutes} minutes in 2 s batches, kept path and steps: core us per "
          "event | steps a minute | mean bytes of the blob + kept refreshes; cap by size, "
          "then the cap of a group of 10 (baseline); ratio of the us")
    for size in sizes:
        batches = steady_fleet_group(size, minutes)
        scaled = bench_steady_group(batches, config)
        switched_off, refresh.MEMBERS_PER_CAP = refresh.MEMBERS_PER_CAP, 1 << 30
        try:
            fixed = bench_steady_group(batches, config)
        finally:
            refresh.MEMBERS_PER_CAP = switched_off
        print(f"  {size:>5} members: " + " | ".join(
            f"{run['us_per_event']:.1f} us, {run['steps_per_minute']:.2f}, "
            f"{run['blob']:,.0f} + {run['kept']:,.0f} B" for run in (scaled, fixed))
            + f"; {scaled['us_per_event'] / fixed['us_per_event']:.2f}")


def fullest_entry(batches: list[list[tuple]], config: StepConfig) -> ShardEntry:
    """The group's entry when it held the most kept refreshes (just before a capped step)."""
    return max((advanced.entry for _, _, advanced, _ in advanced_steady(batches, config)),
               key=lambda entry: entry.kept_count)


def print_new_worker_folds(sizes: list[int], minutes: int, views: int = 200) -> None:
    """A worker that holds no view of a group's blob (a restart, or the other worker's step)
    decodes the blob's view, then folds the group's kept refreshes into its sessions' times
    before it keeps more (`Refreshes.room` on the view just decoded): the fold timed on `views`
    such views, against the decoding of those views (`refreshes_of`), in the same run."""
    config = StepConfig(exact=False)
    print("a new worker's fold of a steady group's kept refreshes, at their most: us a fold | "
          "baseline: the blob's view decoded, us | ratio")
    for size in sizes:
        entry = fullest_entry(steady_fleet_group(size, minutes), config)
        # What the group's run left behind would otherwise be collected inside the first timing.
        gc.collect()
        start = time.perf_counter()
        decoded = [refreshes_of(entry.blob, config) for _ in range(views)]
        decode = (time.perf_counter() - start) / views
        gc.collect()
        start = time.perf_counter()
        for view in decoded:
            view.room(entry.kept)
        fold = (time.perf_counter() - start) / views
        print(f"  {size:>5} members, {entry.kept_count} records: {fold * 1e6:.0f} us | "
              f"{decode * 1e6:.0f} us | {fold / decode:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--baseline-sample", type=int, default=50)
    parser.add_argument("--wave-sizes", default="10,50,100,200,1000",
                        help="join waves to time, comma-separated member counts")
    parser.add_argument("--steady-sizes", default="10,25,50,100,200,1000",
                        help="steady groups to time, comma-separated member counts")
    parser.add_argument("--steady-minutes", type=int, default=20)
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    print_join_waves([int(size) for size in args.wave_sizes.split(",")])
    steady_sizes = [int(size) for size in args.steady_sizes.split(",")]
    print_steady_groups(steady_sizes, args.steady_minutes)
    print_new_worker_folds(steady_sizes, args.steady_minutes)
    print(f"group: {args.clients} clients, {len(TOPICS)} topics x 1,000 queues, AVG")
    blob = build_blob(args.clients)
    raws = changes(args.changes, args.clients)
    step_times, last_blob, metrics = bench_step(blob, raws, CONFIG)
    no_window = StepConfig(session_timeout_ms=CONFIG.session_timeout_ms, reorder_window_ms=0)
    step_times_no_window, _, _ = bench_step(blob, raws, no_window)
    idle_times, _, _ = bench_step(last_blob, [heartbeat("c0000", T0 + (args.changes + 1)
                                                        * SPACING_MS + k) for k in range(5)],
                                  CONFIG)
    core_times = bench_core(blob, raws)
    naive_s, total = bench_naive(blob, args.baseline_sample)
    naive_full = naive_s * total / args.baseline_sample
    step_mean, core_mean = statistics.mean(step_times), statistics.mean(core_times)
    print(f"changes: {args.changes} (joins and unregisters alternating, {SPACING_MS} ms apart)")
    print(f"step() per change: mean {step_mean * 1e3:.1f} ms, "
          f"max {max(step_times) * 1e3:.1f} ms (decode + re-run + findings + diff + encode)")
    print(f"step() per change with reorder_window_ms=0: mean "
          f"{statistics.mean(step_times_no_window) * 1e3:.1f} ms (the default 10 s window "
          "replays a change still inside it once more at the next step)")
    print(f"step() for a plain heartbeat (no change): mean "
          f"{statistics.mean(idle_times) * 1e3:.1f} ms (decode + encode dominate)")
    print(f"core per change (apply + re-run + findings, no codec): mean {core_mean * 1e3:.1f} ms")
    print(f"state blob: {len(blob)} bytes before, {len(last_blob)} bytes after the changes")
    print(f"metrics after: members={metrics.members} skew_ratio={metrics.skew_ratio} "
          f"rebalances_total={metrics.rebalances_total} "
          f"queue_moves_total={metrics.queue_moves_total}")
    print(f"baseline (naive per-client allocate, sorting per call): {naive_s:.2f} s for "
          f"{args.baseline_sample} clients, extrapolated x{total / args.baseline_sample:.0f} "
          f"to {total} clients = {naive_full:.1f} s per re-run")
    print(f"ratio baseline / step(): {naive_full / step_mean:.0f}x; "
          f"baseline / core: {naive_full / core_mean:.0f}x")


if __name__ == "__main__":
    main()
