"""The job's command-line options: defaults an operator relies on, and rejected values."""

from __future__ import annotations

import argparse

import pytest

from streaming.spark.config import add_arguments, config_from_args

pytestmark = pytest.mark.unit


def parse(*argv: str):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(["--bootstrap-servers", "b:9092", *argv]))


def test_a_catch_up_batch_is_bounded_by_default():
    assert parse().max_offsets_per_trigger == 500_000
    assert parse("--max-offsets-per-trigger", "20000").max_offsets_per_trigger == 20_000


def test_a_batch_bound_below_one_is_refused():
    with pytest.raises(SystemExit, match="positive"):
        parse("--max-offsets-per-trigger", "0")


def test_the_bound_can_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("REBALANCE_MONITOR_MAX_OFFSETS_PER_TRIGGER", "7000")
    assert parse().max_offsets_per_trigger == 7_000
