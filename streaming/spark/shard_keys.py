"""The state key of each shard, chosen so that Spark's shuffle spreads the shards evenly.

Spark places a stateful operator's key in the partition `pmod(hash(key), partitions)`, its
Murmur3 with seed 42. The shard numbers 0 to 127 fall 54 and 74 into 2 partitions, and 25, 41,
29 and 33 into 4: the task with the most shards holds the most groups, and the state stage
waits for it while the other core idles (docs/benchmarks.md, "Where a catch-up batch's time
goes"). Shard i is therefore keyed by the i-th of the integers, from 0 up, whose hash is i
modulo SPREAD_MODULUS: into any number of partitions that divides SPREAD_MODULUS, the shards
fall as evenly as their number allows.

    >>> spark_hash_int(0), spark_hash_int(1)      # Spark: SELECT hash(0), hash(1)
    (933211791, -559580957)
    >>> keys = spread_keys(128)
    >>> [sum(spark_partition(k, 2) == p for k in keys) for p in range(2)]
    [64, 64]
    >>> [sum(spark_partition(k, 2) == p for k in range(128)) for p in range(2)]
    [54, 74]
"""

from __future__ import annotations

from functools import lru_cache

SPREAD_MODULUS = 16
SPARK_HASH_SEED = 42      # Spark's HashPartitioning: Murmur3Hash(keys, 42)

_MASK = 0xFFFFFFFF


def spark_hash_int(value: int, seed: int = SPARK_HASH_SEED) -> int:
    """Spark's `hash()` of one IntegerType value: Murmur3_x86_32.hashInt, a signed 32-bit
    result."""
    k1 = _rotl((value & _MASK) * 0xCC9E2D51 & _MASK, 15) * 0x1B873593 & _MASK
    h1 = _rotl((seed & _MASK) ^ k1, 13) * 5 + 0xE6546B64 & _MASK
    h1 ^= 4
    h1 = (h1 ^ (h1 >> 16)) * 0x85EBCA6B & _MASK
    h1 = (h1 ^ (h1 >> 13)) * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def spark_partition(key: int, partitions: int) -> int:
    """The shuffle partition Spark gives an IntegerType key: pmod(hash(key), partitions)."""
    return spark_hash_int(key) % partitions


@lru_cache(maxsize=8)
def spread_keys(shards: int) -> tuple[int, ...]:
    """Shard i's key: the smallest integer not yet taken whose hash is i modulo
    SPREAD_MODULUS."""
    by_residue: list[list[int]] = [[] for _ in range(SPREAD_MODULUS)]
    wanted = [(shards - residue + SPREAD_MODULUS - 1) // SPREAD_MODULUS
              for residue in range(SPREAD_MODULUS)]
    candidate = 0
    while any(len(found) < want for found, want in zip(by_residue, wanted, strict=True)):
        residue = spark_partition(candidate, SPREAD_MODULUS)
        if len(by_residue[residue]) < wanted[residue]:
            by_residue[residue].append(candidate)
        candidate += 1
    return tuple(by_residue[i % SPREAD_MODULUS][i // SPREAD_MODULUS] for i in range(shards))


def _rotl(value: int, bits: int) -> int:
    return (value << bits | value >> (32 - bits)) & _MASK
