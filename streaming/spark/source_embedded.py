"""A Kafka streaming source on Spark's Python Data Source API, reading with confluent-kafka.

For machines where Spark's spark-sql-kafka connector is not on the classpath. Each micro-batch
reads, per partition, a range of offsets [start, end); Spark checkpoints the offsets, so a
restart replays a batch exactly. Same columns as Spark's built-in `kafka` format.

    register(spark)
    events = (spark.readStream.format("rebalance_kafka")
              .option("kafka.bootstrap.servers", "127.0.0.1:9092")
              .option("subscribe", "rebalance.events")
              .option("startingOffsets", "earliest")        # or latest, or Spark's JSON form
              .option("maxOffsetsPerTrigger", 10000)         # split fairly over partitions
              .option("failOnDataLoss", "true")
              .option("kafka.security.protocol", "SASL_SSL")  # kafka.* go to the client
              .load())

Offsets in the checkpoint: {"rebalance.events": {"0": 120, "1": 97}} (next offset to read).
The end of a batch is the TRUE end of each partition (see kafka_client.true_ends), so the tail
record batch of the embedded broker is read. Supports Trigger.AvailableNow.

On a cluster the executors import this module: ship the package with --py-files (a zip of
`streaming/`) or install it on every node, with confluent-kafka and pyarrow.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaException
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streaming.common.faults import error_cause
from streaming.core.switches import parse_bool
from streaming.spark import kafka_client
from streaming.spark.offset_ranges import (
    EARLIEST,
    LATEST,
    SPARK_EARLIEST,
    SPARK_LATEST,
    DataLossError,
    OffsetRange,
    Positions,
    behind,
    from_offsets,
    limit_ends,
    parse_positive_int,
    parse_starting_offsets,
    plan_ranges,
    to_offsets,
    topics_of,
)

log = logging.getLogger(__name__)

SOURCE_NAME = "rebalance_kafka"
# Spark's built-in kafka source schema (without headers), names and types exactly.
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
ARROW_SCHEMA = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
# librdkafka timestamp types -> Java's TimestampType ids, as Spark reports them.
TIMESTAMP_TYPES = {1: 0, 2: 1}  # CREATE_TIME, LOG_APPEND_TIME; otherwise -1


@dataclass(frozen=True)
class ReaderOptions:
    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: str | Positions = EARLIEST
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    kafka_options: tuple[tuple[str, str], ...] = ()
    poll_timeout_s: float = 60.0
    metadata_timeout_s: float = 10.0

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ReaderOptions:
        """Validate Spark reader options (keys are case-insensitive). No I/O."""
        options = {key.lower(): value for key, value in options.items()}
        bootstrap = options.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ValueError("option 'kafka.bootstrap.servers' is required")
        kafka_options = tuple(sorted(
            (key[len("kafka."):], str(value)) for key, value in options.items()
            if key.startswith("kafka.") and key != "kafka.bootstrap.servers"
        ))
        reader_options = cls(
            bootstrap_servers=bootstrap,
            topics=topics_of(options.get("subscribe")),
            starting_offsets=parse_starting_offsets(options.get("startingoffsets")),
            max_offsets_per_trigger=parse_positive_int(
                options.get("maxoffsetspertrigger"), "maxOffsetsPerTrigger"
            ),
            fail_on_data_loss=parse_bool(options.get("failondataloss"), "failOnDataLoss", True),
            kafka_options=kafka_options,
            poll_timeout_s=parse_positive_int(
                options.get("kafkaconsumer.polltimeoutms", "60000"), "kafkaConsumer.pollTimeoutMs"
            ) / 1000.0,
        )
        reader_options.settings()  # validates the kafka.* pass-through
        return reader_options

    def settings(self) -> dict:
        return kafka_client.client_settings(self.bootstrap_servers, dict(self.kafka_options))


class KafkaRangePartition(InputPartition):
    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


class EmbeddedKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets {topic: {partition: next_offset}}; one Spark partition per Kafka partition."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options  # kept cheap: executors unpickle a copy for every read()
        self._consumer = None
        self._target: Positions | None = None
        self._last_latest: Positions | None = None
        self._outage = kafka_client.broker_outage(f"events topic {','.join(options.topics)}")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_consumer": None}

    def _driver_consumer(self):
        if self._consumer is None:
            self._consumer = kafka_client.new_consumer(self.options.settings())
        return self._consumer

    def _latest_and_earliest(self) -> tuple[Positions, Positions]:
        """Waits out a broker outage (logged once): the offsets are needed to go on."""
        return kafka_client.until_answered(self._ask_latest_and_earliest, self._outage)

    def _try_latest_and_earliest(self) -> tuple[Positions, Positions] | None:
        """One attempt; None while the broker does not answer (logged once per outage)."""
        try:
            answer = self._ask_latest_and_earliest()
        except KafkaException as exc:
            self._outage.failed(error_cause(exc), exc)
            return None
        self._outage.ok()
        return answer

    def _ask_latest_and_earliest(self) -> tuple[Positions, Positions]:
        consumer, timeout = self._driver_consumer(), self.options.metadata_timeout_s
        counts = kafka_client.partition_counts(consumer, self.options.topics, timeout)
        keys = [(topic, p) for topic in self.options.topics for p in range(counts[topic])]
        marks = kafka_client.watermarks(consumer, keys, timeout)
        latest = kafka_client.true_ends(consumer, marks, timeout_s=min(timeout, 5.0))
        self._last_latest = latest
        return latest, {key: low for key, (low, _high) in marks.items()}

    def initialOffset(self) -> dict:
        latest, earliest = self._latest_and_earliest()
        start = self.options.starting_offsets
        if start == EARLIEST:
            return to_offsets(earliest)
        if start == LATEST:
            return to_offsets(latest)
        resolved = {**earliest}
        for key, offset in start.items():
            named = {SPARK_EARLIEST: earliest.get(key, 0), SPARK_LATEST: latest.get(key, 0)}
            resolved[key] = named.get(offset, offset)
        return to_offsets(resolved)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target, _ = self._latest_and_earliest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_offsets(start)
        answer = self._try_latest_and_earliest()
        if answer is None:
            # The broker does not answer: no new data this trigger (the query waits, it does not
            # fail), and the next trigger asks again from the same offsets.
            return start
        latest, earliest = answer
        if self._target is not None:  # Trigger.AvailableNow: nothing beyond the target
            latest = {key: min(end, self._target.get(key, begin.get(key, earliest[key])))
                      for key, end in latest.items()}
        lagging = behind(begin, latest)
        if lagging and self.options.fail_on_data_loss:
            raise DataLossError(
                f"partitions went back (key, checkpointed, now): {lagging}; "
                "set failOnDataLoss=false to read them from their current end"
            )
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if not isinstance(limit, (ReadAllAvailable, ReadMaxRows)):
            log.warning("read limit %r is not supported: reading all available", limit)
        ends = limit_ends(begin, latest, earliest, max_rows)
        for key, _checkpointed, now in lagging:
            log.warning("%s went back to %d: continuing from there", key, now)
            ends[key] = now
        return to_offsets(ends)

    def reportLatestOffset(self) -> dict | None:
        return None if self._last_latest is None else to_offsets(self._last_latest)

    def partitions(self, start: dict, end: dict) -> list[KafkaRangePartition]:
        ranges = plan_ranges(from_offsets(start), from_offsets(end))
        return [KafkaRangePartition(offset_range) for offset_range in ranges]

    def read(self, partition: KafkaRangePartition) -> Iterator[pa.RecordBatch]:
        chunks = kafka_client.read_range(
            self.options.settings(), partition.offset_range,
            fail_on_data_loss=self.options.fail_on_data_loss,
            timeout_s=self.options.poll_timeout_s,
        )
        for messages in chunks:
            yield messages_to_batch(messages)

    def commit(self, end: dict) -> None:
        """Nothing to do: the reader keeps no broker-side state (no consumer group)."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def messages_to_batch(messages) -> pa.RecordBatch:
    """One Arrow batch of Spark's kafka columns from messages of one partition."""
    keys, values, offsets, micros, kinds = [], [], [], [], []
    for message in messages:
        keys.append(message.key())
        values.append(message.value())
        offsets.append(message.offset())
        kind, millis = message.timestamp()
        micros.append(millis * 1000)
        kinds.append(TIMESTAMP_TYPES.get(kind, -1))
    first = messages[0]
    columns = [keys, values, [first.topic()] * len(messages),
               [first.partition()] * len(messages), offsets, micros, kinds]
    return pa.RecordBatch.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(columns, ARROW_SCHEMA, strict=True)],
        schema=ARROW_SCHEMA,
    )


class RebalanceKafkaDataSource(DataSource):
    """spark.readStream.format("rebalance_kafka"): see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> EmbeddedKafkaStreamReader:
        return EmbeddedKafkaStreamReader(ReaderOptions.from_options(self.options))


def register(spark) -> None:
    """Make format("rebalance_kafka") available in this SparkSession (idempotent)."""
    expose_py_files_to_driver_planner(spark)
    spark.dataSource.register(RebalanceKafkaDataSource)


def expose_py_files_to_driver_planner(spark) -> None:
    """Spark 4 plans a Python streaming source in a helper process on the driver, which looks
    for --py-files under SparkFiles/<root>/streaming_job/, where they are not; executors are
    fine. Adding the shipped files to the Python workers' PYTHONPATH makes the planner find
    this module too (tests/integration/test_standalone_cluster.py submits with --py-files only)."""
    import os

    from pyspark import SparkFiles

    context = spark.sparkContext
    shipped = [os.path.join(SparkFiles.getRootDirectory(), name)
               for name in getattr(context, "_python_includes", None) or []]
    current = [p for p in context.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    missing = [p for p in shipped if p not in current]
    if missing:
        context.environment["PYTHONPATH"] = os.pathsep.join(current + missing)
