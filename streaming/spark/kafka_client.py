"""confluent-kafka side of the embedded reader: client settings, true end offsets, range reads.

No Spark here, so it runs (and is tested) the same on the driver and on executors.

Why `true_ends` reads the tail: the embedded broker (tansu) reports as high watermark the base
offset of the last record batch + 1, not the end of the log. A reader that trusts it never
sees the rest of the last batch. Reading from (reported watermark - 1) finds the real end on
tansu (the first fetch from there returns the whole tail batch), and costs one record on a real
Kafka broker, where it returns the watermark itself.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streaming.common.faults import Backoff, StateLog, cause_of, error_cause
from streaming.spark.offset_ranges import DataLossError, OffsetRange, TopicPartitionKey

log = logging.getLogger(__name__)

# Settings the reader owns: it assigns partitions itself and never commits.
MANAGED_SETTINGS = frozenset({
    "group.id", "enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset",
    "enable.partition.eof", "key.deserializer", "value.deserializer", "bootstrap.servers",
})


def client_settings(bootstrap_servers: str, kafka_options: Mapping[str, str]) -> dict:
    """librdkafka settings from Spark-style `kafka.*` options (prefix already removed), which
    are librdkafka's already (streaming/common/kafka_options.py translated them).

    >>> client_settings("b:9092", {"security.protocol": "SASL_SSL", "sasl.username": "u"})
    {'bootstrap.servers': 'b:9092', 'security.protocol': 'SASL_SSL', 'sasl.username': 'u'}
    """
    settings = {"bootstrap.servers": bootstrap_servers}
    for key, value in kafka_options.items():
        if key in MANAGED_SETTINGS:
            raise ValueError(f"kafka.{key} is managed by the reader and cannot be set")
        settings[key] = str(value)
    return settings


def broker_outage(what: str) -> StateLog:
    """The log of one read's broker connection: once when it fails (with the cause), once when
    it answers again, not once per retry."""
    return StateLog(f"{what}: events broker", log)


def until_answered(call, outage: StateLog, max_backoff_s: float = 30.0):
    """call() until it returns without a client error, backing off from 1 s to max_backoff_s.
    For requests whose answer the caller cannot do without (an outage only delays it)."""
    backoff = Backoff(max_s=max_backoff_s)
    while True:
        try:
            result = call()
        except KafkaException as exc:
            outage.failed(error_cause(exc), exc)
            time.sleep(backoff.next())
            continue
        outage.ok()
        return result


def new_consumer(settings: Mapping[str, str]) -> Consumer:
    config = {
        "log_level": 0,   # the read logs its broker's state once per change (broker_outage)
        "isolation.level": "read_uncommitted",  # as Spark's kafka source: offsets are dense
        "fetch.wait.max.ms": 50,
        **settings,
        "group.id": f"rebalance-monitor-reader-{uuid.uuid4().hex}",  # never joined nor committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    }
    return Consumer(config)


def partition_counts(consumer: Consumer, topics, timeout_s: float) -> dict[str, int]:
    """Partitions per topic; a topic that does not exist (yet) has 0."""
    counts = {}
    for topic in topics:
        metadata = consumer.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
        ok = metadata is not None and metadata.error is None
        counts[topic] = len(metadata.partitions) if ok else 0
    return counts


def watermarks(consumer: Consumer, keys, timeout_s: float) -> dict[TopicPartitionKey, tuple]:
    """{key: (low, reported_high)} as the broker reports them."""
    return {
        key: tuple(consumer.get_watermark_offsets(TopicPartition(*key), timeout=timeout_s))
        for key in keys
    }


def true_ends(
    consumer: Consumer,
    marks: Mapping[TopicPartitionKey, tuple[int, int]],
    timeout_s: float = 5.0,
) -> dict[TopicPartitionKey, int]:
    """The real end of each partition: the reported watermark, pushed up to the last record of
    the first fetch from (watermark - 1). Every returned end has all records below it in the log.

    A probe stops at EOF, at its first fetched records (the end is then the last record seen + 1),
    or at the deadline. A fetch returns whole record batches, so the first one already holds the
    tail batch the watermark leaves out; reading on for records that keep arriving would only
    move them from the next batch into this one, and make every trigger wait for it.
    """
    ends = {key: high for key, (low, high) in marks.items()}
    probe_from = {key: high - 1 for key, (low, high) in marks.items() if high > low}
    if not probe_from:
        return ends
    consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in probe_from.items()])
    pending = set(probe_from)
    deadline = time.monotonic() + timeout_s
    try:
        while pending and time.monotonic() < deadline:
            answered = set()
            for message in consumer.consume(num_messages=10_000, timeout=0.01):
                key = (message.topic(), message.partition())
                if key not in pending or message.offset() < probe_from[key]:
                    continue  # left over from an earlier assignment
                error = message.error()
                if error is None:
                    ends[key] = max(ends[key], message.offset() + 1)
                elif error.code() == KafkaError._PARTITION_EOF:
                    ends[key] = max(ends[key], message.offset())
                else:
                    log.warning("end probe of %s: %s", key, error)
                answered.add(key)
            pending -= answered
    finally:
        consumer.unassign()
    if pending:
        log.warning("end probe timed out for %s: using the last offsets seen", sorted(pending))
    return ends


def read_range(
    settings: Mapping[str, str],
    offset_range: OffsetRange,
    *,
    fail_on_data_loss: bool = True,
    timeout_s: float = 60.0,
    batch_size: int = 10_000,
) -> Iterator[list]:
    """Yield lists of confluent-kafka Messages with start <= offset < end, in offset order.

    Raises TimeoutError when the broker returns no record of the range for `timeout_s` (and
    failOnDataLoss is true; otherwise it logs and stops), DataLossError when the range starts
    below the log start (failOnDataLoss false: skip ahead and log).
    """
    with pooled_consumer(settings) as consumer:
        position = _first_offset(consumer, offset_range, fail_on_data_loss, timeout_s)
        yield from _consume_until(
            consumer, offset_range, position, fail_on_data_loss, timeout_s, batch_size
        )


# Idle consumers of this process by settings. Spark reuses a Python worker for task after task
# (one at a time), so each micro-batch's read takes the consumer the previous one left, instead of
# paying for a new client, its connections and its metadata (as Spark's own Kafka source pools).
_IDLE: dict[tuple, list[Consumer]] = {}


@contextlib.contextmanager
def pooled_consumer(settings: Mapping[str, str]) -> Iterator[Consumer]:
    """A consumer for these settings, returned to the pool unassigned when the block completes
    and closed when it fails (or is abandoned), so a broken client is never reused."""
    idle = _IDLE.setdefault(tuple(sorted(settings.items())), [])
    consumer = idle.pop() if idle else new_consumer(settings)
    try:
        yield consumer
        consumer.unassign()
    except BaseException:
        consumer.close()
        raise
    idle.append(consumer)


def _first_offset(consumer, offset_range: OffsetRange, fail_on_data_loss, timeout_s) -> int:
    key = TopicPartition(offset_range.topic, offset_range.partition)
    outage = broker_outage(f"{offset_range.topic}[{offset_range.partition}]")
    low, _ = until_answered(lambda: consumer.get_watermark_offsets(key, timeout=timeout_s), outage)
    if offset_range.start >= low or offset_range.new_partition:
        return max(offset_range.start, low)
    message = (
        f"{offset_range.topic}[{offset_range.partition}]: offsets {offset_range.start}.."
        f"{min(low, offset_range.end) - 1} are gone (log starts at {low})"
    )
    if fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them")
    log.warning("%s: skipping them (failOnDataLoss=false)", message)
    return low


def _consume_until(consumer, offset_range, position, fail_on_data_loss, timeout_s, batch_size):
    topic, partition, end = offset_range.topic, offset_range.partition, offset_range.end
    if position >= end:
        return
    consumer.assign([TopicPartition(topic, partition, position)])
    outage = broker_outage(f"{topic}[{partition}]")
    deadline = time.monotonic() + timeout_s
    while position < end:
        chunk = []
        wanted = min(batch_size, end - position)  # consume() returns once it has them
        for message in consumer.consume(num_messages=wanted, timeout=0.5):
            error, offset = message.error(), message.offset()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if offset >= end:  # nothing left below end: a gap (compaction, markers)
                        position = end
                    continue
                if error.fatal() or error.code() == KafkaError._AUTO_OFFSET_RESET:
                    raise DataLossError(f"{topic}[{partition}] at {position}: {error}")
                outage.failed(cause_of(error))  # the client retries by itself
                continue
            if offset < position:
                continue
            if offset >= end:
                position = end
                break
            chunk.append(message)
            position = offset + 1
        if chunk:
            outage.ok()
            deadline = time.monotonic() + timeout_s
            yield chunk
        elif position < end and time.monotonic() > deadline and not _answers(consumer, topic,
                                                                             partition, outage):
            deadline = time.monotonic() + timeout_s  # an outage: the records are still there
        elif position < end and time.monotonic() > deadline:
            text = (
                f"{topic}[{partition}]: the broker returned no record at offset {position} "
                f"within {timeout_s}s, range end {end}"
            )
            if fail_on_data_loss:
                raise TimeoutError(text)
            log.warning("%s: skipping the rest of the range (failOnDataLoss=false)", text)
            return


def _answers(consumer, topic: str, partition: int, outage: StateLog) -> bool:
    """Whether the broker answers for the partition now (a silent read is then no outage)."""
    try:
        consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5.0)
    except KafkaException as exc:
        outage.failed(error_cause(exc))
        return False
    return True
