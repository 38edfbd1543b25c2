"""The job's event stream: Spark's built-in `kafka` format or the embedded Python reader.

    config = SourceConfig(bootstrap_servers="127.0.0.1:9092", topic="rebalance.events",
                          source="auto", starting_offsets="earliest",
                          max_offsets_per_trigger=50_000, fail_on_data_loss=True,
                          kafka_options=KafkaClientOptions((("security.protocol", "SASL_SSL"),)))
    events = read_event_stream(spark, config)   # key, value, topic, partition, offset, timestamp

`source`: "kafka" (needs spark-sql-kafka on the classpath), "embedded" (format
"rebalance_kafka", confluent-kafka on the executors) or "auto" (kafka when its classes load).
`kafka_options` are the checked client settings (streaming/common/kafka_options.py, parsed once
with the command's options); each source receives them as `kafka.<name>` options in its client's
form: the Java client's for the built-in source, librdkafka's for the embedded one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from streaming.common.kafka_options import KafkaClientOptions

log = logging.getLogger(__name__)

SOURCES = ("auto", "kafka", "embedded")
EVENT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
BUILTIN_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


@dataclass(frozen=True)
class SourceConfig:
    bootstrap_servers: str
    topic: str
    source: str = "auto"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    kafka_options: KafkaClientOptions = KafkaClientOptions()

    def __post_init__(self) -> None:
        from streaming.spark.offset_ranges import parse_starting_offsets

        if not self.bootstrap_servers or not self.topic:
            raise ValueError("bootstrap_servers and topic are required")
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        parse_starting_offsets(self.starting_offsets)
        # max_offsets_per_trigger is checked where it is read from text: by its `run` option
        # and, as maxOffsetsPerTrigger, by the reader (parse_positive_int, the same rule).

    def spark_options(self, chosen: str = "kafka") -> dict[str, str]:
        """Reader options of the chosen source ("kafka" or "embedded"): the same but for the
        client settings, which each gets in its own client's names."""
        options = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "subscribe": self.topic,
            "startingOffsets": self.starting_offsets,
            "failOnDataLoss": "true" if self.fail_on_data_loss else "false",
        }
        if self.max_offsets_per_trigger is not None:
            options["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        client = self.kafka_options
        settings = client.for_java() if chosen == "kafka" else client.for_librdkafka()
        options.update({f"kafka.{key}": value for key, value in settings.items()})
        return options


def builtin_kafka_available(spark) -> bool:
    """True when Spark's kafka source classes load in this session's JVM."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: no JVM to ask
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass(BUILTIN_PROVIDER)
        return True
    except Exception:  # noqa: BLE001 - py4j wraps ClassNotFoundException
        try:
            jvm.java.lang.Class.forName(BUILTIN_PROVIDER)
            return True
        except Exception:  # noqa: BLE001
            return False


def resolve_source(spark, config: SourceConfig) -> str:
    if config.source != "auto":
        return config.source
    chosen = "kafka" if builtin_kafka_available(spark) else "embedded"
    log.info("source auto: using %s", chosen)
    return chosen


def read_event_stream(spark, config: SourceConfig):
    """Streaming DataFrame of the topic's records with exactly EVENT_COLUMNS."""
    chosen = resolve_source(spark, config)
    if chosen == "embedded":
        from streaming.spark.source_embedded import SOURCE_NAME, register

        register(spark)
        data_format = SOURCE_NAME
    else:
        if config.source == "kafka" and not builtin_kafka_available(spark):
            raise ValueError(
                "Spark's kafka source is not on the classpath: add the spark-sql-kafka-0-10 "
                "package (spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:"
                "<spark version>) or use --source embedded"
            )
        data_format = "kafka"
    reader = spark.readStream.format(data_format)
    for key, value in config.spark_options(chosen).items():
        reader = reader.option(key, value)
    return reader.load().select(*EVENT_COLUMNS)


def describe(config: SourceConfig) -> str:
    """One line for logs, without secrets."""
    return json.dumps({
        "source": config.source, "bootstrap": config.bootstrap_servers, "topic": config.topic,
        "startingOffsets": config.starting_offsets, "kafka": config.kafka_options.redacted(),
    })
