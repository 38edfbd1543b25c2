"""Producing to Kafka without ever stopping the caller: every record is delivered, retried, or
counted as undelivered with its cause, and each change of a topic's delivery state is logged once.

    stats = DeliveryStats()
    outbox = Outbox(Producer({...}), stats, RetryPolicy(attempts=5))
    outbox.start()                                   # serves delivery reports in the background
    sent = outbox.send(Record("rebalance.findings", value, key))
    outbox.wait([sent], timeout_s=30)                # bounded: a broker outage does not hold it
    stats.snapshot()                                 # counters by (topic, cause) for /metrics
    outbox.close(timeout_s=10)

Used by the job's findings and dead-letter sink and by the long-running producer commands.
Nothing here raises out of `send`: a record the client refuses at once (too large, queue full,
unknown topic) takes the same path as one the broker refuses later.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from confluent_kafka import KafkaError, KafkaException

from streaming.common.client_errors import ClientErrors
from streaming.common.faults import StateLog, cause_of

log = logging.getLogger(__name__)

ORIGINAL_BYTES_HEADER = "rebalance-monitor-original-bytes"
ORIGINAL_SHA256_HEADER = "rebalance-monitor-original-sha256"
TRUNCATED_HEADER = "rebalance-monitor-truncated"
# What a cut record keeps at the least: enough of the original to recognise it.
MIN_CUT_BYTES = 1024
# Room left under message.max.bytes for the key, the headers and the record's own framing.
RECORD_OVERHEAD_BYTES = 4096

# Failures a later attempt can overcome. Everything else (too large, unauthorized, a record the
# broker's validation rejects) fails the same way every time: counted once, not retried.
RETRIABLE = frozenset({
    KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN, KafkaError._QUEUE_FULL, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.NETWORK_EXCEPTION, KafkaError._UNKNOWN_PARTITION,
})
TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


@dataclass(frozen=True)
class Record:
    topic: str
    value: bytes
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    # A record that may be cut to fit a size limit (a dead letter: its bytes are evidence, its
    # original size and digest are kept in headers); others are retried whole or counted.
    cuttable: bool = False
    attempt: int = 1


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per record. Each attempt lasts up to the client's message.timeout.ms, so the
    whole is bounded: attempts x message.timeout.ms."""

    attempts: int = 3

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")


class Delivery:
    """One send's outcome, settled once: delivered, or given up with a cause."""

    def __init__(self) -> None:
        self._settled = threading.Event()
        self.cause: str | None = None

    @property
    def settled(self) -> bool:
        return self._settled.is_set()

    @property
    def delivered(self) -> bool:
        return self.settled and self.cause is None

    def _settle(self, cause: str | None) -> None:
        self.cause = cause
        self._settled.set()


@dataclass(frozen=True)
class DeliveryCounts:
    """What DeliveryStats has counted, at one moment: plain dicts, the caller's to keep."""

    errors: dict[tuple[str, str], int]        # (topic, cause) -> failed attempts
    undelivered: dict[tuple[str, str], int]   # (topic, cause) -> records given up on
    truncated: dict[str, int]                 # topic -> records sent cut to fit
    delivered: dict[str, int]                 # topic -> records the broker acknowledged


@dataclass
class DeliveryStats:
    """Thread-safe counters by (topic, cause), read by a metrics collector."""

    errors: Counter = field(default_factory=Counter)        # every failed attempt
    undelivered: Counter = field(default_factory=Counter)   # given up: the record is lost
    truncated: Counter = field(default_factory=Counter)     # by topic: sent cut to fit
    delivered: Counter = field(default_factory=Counter)     # by topic
    # The producer's client's own errors (its connections): give client.settings() to it.
    client: ClientErrors = field(default_factory=lambda: ClientErrors("Kafka producer"),
                                 repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _states: dict[str, StateLog] = field(default_factory=dict, repr=False)  # by topic

    def count(self, counter: str, key) -> None:
        with self._lock:
            getattr(self, counter)[key] += 1

    def snapshot(self) -> DeliveryCounts:
        with self._lock:
            return DeliveryCounts(dict(self.errors), dict(self.undelivered), dict(self.truncated),
                                  dict(self.delivered))

    def note_state(self, topic: str, cause: str | None) -> None:
        """Log a topic's delivery state when it changes, not on every record."""
        with self._lock:
            state = self._states.setdefault(topic, StateLog(f"delivery to {topic}", log))
        if cause is None:
            state.ok()
        else:
            state.failed(cause)


def cut_to_fit(record: Record, limit: int) -> Record:
    """The record with its value cut to `limit` bytes, the original size and SHA-256 in headers."""
    value = record.value
    headers = dict(record.headers)
    if TRUNCATED_HEADER not in headers:
        headers[ORIGINAL_BYTES_HEADER] = str(len(value)).encode()
        headers[ORIGINAL_SHA256_HEADER] = hashlib.sha256(value).hexdigest().encode()
        headers[TRUNCATED_HEADER] = b"true"
    return replace(record, value=value[:max(limit, MIN_CUT_BYTES)], headers=tuple(headers.items()))


class Outbox:
    """A confluent-kafka Producer behind a send() that never raises.

    A background thread serves delivery reports, so retries and counts go on while the caller
    does other work (or nothing)."""

    def __init__(self, producer, stats: DeliveryStats, retry: RetryPolicy = RetryPolicy(),
                 max_message_bytes: int = 1_000_000, poll_interval_s: float = 0.2) -> None:
        self._producer = producer
        self.stats = stats
        self._retry = retry
        self._max_value_bytes = max(MIN_CUT_BYTES, max_message_bytes - RECORD_OVERHEAD_BYTES)
        self._poll_interval_s = poll_interval_s
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Outbox:
        self._thread = threading.Thread(target=self._serve, name="outbox-delivery", daemon=True)
        self._thread.start()
        return self

    def send(self, record: Record) -> Delivery:
        delivery = Delivery()
        if record.cuttable and len(record.value) > self._max_value_bytes:
            record = self._cut(record, self._max_value_bytes)
        self._produce(record, delivery)
        return delivery

    def wait(self, deliveries: Iterable[Delivery], timeout_s: float) -> int:
        """Serve reports until every delivery is settled or the time is up; returns how many
        are still pending (they stay queued and settle later)."""
        pending = [d for d in deliveries if not d.settled]
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            self._producer.poll(min(0.1, max(0.0, deadline - time.monotonic())))
            pending = [d for d in pending if not d.settled]
        return len(pending)

    def close(self, timeout_s: float = 10.0) -> int:
        """Stop serving in the background, then flush; returns records still undelivered."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        left = self._producer.flush(timeout_s)
        if left:
            log.warning("%d records were still undelivered when the producer closed", left)
        return left

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                self._producer.poll(self._poll_interval_s)
            except Exception:  # noqa: BLE001 - a report handler's bug must not end the thread
                log.exception("serving delivery reports failed; going on")

    def _produce(self, record: Record, delivery: Delivery) -> None:
        try:
            self._producer.produce(
                record.topic, value=record.value, key=record.key, headers=list(record.headers),
                on_delivery=lambda error, _message: self._on_report(record, delivery, error))
        except BufferError:
            self._failed(record, delivery, KafkaError(KafkaError._QUEUE_FULL))
        except KafkaException as exc:
            self._failed(record, delivery, exc.args[0])

    def _on_report(self, record: Record, delivery: Delivery, error: KafkaError | None) -> None:
        if error is None:
            self.stats.count("delivered", record.topic)
            self.stats.note_state(record.topic, None)
            delivery._settle(None)
        else:
            self._failed(record, delivery, error)

    def _failed(self, record: Record, delivery: Delivery, error: KafkaError) -> None:
        cause = cause_of(error)
        self.stats.count("errors", (record.topic, cause))
        self.stats.note_state(record.topic, cause)
        code = error.code()
        if code in TOO_LARGE and record.cuttable and len(record.value) > MIN_CUT_BYTES:
            # The topic's own limit is below the client's: halve until the broker takes it.
            self._produce(self._cut(record, len(record.value) // 2), delivery)
        elif code in RETRIABLE and record.attempt < self._retry.attempts:
            if code == KafkaError._QUEUE_FULL:
                time.sleep(0.05)  # let the client's queue drain a little (no poll: may be in one)
            self._produce(replace(record, attempt=record.attempt + 1), delivery)
        else:
            self.stats.count("undelivered", (record.topic, cause))
            log.debug("record to %s undelivered after %d attempt(s): %s",
                      record.topic, record.attempt, cause)
            delivery._settle(cause)

    def _cut(self, record: Record, limit: int) -> Record:
        self.stats.count("truncated", record.topic)
        return cut_to_fit(record, limit)


def count_unflushed(stats, topic: str, left: int) -> None:
    """Records still in the producer when it closed are lost: count them (cause `unflushed`)
    in a DeliveryStats, so /metrics and the exit code say so."""
    for _ in range(left):
        stats.count("undelivered", (topic, "unflushed"))
    if left:
        log.warning("%d record(s) to %s undelivered when the producer closed", left, topic)
