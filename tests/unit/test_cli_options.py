"""Every option of every subcommand is checked where it is parsed: a bad value is one line on
stderr naming the option, exit status 2, never a traceback nor a run on nonsense.

The walk below finds each subcommand's options in its own parser, so an option added without a
check (a plain string, an unchecked int) fails `test_every_option_has_a_check`."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields

import pytest

from streaming import cli

pytestmark = pytest.mark.unit

# Bad values per check, by the name the check gives argparse (streaming.common.option_values and the
# few checks of one command).
BAD_VALUES = {
    "whole number": ["x", "1.5", ""],
    "number": ["x", "nan", "inf", ""],
    "host:port": ["", "host:99999", "a b:1"],
    "choice": ["no-such-choice"],
    "not_empty": ["", "  "],
    "pattern": ["[", "(?P<"],
    "key_value": ["novalue", "=x"],
    "names": ["", "a,,b"],
    "name": ["", " ", "bad\x07name"],
    "absolute_url": ["", "docs/metrics.md", "ftp://host/m.md", "https://", "https://host/m.md#x",
                     "https://host/a b", "https://[host/m.md"],
    "readable_file": ["", "/no/such/rules.yml"],
    "_scenarios": ["no-such-scenario", ""],
    "_topic_spec": ["T", "T:b=x", "T:b=0", "T:b=100000000"],
    "_client_ids": ["", "a,,b"],
    "_positive_or_auto": ["0", "-1", "some"],
    "_on_off": ["maybe"],
    "_sdk_strategy": ["GO", "GO=NOPE", "KLINGON=AVG"],
}
# What each subcommand needs to parse at all (its required options), valid.
REQUIRED = {"run": ["--bootstrap-servers", "b:9092"],
            "observe-kafka": ["--bootstrap-servers", "b:9092"],
            "observe-rocketmq": ["--namesrv", "ns:9876", "--bootstrap-servers", "b:9092"],
            "alert-rules": ["--runbook-base-url", "https://wiki.example.com/metrics.md"]}
# A switch (a flag without a value) is a store_const; its variable is read by parse_bool.
UNCHECKED_ACTIONS = (argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreFalseAction,
                     argparse._StoreConstAction, argparse._VersionAction, argparse._CountAction)


def subparser(command: str) -> argparse.ArgumentParser:
    parser = cli.build_parser([command])
    return parser._subparsers._group_actions[0].choices[command]


def options_of(command: str) -> list[argparse.Action]:
    return [a for a in subparser(command)._actions
            if a.option_strings and not isinstance(a, UNCHECKED_ACTIONS)]


def check_name(action: argparse.Action) -> str:
    return "choice" if action.choices is not None else getattr(action.type, "__name__", "")


CASES = [(command, action.option_strings[-1], bad)
         for command in cli.SUBCOMMANDS for action in options_of(command)
         for bad in BAD_VALUES.get(check_name(action), [])]


@pytest.fixture(autouse=True)
def no_environment_defaults(monkeypatch):
    """The machine's own variables must not stand in for the options under test."""
    for name in ("KAFKA_BOOTSTRAP_SERVERS", "NAMESRV_ADDR", "ROCKETMQ_NAMESRV",
                 "REBALANCE_MONITOR_BOOTSTRAP_SERVERS", "REBALANCE_MONITOR_NAMESRV",
                 "REBALANCE_MONITOR_EXACT"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("command", sorted(cli.SUBCOMMANDS))
def test_every_option_has_a_check(command):
    unchecked = [a.option_strings[-1] for a in options_of(command)
                 if check_name(a) not in BAD_VALUES]
    assert unchecked == []


@pytest.mark.parametrize("command, flag, bad", CASES)
def test_a_bad_value_is_one_line_naming_the_option_and_exit_2(capsys, command, flag, bad):
    argv = [command, *REQUIRED.get(command, []), flag, bad]
    with pytest.raises(SystemExit) as exited:
        cli.build_parser(argv).parse_args(argv)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and flag in error and "Traceback" not in error, error


def test_the_walk_covers_every_subcommand():
    assert {command for command, _, _ in CASES} == set(cli.SUBCOMMANDS)
    assert len(CASES) > 150


@pytest.mark.parametrize("variable", ["NAMESRV_ADDR", "REBALANCE_MONITOR_NAMESRV"])
def test_the_namesrv_comes_from_rocketmqs_own_variable_or_ours_with_its_default_port(
        monkeypatch, variable):
    monkeypatch.setenv(variable, "10.0.0.1;10.0.0.2:9877")
    argv = ["observe-rocketmq", "--stdout"]
    assert cli.build_parser(argv).parse_args(argv).config.namesrv == "10.0.0.1:9876;10.0.0.2:9877"


def test_a_bad_environment_default_is_refused_like_the_option(monkeypatch, capsys):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", " ")
    argv = ["observe-kafka", "--once"]
    with pytest.raises(SystemExit) as exited:
        cli.build_parser(argv).parse_args(argv)
    assert exited.value.code == 2 and "--bootstrap-servers" in capsys.readouterr().err


def test_version_and_json_logs(capsys):
    import json
    import logging

    with pytest.raises(SystemExit) as shown:
        cli.main(["--version"])
    assert shown.value.code == 0 and capsys.readouterr().out.startswith("rebalance-monitor ")
    args = cli.build_parser(["allocate"]).parse_args(["allocate", "--log-format", "json",
                                                      "--log-level", "debug"])
    root = logging.getLogger()
    before = (root.handlers[:], root.level)
    try:
        cli.configure_logging(args.logging.level("INFO"), args.logging.log_format)
        logging.getLogger("rebalance_monitor.test").warning("one %s", "line")
        line = json.loads(capsys.readouterr().err.strip())
        assert (line["level"], line["logger"], line["message"]) == (
            "WARNING", "rebalance_monitor.test", "one line")
        assert root.level == logging.DEBUG
    finally:
        root.handlers[:], root.level = before


# The flags renamed to say their unit before any release: refused, not taken for the new ones
# (argparse's abbreviations are off, so --interval is not read as --interval-seconds).
OLDER_FLAGS = {("observe-rocketmq", "--interval"), ("observe-rocketmq", "--keepalive"),
               ("observe-rocketmq", "--running-info-refresh"), ("observe-rocketmq", "--timeout"),
               ("observe-kafka", "--interval"), ("observe-kafka", "--timeout"),
               ("demo", "--duration"), ("demo", "--refresh"), ("simulate", "--duration"),
               ("run", "--trigger-interval"), ("run", "--watermark-delay")}


@pytest.mark.parametrize("command, older", sorted(OLDER_FLAGS))
def test_a_renamed_options_older_flag_is_refused(capsys, command, older):
    argv = [command, *REQUIRED.get(command, []), older, "7"]
    with pytest.raises(SystemExit) as exited:
        cli.build_parser(argv).parse_args(argv)
    error = capsys.readouterr().err
    assert exited.value.code == 2 and error == (
        f"rebalance-monitor {command}: error: unrecognized arguments: {older} 7\n")
    assert older + " " not in subparser(command).format_help()


def test_every_option_has_a_help_line_that_shows_its_default():
    """A flag (store_true) or an option without a default says what it does; one with a default
    also shows it (run's options say theirs with their variable)."""
    for command in cli.SUBCOMMANDS:
        for action in subparser(command)._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            assert action.help, (command, action.option_strings)
            has_default = action.default not in (None, False, [], argparse.SUPPRESS) \
                and not isinstance(action, argparse._HelpAction)
            if has_default:
                assert "default" in action.help or "required" in action.help, (
                    command, action.option_strings)


# Texts an option may take (as a flag or its variable); each option's test takes the first its
# flag accepts with a value other than its default.
CANDIDATE_TEXTS = ["broker-crash", "7", "0.5", "1000000000000", "h:9092", "CONSISTENT_HASH",
                   "embedded", "latest", "hdfs", "off", "on", "DEBUG", "json", "GO=AVG",
                   "client.id=a", "T:b=2", "c1,c2", "https://wiki.example.com/m.md", __file__,
                   "x"]


def declared_options(command: str):
    """(dest, options dataclass) of the command's parser: its own and the logging options."""
    return subparser(command).get_default("_option_classes").items()


# Options that go in pairs (check_options refuses one alone): the other, given with it.
COMPANIONS = {("observe-rocketmq", "--access-key"): ["--secret-key", "s"],
              ("observe-rocketmq", "--secret-key"): ["--access-key", "a"]}


def parsed(command: str, *argv: str, dropped: str | None = None) -> argparse.Namespace:
    required = REQUIRED.get(command, [])
    if dropped in required:
        at = required.index(dropped)
        required = required[:at] + required[at + 2:]
    full = [command, *required, *COMPANIONS.get((command, dropped), []), *argv]
    return cli.build_parser(full).parse_args(full)


def a_text_for(command: str, dest: str, each, capsys) -> tuple[str | None, object]:
    """A text the option's flag takes, and the value it gives, other than the default."""
    from streaming.common.options import default_of, flag_of

    if each.metadata["option"].switch:
        return "on", True
    for text in CANDIDATE_TEXTS:
        try:
            value = getattr(getattr(parsed(command, flag_of(each), text, dropped=flag_of(each)),
                                    dest), each.name)
        except SystemExit:
            capsys.readouterr()
            continue
        if value != default_of(each):
            return text, value
    return None, None


ALL_OPTIONS = [(command, dest, each) for command in sorted(cli.SUBCOMMANDS)
               for dest, cls in declared_options(command) for each in fields(cls)]


def test_every_command_declares_its_options_and_logging_as_dataclasses():
    assert {command for command, _, _ in ALL_OPTIONS} == set(cli.SUBCOMMANDS)
    assert {dest for _, dest, _ in ALL_OPTIONS} == {"config", "logging"}


@pytest.mark.parametrize("command, dest, each", ALL_OPTIONS,
                         ids=[f"{c}{e.name}" for c, _, e in ALL_OPTIONS])
def test_every_option_has_a_variable_and_a_help_line_with_its_default_and_the_variable_is_read(
        monkeypatch, capsys, command, dest, each):
    from streaming.common.options import env_of, flag_of

    action = next(a for a in subparser(command)._actions if flag_of(each) in a.option_strings)
    help_text = " ".join(action.help.split())
    assert f"env {env_of(each)}" in help_text, help_text
    assert re.search(r"\((default: [^;]+|required); env ", help_text), help_text
    text, value = a_text_for(command, dest, each, capsys)
    assert text is not None, f"no text in CANDIDATE_TEXTS for {command} {flag_of(each)}"
    monkeypatch.setenv(env_of(each), text)
    assert getattr(getattr(parsed(command, dropped=flag_of(each)), dest), each.name) == value


def test_a_flag_wins_over_its_variable(monkeypatch):
    monkeypatch.setenv("REBALANCE_MONITOR_INTERVAL_SECONDS", "7")
    assert parsed("observe-kafka").config.interval_seconds == 7.0
    assert parsed("observe-kafka", "--interval-seconds", "3").config.interval_seconds == 3.0


@pytest.mark.parametrize("variable", ["KAFKA_BOOTSTRAP_SERVERS",
                                      "REBALANCE_MONITOR_BOOTSTRAP_SERVERS"])
def test_the_bootstrap_servers_fall_back_to_kafkas_own_variable(monkeypatch, variable):
    monkeypatch.setenv(variable, "k:9092")
    for command in ("observe-kafka", "observe-rocketmq", "simulate"):
        assert parsed(command, dropped="--bootstrap-servers").config.bootstrap_servers == "k:9092"


def test_a_bad_variable_of_any_command_is_one_line_naming_it_and_its_flag(monkeypatch, capsys):
    monkeypatch.setenv("REBALANCE_MONITOR_ONCE", "maybe")
    with pytest.raises(SystemExit) as exited:
        parsed("observe-kafka")
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "rebalance-monitor observe-kafka: error: REBALANCE_MONITOR_ONCE='maybe' (the default of "
        "--once): the value must be on or off (true/false, yes/no, 1/0), got 'maybe'\n")


def test_observe_rocketmq_without_a_kafka_nor_stdout_is_refused_before_it_starts(capsys):
    with pytest.raises(SystemExit) as exited:
        parsed("observe-rocketmq", dropped="--bootstrap-servers")
    assert exited.value.code == 2 and capsys.readouterr().err.startswith(
        "rebalance-monitor observe-rocketmq: error: --bootstrap-servers (or ")
