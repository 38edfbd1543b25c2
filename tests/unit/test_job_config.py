"""The job's command-line options: defaults an operator relies on, and rejected values.

Each option is declared once (a JobConfig field); these tests hold the flags, variables, help
lines and validation generated from those declarations to what docs/ promise.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import fields
from pathlib import Path

import pytest

from streaming.common.kafka_options import KafkaClientOptions, parse_kafka_options
from streaming.common.options import OneLineParser, add_arguments, env_of, flag_of
from streaming.common.options import options as options_of
from streaming.core.step import StepConfig
from streaming.core.switches import EXACT_VARIABLE
from streaming.spark.config import JobConfig

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

# Today's (documented) flags, variables and defaults: none may change. (--trigger-interval and
# --watermark-delay, which took Spark's duration text, are refused: tested below.)
DEFAULTS = {
    "--topic": "rebalance.events",
    "--checkpoint": "./checkpoints/rebalance-monitor",
    "--source": "auto",
    "--starting-offsets": "earliest",
    "--max-offsets-per-trigger": 2_000_000,
    "--fail-on-data-loss": True,
    "--kafka-option": KafkaClientOptions(),
    "--findings-topic": "rebalance.findings",
    "--dead-letter-topic": "rebalance.events.dlq",
    "--metrics-host": "0.0.0.0",
    "--metrics-port": 9108,
    "--trigger-interval-ms": 2_000,
    "--watermark-delay-ms": 30_000,
    "--session-timeout-ms": 120_000,
    "--kafka-session-timeout-ms": 45_000,
    "--reorder-window-ms": 10_000,
    "--instant-ms": 1,
    "--client-metrics": True,
    "--max-client-series": 500,
    "--dashboard-base-url": None,
    "--runbook-base-url": None,
    "--shuffle-partitions": None,
    "--state-shards": None,
    "--state-store": "rocksdb",
    "--max-event-bytes": 1 << 20,
    "--max-clock-skew-ms": 300_000,
    "--cluster-silence-ms": 30_000,
    "--cluster-forget-ms": 86_400_000,
    "--exact": False,
    "--master": None,
}

# One good text per option (as a flag or its variable) and the value it gives.
GOOD = {
    "bootstrap_servers": ("b1:9092,b2:9092", "b1:9092,b2:9092"),
    "topic": ("events.v2", "events.v2"),
    "checkpoint": ("/data/cp", "/data/cp"),
    "source": ("embedded", "embedded"),
    "starting_offsets": ("latest", "latest"),
    "max_offsets_per_trigger": ("7000", 7_000),
    "fail_on_data_loss": ("off", False),
    "kafka_options": ("security.protocol=SASL_SSL",
                      parse_kafka_options(["security.protocol=SASL_SSL"])),
    "findings_topic": ("f", "f"),
    "dead_letter_topic": ("d", "d"),
    "metrics_host": ("127.0.0.1", "127.0.0.1"),
    "metrics_port": ("9200", 9200),
    "trigger_interval_ms": ("500", 500),
    "watermark_delay_ms": ("60000", 60_000),
    "session_timeout_ms": ("60000", 60_000),
    "kafka_session_timeout_ms": ("30000", 30_000),
    "reorder_window_ms": ("5000", 5_000),
    "instant_ms": ("1000", 1_000),
    "client_metrics": ("no", False),
    "max_client_series": ("50", 50),
    "dashboard_base_url": ("https://grafana.example.com", "https://grafana.example.com"),
    "runbook_base_url": ("https://wiki.example.com/m.md", "https://wiki.example.com/m.md"),
    "shuffle_partitions": ("4", 4),
    "state_shards": ("64", 64),
    "state_store": ("hdfs", "hdfs"),
    "max_event_bytes": ("50000", 50_000),
    "max_clock_skew_ms": ("60000", 60_000),
    "cluster_silence_ms": ("40000", 40_000),
    "cluster_forget_ms": ("3600000", 3_600_000),
    "exact": ("on", True),
    "master": ("local[2]", "local[2]"),
}

# One refused text for every option that validates its text, and a word of the reason.
BAD = {
    "bootstrap_servers": (" ", "HOST:PORT"),
    "source": ("pulsar", "one of auto, kafka, embedded"),
    "starting_offsets": ("newest", "one of earliest, latest"),
    "max_offsets_per_trigger": ("0", "positive"),
    "fail_on_data_loss": ("maybe", "on or off"),
    "exact": ("maybe", "on or off"),
    "kafka_options": ("security.protocol", "KEY=VALUE"),
    "metrics_port": ("nine", "whole number"),
    "session_timeout_ms": ("2m", "whole number"),
    "kafka_session_timeout_ms": ("1.5", "whole number"),
    "reorder_window_ms": ("", "whole number"),
    "instant_ms": ("1s", "whole number"),
    "client_metrics": ("enabled", "on or off"),
    "max_client_series": ("many", "whole number"),
    "dashboard_base_url": ("grafana.example.com", "absolute http(s) URL"),
    "runbook_base_url": ("https://wiki.example.com/m.md#top", "without '#'"),
    "shuffle_partitions": ("-1", "positive whole number or auto"),
    "state_shards": ("0", "positive whole number or auto"),
    "state_store": ("memory", "one of rocksdb, hdfs"),
    "max_event_bytes": ("-5", "positive"),
    "max_clock_skew_ms": ("5 min", "whole number"),
    "cluster_silence_ms": ("0", "positive"),
    "cluster_forget_ms": ("-1", "positive"),
    "topic": (" ", "empty"),
    "checkpoint": ("", "empty"),
    "findings_topic": (" ", "empty"),
    "dead_letter_topic": (" ", "empty"),
    "metrics_host": ("", "empty"),
    "trigger_interval_ms": ("2 seconds", "whole number"),
    "watermark_delay_ms": ("-1", "at least 0"),
    "master": (" ", "empty"),
}
FREE_TEXT: set[str] = set()
# What a new operator tried, each once accepted and handed to Spark.
ALSO_BAD = [
    ("metrics_port", "99999", "at most 65535"),
    ("session_timeout_ms", "-1", "positive"),
    ("reorder_window_ms", "-10", "at least 0"),
    ("instant_ms", "0", "positive"),
    ("max_client_series", "-3", "at least 0"),
]


def parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="rebalance-monitor run")
    add_arguments(parser, JobConfig)
    return parser


def parse(*argv: str) -> JobConfig:
    return parser().parse_args(["--bootstrap-servers", "b:9092", *argv]).config


def options():
    return options_of(JobConfig)


def refused(capsys, *argv: str, bootstrap: bool = True) -> str:
    """The one line a refused start prints (exit status 2, no traceback)."""
    with pytest.raises(SystemExit) as exited:
        parser().parse_args([*(["--bootstrap-servers", "b:9092"] if bootstrap else []), *argv])
    error = capsys.readouterr().err
    assert exited.value.code == 2 and error.count("\n") == 1 and "Traceback" not in error, error
    assert error.startswith("rebalance-monitor run: error: "), error
    return error


def field_named(name: str):
    return next(each for each, _ in options() if each.name == name)


@pytest.fixture(autouse=True)
def no_job_variables(monkeypatch):
    """The tests' own environment: no REBALANCE_MONITOR_* of the machine running them."""
    for each, _ in options():
        monkeypatch.delenv(env_of(each), raising=False)


def test_a_catch_up_batch_is_bounded_by_default():
    assert parse().max_offsets_per_trigger == 2_000_000
    assert parse("--max-offsets-per-trigger", "20000").max_offsets_per_trigger == 20_000


def test_a_batch_bound_below_one_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse("--max-offsets-per-trigger", "0")
    assert "argument --max-offsets-per-trigger" in capsys.readouterr().err


def test_the_bound_can_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("REBALANCE_MONITOR_MAX_OFFSETS_PER_TRIGGER", "7000")
    assert parse().max_offsets_per_trigger == 7_000


def test_every_field_is_one_flag_and_one_variable_with_a_help_line():
    actions = [action for action in parser()._actions if action.option_strings != ["-h", "--help"]]
    by_dest = {action.dest: action for action in actions}
    assert len(by_dest) == len(actions) == len(fields(JobConfig))
    for each, opt in options():
        action = by_dest[each.name]
        assert action.option_strings == [flag_of(each)]
        assert env_of(each) == "REBALANCE_MONITOR_" + flag_of(each)[2:].upper().replace("-", "_")
        assert opt.help and env_of(each) in action.help
        assert ("required" if opt.required else "default:") in action.help
    assert len({flag_of(each) for each, _ in options()}) == len(fields(JobConfig))


def test_flags_and_defaults_are_the_documented_ones():
    config = parse()
    assert {flag_of(each): getattr(config, each.name) for each, _ in options()
            if each.name != "bootstrap_servers"} == DEFAULTS
    assert config == JobConfig(bootstrap_servers="b:9092")


def test_every_flag_the_docs_name_for_run_is_an_option():
    flags = {flag_of(each) for each, _ in options()}
    operating = (ROOT / "docs" / "operating.md").read_text()
    option_table = re.findall(r"^\| `(--[a-z-]+)", operating, re.M)
    option_table += re.findall(r"`(--[a-z-]+)`", "".join(re.findall(r"^\| `--.*", operating, re.M)))
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    job_arguments = deploy[deploy.index("The job's own arguments"):deploy.index("## 2.")]
    documented = set(option_table) | set(re.findall(r"`(--[a-z-]+)`", job_arguments))
    assert len(documented) >= 15
    assert documented <= flags
    assert "REBALANCE_MONITOR_BOOTSTRAP_SERVERS" in operating
    assert env_of(field_named("bootstrap_servers")) == "REBALANCE_MONITOR_BOOTSTRAP_SERVERS"


def test_the_defaults_the_operating_table_gives_are_the_options():
    """Each row of one flag and one value in docs/operating.md: the value, parsed as the flag's,
    is the flag's default."""
    operating = (ROOT / "docs" / "operating.md").read_text()
    rows = re.findall(r"^\| `(--[a-z-]+)` \| `([^`|]+)` \|", operating, re.M)
    assert len(rows) >= 10
    defaults = parse()
    by_flag = {flag_of(each): each.name for each, _ in options()}
    for flag, shown in rows:
        name = by_flag[flag]
        assert getattr(parse(flag, shown), name) == getattr(defaults, name), flag


def test_the_tables_cover_every_option():
    names = {each.name for each, _ in options()}
    assert set(GOOD) == names
    validating = {each.name for each, opt in options() if opt.parse is not str}
    assert set(BAD) == validating and FREE_TEXT == names - validating


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_flag_sets_its_field(name):
    text, value = GOOD[name]
    assert getattr(parse(flag_of(field_named(name)), text), name) == value


# Defaults whose text is not str(value): a flag giving the default overrides a variable.
DEFAULT_TEXT = {"fail_on_data_loss": "on", "client_metrics": "on", "shuffle_partitions": "auto",
                "state_shards": "auto"}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_variable_is_its_flags_default_and_the_flag_wins(monkeypatch, name):
    each = field_named(name)
    text, value = GOOD[name]
    monkeypatch.setenv(env_of(each), text)
    if name == "bootstrap_servers":
        assert parser().parse_args([]).config.bootstrap_servers == value
        return
    assert getattr(parse(), name) == value
    # None of these has a text for its default.
    if name not in ("kafka_options", "master", "dashboard_base_url", "runbook_base_url"):
        default = DEFAULTS[flag_of(each)]
        assert getattr(parse(flag_of(each), DEFAULT_TEXT.get(name, str(default))), name) == default


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_flag_value_is_refused_naming_the_flag(capsys, name):
    text, reason = BAD[name]
    with pytest.raises(SystemExit) as exited:
        parse(flag_of(field_named(name)), text)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"argument {flag_of(field_named(name))}: " in error and reason in error
    assert "Traceback" not in error


@pytest.mark.parametrize("name, text, reason", ALSO_BAD)
def test_out_of_range_values_are_refused_where_they_are_parsed(capsys, name, text, reason):
    with pytest.raises(SystemExit) as exited:
        parse(flag_of(field_named(name)), text)
    assert exited.value.code == 2 and reason in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_variable_is_refused_naming_the_variable_and_flag(monkeypatch, capsys, name):
    text, reason = BAD[name]
    each = field_named(name)
    monkeypatch.setenv(env_of(each), text)
    message = refused(capsys, bootstrap=name != "bootstrap_servers")
    shown = env_of(each) if name == "kafka_options" else f"{env_of(each)}={text!r}"
    assert shown in message and flag_of(each) in message and reason in message


def test_a_bad_kafka_option_line_is_quoted_alone(monkeypatch, capsys):
    """The variable's other lines may be credentials: only the bad line is shown."""
    each = field_named("kafka_options")
    monkeypatch.setenv(env_of(each), "sasl.password=s3cret\nsecurity.protocol")
    message = refused(capsys)
    assert env_of(each) in message and "'security.protocol'" in message
    assert "s3cret" not in message


def test_kafka_options_come_from_the_variable_then_the_flags(monkeypatch):
    monkeypatch.setenv("REBALANCE_MONITOR_KAFKA_OPTION",
                       "security.protocol=SASL_SSL\n\nkafka.sasl.mechanism=PLAIN\n")
    config = parse("--kafka-option", "sasl.mechanism=SCRAM-SHA-512", "--kafka-option", "client.id=b=c")
    assert config.kafka_options == parse_kafka_options({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "client.id": "b=c"})


@pytest.mark.parametrize(("option", "told"), [
    ("sasl.jaas.config=x", "sasl.username and sasl.password"),
    ("ssl.truststore.location=/x.jks", "ssl.ca.location"),
    ("sasl.username=u", "needs sasl.password"),
])
def test_a_kafka_option_one_client_cannot_take_stops_the_start_in_one_line(capsys, option, told):
    message = refused(capsys, "--kafka-option", option)
    assert message.startswith("rebalance-monitor run: error: --kafka-option: ")
    assert told in message


def test_a_client_key_the_java_client_cannot_read_stops_the_start(tmp_path, capsys):
    (tmp_path / "client.pem").write_text("-----BEGIN CERTIFICATE-----\nx\n")
    (tmp_path / "client.key").write_text("-----BEGIN RSA PRIVATE KEY-----\nx\n")
    options = ["ssl.certificate.location=" + str(tmp_path / "client.pem"),
               "ssl.key.location=" + str(tmp_path / "client.key")]
    assert "PKCS#8" in refused(capsys, "--source", "kafka",
                               *(a for o in options for a in ("--kafka-option", o)))
    # The embedded reader and the producers use librdkafka, which reads that key.
    assert parse("--source", "embedded",
                 *(a for o in options for a in ("--kafka-option", o))).kafka_options


def test_the_findings_producer_gets_librdkafka_names():
    config = parse("--kafka-option", "sasl.username=u", "--kafka-option", "sasl.password=p")
    assert config.producer_options()["sasl.mechanism"] == "PLAIN"
    assert "sasl.jaas.config" not in config.producer_options()


def test_bootstrap_servers_are_required_from_the_flag_or_the_variable(capsys):
    assert "--bootstrap-servers (or REBALANCE_MONITOR_BOOTSTRAP_SERVERS) is required" in refused(
        capsys, bootstrap=False)


def test_the_core_gets_the_fields_of_its_names():
    config = parse("--session-timeout-ms", "1", "--kafka-session-timeout-ms", "2",
                   "--reorder-window-ms", "3", "--cluster-silence-ms", "1")
    assert config.step_config() == StepConfig(1, 2, 3)


def test_run_help_gives_every_option_a_help_line_with_default_and_variable(capsys):
    from streaming.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser(["run", "--help"]).parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    text = text[text.index("options:"):]
    flags = [flag_of(each) for each, _ in options()]
    starts = [text.index(f" {flag} ") for flag in flags]
    assert starts == sorted(starts)
    for each, start, end in zip(fields(JobConfig), starts, [*starts[1:], len(text)], strict=True):
        line = text[start:end]  # the flag, its metavar and its help
        assert f"env {env_of(each)})" in line and re.search(r"\((default: .+|required);", line)
        assert len(line.split()) > 6, line
    assert "Spark master" in text[starts[-1]:]
    for section in ("Kafka:", "detection:", "state:", "metrics and outputs:", "Spark:"):
        assert section in text


ON_OFF_WORDS = re.compile(
    r"""["'](?:on|off|yes|no|true|false|1|0)["']\s*,\s*["'](?:on|off|yes|no|true|false|1|0)["']""",
    re.I)


def test_one_on_off_parser_in_the_project():
    """parse_bool (streaming/core/switches.py) is the only one."""
    found = []
    for path in sorted([*(ROOT / "streaming").rglob("*.py"), *(ROOT / "producers").rglob("*.py")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"def \w*bool\w*\(", line) or ON_OFF_WORDS.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}")
    assert [place.split(":")[0] for place in found] == ["streaming/core/switches.py"] * 3


@pytest.mark.parametrize("older, value", [("--trigger-interval", "500 milliseconds"),
                                          ("--watermark-delay", "1 minute")])
def test_the_older_duration_flags_are_refused(capsys, older, value):
    """Renamed before any release to say their unit (--trigger-interval-ms, ...): the old
    names, and their variables, are gone."""
    assert f"unrecognized arguments: {older}" in refused(capsys, older, value)


def test_the_older_duration_variables_are_not_read(monkeypatch):
    monkeypatch.setenv("REBALANCE_MONITOR_TRIGGER_INTERVAL", "500 milliseconds")
    monkeypatch.setenv("REBALANCE_MONITOR_WATERMARK_DELAY", "1 minute")
    config = parse()
    assert (config.trigger_interval_ms, config.watermark_delay_ms) == (2_000, 30_000)


def test_exact_is_read_from_the_variable_the_core_reads():
    """The suite's exact run sets one variable: the job's --exact and the core's StepConfig
    default both read it."""
    exact = next(each for each, _ in options() if each.name == "exact")
    assert env_of(exact) == EXACT_VARIABLE
    assert parse("--exact", "on").step_config().exact is True
    assert parse("--exact", "off").step_config().exact is False


def test_exact_keeps_one_group_per_shard_so_a_shard_count_is_refused(capsys):
    assert "--exact keeps one group per state shard" in refused(
        capsys, "--exact", "on", "--state-shards", "8")


def test_a_cluster_silence_longer_than_a_session_timeout_is_refused(capsys):
    """A silent cluster's members would expire before it counts as silent: an all-clear."""
    with pytest.raises(SystemExit):
        parse("--cluster-silence-ms", "50000")       # the Kafka session timeout is 45,000
    assert "--cluster-silence-ms 50000 must not exceed" in capsys.readouterr().err
    assert parse("--cluster-silence-ms", "45000").cluster_silence_ms == 45_000
