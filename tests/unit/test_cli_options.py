"""Every option of every subcommand is checked where it is parsed: a bad value is one line on
stderr naming the option, exit status 2, never a traceback nor a run on nonsense.

The walk below finds each subcommand's options in its own parser, so an option added without a
check (a plain string, an unchecked int) fails `test_every_option_has_a_check`."""

from __future__ import annotations

import argparse

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
    "spark_duration": ["bogus", "10 parsecs", ""],
    "duration_ms": ["bogus", "10 parsecs", ""],
    "pattern": ["[", "(?P<"],
    "key_value": ["novalue", "=x"],
    "names": ["", "a,,b"],
    "absolute_url": ["", "docs/metrics.md", "ftp://host/m.md", "https://", "https://host/m.md#x",
                     "https://host/a b", "https://[host/m.md"],
    "readable_file": ["", "/no/such/rules.yml"],
    "_scenarios": ["no-such-scenario", ""],
    "_topic_spec": ["T", "T:b=x", "T:b=0", "T:b=100000000"],
    "_client_ids": ["", "a,,b"],
    "_positive_or_auto": ["0", "-1", "some"],
    "_on_off": ["maybe"],
    "_kafka_option": ["security.protocol"],
    "_sdk_strategy": ["GO", "GO=NOPE", "KLINGON=AVG"],
}
# What each subcommand needs to parse at all (its required options), valid.
REQUIRED = {"run": ["--bootstrap-servers", "b:9092"],
            "observe-kafka": ["--bootstrap-servers", "b:9092"],
            "observe-rocketmq": ["--namesrv", "ns:9876"],
            "alert-rules": ["--runbook-base-url", "https://wiki.example.com/metrics.md"]}
UNCHECKED_ACTIONS = (argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreFalseAction,
                     argparse._VersionAction, argparse._CountAction)


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
                 "REBALANCE_MONITOR_BOOTSTRAP_SERVERS", "REBALANCE_MONITOR_NAMESRV"):
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
    assert cli.build_parser(argv).parse_args(argv).namesrv == "10.0.0.1:9876;10.0.0.2:9877"


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
        cli.configure_logging(args.log_level, args.log_format)
        logging.getLogger("rebalance_monitor.test").warning("one %s", "line")
        line = json.loads(capsys.readouterr().err.strip())
        assert (line["level"], line["logger"], line["message"]) == (
            "WARNING", "rebalance_monitor.test", "one line")
        assert root.level == logging.DEBUG
    finally:
        root.handlers[:], root.level = before


OLDER_FLAGS = {("observe-rocketmq", "--interval"), ("observe-rocketmq", "--keepalive"),
               ("observe-rocketmq", "--running-info-refresh"), ("observe-rocketmq", "--timeout"),
               ("observe-kafka", "--interval"), ("observe-kafka", "--timeout"),
               ("demo", "--duration"), ("demo", "--refresh"), ("simulate", "--duration")}


def test_a_renamed_options_older_flag_still_sets_it_and_says_what_replaces_it(capsys):
    from streaming.common.option_values import _OlderFlag

    found = {(command, a.option_strings[0]) for command in cli.SUBCOMMANDS
             for a in subparser(command)._actions if isinstance(a, _OlderFlag)}
    assert found == OLDER_FLAGS
    for command, older in sorted(OLDER_FLAGS):
        action = next(a for a in subparser(command)._actions if older in a.option_strings)
        argv = [command, *REQUIRED.get(command, []), older, "7"]
        parsed = cli.build_parser(argv).parse_args(argv)
        assert getattr(parsed, action.dest) == 7.0
        assert f"{older} is deprecated: use {action.newer}" in capsys.readouterr().err
        shown = subparser(command).format_help().replace(action.newer, "")
        assert action.newer.endswith("-seconds") and older + " " not in shown


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
