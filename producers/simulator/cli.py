"""`rebalance-monitor simulate`: run a named scenario and publish its events to Kafka.

    rebalance-monitor simulate --bootstrap-servers localhost:9092 --topic rebalance.events \\
        --scenario broker-crash --with-view --print-ground-truth
    rebalance-monitor simulate --scenario steady --groups 1000 --clients 4 --stdout | head
    rebalance-monitor simulate --scenario lost-notification --realtime --bootstrap-servers ...

Events are JSON (contract v1), keyed by group. By default simulated time runs as fast as
possible from a fixed epoch (deterministic with --seed); --realtime paces it against the wall
clock with real timestamps (--speed N runs N x faster). --rate caps events per wall second.
--print-ground-truth prints the findings a correct monitor must report, one JSON object a line
({"ground_truth": {...}}), after the events.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict

from producers.simulator.clock import DEFAULT_EPOCH_MS, FastClock, RealtimeClock
from producers.simulator.scenarios import SCENARIOS, Scenario, Steady


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "scenarios:\n" + "\n".join(
        f"  {name:22} {cls.summary}" for name, cls in sorted(SCENARIOS.items()))
    parser.add_argument("--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
                        help="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS)")
    parser.add_argument("--topic", default="rebalance.events", help="events topic")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="steady")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--realtime", action="store_true", help="pace by the wall clock")
    parser.add_argument("--speed", type=float, default=1.0, help="with --realtime: N x faster")
    parser.add_argument("--epoch-ms", type=int, default=DEFAULT_EPOCH_MS,
                        help="start of simulated time when not --realtime")
    parser.add_argument("--duration", type=float, help="simulated seconds (scenario default)")
    parser.add_argument("--with-view", action="store_true",
                        help="heartbeats carry view and owned (default: what real clients send)")
    parser.add_argument("--groups-list", action="store_true",
                        help="one route event naming `groups` instead of one per group")
    parser.add_argument("--notification-loss", type=float, default=0.0,
                        help="probability that a broker notification is lost")
    steady = parser.add_argument_group("steady scenario")
    steady.add_argument("--groups", type=int, default=100)
    steady.add_argument("--clients", type=int, default=4, help="clients per group")
    steady.add_argument("--topics", type=int, default=2, help="topics per group")
    steady.add_argument("--queues", type=int, default=8, help="queues per topic")
    steady.add_argument("--brokers", type=int, default=2)
    parser.add_argument("--rate", type=float, help="at most N events per wall-clock second")
    parser.add_argument("--print-ground-truth", action="store_true")
    parser.add_argument("--stdout", action="store_true", help="print events instead of producing")
    parser.add_argument("--create-topic", type=int, metavar="PARTITIONS",
                        help="create the events topic with this many partitions first")


def build_scenario(args: argparse.Namespace) -> Scenario:
    options = dict(seed=args.seed, with_view=args.with_view,
                   route_groups_list=args.groups_list,
                   notification_loss=args.notification_loss,
                   duration_ms=None if args.duration is None else int(args.duration * 1000))
    if args.scenario == Steady.name:
        options.update(groups=args.groups, clients=args.clients, topics=args.topics,
                       queues=args.queues, brokers=args.brokers)
    return SCENARIOS[args.scenario](**options)


class RateLimit:
    """Caps events per wall second; checks the clock once per 256 events."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.count = 0
        self.start = time.monotonic()

    def tick(self) -> None:
        self.count += 1
        if self.rate and self.count % 256 == 0:
            ahead = self.count / self.rate - (time.monotonic() - self.start)
            if ahead > 0:
                time.sleep(ahead)  # pacing, not waiting for a condition


def produce(events, bootstrap: str, topic: str, rate: RateLimit) -> tuple[int, int]:
    """Produce (key, value) pairs; returns (produced, failed deliveries)."""
    from confluent_kafka import Producer

    failed = [0]

    def delivered(error, _message) -> None:
        if error is not None:
            failed[0] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "delivery.report.only.error": True,
                         "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    count = 0
    for key, value in events:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
        rate.tick()
    remaining = producer.flush(60)
    return count, failed[0] + remaining


def main(args: argparse.Namespace) -> int:
    try:
        return _main(args)
    except BrokenPipeError:  # `| head`: the reader has seen enough
        sys.stderr.close()
        return 0


def _main(args: argparse.Namespace) -> int:
    scenario = build_scenario(args)
    clock = (RealtimeClock(args.speed) if args.realtime else FastClock(args.epoch_ms))
    rate = RateLimit(args.rate)
    if args.stdout:
        for _key, value in scenario.run_encoded(clock):
            sys.stdout.write(value.decode() + "\n")
            rate.tick()
        sys.stdout.flush()
    elif args.bootstrap_servers:
        if args.create_topic:
            from streaming.embedded_broker import create_topic

            create_topic(args.bootstrap_servers, args.topic, partitions=args.create_topic)
        started = time.monotonic()
        count, failed = produce(scenario.run_encoded(clock), args.bootstrap_servers,
                                args.topic, rate)
        elapsed = time.monotonic() - started
        print(f"simulate: {scenario.name}: {count} events to {args.topic} in {elapsed:.2f} s "
              f"({count / max(elapsed, 1e-9):,.0f}/s), {failed} failed", file=sys.stderr)
        if failed:
            return 1
    elif not args.print_ground_truth:
        print("simulate: give --bootstrap-servers, --stdout or --print-ground-truth",
              file=sys.stderr)
        return 2
    if args.print_ground_truth:
        truth = scenario.ground_truth()
        mode = "with view and owned" if args.with_view else "without view (structural only)"
        print(f"simulate: {scenario.name}: ground truth for heartbeats {mode}: "
              f"{len(truth)} findings", file=sys.stderr)
        for finding in truth:
            print(json.dumps({"ground_truth": asdict(finding)}))
    return 0
