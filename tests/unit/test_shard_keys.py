"""The spread shard keys: distinct, the same on every call, and falling evenly into any number
of Spark partitions that divides SPREAD_MODULUS (Spark's own hash is checked against this one
in tests/integration/test_shard_keys_spark.py)."""

import pytest

from streaming.spark.shard_keys import SPREAD_MODULUS, spark_partition, spread_keys

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("shards", [1, 7, 16, 128, 500])
def test_the_keys_are_distinct_and_stable(shards):
    keys = spread_keys(shards)
    assert len(keys) == shards == len(set(keys))
    spread_keys.cache_clear()
    assert spread_keys(shards) == keys
    assert spread_keys(shards + 3)[:shards] == keys     # a shard's key does not move


@pytest.mark.parametrize("shards", [16, 100, 128, 500])
@pytest.mark.parametrize("partitions", [p for p in range(1, SPREAD_MODULUS + 1)
                                        if SPREAD_MODULUS % p == 0])
def test_the_keys_fall_evenly_into_partitions_that_divide_the_modulus(shards, partitions):
    counts = [0] * partitions
    for key in spread_keys(shards):
        counts[spark_partition(key, partitions)] += 1
    assert max(counts) - min(counts) <= 1


def test_the_shard_numbers_themselves_do_not():
    """The control: the numbers 0 to 127 as keys fall 54 and 74 into 2 partitions."""
    counts = [0, 0]
    for key in range(128):
        counts[spark_partition(key, 2)] += 1
    assert counts == [54, 74]
