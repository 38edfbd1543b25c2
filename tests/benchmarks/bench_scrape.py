"""Benchmark: one /metrics scrape of a fleet, kept-rendered text against prometheus_client.

Run: python -m tests.benchmarks.bench_scrape [--groups 10000] [--clients 10] [--queues 8]

A fleet of groups, each with one topic, `--queues` queues and `--clients` clients, a tenth of
the groups with an open conflict. Measures, in the same run:
- baseline: prometheus_client formatting every family of a registry with RebalanceCollector
  (what the job served before), full scrape and one family (`name[]`);
- the job's scrape: GroupFamiliesText's text plus the registry's job health, full and one family;
- what a batch costs the sink: every group written again with only its event time moved (a
  batch of heartbeats), and every group written with a changed value (a fleet-wide change);
- the render after a batch in which one group changed and the event time moved (what the job's
  Prerender does, holding the store's batch lock): the text kept in blocks of BLOCK_GROUPS
  groups, against one block per family (every family's text joined again whole: the baseline).
The best of `--repeat` runs of each is kept.
"""

from __future__ import annotations

import argparse
import time
from io import BytesIO

from prometheus_client import CollectorRegistry, generate_latest

from streaming.core.contract import GroupMetrics
from streaming.exporter import (
    ClientSeriesPolicy,
    GroupFamiliesText,
    JobHealthCollector,
    RebalanceCollector,
    SnapshotStore,
)
from streaming.exporter.exposition import BLOCK_GROUPS
from streaming.exporter.server import metrics_app
from tests.benchmarks.machine import describe_machine

ONE_FAMILY = "name[]=rebalance_double_assigned_queues"


def fleet(groups: int, clients: int, queues: int, event_time_ms: int, members_delta: int = 0):
    for g in range(groups):
        conflict = g % 10 == 0
        yield GroupMetrics(
            system="rocketmq", group=f"group-{g:05d}", event_time_ms=event_time_ms,
            members=clients + members_delta, queues={"orders": queues},
            double_assigned={"orders": 1 if conflict else 0}, orphaned={"orders": 0},
            conflict_since_ms=1_000 if conflict else None, skew_ratio=1.0, idle_clients=0,
            subscription_inconsistent=0, strategy_inconsistent=0,
            client_id_collisions=1 if conflict else 0, view_divergent_clients=0,
            broker_view_divergent=0, allocation_mismatch_clients=0, rebalances_total=3,
            queue_moves_total=12, late_events_total=0,
            client_queues={f"10.0.{g // 250}.{g % 250}@{c}": queues // clients + (c < queues % clients)
                           for c in range(clients)})


def best(repeat: int, run) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def scrape(app, query: str = "") -> bytes:
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": query,
               "wsgi.input": BytesIO()}
    return b"".join(app(environ, lambda status, headers: None))


def render_after_one_change(args, block_groups: int) -> float:
    """Seconds to render the full text after each of `--repeat` batches that changed one group
    and moved the event time (the best)."""
    text = GroupFamiliesText(ClientSeriesPolicy(), block_groups)
    store = SnapshotStore(text)
    groups = list(fleet(args.groups, args.clients, args.queues, 1_000))
    for metrics in groups:
        store.replace_group(metrics)
    text.chunks(store.health())
    changed = list(fleet(args.groups, args.clients, args.queues, 3_000, members_delta=1))
    times = []
    for n in range(args.repeat):
        store.replace_group(changed[(n * 7919) % len(changed)])
        store.update_health(max_event_time_ms=60_000 + n)
        started = time.perf_counter()
        text.chunks(store.health())
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(describe_machine())
    compare_scrapes(args)       # returns before the next, so that one fleet is in memory at once
    whole = render_after_one_change(args, max(1, args.groups))
    blocks = render_after_one_change(args, BLOCK_GROUPS)
    print(f"render after a batch that changed one group: one block per family {whole:.3f} s, "
          f"blocks of {BLOCK_GROUPS} groups {blocks:.4f} s (ratio {whole / blocks:.0f}x)")


def compare_scrapes(args) -> None:
    policy = ClientSeriesPolicy()
    text = GroupFamiliesText(policy)
    store = SnapshotStore(text)
    first, _ = best(1, lambda: [store.replace_group(m) for m in
                                fleet(args.groups, args.clients, args.queues, 1_000)])
    store.update_health(max_event_time_ms=60_000)
    registry = CollectorRegistry()
    registry.register(JobHealthCollector(store, clock=lambda: 90.0))
    app = metrics_app(registry, lambda names: text.chunks(store.health(), names))
    reference = CollectorRegistry()
    reference.register(RebalanceCollector(store, policy, clock=lambda: 90.0))

    old_full, old_body = best(args.repeat, lambda: generate_latest(reference))
    old_one, _ = best(args.repeat, lambda: generate_latest(
        reference.restricted_registry(["rebalance_double_assigned_queues"])))
    new_full, new_body = best(args.repeat, lambda: scrape(app))
    new_one, _ = best(args.repeat, lambda: scrape(app, ONE_FAMILY))
    equal = new_body == old_body
    series = old_body.count(b"\n") - old_body.count(b"\n#")
    heartbeats = list(fleet(args.groups, args.clients, args.queues, 2_000))
    changed = list(fleet(args.groups, args.clients, args.queues, 3_000, members_delta=1))
    batch_same, _ = best(1, lambda: [store.replace_group(m) for m in heartbeats])
    batch_changed, _ = best(1, lambda: [store.replace_group(m) for m in changed])

    print(f"fleet: {args.groups:,} groups x {args.clients} clients, 1 topic x {args.queues} queues, "
          f"{series:,} series, {len(old_body) / 1e6:.1f} MB of text")
    print(f"full scrape: prometheus_client {old_full:.3f} s, kept-rendered text {new_full:.3f} s "
          f"(ratio {old_full / new_full:.0f}x); the same bytes: {equal}")
    print(f"one family: prometheus_client {old_one:.3f} s, kept-rendered text "
          f"{new_one * 1000:.2f} ms (ratio {old_one / new_one:.0f}x)")
    print(f"sink, per batch: first render {first:.2f} s; every group again with only its event "
          f"time moved {batch_same:.2f} s; every group changed {batch_changed:.2f} s")


if __name__ == "__main__":
    main()
