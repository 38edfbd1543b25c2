"""The job's one frozen configuration: parsed and validated once, passed down, never global.

Each option is declared once, as a `JobConfig` field made by `option(...)`: its default, its
help line and the function that turns text into its value (and refuses bad text). From that
declaration come the `rebalance-monitor run` flag (`--<field-name>` with dashes, or the
declared `flag`), its environment default `REBALANCE_MONITOR_<FLAG>` (so the same image runs
under spark-submit, docker compose or a terminal), the `--help` line and `config_from_args`.
A flag given on the command line wins over its environment variable.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from streaming.common import option_values as values
from streaming.common.kafka_options import KafkaClientOptions, options_or_exit, parse_kafka_options
from streaming.core.step import StepConfig
from streaming.core.switches import exact_by_default, parse_bool
from streaming.spark.source import SOURCES

ENV_PREFIX = "REBALANCE_MONITOR_"


@dataclass(frozen=True)
class Option:
    """What the command line knows about one JobConfig field."""

    help: str
    parse: Callable[[str], Any] = str  # text -> value; raises ValueError/ArgumentTypeError
    metavar: str | None = None
    flag: str | None = None       # default: the field name with dashes
    required: bool = False        # no default: the flag or its variable must be set
    repeated: bool = False        # the flag may be given many times; the variable has one a line
    shown_default: str | None = None  # the default as --help shows it
    # An older flag of this option, still taken (its variable too), with the parser of its own
    # value form; each use says once which flag replaces it.
    legacy: tuple[str, Callable[[str], Any]] | None = None


def option(help: str, parse: Callable[[str], Any] = str, *, default: Any = MISSING,
           default_factory: Any = MISSING, **details: Any) -> Any:
    """A JobConfig field declared together with its command-line option."""
    return field(default=default, default_factory=default_factory,
                 metadata={"option": Option(help=help, parse=parse, **details)})


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


def _kafka_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.removeprefix("kafka."), value


@dataclass(frozen=True)
class JobConfig:
    bootstrap_servers: str = option(
        "Kafka bootstrap servers of the events topic, e.g. HOST:9092,HOST2:9092",
        _not_empty, required=True, metavar="HOST:PORT[,...]")
    topic: str = option("the events topic", _not_empty, default="rebalance.events",
                        metavar="TOPIC")
    checkpoint: str = option(
        "checkpoint directory (offsets, group state, the job's counters); keep it on durable "
        "storage", _not_empty, default="./checkpoints/rebalance-monitor", metavar="PATH")
    source: str = option(
        "kafka: Spark's built-in connector; embedded: the Python reader; auto: built-in if "
        "present", _one_of(*SOURCES), default="auto",
        metavar="{auto,kafka,embedded}")
    starting_offsets: str = option(
        "where a new checkpoint starts reading the topic", _one_of("earliest", "latest"),
        default="earliest", metavar="{earliest,latest}")
    # A bounded batch after downtime: 500,000 caught up fastest on 2 cores (docs/benchmarks.md)
    # and keeps one batch's events per group within the Python worker's memory.
    max_offsets_per_trigger: int | None = option(
        "events per micro-batch at most, which bounds a catch-up batch", _positive,
        default=500_000, metavar="N")
    fail_on_data_loss: bool = option(
        "stop when offsets the query needs are gone", _on_off, default=True,
        metavar="ON|OFF", shown_default="on")
    kafka_options: dict[str, str] = option(
        "Kafka client setting, librdkafka's name, e.g. security.protocol=SASL_SSL; Spark's "
        "Java reader gets it translated (docs/deploy.md); repeatable, and the variable holds "
        "one KEY=VALUE a line (flags come after it)",
        _kafka_option, default_factory=dict, flag="kafka-option", repeated=True,
        metavar="KEY=VALUE", shown_default="none")
    findings_topic: str = option(
        "topic the findings that start or end are written to", _not_empty,
        default="rebalance.findings", metavar="TOPIC")
    dead_letter_topic: str = option(
        "topic invalid events are written to, with their reason", _not_empty,
        default="rebalance.events.dlq", metavar="TOPIC")
    metrics_host: str = option("address the /metrics endpoint listens on", _not_empty,
                               default="0.0.0.0", metavar="HOST")
    metrics_port: int = option("port of the /metrics endpoint (0: any free port)", values.port,
                               default=9108, metavar="PORT")
    trigger_interval_ms: int = option(
        "time between micro-batches (Spark's processing-time trigger); keep it at or above "
        "the batch duration", _positive, default=2_000, metavar="MS",
        legacy=("trigger-interval", values.duration_ms))
    watermark_delay_ms: int = option(
        "how far the watermark (which drives session expiry in event time) trails the "
        "newest record", values.non_negative, default=30_000, metavar="MS",
        legacy=("watermark-delay", values.duration_ms))
    session_timeout_ms: int = option(
        "a RocketMQ member without heartbeat for this long (event time) is gone",
        _positive, default=120_000, metavar="MS")
    kafka_session_timeout_ms: int = option(
        "a Kafka member without heartbeat for this long (event time) is gone", _positive,
        default=45_000, metavar="MS")
    reorder_window_ms: int = option(
        "events this far behind a group's newest event are put back in order exactly (the "
        "window's edge moves in steps of this size); events behind it merge with the newest "
        "fact winning", values.non_negative, default=10_000, metavar="MS")
    client_metrics: bool = option("export rebalance_client_queues per client",
                                  _on_off, default=True, metavar="ON|OFF", shown_default="on")
    max_client_series: int = option("cap on rebalance_client_queues series per group",
                                    values.non_negative, default=500, metavar="N")
    shuffle_partitions: int | None = option(
        "state partitions (tasks of the stateful stage), fixed when the checkpoint is "
        "created; auto: Spark's default parallelism (total cores)", _positive_or_auto,
        default=None, metavar="N|auto", shown_default="auto")
    state_shards: int | None = option(
        "groups are kept in this many shards of state (Spark's per-key cost is paid per shard "
        "and batch), fixed when the checkpoint is created; auto: the checkpoint's, 128 for a "
        "new one", _positive_or_auto, default=None, metavar="N|auto", shown_default="auto")
    state_store: str = option("state store provider", _one_of("rocksdb", "hdfs"),
                              default="rocksdb", metavar="{rocksdb,hdfs}")
    max_event_bytes: int = option(
        "events larger than this go to the dead-letter topic as oversized", _positive,
        default=1 << 20, metavar="BYTES")
    cluster_silence_ms: int = option(
        "a cluster (as the events name it) whose producers write nothing for this long of "
        "the job's event time is silent: its groups are kept as they were and marked stale; "
        "keep it above the producers' interval and below the session timeouts",
        _positive, default=30_000, metavar="MS")
    cluster_forget_ms: int = option(
        "a cluster silent this long is retired: its groups take the state the core gives them "
        "(expired) and it is no longer shown", _positive, default=86_400_000, metavar="MS")
    max_clock_skew_ms: int = option(
        "events stamped further ahead of their Kafka timestamp go to the dead-letter topic as "
        "future_timestamp (a producer's clock is wrong); they never move the watermark",
        values.non_negative, default=300_000, metavar="MS")
    exact: bool = option(
        "take no shortcut: every group steps through the full definition at every batch "
        "(no kept refreshes, no cached parse or render, one group per state shard); the "
        "published findings and metrics are the same, at a higher cost: for checking",
        _on_off, default_factory=exact_by_default, metavar="ON|OFF", shown_default="off")

    def step_config(self) -> StepConfig:
        """The core's settings: the JobConfig fields of the same names."""
        return StepConfig(**{name: getattr(self, name) for name in _field_names(StepConfig)})

    def producer_options(self) -> dict[str, str]:
        """confluent-kafka settings for the findings and dead-letter producer."""
        return {"bootstrap.servers": self.bootstrap_servers,
                **parse_kafka_options(self.kafka_options).for_librdkafka()}


def _field_names(cls) -> list[str]:
    return [each.name for each in fields(cls)]


def options() -> Iterator[tuple[Field, Option]]:
    """Every JobConfig field with its option, in declaration order."""
    for each in fields(JobConfig):
        yield each, each.metadata["option"]


def flag_of(each: Field) -> str:
    return "--" + (each.metadata["option"].flag or each.name.replace("_", "-"))


def env_of(each: Field) -> str:
    return ENV_PREFIX + flag_of(each).removeprefix("--").upper().replace("-", "_")


def default_of(each: Field) -> Any:
    if each.default_factory is not MISSING:
        return each.default_factory()
    return None if each.default is MISSING else each.default


def help_of(each: Field, opt: Option) -> str:
    if opt.required:
        where = f"required; env {env_of(each)}"
    else:
        shown = opt.shown_default if opt.shown_default is not None else each.default
        where = f"default: {shown}; env {env_of(each)}"
    return f"{opt.help} ({where})".replace("%", "%%")  # argparse %-formats help


def _argument_type(opt: Option) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return opt.parse(text)
        except (TypeError, ValueError) as error:  # argparse reports ArgumentTypeError itself
            raise argparse.ArgumentTypeError(str(error)) from None
    parse.__name__ = getattr(opt.parse, "__name__", "value")
    return parse


# Not given on the command line (a flag's value may be None, e.g. --shuffle-partitions auto).
_UNSET = object()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for each, opt in options():
        parser.add_argument(
            flag_of(each), dest=each.name, type=_argument_type(opt), metavar=opt.metavar,
            action="append" if opt.repeated else "store",
            default=None if opt.repeated else _UNSET, help=help_of(each, opt))
        if opt.legacy is not None:
            flag, parse = opt.legacy
            parser.add_argument(f"--{flag}", dest=_legacy_dest(each), default=_UNSET,
                                type=_argument_type(Option(help="", parse=parse)),
                                help=argparse.SUPPRESS)


def _legacy_dest(each: Field) -> str:
    return each.name + "__legacy"


def _legacy_value(each: Field, opt: Option, args: argparse.Namespace) -> Any:
    """The option's value from its older flag, else the older flag's variable; _UNSET if
    neither is given. A use says which flag replaces it, once (stderr: logging is not set up
    while the options are parsed)."""
    if opt.legacy is None:
        return _UNSET
    flag, parse = opt.legacy
    given = getattr(args, _legacy_dest(each), _UNSET)
    if given is _UNSET:
        given = _from_env(each, Option(help="", parse=parse), ENV_PREFIX + flag.upper().replace(
            "-", "_"))
    if given is not _UNSET:
        print(f"rebalance-monitor run: --{flag} is deprecated: use {flag_of(each)}",
              file=sys.stderr)
    return given


def _from_env(each: Field, opt: Option, name: str | None = None) -> Any:
    """The parsed value of the field's environment variable (or of `name`), or _UNSET when it
    is not set."""
    name = name or env_of(each)
    text = os.environ.get(name)
    if text is None:
        return _UNSET
    try:
        if opt.repeated:  # one value a line
            return [opt.parse(line.strip()) for line in text.splitlines() if line.strip()]
        return opt.parse(text)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as error:
        # A repeated option's error quotes its bad line only: the others may hold secrets.
        shown = name if opt.repeated else f"{name}={text!r}"
        raise SystemExit(f"rebalance-monitor run: error: {shown} (the default of "
                         f"{flag_of(each)}): {error}") from None


def config_from_args(args: argparse.Namespace) -> JobConfig:
    """Each option's flag (parsed by argparse), else its variable, else its default. A repeated
    option takes its variable's values first, then its flags'."""
    values: dict[str, Any] = {}
    for each, opt in options():
        given = getattr(args, each.name)
        if opt.repeated:
            from_env = _from_env(each, opt)
            value = dict([*(from_env if from_env is not _UNSET else []), *(given or [])])
        elif given is not _UNSET:
            value = given
        elif (from_env := _from_env(each, opt)) is not _UNSET:
            value = from_env
        elif (legacy := _legacy_value(each, opt, args)) is not _UNSET:
            value = legacy
        elif opt.required:
            raise SystemExit(f"{flag_of(each)} (or {env_of(each)}) is required")
        else:
            value = default_of(each)
        values[each.name] = value
    return _with_checked_kafka_options(JobConfig(**values))


def _with_checked_kafka_options(config: JobConfig) -> JobConfig:
    """Both client kinds' forms of --kafka-option are built once here, so an option that
    cannot be translated (or a certificate the Java client cannot read) stops the start."""
    check = None if config.source == "embedded" else KafkaClientOptions.for_java
    options_or_exit("run", config.kafka_options, check=check)
    if config.exact and config.state_shards is not None:
        raise SystemExit("rebalance-monitor run: error: --exact keeps one group per state "
                         "shard: leave --state-shards unset")
    return config
