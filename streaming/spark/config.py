"""The job's one frozen configuration: parsed and validated once, passed down, never global.

Each option is declared once, as a `JobConfig` field made by `option(...)`
(streaming/common/options.py, the one mechanism every command's options use): its default, its
help line and the function that turns text into its value (and refuses bad text). From that
declaration come the `rebalance-monitor run` flag, its environment default
`REBALANCE_MONITOR_<FLAG>` (so the same image runs under spark-submit, docker compose or a
terminal), the `--help` line and the parse. A flag given on the command line wins over its
environment variable.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

from streaming.common import option_values as values
from streaming.common.kafka_options import KafkaClientOptions, parse_kafka_options
from streaming.common.options import OptionError, option
from streaming.core.step import StepConfig
from streaming.core.switches import exact_by_default, parse_bool
from streaming.spark.source import SOURCES

# Per-option parsers (streaming.common.option_values, and these). Each one is the only check of its
# values, from a flag or a variable.

_positive = values.positive
_not_empty = values.not_empty
_one_of = values.one_of


def _positive_or_auto(text: str) -> int | None:
    if str(text).strip().lower() == "auto":
        return None
    try:
        return _positive(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number or auto, got {text!r}") from None


def _on_off(text: str) -> bool:
    return parse_bool(text, "the value", default=False)


KAFKA, DETECTION, STATE, METRICS, SPARK = (
    "Kafka", "detection", "state", "metrics and outputs", "Spark")


@dataclass(frozen=True)
class JobConfig:
    bootstrap_servers: str = option(
        "Kafka bootstrap servers of the events topic, e.g. HOST:9092,HOST2:9092",
        values.host_ports(), required=True, metavar="HOST:PORT[,...]", group=KAFKA)
    topic: str = option("the events topic", _not_empty, default="rebalance.events",
                        metavar="TOPIC", group=KAFKA)
    source: str = option(
        "kafka: Spark's built-in connector; embedded: the Python reader; auto: built-in if "
        "present", _one_of(*SOURCES), default="auto", metavar="{auto,kafka,embedded}",
        group=KAFKA)
    starting_offsets: str = option(
        "where a new checkpoint starts reading the topic", _one_of("earliest", "latest"),
        default="earliest", metavar="{earliest,latest}", group=KAFKA)
    # A bounded batch after downtime, in time and in the Python worker's memory. Each batch of a
    # catch-up costs every group with events a visit (its rows, its state, its blob decoded
    # where the other worker wrote it): in one series at 10,000 groups a restart caught up 1.5
    # times as fast with 2,000,000 as with 500,000 and a world start 1.3 times; 4,000,000
    # gained 4 % more for batches twice as long. One cap's runs spread by 1.5 times on that
    # machine; with the caps alternated, 2,000,000 took 0.67 and 0.84 of the time of 500,000
    # (docs/benchmarks.md, "The catch-up's batch cap").
    max_offsets_per_trigger: int | None = option(
        "events per micro-batch at most, which bounds a catch-up batch", _positive,
        default=2_000_000, metavar="N", group=KAFKA)
    fail_on_data_loss: bool = option(
        "stop when offsets the query needs are gone", _on_off, default=True,
        metavar="ON|OFF", shown_default="on", group=KAFKA)
    kafka_options: KafkaClientOptions = option(
        "Kafka client setting, librdkafka's name, e.g. security.protocol=SASL_SSL; Spark's "
        "Java reader gets it translated (docs/deploy.md); repeatable, and the variable holds "
        "one KEY=VALUE a line (flags come after it)",
        values.key_value, default=KafkaClientOptions(), flag="kafka-option", repeated=True,
        combine=parse_kafka_options, metavar="KEY=VALUE", shown_default="none", group=KAFKA)
    findings_topic: str = option(
        "topic the findings that start or end are written to", _not_empty,
        default="rebalance.findings", metavar="TOPIC", group=KAFKA)
    dead_letter_topic: str = option(
        "topic invalid events are written to, with their reason", _not_empty,
        default="rebalance.events.dlq", metavar="TOPIC", group=KAFKA)
    watermark_delay_ms: int = option(
        "how far the watermark (which drives session expiry in event time) trails the "
        "newest record", values.non_negative, default=30_000, metavar="MS", group=DETECTION)
    session_timeout_ms: int = option(
        "a RocketMQ member without heartbeat for this long (event time) is gone",
        _positive, default=120_000, metavar="MS", group=DETECTION)
    kafka_session_timeout_ms: int = option(
        "a Kafka member without heartbeat for this long (event time) is gone", _positive,
        default=45_000, metavar="MS", group=DETECTION)
    reorder_window_ms: int = option(
        "events this far behind a group's newest event are put back in order exactly (the "
        "window's edge moves in steps of this size); events behind it merge with the newest "
        "fact winning", values.non_negative, default=10_000, metavar="MS", group=DETECTION)
    instant_ms: int = option(
        "a group's events within one instant (event time in steps of this size) are applied "
        "together and its allocation is re-run once: a join wave of N members spread over "
        "an instant costs one re-run, not N; a conflict shorter than an instant may not show",
        _positive, default=1, metavar="MS", group=DETECTION)
    max_event_bytes: int = option(
        "events larger than this go to the dead-letter topic as oversized", _positive,
        default=1 << 20, metavar="BYTES", group=DETECTION)
    cluster_silence_ms: int = option(
        "a cluster (as the events name it) whose producers write nothing for this long of "
        "the job's event time is silent: its groups are kept as they were and marked stale; "
        "keep it above the producers' interval and below the session timeouts",
        _positive, default=30_000, metavar="MS", group=DETECTION)
    cluster_forget_ms: int = option(
        "a cluster silent this long is retired: its groups take the state the core gives them "
        "(expired) and it is no longer shown", _positive, default=86_400_000, metavar="MS",
        group=DETECTION)
    max_clock_skew_ms: int = option(
        "events stamped further ahead of their Kafka timestamp go to the dead-letter topic as "
        "future_timestamp (a producer's clock is wrong); they never move the watermark",
        values.non_negative, default=300_000, metavar="MS", group=DETECTION)
    exact: bool = option(
        "take no shortcut: every group steps through the full definition at every batch "
        "(no kept refreshes, no cached parse or render, one group per state shard); the "
        "published findings and metrics are the same, at a higher cost: for checking",
        _on_off, default_factory=exact_by_default, metavar="ON|OFF", shown_default="off",
        group=DETECTION)
    checkpoint: str = option(
        "checkpoint directory (offsets, group state, the job's counters); keep it on durable "
        "storage", _not_empty, default="./checkpoints/rebalance-monitor", metavar="PATH",
        group=STATE)
    shuffle_partitions: int | None = option(
        "state partitions (tasks of the stateful stage), fixed when the checkpoint is "
        "created; auto: Spark's default parallelism (total cores)", _positive_or_auto,
        default=None, metavar="N|auto", shown_default="auto", group=STATE)
    state_shards: int | None = option(
        "groups are kept in this many shards of state (Spark's per-key cost is paid per shard "
        "and batch), fixed when the checkpoint is created; auto: the checkpoint's, 128 for a "
        "new one", _positive_or_auto, default=None, metavar="N|auto", shown_default="auto",
        group=STATE)
    state_store: str = option("state store provider", _one_of("rocksdb", "hdfs"),
                              default="rocksdb", metavar="{rocksdb,hdfs}", group=STATE)
    metrics_host: str = option("address the /metrics endpoint listens on", _not_empty,
                               default="0.0.0.0", metavar="HOST", group=METRICS)
    metrics_port: int = option("port of the /metrics endpoint (0: any free port)", values.port,
                               default=9108, metavar="PORT", group=METRICS)
    client_metrics: bool = option("export rebalance_client_queues per client", _on_off,
                                  default=True, metavar="ON|OFF", shown_default="on",
                                  group=METRICS)
    max_client_series: int = option("cap on rebalance_client_queues series per group",
                                    values.non_negative, default=500, metavar="N",
                                    group=METRICS)
    dashboard_base_url: str | None = option(
        "where operators reach Grafana, e.g. https://grafana.example.com: each group page links "
        "its group dashboard there", values.absolute_url, default=None, metavar="URL",
        shown_default="no link", group=METRICS)
    runbook_base_url: str | None = option(
        "where operators read docs/metrics.md, e.g. "
        "https://wiki.example.com/rebalance/metrics.md: each finding on a group page links its "
        "runbook section there", values.absolute_url, default=None, metavar="URL",
        shown_default="no link", group=METRICS)
    trigger_interval_ms: int = option(
        "time between micro-batches (Spark's processing-time trigger); keep it at or above "
        "the batch duration", _positive, default=2_000, metavar="MS", group=SPARK)
    master: str | None = option("Spark master", _not_empty, default=None, metavar="URL",
                                shown_default="spark-submit's, else local[*]", group=SPARK)

    def step_config(self) -> StepConfig:
        """The core's settings: the JobConfig fields of the same names."""
        return StepConfig(**{name: getattr(self, name) for name in _field_names(StepConfig)})

    def producer_options(self) -> dict[str, str]:
        """confluent-kafka settings for the findings and dead-letter producer."""
        return {"bootstrap.servers": self.bootstrap_servers,
                **self.kafka_options.for_librdkafka()}

    def check_options(self) -> None:
        """What no one option's parser can see. The Java client's form of --kafka-option is
        built here, so an option it cannot take (or a certificate it cannot read) stops the
        start."""
        if self.source != "embedded":
            try:
                self.kafka_options.for_java()
            except ValueError as error:
                raise OptionError(f"--kafka-option: {error}") from None
        shortest = min(self.session_timeout_ms, self.kafka_session_timeout_ms)
        if self.cluster_silence_ms > shortest:
            raise OptionError(
                f"--cluster-silence-ms {self.cluster_silence_ms} must not exceed the session "
                f"timeouts ({shortest} ms; --session-timeout-ms, --kafka-session-timeout-ms): "
                "a silent cluster's members would expire first")
        if self.exact and self.state_shards is not None:
            raise OptionError("--exact keeps one group per state shard: leave --state-shards "
                              "unset")


def _field_names(cls) -> list[str]:
    return [each.name for each in fields(cls)]
