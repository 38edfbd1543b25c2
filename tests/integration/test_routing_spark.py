"""The router's leading members (streaming.spark.parse.leading_envelope) against Spark's own
JSON parser, in a real SparkSession: a record routed by them goes where `from_json` would send
it, or the core's parser dead-letters it (where it arrives does not matter then).

The records are the producers' own events, the simulator's, hand-made edge cases and random
edits of them. The reference is route_events itself on each record with a space before it:
JSON ignores the space, the leading pattern does not, so every reference record is read by
`from_json`. One more difference is allowed: a record Python's json reads and Spark's does not
(a number of more than 1,000 digits) goes where Python reads it, not to the unroutable key."""

from __future__ import annotations

import datetime
import json
import random

import pytest
from pyspark.sql import functions as F

from producers import events
from producers.simulator.cli import with_cluster
from producers.simulator.clock import FastClock
from producers.simulator.scenarios import SCENARIOS
from streaming.core.state.events import Invalid, parse_event
from streaming.spark.parse import (
    UNROUTABLE_KEY,
    leading_envelope,
    leading_members,
    led_members,
    route_events,
)

pytestmark = pytest.mark.integration

TS = 1_700_000_000_000
ROUTED = ["offset", "copy", "system", "group", "event_time", "cluster", "shard"]


def producer_events() -> list[dict]:
    owned = [["TopicX", "broker-a", q] for q in range(4)]
    built = [
        events.heartbeat(TS, "cg-orders", "10.0.0.7@4121", ["TopicX"], "AVG",
                         broker="broker-a", address="10.0.0.7:4121", owned=owned),
        events.heartbeat(TS, "orders", "m-1", ["t1", "t2"], "range", system="kafka",
                         group_type="classic", owned=[["t1", "", 0]]),
        events.unregister(TS, "cg-orders", "10.0.0.7@4121", address="10.0.0.7:4121"),
        events.unregister(TS, "orders", "m-1", system="kafka"),
        events.route(TS, "TopicX", group="cg-orders", brokers={"broker-a": 4}),
        events.route(TS, "t1", system="kafka", group="orders", partitions=6),
        events.route(TS, "TopicX", groups=["cg-a", "cg-b"], queues=[["broker-a", 0]]),
        events.alive(TS, "cg-orders", [("10.0.0.7@4121", "10.0.0.7:4121"), ("c2", None)],
                     broker="broker-a"),
    ]
    return built + [events.stamped(event, "eu-1") for event in built]


def compact(event: dict) -> bytes:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()


def simulated() -> list[bytes]:
    values = []
    for name in ("steady", "broker-crash", "network-partition"):
        encoded = SCENARIOS[name](seed=5, with_view=True).run_encoded(FastClock())
        values += [value for _key, value in list(encoded)[:150]]
    return values + [value for _key, value in with_cluster(((b"", v) for v in values[:50]),
                                                           "eu-1")]


# Each one puts a member or a text past what the quick path reads.
EDGE_CASES = [
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","group":"b","client_id":"c","topics":[]}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","topics":[],"group":"b"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","meta":{"group":"b"}}',
    b'{"v":1,"type":"heartbeat","ts":1,"meta":{"group":"b"}}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","ts":2,"topics":[]}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","topics":[],"ts":2}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","system":"kafka","system":"rocketmq"}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a","ts":1700000001000}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a","x":[],"ts":1700000001000}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a","x":{"ts":1700000001000}}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a",\'ts\':1700000001000}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a","\\u0074s":1700000001000}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","topics":["x"],"system":"kafka"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","topics":["x"],"cluster":"c"}',
    b'{"cluster":"c","v":1,"type":"heartbeat","ts":1,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a","client_id":"c","topics":["T"],'
    b'"strategy":"AVG","cluster":"eu"}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a","client_id":"c","topics":["T"],'
    b'"strategy":"range","system":"kafka"}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"a","cluster":"caf\\u00e9",'
    b'"client_id":"c","topics":["T"],"strategy":"AVG"}',
    b'{"v":1,"type":"route","ts":1,"groups":"a","topic":"T"}',
    b'{"v":1,"type":"route","ts":1,"groups":"a","group":"b","topic":"T"}',
    b'{"v":1,"type":"route","ts":1,"group":"b","groups":5}',
    b'{"v":1,"type":"route","ts":1,"groups":["a","b","a"],"group":"c","topic":"T"}',
    b'{"v":1,"type":"route","ts":1,"group":"a","groups":[],"topic":"T"}',
    b'{"v":1,"type":"route","ts":1700000000000,"group":"a","topic":"T","brokers":{"b":2},'
    b'"groups":["b","c"]}',
    b'{"v":1,"type":"route","ts":1700000000000,"group":"a","topic":"T","brokers":{"b":2},'
    b'"cluster":"c"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":123}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":null}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":""}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a,b}c:d"}',
    b'{"v":1,"type":"heartbeat","ts":"2023-11-14T22:13:20Z","group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":"1700000000000","group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":1.7e12,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":-0,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":0,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":-5,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":0017,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":123456789012345678901234567890,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","n":' + b"7" * 990 + b"}",
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","n":' + b"7" * 1990 + b"}",
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","n":' + b"[" * 480 + b"]" * 480 + b"}",
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","n":' + b"[" * 700 + b"]" * 700 + b"}",
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","n":"' + b"x" * 100_000 + b'"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","n":NaN}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","n":Infinity,"m":-Infinity}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a",\'group\':\'b\'}',
    b"{'v':1,'type':'heartbeat','ts':1,'group':'a'}",
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","x":"it\'s"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","gro\\u0075p":"b"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a\\"b"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","x":"\\"group\\":\\"b\\""}',
    b'{"v":1,"type":"heartbeat","ts":1,"GROUP":"b"}',
    b'{"v":1,"type":"heartbeat","ts":1,"Group":"b","group":"a"}',
    b'{"v":1, "type":"heartbeat", "ts":1, "group":"a"}',
    b'{ "v":1,"type":"heartbeat","ts":1,"group":"a"}',
    b' {"v":1,"type":"heartbeat","ts":1,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a"} ',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a"}{"group":"b"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a"}x',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a"',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a",}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","x":}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","x":[1,2}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a"/*c*/}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"\xff\xfe"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","x":"\xc3"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"caf\xc3\xa9"}',
    b'\xef\xbb\xbf{"v":1,"type":"heartbeat","ts":1,"group":"a"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a\x01"}',
    b'{"v":1,"type":"heartbeat","ts":1,"group":"a","x":"\x01"}',
    b'[{"v":1,"type":"heartbeat","ts":1,"group":"a"}]',
    b'["group"]',
    b'"group"',
    b"17",
    b"null",
    b"",
    b"{}",
    b"{not json",
]


def mutations(seeds: list[bytes], count: int) -> list[bytes]:
    """Random small edits of valid events: the texts nearest a led record that are not."""
    rng = random.Random(20261207)
    pieces = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"\\", b"'", b" ", b"0", b"-", b"a",
              b'"group"', b'"ts"', b'"groups"', b'"system"', b'"cluster"', b'"group":"z"',
              b'"ts":5', b"\xc3", b"null", b"NaN"]
    out = []
    for _ in range(count):
        text = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            action = rng.random()
            if action < 0.4:
                text[at:at] = rng.choice(pieces)
            elif action < 0.7:
                del text[at:at + rng.randint(1, 4)]
            else:
                text[at:at + 1] = rng.choice(pieces)
        out.append(bytes(text))
    return out


def routed_both_ways(spark, values: list[bytes]):
    now = datetime.datetime(2023, 11, 14, 22, 13, 20)

    def rows(prefix: bytes) -> dict[int, list[tuple]]:
        records = spark.createDataFrame(
            [(None, prefix + value, "events", 0, offset, now)
             for offset, value in enumerate(values)],
            "key binary, value binary, topic string, partition int, offset long, "
            "timestamp timestamp")
        by_offset: dict[int, list[tuple]] = {}
        for row in route_events(records, 1 << 20, 128, 300_000).select(ROUTED).collect():
            by_offset.setdefault(row.offset, []).append(tuple(row))
        return {offset: sorted(found) for offset, found in by_offset.items()}

    led = [row.led for row in spark.createDataFrame([(v,) for v in values], "value binary")
           .select(leading_envelope(led_members(F.col("value"), leading_members(F.col("value"))))
                   .isNotNull().alias("led"))
           .collect()]
    return rows(b""), rows(b" "), led


def assert_routed_as_parsed(spark, values: list[bytes]) -> list[bool]:
    routed, reference, led = routed_both_ways(spark, values)
    assert routed.keys() == reference.keys() == set(range(len(values)))
    for offset, value in enumerate(values):
        if routed[offset] == reference[offset]:
            continue
        assert led[offset], value
        parsed = parse_event(value)
        if isinstance(parsed, Invalid):
            continue
        assert [row[3] for row in reference[offset]] == [UNROUTABLE_KEY], value
        assert [(row[2], row[3]) for row in routed[offset]] == [
            (event.system, event.group) for event in parsed], value
    return led


def test_the_producers_events_are_routed_by_their_leading_members_as_parsed(spark):
    values = [compact(event) for event in producer_events()] + simulated()
    led = assert_routed_as_parsed(spark, values)
    assert all(led[i] for i, value in enumerate(values) if b'"groups"' not in value)
    # ... and spaced as json.dumps spaces them by default, not led, routed the same.
    spaced = [json.dumps(event).encode() for event in producer_events()]
    assert not any(assert_routed_as_parsed(spark, spaced))


def test_edge_cases_are_routed_as_from_json_routes_them(spark):
    led = assert_routed_as_parsed(spark, EDGE_CASES)
    assert 10 < sum(led) < len(EDGE_CASES) - 10


def test_random_edits_of_events_are_routed_as_from_json_routes_them(spark):
    seeds = [compact(event) for event in producer_events()] + EDGE_CASES[:10]
    values = mutations(seeds, 3_000)
    led = assert_routed_as_parsed(spark, values)
    assert sum(led) > 300
