"""A long-running producer command (`rebalance-monitor observe-kafka`, `simulate`) as a real
process with its own /metrics port, and what the fault tests need around it:

    with ProducerProcess(["observe-kafka", "--bootstrap-servers", b, ...]) as command:
        command.wait_for(lambda m: m.value("rebalance_observer_events_total") > 0)
        with paused(broker):                            # SIGSTOP ... SIGCONT
            command.wait_for(lambda m: m.total("rebalance_observer_poll_failures_total") >= 2)

Not a test module itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from streaming.embedded_broker import free_port

COMMAND = str(Path(sys.executable).parent / "rebalance-monitor")


class Scrape:
    """One /metrics scrape, queried by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def value(self, name: str, **labels: str) -> float | None:
        for sample in self.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        return None

    def series(self, name: str) -> dict[tuple, float]:
        return {tuple(sorted(s.labels.items())): s.value for s in self.samples if s.name == name}

    def total(self, name: str) -> float:
        return sum(self.series(name).values())


class ProducerProcess:
    def __init__(self, args: list[str], log_dir: Path | None = None) -> None:
        self.port = free_port()
        self.args = [COMMAND, *args, "--metrics-host", "127.0.0.1",
                     "--metrics-port", str(self.port)]
        self.log_path = Path(log_dir or tempfile.mkdtemp()) / f"{args[0]}-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> ProducerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def try_scrape(self) -> Scrape | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=2) as response:
                return Scrape(response.read().decode())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def wait_for(self, predicate: Callable[[Scrape], bool], timeout: float = 30.0,
                 what: str = "") -> Scrape:
        """Scrape until predicate holds; fail with the log tail if it exits or the time is up."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if not self.running:
                raise AssertionError(f"{self.args[1]} exited with {self.process.returncode} "
                                     f"while waiting for {what}:\n{self.log()[-3000:]}")
            last = self.try_scrape()
            if last is not None and predicate(last):
                return last
            time.sleep(0.2)
        raise AssertionError(f"not within {timeout} s: {what}\nlast scrape:\n"
                             f"{last.text if last else None}\n{self.log()[-3000:]}")

    def wait_exit(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def stop(self, timeout: float = 30.0) -> int:
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> ProducerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.running:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def paused(broker) -> Iterator[None]:
    """The embedded broker stops answering (SIGSTOP) until the block ends (SIGCONT)."""
    os.kill(broker.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(broker.pid, signal.SIGCONT)


def read_values(bootstrap: str, topic: str, until: Callable[[list[bytes]], bool],
                timeout: float = 30.0) -> list[bytes]:
    """A topic's record values from the start, read until `until(values)` holds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                if message.error() is None:
                    values.append(message.value())
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"reading {topic}: {message.error()}")
            if until(values):
                return values
        raise AssertionError(f"{topic}: not within {timeout} s ({len(values)} records read)")
    finally:
        consumer.close()
