"""The job's one frozen configuration: parsed and validated once, passed down, never global.

Every flag has an environment-variable default (REBALANCE_MONITOR_<FLAG>), so the same image
runs under spark-submit, docker compose or a terminal.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from streaming.core.step import StepConfig


@dataclass(frozen=True)
class JobConfig:
    bootstrap_servers: str
    topic: str = "rebalance.events"
    checkpoint: str = "./checkpoints/rebalance-monitor"
    source: str = "auto"  # auto | kafka | embedded
    starting_offsets: str = "earliest"
    # A bounded batch after downtime: 500,000 caught up fastest on 2 cores (docs/benchmarks.md)
    # and keeps one batch's events per group within the Python worker's memory.
    max_offsets_per_trigger: int | None = 500_000
    fail_on_data_loss: bool = True
    kafka_options: dict[str, str] = field(default_factory=dict)
    findings_topic: str = "rebalance.findings"
    dead_letter_topic: str = "rebalance.events.dlq"
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 9108
    trigger_interval: str = "2 seconds"
    watermark_delay: str = "30 seconds"
    session_timeout_ms: int = 120_000
    kafka_session_timeout_ms: int = 45_000
    reorder_window_ms: int = 10_000
    client_metrics: bool = True
    max_client_series: int = 500
    shuffle_partitions: int | None = None   # None: the cores Spark has when the job starts
    state_store: str = "rocksdb"  # rocksdb | hdfs
    max_event_bytes: int = 1 << 20

    def step_config(self) -> StepConfig:
        return StepConfig(session_timeout_ms=self.session_timeout_ms,
                          kafka_session_timeout_ms=self.kafka_session_timeout_ms,
                          reorder_window_ms=self.reorder_window_ms)

    def producer_options(self) -> dict[str, str]:
        """confluent-kafka settings for the findings and dead-letter producer."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.kafka_options}


def _env(name: str, default):
    return os.environ.get("REBALANCE_MONITOR_" + name.upper().replace("-", "_"), default)


def _bool(text: str) -> bool:
    lowered = str(text).lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected on/off, got {text!r}")


def _kafka_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.removeprefix("kafka."), value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--bootstrap-servers", default=_env("bootstrap-servers", None),
        help="Kafka bootstrap servers of the events topic (env REBALANCE_MONITOR_BOOTSTRAP_SERVERS)")
    add("--topic", default=_env("topic", JobConfig.topic))
    add("--checkpoint", default=_env("checkpoint", JobConfig.checkpoint))
    add("--source", choices=["auto", "kafka", "embedded"], default=_env("source", "auto"),
        help="kafka: Spark's built-in connector; embedded: the Python reader; auto: built-in if present")
    add("--starting-offsets", choices=["earliest", "latest"],
        default=_env("starting-offsets", "earliest"))
    add("--max-offsets-per-trigger", type=int,
        default=_env("max-offsets-per-trigger", JobConfig.max_offsets_per_trigger),
        help="events per micro-batch at most (bounds a catch-up batch)")
    add("--fail-on-data-loss", type=_bool, default=_bool(_env("fail-on-data-loss", "true")))
    add("--kafka-option", type=_kafka_option, action="append", default=[], metavar="KEY=VALUE",
        help="client setting passed to every Kafka client, e.g. security.protocol=SASL_SSL")
    add("--findings-topic", default=_env("findings-topic", JobConfig.findings_topic))
    add("--dead-letter-topic", default=_env("dead-letter-topic", JobConfig.dead_letter_topic))
    add("--metrics-host", default=_env("metrics-host", JobConfig.metrics_host))
    add("--metrics-port", type=int, default=int(_env("metrics-port", JobConfig.metrics_port)))
    add("--trigger-interval", default=_env("trigger-interval", JobConfig.trigger_interval))
    add("--watermark-delay", default=_env("watermark-delay", JobConfig.watermark_delay))
    add("--session-timeout-ms", type=int,
        default=int(_env("session-timeout-ms", JobConfig.session_timeout_ms)))
    add("--kafka-session-timeout-ms", type=int,
        default=int(_env("kafka-session-timeout-ms", JobConfig.kafka_session_timeout_ms)))
    add("--reorder-window-ms", type=int,
        default=int(_env("reorder-window-ms", JobConfig.reorder_window_ms)),
        help="events this far behind a group's newest event are put back in order exactly "
             "(the window's edge moves in steps of this size); events behind it merge with "
             "the newest fact winning")
    add("--client-metrics", type=_bool, default=_bool(_env("client-metrics", "on")),
        help="export rebalance_client_queues per client (on/off)")
    add("--max-client-series", type=int,
        default=int(_env("max-client-series", JobConfig.max_client_series)),
        help="cap on rebalance_client_queues series per group")
    add("--shuffle-partitions", type=_positive_or_auto, default=_env("shuffle-partitions", None),
        help="state partitions (tasks of the stateful stage); default: Spark's default "
             "parallelism (total cores) when the checkpoint is created")
    add("--state-store", choices=["rocksdb", "hdfs"], default=_env("state-store", "rocksdb"))


def _positive_or_auto(text) -> int | None:
    if text is None or str(text).lower() == "auto":
        return None
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive number or auto")
    return value


def config_from_args(args: argparse.Namespace) -> JobConfig:
    if not args.bootstrap_servers:
        raise SystemExit("--bootstrap-servers (or REBALANCE_MONITOR_BOOTSTRAP_SERVERS) is required")
    if args.max_offsets_per_trigger is not None and int(args.max_offsets_per_trigger) <= 0:
        raise SystemExit("--max-offsets-per-trigger must be positive")
    return JobConfig(
        bootstrap_servers=args.bootstrap_servers, topic=args.topic, checkpoint=args.checkpoint,
        source=args.source, starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=(int(args.max_offsets_per_trigger)
                                 if args.max_offsets_per_trigger is not None else None),
        fail_on_data_loss=args.fail_on_data_loss, kafka_options=dict(args.kafka_option),
        findings_topic=args.findings_topic, dead_letter_topic=args.dead_letter_topic,
        metrics_host=args.metrics_host, metrics_port=args.metrics_port,
        trigger_interval=args.trigger_interval, watermark_delay=args.watermark_delay,
        session_timeout_ms=args.session_timeout_ms,
        kafka_session_timeout_ms=args.kafka_session_timeout_ms,
        reorder_window_ms=args.reorder_window_ms, client_metrics=args.client_metrics,
        max_client_series=args.max_client_series, shuffle_partitions=args.shuffle_partitions,
        state_store=args.state_store,
    )
