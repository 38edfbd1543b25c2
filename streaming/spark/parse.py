"""Routing of raw Kafka records to the per-group state, in the JVM (no Python UDF on the hot path).

Only the envelope is read here, with an explicit schema: the fields that decide which group's
state a record belongs to (its system and group: a Kafka group and a RocketMQ group of the same
name are two states) and its event time. The full contract is checked by the core
(`streaming.core.state.events.parse_event`) inside the state function, so one validator decides
what is valid. Records that cannot be routed (not JSON, no group, oversized) go to one reserved
key; the state function turns them into dead letters with a reason.

A record led by its leading members as this project's producers write them
(fields.LEADING_PATTERN) is routed by them, with a regular expression and a few string
functions: Spark's `from_json` cost the read stage about half its time (docs/benchmarks.md).
The core's parser dead-letters such a record when a later member contradicts them
(`repeated_envelope`), so one it accepts goes where `from_json` would send it
(tests/integration/test_routing_spark.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streaming.core.contract import DEFAULT_CLUSTER
from streaming.core.state.fields import (
    LEADING,
    LEADING_INTEGERS,
    LEADING_OPTIONAL,
    LEADING_PATTERN,
)

# No real group can be named this: the contract rejects control characters in names.
UNROUTABLE_KEY = "\u0000unroutable"
# What the contract assumes when an event names no system (docs/events.md).
DEFAULT_SYSTEM = "rocketmq"

ENVELOPE_SCHEMA = T.StructType([
    T.StructField("system", T.StringType()),
    T.StructField("ts", T.StringType()),     # epoch ms or ISO-8601; numbers arrive as their text
    T.StructField("group", T.StringType()),
    T.StructField("groups", T.ArrayType(T.StringType())),
    T.StructField("cluster", T.StringType()),
])

# Event times further back than this from the record's own Kafka timestamp do not move the
# watermark (a replay of old events, or a simulator's fixed epoch). Event times ahead of it by
# more than the job's --max-clock-skew-ms do not either: the state function dead-letters them.
WATERMARK_TRUST_WINDOW_MS = 24 * 3600 * 1000


def route_events(records: DataFrame, max_event_bytes: int, shards: int,
                 max_clock_skew_ms: int, shard_keys: Sequence[int] | None = None) -> DataFrame:
    """key/value/topic/partition/offset/timestamp -> shard, system, group, event_time, offset,
    value, arrival_ms, copy, cluster. Unroutable records get UNROUTABLE_KEY as both system and
    group. The shard (the state's key) is a hash of (system, group) in [0, shards): xxhash64, Spark's
    own, so it is the same on every executor and version; `shard_keys` (None: the shard's number)
    gives each shard's state key (streaming.spark.shard_keys). A route naming several groups becomes
    one row per group; `copy` is 0 on the first, so each record is counted (or dead-lettered)
    once. `arrival_ms` is the record's Kafka timestamp; `cluster` the cluster its producer names.
    A record that starts with its leading members is routed by them (`leading_envelope`),
    any other by `from_json`."""
    # The leading members found once, in projections of their own: Spark would find them
    # again for each field read from them (a CASE's branch shares no subexpression).
    records = (records.withColumn("lead", leading_members(F.col("value")))
               .withColumn("led", led_members(F.col("value"), F.col("lead"))))
    envelope = F.coalesce(leading_envelope(F.col("led")),
                          F.from_json(F.col("value").cast("string"), ENVELOPE_SCHEMA))
    enriched = records.select(
        F.col("value"), F.col("offset"), F.col("timestamp").alias("kafka_ts"),
        envelope.alias("env"),
    )
    routable = (
        F.col("env").isNotNull()
        & (F.length("value") <= max_event_bytes)
        & (F.col("env.group").isNotNull() | (F.size(F.col("env.groups")) > 0))
    )
    targets = F.when(~routable, F.array(F.lit(UNROUTABLE_KEY))).when(
        F.col("env.groups").isNotNull() & (F.size(F.col("env.groups")) > 0), F.col("env.groups")
    ).otherwise(F.array(F.col("env.group")))
    system = F.when(~routable, F.lit(UNROUTABLE_KEY)).otherwise(
        F.coalesce(F.col("env.system"), F.lit(DEFAULT_SYSTEM)))
    return enriched.select(
        system.alias("system"),
        F.posexplode(F.array_distinct(targets)).alias("copy", "group"),
        _watermark_time(F.col("env.ts"), F.col("kafka_ts"), max_clock_skew_ms).alias("event_time"),
        F.col("offset"),
        F.col("value"),
        F.unix_millis(F.col("kafka_ts")).alias("arrival_ms"),
        F.coalesce(F.col("env.cluster"), F.lit(DEFAULT_CLUSTER)).alias("cluster"),
    ).select(F.when(F.col("group").isNull(), F.lit(UNROUTABLE_KEY)).otherwise(F.col("system"))
             .alias("system"),
             F.coalesce(F.col("group"), F.lit(UNROUTABLE_KEY)).alias("group"),
             "event_time", "offset", "value", "arrival_ms", "copy", "cluster",
             ).withColumn("shard", _shard_key(F.pmod(F.xxhash64("system", "group"), F.lit(shards)),
                                              shard_keys))


def leading_members(value: Column) -> Column:
    """The text of the record's leading members (fields.LEADING_PATTERN), "" when it does not
    start with them."""
    return F.regexp_extract(value.cast("string"), LEADING_PATTERN, 0)


def led_members(value: Column, lead: Column) -> Column:
    """The record's leading members `lead`, or null when it is not led by them
    (streaming.core.state.events.led_by: it does not start with them, or names an optional one
    it leaves out later)."""
    led = lead != F.lit("")
    for name in LEADING_OPTIONAL:
        led = led & (F.contains(lead, F.lit(f'"{name}":'))
                     | ~F.contains(value.cast("string"), F.lit(f'"{name}"')))
    return F.when(led, lead)


def leading_envelope(lead: Column) -> Column:
    """ENVELOPE_SCHEMA's fields as the leading members give them (the text `from_json` gives a
    string field: a string's content, an integer's digits), from `led_members`; null without
    them."""
    def member(name: str) -> Column:
        after = F.substring_index(lead, f'"{name}":', -1)
        if name in LEADING_INTEGERS:
            return F.substring_index(after, ",", 1)
        text = F.substring_index(F.substr(after, F.lit(2)), '"', 1)
        if name not in LEADING_OPTIONAL:
            return text
        return F.when(F.contains(lead, F.lit(f'"{name}":')), text)
    return F.when(lead.isNotNull(), F.struct(*(
        (member(f.name) if f.name in LEADING else F.lit(None).cast(f.dataType)).alias(f.name)
        for f in ENVELOPE_SCHEMA)))


def _shard_key(shard: Column, keys: Sequence[int] | None) -> Column:
    if keys is None:
        return shard.cast("int")
    return F.element_at(F.array(*(F.lit(key) for key in keys)), (shard + 1).cast("int"))


def with_watermark_keeping_late_rows(routed: DataFrame, delay: str) -> DataFrame:
    """`routed` with its watermark on event_time, minus the late-row filter of the stateful
    operator after it. An event-time-timeout flatMapGroupsWithState drops every input row whose
    watermark column is at or behind the watermark before the function sees it. During a capped
    catch-up the sparse partitions run ahead in event time, the watermark follows them, and
    that filter dropped about half of a dense partition's events (tests/integration/
    test_catch_up.py). The watermark is still computed from event_time; the column the operator
    sees is null with the same watermark metadata, and Spark's filter never drops a row whose
    column is null. Late events reach the core, whose reorder window and late merge are there
    for them (docs/events.md)."""
    watermarked = routed.withWatermark("event_time", delay)
    tagged = watermarked.schema["event_time"].metadata
    never_late = F.lit(None).cast("timestamp").alias("event_time", metadata=tagged)
    return watermarked.select(*(never_late if name == "event_time" else name
                                for name in watermarked.columns))


def _watermark_time(ts: Column, kafka_ts: Column, max_clock_skew_ms: int) -> Column:
    as_millis = F.when(ts.rlike(r"^-?\d{1,16}$"), F.timestamp_millis(ts.cast("long")))
    as_iso = F.try_to_timestamp(ts)
    event_time = F.coalesce(as_millis, as_iso)
    ahead_ms = F.unix_millis(event_time) - F.unix_millis(kafka_ts)
    # Spark takes the max of non-null values for the watermark; null means "don't trust it".
    # Never older than the record's arrival, so the watermark follows the broker's clock too.
    trusted = (ahead_ms >= -WATERMARK_TRUST_WINDOW_MS) & (ahead_ms <= max_clock_skew_ms)
    return F.when(trusted, F.greatest(event_time, kafka_ts))
