"""Benchmark: the steady scenario's events per second into a broker, from one process.

    python -m tests.benchmarks.bench_simulator [--groups 1000] [--duration 1800]

Uses KAFKA_BOOTSTRAP_SERVERS when set, else starts the embedded broker. Figures:
- simulate only: events/s the simulator generates (encoded, not sent);
- simulate + produce: events/s generated and delivered (flush included) - the goal is >= 50,000;
- baseline: a plain confluent-kafka producer sending pre-built messages of the same sizes
  (a sample of the run's own messages, cycled), with the same producer settings, same count.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from itertools import cycle, islice

from producers.simulator.cli import RateLimit, produce
from producers.simulator.scenarios import Steady
from tests.benchmarks.machine import describe_machine


def scenario(args) -> Steady:
    return Steady(groups=args.groups, clients=args.clients, topics=args.topics,
                  queues=args.queues, duration_ms=int(args.duration * 1000), seed=1)


def simulate_only(args) -> tuple[int, float, list[tuple[bytes, bytes]]]:
    sample: list[tuple[bytes, bytes]] = []
    started = time.perf_counter()
    count = 0
    for pair in scenario(args).run_encoded():
        count += 1
        if count % 50 == 0 and len(sample) < 20_000:
            sample.append(pair)
    return count, time.perf_counter() - started, sample


def timed_produce(events, bootstrap: str, topic: str) -> tuple[int, float, int]:
    started = time.perf_counter()
    count, failed = produce(events, bootstrap, topic, RateLimit(None))
    return count, time.perf_counter() - started, failed


def run(bootstrap: str, args) -> None:
    from streaming.common.topics import create_topic

    print(describe_machine())
    print(f"steady: {args.groups} groups x {args.clients} clients, {args.topics} topics x "
          f"{args.queues} queues, 2 brokers, {args.duration:.0f} simulated s")
    count, elapsed, sample = simulate_only(args)
    size = sum(len(v) for _, v in sample) / len(sample)
    print(f"simulate only:       {count:>9,} events in {elapsed:6.2f} s = "
          f"{count / elapsed:>9,.0f} events/s (mean value {size:.0f} bytes)")
    sim_topic, base_topic = f"bench.sim.{uuid.uuid4().hex[:6]}", f"bench.base.{uuid.uuid4().hex[:6]}"
    for topic in (sim_topic, base_topic):
        create_topic(bootstrap, topic, partitions=4)
    sent, elapsed, failed = timed_produce(scenario(args).run_encoded(), bootstrap, sim_topic)
    sim_rate = sent / elapsed
    print(f"simulate + produce:  {sent:>9,} events in {elapsed:6.2f} s = "
          f"{sim_rate:>9,.0f} events/s ({failed} failed) goal >= 50,000: "
          f"{'met' if sim_rate >= 50_000 and not failed else 'NOT met'}")
    sent, elapsed, failed = timed_produce(islice(cycle(sample), count), bootstrap, base_topic)
    base_rate = sent / elapsed
    print(f"baseline (pre-built): {sent:>8,} events in {elapsed:6.2f} s = "
          f"{base_rate:>9,.0f} events/s ({failed} failed)")
    print(f"ratio simulate+produce / baseline = {sim_rate / base_rate:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--topics", type=int, default=2)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--duration", type=float, default=1800.0, help="simulated seconds")
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        run(bootstrap, args)
        return
    from streaming.embedded_broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        run(broker.bootstrap_servers, args)


if __name__ == "__main__":
    main()
