"""Benchmark: what observe-kafka costs a cluster per poll, by group type, against a real Apache
Kafka broker (the jar cache's, 4.3.1).

    python -m tests.benchmarks.bench_observer [--groups 1000] [--members 3] [--partitions 6]
        [--polls 5] [--types classic,consumer,share,streams]

For each group type, on a broker of its own: GroupLoad (tests/benchmarks/kafka_java, a JVM
speaking the broker's group protocols itself) makes --groups groups of --members members on one
topic of --partitions partitions and keeps them alive; then an observer (the real
KafkaGroupObserver, in this process) polls once to warm up and --polls times back to back.
Per poll: the requests by kind (the observer's own counts), the bytes its sockets to the broker
sent and received (the kernel's TCP counters, `ss -tin`), and the poll's wall and CPU time.

Baseline, measured in the same run: the same polls of the same broker before any group exists.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from producers.kafka.observer import KafkaGroupObserver
from streaming import jars
from streaming.common.topics import create_topic
from streaming.kafka_broker import ApacheKafkaBroker
from tests.benchmarks.machine import describe_machine
from tests.integration.java_programs import compile_java
from tests.integration.kafka_consumers import LOG4J2, runtime_jars

SOURCE = Path(__file__).parent / "kafka_java" / "GroupLoad.java"
TYPES = ("classic", "consumer", "share", "streams")
# Production's session and heartbeat defaults (the tests' broker shortens them), and a join
# window for the classic groups, whose members all join before the first rebalance ends.
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "1000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.streams.session.timeout.ms": "45000",
    "group.streams.heartbeat.interval.ms": "5000",
}


@dataclass(frozen=True)
class PollCost:
    """The mean of one poll: requests by kind, bytes sent and received, wall and CPU seconds."""

    requests: dict[str, float]
    sent: float
    received: float
    wall_s: float
    cpu_s: float
    groups: int
    members: int


def socket_bytes(port: int, pid: int) -> tuple[int, int]:
    """(sent, received) bytes over the established TCP connections of `pid` to `port`."""
    out = subprocess.run(["ss", "-tinpH", "state", "established", "dport", f"= :{port}"],
                         capture_output=True, text=True, check=True).stdout
    sent = received = 0
    for record in re.split(r"\n(?=\S)", out):
        if f"pid={pid}," in record:
            sent += int(_counter(record, "bytes_sent"))
            received += int(_counter(record, "bytes_received"))
    return sent, received


def _counter(record: str, name: str) -> str:
    found = re.search(rf"\b{name}:(\d+)", record)
    return found.group(1) if found else "0"


def measure(bootstrap: str, polls: int) -> PollCost:
    port = int(bootstrap.rsplit(":", 1)[1])
    observer = KafkaGroupObserver(bootstrap, timeout_s=60)
    try:
        observer.poll()                                  # connects; the clients warm up
        calls_before, _ = observer.health.calls.snapshot()
        bytes_before = socket_bytes(port, os.getpid())
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(polls):
            translations = observer.poll()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        bytes_after = socket_bytes(port, os.getpid())
        calls_after, _ = observer.health.calls.snapshot()
    finally:
        observer.close()
    requests = Counter({request: n - calls_before.get((request, outcome), 0)
                        for (request, outcome), n in calls_after.items()})
    return PollCost({r: n / polls for r, n in sorted(requests.items()) if n},
                    (bytes_after[0] - bytes_before[0]) / polls,
                    (bytes_after[1] - bytes_before[1]) / polls,
                    wall / polls, cpu / polls, len(translations),
                    sum(len(t.members) for t in translations))


@contextmanager
def group_load(bootstrap: str, kind: str, args: argparse.Namespace, topic: str,
               classes: Path) -> Iterator[str]:
    """GroupLoad running until the block ends; yields its ready line."""
    classpath = os.pathsep.join([str(classes), *map(str, runtime_jars())])
    process = subprocess.Popen(
        ["java", f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}", "-cp",
         classpath, "GroupLoad", "--bootstrap", bootstrap, "--type", kind,
         "--groups", str(args.groups), "--members", str(args.members), "--topic", topic,
         "--partitions", str(args.partitions), "--threads", "32"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = process.stdout.readline()
        if not ready:
            raise RuntimeError(f"GroupLoad {kind} ended: {process.stderr.read()[-2000:]}")
        yield ready.strip()
    finally:
        process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def run_type(kind: str, args: argparse.Namespace, classes: Path) -> tuple[PollCost, PollCost]:
    """(baseline: the broker without groups, the broker with the groups) for one type."""
    with tempfile.TemporaryDirectory(prefix="bench-observer-") as workdir, \
            ApacheKafkaBroker(Path(workdir), heap="1g", settings=BROKER_SETTINGS) as broker:
        topic = f"bench-{kind}"
        create_topic(broker.bootstrap_servers, topic, args.partitions)
        baseline = measure(broker.bootstrap_servers, args.polls)
        with group_load(broker.bootstrap_servers, kind, args, topic, classes) as ready:
            print(f"  {kind}: {ready}", flush=True)
            loaded = measure(broker.bootstrap_servers, args.polls)
    return baseline, loaded


def row(label: str, cost: PollCost, baseline: PollCost) -> str:
    requests = ", ".join(f"{r} {n:g}" for r, n in cost.requests.items())
    return (f"| {label} | {cost.groups} | {cost.members} | {requests} | {cost.sent / 1e3:,.1f} | "
            f"{cost.received / 1e3:,.1f} | {cost.wall_s:.3f} ({cost.wall_s / baseline.wall_s:.0f}x)"
            f" | {cost.cpu_s:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--polls", type=int, default=5)
    parser.add_argument("--types", default=",".join(TYPES))
    args = parser.parse_args()
    if min(args.groups, args.members, args.partitions, args.polls) < 1:
        parser.error("--groups, --members, --partitions and --polls must be at least 1")
    kinds = [k for k in args.types.split(",") if k]
    unknown = set(kinds) - set(TYPES)
    if unknown:
        parser.error(f"--types: unknown {sorted(unknown)}; choose from {', '.join(TYPES)}")
    print("machine:", describe_machine())
    print(f"broker: Apache Kafka {jars.KAFKA_VERSION}, one KRaft node, heap 1 GB; "
          f"{args.groups} groups x {args.members} members, {args.partitions} partitions, "
          f"mean of {args.polls} polls", flush=True)
    classes = compile_java([SOURCE], runtime_jars(), "GroupLoad", f"kafka-{jars.KAFKA_VERSION}",
                           {"log4j2.properties": LOG4J2})
    rows = []
    for kind in kinds:
        baseline, loaded = run_type(kind, args, classes)
        rows += [row(f"{kind}: no group (baseline)", baseline, baseline),
                 row(f"{kind}", loaded, baseline)]
    print("\n| cluster | groups | members | requests per poll | KB sent | KB received | "
          "poll wall s (x baseline) | poll CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
