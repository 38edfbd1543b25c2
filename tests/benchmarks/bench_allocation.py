"""Group-level allocation vs a naive per-client loop: 1,000 clients, 10 topics x 1,000 queues.

Run: python -m tests.benchmarks.bench_allocation [--repeat N] [--max-naive-seconds S]

The naive loop is what re-running every client would cost: for each topic, sort the view once,
then call the per-client `allocate` (the Java method, transcribed) for each of the 1,000
clients. The group-level call is `allocate_group_topics`, sorting included. Both answers are
compared for the clients the naive loop ran. Goals: group-level >= 50x faster, AVG < 100 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time

from streaming.core.allocation import allocate, allocate_group_topics, sort_client_ids, sort_queues

CLIENTS = 1_000
TOPICS = 10
QUEUES_PER_TOPIC = 1_000
BROKERS = 4
GOAL_RATIO = 50.0
GOAL_AVG_MS = 100.0
STRATEGIES = (("AVG", {}), ("CONSISTENT_HASH", {"virtual_nodes": 10}))


def machine() -> str:
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo
                          if line.startswith("model name")), model)
    except OSError:
        pass
    return (f"machine: nproc={os.cpu_count()} cpu={model!r} python={platform.python_version()} "
            f"({platform.python_implementation()})")


def build_group(seed: int = 7) -> tuple[dict[str, list[tuple[str, str, int]]], list[str]]:
    rng = random.Random(seed)
    per_broker = QUEUES_PER_TOPIC // BROKERS
    queues_by_topic = {}
    for t in range(TOPICS):
        topic = f"topic-{t:02d}"
        queues = [(topic, f"broker-{b}", q) for b in range(BROKERS) for q in range(per_broker)]
        rng.shuffle(queues)  # the view arrives unsorted, as from a route event
        queues_by_topic[topic] = queues
    clients = [f"10.0.{i // 250}.{i % 250}@{20000 + i}#{rng.randrange(10**6)}"
               for i in range(CLIENTS)]
    rng.shuffle(clients)
    return queues_by_topic, clients


def time_group(strategy, params, queues_by_topic, clients, repeat):
    timings, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = allocate_group_topics(strategy, params, queues_by_topic, clients)
        timings.append(time.perf_counter() - start)
    return min(timings), statistics.median(timings), result


def naive_loop(strategy, params, queues_by_topic, clients, sample):
    """Per-client `allocate` for `sample` clients on every topic; (seconds, answers)."""
    answers: dict[str, dict[str, list]] = {}
    start = time.perf_counter()
    for topic, queues in queues_by_topic.items():
        mq_all, cid_all = sort_queues(queues), sort_client_ids(clients)
        answers[topic] = {cid: allocate(strategy, params, cid, mq_all, cid_all) for cid in sample}
    return time.perf_counter() - start, answers


def naive_sample(strategy, params, queues_by_topic, clients, max_seconds):
    """All clients, unless a pilot projects more than `max_seconds`: then a fixed sample."""
    pilot = clients[:: CLIENTS // 5]
    pilot_seconds, _ = naive_loop(strategy, params, queues_by_topic, clients, pilot)
    projected = pilot_seconds * CLIENTS / len(pilot)
    if projected <= max_seconds:
        return clients
    size = max(10, int(len(clients) * max_seconds / 4 / projected))
    return clients[:: len(clients) // size][:size]


def bench(strategy, params, queues_by_topic, clients, repeat, max_naive_seconds) -> bool:
    best, median, group = time_group(strategy, params, queues_by_topic, clients, repeat)
    sample = naive_sample(strategy, params, queues_by_topic, clients, max_naive_seconds)
    naive_seconds, answers = naive_loop(strategy, params, queues_by_topic, clients, sample)
    mismatches = sum(group[t].results[cid] != share
                     for t, by_cid in answers.items() for cid, share in by_cid.items())
    naive_total = naive_seconds * len(clients) / len(sample)
    ratio = naive_total / best
    print(f"\n{strategy} {params or ''}")
    print(f"  group-level allocate_group_topics: best {best * 1e3:.1f} ms, median "
          f"{median * 1e3:.1f} ms over {repeat} runs")
    if len(sample) == len(clients):
        print(f"  naive per-client loop ({len(clients)} clients x {TOPICS} topics): "
              f"{naive_total:.2f} s")
    else:
        print(f"  naive per-client loop: EXTRAPOLATED linearly from a fixed sample of "
              f"{len(sample)} of {len(clients)} clients x {TOPICS} topics "
              f"({naive_seconds:.2f} s measured) -> {naive_total:.1f} s")
    print(f"  ratio naive / group-level: {ratio:.0f}x (goal >= {GOAL_RATIO:.0f}x)")
    print(f"  answers compared: {sum(map(len, answers.values()))}, mismatches: {mismatches}")
    ok = ratio >= GOAL_RATIO and mismatches == 0
    if strategy == "AVG":
        ok = ok and best * 1e3 < GOAL_AVG_MS
        print(f"  AVG group-level under {GOAL_AVG_MS:.0f} ms: {best * 1e3 < GOAL_AVG_MS}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="group-level runs (best is kept)")
    parser.add_argument("--max-naive-seconds", type=float, default=120.0,
                        help="above this projected time the naive loop is sampled")
    args = parser.parse_args(argv)
    print(machine())
    queues_by_topic, clients = build_group()
    print(f"group: {len(clients)} clients, {TOPICS} topics x {QUEUES_PER_TOPIC} queues "
          f"on {BROKERS} brokers (inputs unsorted)")
    results = [bench(s, p, queues_by_topic, clients, args.repeat, args.max_naive_seconds)
               for s, p in STRATEGIES]
    print(f"\ngoals met: {all(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
