"""The spread shard keys against Spark itself: its `hash()` is the one streaming.spark.shard_keys
computes, and the router's shard column, shuffled as the stateful operator's input is (hash
partitioning on `shard`), gives each task as many shards; the shards' numbers do not."""

import datetime
import json

import pytest
from pyspark.sql import functions as F

from streaming.spark.checkpoint_layout import DEFAULT_SHARDS, MAX_SPREAD_SHARDS
from streaming.spark.parse import route_events
from streaming.spark.shard_keys import spark_hash_int, spread_keys

pytestmark = pytest.mark.integration


def test_sparks_hash_is_the_one_the_keys_are_chosen_by(spark):
    values = [*spread_keys(DEFAULT_SHARDS), *range(-300, 300), 2**31 - 1, -2**31]
    frame = spark.createDataFrame([(v,) for v in values], "k int")
    hashed = {row.k: row.h for row in frame.select("k", F.hash("k").alias("h")).collect()}
    assert hashed == {v: spark_hash_int(v) for v in values}


def routed_shards_per_task(spark, shard_keys, partitions: int) -> list[int]:
    """Route one heartbeat of each of 2,000 groups, shuffle it by `shard` as the stateful
    operator's input is, and count the distinct shards each task receives."""
    now = datetime.datetime.now()
    records = spark.createDataFrame(
        [(None, json.dumps({"type": "heartbeat", "ts": 1_700_000_000_000, "group": f"g{i}",
                            "client_id": "c1", "topics": ["T"]}).encode(), "events", 0, i, now)
         for i in range(2_000)],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp")
    routed = route_events(records, 1 << 20, DEFAULT_SHARDS, 300_000, shard_keys)
    tasks = (routed.repartition(partitions, "shard")
             .select(F.spark_partition_id().alias("task"), "shard").distinct()
             .groupBy("task").count().collect())
    assert {row.task for row in tasks} == set(range(partitions))
    return sorted(row["count"] for row in tasks)


@pytest.mark.parametrize("partitions", [2, 4, 8])
def test_the_spread_keys_give_each_task_as_many_shards(spark, partitions):
    per_task = routed_shards_per_task(spark, spread_keys(DEFAULT_SHARDS), partitions)
    assert per_task == [DEFAULT_SHARDS // partitions] * partitions


def test_the_shard_numbers_as_keys_give_the_tasks_54_and_74(spark):
    """The control, and the layout of every checkpoint recorded before the spread keys."""
    assert routed_shards_per_task(spark, None, 2) == [54, 74]


def test_a_plan_with_the_most_keys_is_not_cut_short_at_the_jobs_setting(spark):
    """build_session sets spark.sql.debug.maxToStringFields to MAX_SPREAD_SHARDS: below it,
    Spark cuts the keys' array short in the plan's text and logs a WARNING saying so (the job's
    log then had a line in the middle of an outage, test_outage_logs)."""
    now = datetime.datetime.now()
    records = spark.createDataFrame(
        [(None, b"{}", "events", 0, 0, now)],
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp")
    routed = route_events(records, 1 << 20, MAX_SPREAD_SHARDS, 300_000,
                          spread_keys(MAX_SPREAD_SHARDS))
    setting = "spark.sql.debug.maxToStringFields"
    before = spark.conf.get(setting)
    try:
        assert "more fields" in routed._jdf.queryExecution().toString()     # Spark's default
        spark.conf.set(setting, str(MAX_SPREAD_SHARDS))
        assert "more fields" not in routed._jdf.queryExecution().toString()
    finally:
        spark.conf.set(setting, before)
