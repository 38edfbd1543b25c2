"""Real Kafka Streams applications for the integration tests: kafka_java/StreamsProbe.java,
compiled once with javac against the cached Kafka Streams jars (scripts/fetch_jars.py
kafka-streams), run as one JVM per instance with group.protocol=streams (KIP-1071).

    a = StreamsApp(bootstrap, "app", "orders", tmp_path).start()
    b = StreamsApp(bootstrap, "app", "orders", tmp_path).start()
    wait_for_tasks([a, b], {"0": 4, "1": 4})   # each task run by exactly one instance
    a.active                                   # frozenset of ("0", 1), ... it runs now

An instance is a JavaConsumer in all but its program: the same process handling (start, close,
kill, pause, wait_for on each line printed), its lines read as StreamsProbe prints them. Its
ground truth is its own KafkaStreams.metadataForLocalThreads(), never the broker's answer.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from streaming import jars
from tests.integration.java_programs import JavaUnavailable, compile_java
from tests.integration.kafka_consumers import JavaConsumer, ProbeUnavailable, wait_for_probes

SOURCE = Path(__file__).parent / "kafka_java" / "StreamsProbe.java"
MAIN_CLASS = "StreamsProbe"
JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")

Task = tuple[str, int]   # (subtopology id, partition): "1_3" is ("1", 3)


def streams_jars() -> list[Path]:
    found = jars.kafka_streams_jars()
    if not found:
        raise ProbeUnavailable(f"no Kafka Streams jars in {jars.kafka_streams_dir()}: run "
                               "`make jars` (or python scripts/fetch_jars.py kafka-streams)")
    return found


def compile_streams_probe() -> Path:
    try:
        return compile_java([SOURCE], streams_jars(), MAIN_CLASS,
                            f"kafka-streams-{jars.KAFKA_VERSION}")
    except JavaUnavailable as refused:
        raise ProbeUnavailable(str(refused)) from None


def task(text: str) -> Task:
    subtopology, partition = text.split("_")
    return subtopology, int(partition)


class StreamsApp(JavaConsumer):
    """One StreamsProbe JVM: one instance of the application `app_id` (one stream thread, so one
    member of the group, unless `threads` says more). `block_file`: while it exists, each
    record's processing waits. `stall_file`: while it exists, each thread running an active
    task stalls, records or not. `replication_factor`: of the internal topics the broker creates
    for it (-1: the broker's default)."""

    def __init__(self, bootstrap: str, app_id: str, source: str, state_root: Path, *,
                 threads: int = 1, block_file: Path | None = None,
                 stall_file: Path | None = None, name: str | None = None,
                 log_dir: Path | None = None, replication_factor: int = -1) -> None:
        super().__init__(bootstrap, app_id, [source], name=name, log_dir=log_dir or state_root)
        self.arguments = ["--bootstrap", bootstrap, "--app-id", app_id, "--source", source,
                          "--state-dir", str(state_root / f"{self.name}-state"),
                          "--threads", str(threads),
                          "--replication-factor", str(replication_factor)]
        if block_file is not None:
            self.arguments += ["--block-file", str(block_file)]
        if stall_file is not None:
            self.arguments += ["--stall-file", str(stall_file)]

    def __repr__(self) -> str:
        return f"StreamsApp({self.name})"

    def java(self) -> list[str]:
        classpath = os.pathsep.join([str(compile_streams_probe()), *map(str, streams_jars())])
        return ["java", *JVM_FLAGS, "-cp", classpath, MAIN_CLASS]

    def _reset(self) -> None:
        super()._reset()
        self.state: str | None = None
        self.threads: dict[str, dict[str, frozenset[Task]]] = {}
        self.stalled: set[str] = set()      # the stream threads stalled now

    def _apply(self, event: dict[str, Any]) -> None:
        super()._apply(event)
        if event["event"] == "tasks":
            self.state = event["state"]
            self.threads = {thread["client"]: {kind: frozenset(map(task, thread[kind]))
                                               for kind in ("active", "standby")}
                            for thread in event["threads"]}
        elif event["event"] == "stalled":
            self.stalled.add(event["thread"])
        elif event["event"] == "resumed":
            self.stalled.discard(event["thread"])

    @property
    def active(self) -> frozenset[Task]:
        """The active tasks this instance's threads run now."""
        return frozenset(t for thread in self.threads.values() for t in thread["active"])

    @property
    def standby(self) -> frozenset[Task]:
        """The tasks this instance's threads keep a standby copy of now."""
        return frozenset(t for thread in self.threads.values() for t in thread["standby"])

    def tail(self) -> str:
        return super().tail().replace("stdout:", f"stdout (state {self.state}):", 1)


def wait_for_tasks(apps: Sequence[StreamsApp], tasks: Mapping[str, int],
                   timeout: float = 90.0) -> list[frozenset[Task]]:
    """Until the instances are RUNNING, together run each task of `tasks` ({subtopology: task
    count}) exactly once, and their counts differ by at most one (the broker's sticky assignor
    balances active tasks: a newcomer holding nothing is a hand-off still under way). Each
    one's active tasks."""
    apps = list(apps)
    every = Counter((sub, p) for sub, count in tasks.items() for p in range(count))

    def settled() -> list[frozenset[Task]] | None:
        if any(app.state != "RUNNING" for app in apps):
            return None
        running = Counter(t for app in apps for t in app.active)
        counts = [len(app.active) for app in apps]
        if running != every or max(counts) - min(counts) > 1:
            return None
        return [app.active for app in apps]

    return wait_for_probes(settled, timeout, f"{len(apps)} Streams instances running each of "
                           f"{sum(every.values())} tasks once", apps)
