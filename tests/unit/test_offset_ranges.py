"""Offsets, read limits and ranges of the embedded Kafka reader (pure)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.core.switches import parse_bool
from streaming.spark.kafka_client import client_settings
from streaming.spark.offset_ranges import (
    OffsetRange,
    behind,
    fair_split,
    from_offsets,
    limit_ends,
    parse_positive_int,
    parse_starting_offsets,
    plan_ranges,
    to_offsets,
    topics_of,
)

pytestmark = pytest.mark.unit


def test_offsets_round_trip_through_spark_json():
    positions = {("t", 1): 97, ("t", 0): 120, ("u", 0): 3}
    text = json.dumps(to_offsets(positions))
    assert text == '{"t": {"0": 120, "1": 97}, "u": {"0": 3}}'
    assert from_offsets(json.loads(text)) == positions
    assert from_offsets(text) == positions
    assert from_offsets(None) == {}


def test_fair_split_gives_leftovers_of_small_partitions_to_the_others():
    available = {("t", 0): 2, ("t", 1): 100, ("t", 2): 100}
    assert fair_split(available, 10) == {("t", 0): 2, ("t", 1): 4, ("t", 2): 4}
    assert fair_split(available, 11) == {("t", 0): 2, ("t", 1): 4, ("t", 2): 5}
    assert fair_split(available, 0) == {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    assert fair_split(available, 1000) == available
    with pytest.raises(ValueError):
        fair_split(available, -1)


@given(st.dictionaries(st.tuples(st.just("t"), st.integers(0, 20)), st.integers(0, 1000)),
       st.integers(0, 5000))
def test_fair_split_takes_exactly_the_budget_or_everything(available, budget):
    shares = fair_split(available, budget)
    assert sum(shares.values()) == min(budget, sum(available.values()))
    assert all(0 <= shares[key] <= available[key] for key in available)
    if shares:  # no partition with rows left gets less than another's share minus one
        starved = [key for key in available if shares[key] < available[key]]
        if starved:
            assert min(shares[key] for key in starved) >= max(shares.values()) - 1


def test_limit_ends_caps_the_batch_and_starts_new_partitions_at_earliest():
    start = {("t", 0): 10}
    latest = {("t", 0): 50, ("t", 1): 5}
    assert limit_ends(start, latest, {("t", 1): 0}, None) == {("t", 0): 50, ("t", 1): 5}
    assert limit_ends(start, latest, {("t", 1): 0}, 20) == {("t", 0): 25, ("t", 1): 5}
    assert limit_ends(start, latest, {("t", 1): 3}, 20) == {("t", 0): 28, ("t", 1): 5}


def test_limit_ends_keeps_partitions_that_disappeared():
    assert limit_ends({("t", 0): 4, ("t", 1): 9}, {("t", 0): 6}, {}, None) == {
        ("t", 0): 6, ("t", 1): 9}


def test_behind_lists_partitions_whose_log_went_back():
    assert behind({("t", 0): 50, ("t", 1): 2}, {("t", 0): 4, ("t", 1): 2}) == [(("t", 0), 50, 4)]


def test_plan_ranges_skips_empty_ones_and_marks_new_partitions():
    ranges = plan_ranges({("t", 0): 3, ("t", 1): 7}, {("t", 0): 9, ("t", 1): 7, ("t", 2): 4})
    assert ranges == [OffsetRange("t", 0, 3, 9), OffsetRange("t", 2, 0, 4, new_partition=True)]
    assert [r.size for r in ranges] == [6, 4]


def test_starting_offsets_forms():
    assert parse_starting_offsets(None) == "earliest"
    assert parse_starting_offsets(" Latest ") == "latest"
    assert parse_starting_offsets('{"t": {"0": 23, "1": -2}}') == {("t", 0): 23, ("t", 1): -2}
    for bad in ("newest", '{"t": {"0": -3}}', "[1]"):
        with pytest.raises(ValueError):
            parse_starting_offsets(bad)


def test_scalar_options_are_validated():
    assert parse_bool("False", "x", True) is False and parse_bool(None, "x", True) is True
    assert parse_positive_int("500", "m") == 500 and parse_positive_int(None, "m") is None
    assert topics_of(" a, b ,") == ("a", "b")
    for call in (lambda: parse_bool("maybe", "x", True), lambda: parse_positive_int("0", "m"),
                 lambda: parse_positive_int("x", "m"), lambda: topics_of(" , ")):
        with pytest.raises(ValueError):
            call()


def test_client_settings_pass_librdkafka_names_and_refuse_managed_keys():
    settings = client_settings("b:9093", {"security.protocol": "SASL_SSL",
                                          "sasl.mechanism": "SCRAM-SHA-512",
                                          "sasl.username": "alice", "sasl.password": 's3"cret'})
    assert settings == {"bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                        "sasl.password": 's3"cret'}
    with pytest.raises(ValueError, match="managed"):
        client_settings("b:9093", {"enable.auto.commit": "true"})
