"""Helpers the integration tests and benchmarks share; not a test module itself.

- Scrape: one Prometheus text exposition (a /metrics answer), queried by name and labels.
- wait_until: ask a predicate until it holds, failing after a timeout with what was awaited;
  every harness's wait_for delegates to it.
- read_topic / read_values: a topic's records from the start, read to its end or until a
  condition on them holds.
- COUNTED_WRITES: producer settings for records a test later counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")

# A test that checks the job's counts against what it wrote needs each acknowledged record in the
# topic once. Without idempotence a request timed out against a stalled broker is sent again, and
# the broker, once resumed, appends both copies (a CI run counted 170 heartbeats for 116 written).
COUNTED_WRITES = {"linger.ms": 5, "enable.idempotence": True}


class Scrape:
    """One /metrics scrape, queried by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        # Prometheus refuses a whole scrape that declares a family twice; the parser below
        # would take it.
        declared = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
        twice = sorted({name for name in declared if declared.count(name) > 1})
        assert not twice, f"families declared twice in one scrape: {twice}"
        self.samples = [s for f in text_string_to_metric_families(text) for s in f.samples]

    def value(self, name: str, **labels: str) -> float | None:
        """The first sample of `name` carrying these labels (others may have more), or None."""
        for sample in self.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
        return None

    def series(self, name: str, **labels: str) -> dict[tuple, float]:
        """Every sample of `name` carrying these labels: (sorted label items) -> value."""
        return {tuple(sorted(s.labels.items())): s.value for s in self.samples
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())}

    def total(self, name: str, **labels: str) -> float:
        """The sum of series(name, **labels); 0 when there is none."""
        return sum(self.series(name, **labels).values())

    def groups(self) -> set[str]:
        """The groups the job shows (those with a rebalance_group_members sample)."""
        return {s.labels["group"] for s in self.samples if s.name == "rebalance_group_members"}


def wait_until(predicate: Callable[[], T], timeout: float, what: str, *,
               interval: float = 0.1, details: Callable[[], str] | None = None,
               error: type[Exception] = AssertionError,
               pause: Callable[[float], object] | None = None) -> T:
    """predicate()'s first truthy value, asked at once and then every `interval` seconds (or,
    given `pause`, after each pause(seconds left): a condition's wait, woken by a change).
    After `timeout` seconds, `error` with "not within {timeout} s: {what}", then what details()
    gives (if anything) on the next lines. A predicate fails at once by raising (a process that ended)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            shown = details() if details is not None else ""
            raise error(f"not within {timeout} s: {what}" + (f"\n{shown}" if shown else ""))
        if pause is None:
            time.sleep(interval)
        else:
            pause(remaining)


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0, *,
               until: Callable[[list[tuple]], object] | None = None) -> list[tuple]:
    """Every record of a topic from its start, as (key, value, headers tuple), by a reader of
    its own (a fresh group id, nothing committed).

    Without `until`: read until each partition has reported its end and one more poll brings
    nothing. With it: read (in batches of up to 1,000) until until(records) holds, waiting for
    records still to be written. AssertionError after timeout seconds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[tuple] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if until is None:
                message = consumer.poll(0.5)
                if message is None and at_end >= set(partitions):
                    return records
                messages = [] if message is None else [message]
            else:
                messages = consumer.consume(1000, 0.2)
            for message in messages:
                if message.error() is None:
                    records.append((message.key(), message.value(),
                                    tuple(message.headers() or ())))
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                else:
                    raise AssertionError(f"reading {topic}: {message.error()}")
            if until is not None and until(records):
                return records
        if until is None:
            raise AssertionError(f"{topic}: partitions {set(partitions) - at_end} never reached "
                                 f"their end")
        raise AssertionError(f"{topic}: not within {timeout} s ({len(records)} records read)")
    finally:
        consumer.close()


def read_values(bootstrap: str, topic: str, until: Callable[[list[bytes]], object],
                timeout: float = 30.0) -> list[bytes]:
    """A topic's record values from the start, read until `until(values)` holds: read_topic's
    records, their values only."""
    records = read_topic(bootstrap, topic, timeout,
                         until=lambda records: until([value for _, value, _ in records]))
    return [value for _, value, _ in records]
