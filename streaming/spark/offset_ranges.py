"""Kafka offsets as Spark checkpoints them, read limits and per-partition ranges (pure).

The checkpointed offset is Spark's kafka format, a JSON dict of next offsets per partition:

    {"rebalance.events": {"0": 120, "1": 97}}

Internally positions are {(topic, partition): next_offset}. A batch reads, per partition, the
half-open range [start, end). A partition that appears after the query started has no start: it
is read from its earliest offset (`OffsetRange.new_partition`), as Spark's kafka source does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TopicPartitionKey = tuple[str, int]
Positions = dict[TopicPartitionKey, int]

EARLIEST = "earliest"
LATEST = "latest"
SPARK_EARLIEST = -2  # Spark's JSON startingOffsets sentinels
SPARK_LATEST = -1


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (or went backwards) and failOnDataLoss is true."""


def to_offsets(positions: Mapping[TopicPartitionKey, int]) -> dict[str, dict[str, int]]:
    """{(topic, partition): offset} -> {topic: {"partition": offset}}, keys in a fixed order."""
    offsets: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(positions.items()):
        offsets.setdefault(topic, {})[str(partition)] = int(offset)
    return offsets


def from_offsets(offsets: Mapping[str, Mapping[str, int]] | None) -> Positions:
    """Inverse of to_offsets; accepts JSON text too."""
    if offsets is None:
        return {}
    if isinstance(offsets, str):
        offsets = json.loads(offsets)
    return {
        (topic, int(partition)): int(offset)
        for topic, per_partition in offsets.items()
        for partition, offset in per_partition.items()
    }


def fair_split(available: Mapping[TopicPartitionKey, int], budget: int) -> Positions:
    """Share `budget` rows among partitions: equal shares, what a partition cannot use goes to
    the others. The total is min(budget, sum(available)).

    >>> fair_split({("t", 0): 2, ("t", 1): 100, ("t", 2): 100}, 10)
    {('t', 0): 2, ('t', 1): 4, ('t', 2): 4}
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    shares: Positions = {}
    ordered = sorted(available.items(), key=lambda item: (item[1], item[0]))
    remaining = budget
    for index, (key, rows) in enumerate(ordered):
        share = min(max(rows, 0), remaining // (len(ordered) - index))
        shares[key] = share
        remaining -= share
    # Floor division can leave a remainder while larger partitions still have rows.
    for key, rows in sorted(available.items(), key=lambda item: item[0]):
        extra = min(max(rows, 0) - shares[key], remaining)
        shares[key] += extra
        remaining -= extra
    return dict(sorted(shares.items()))


def limit_ends(
    start: Mapping[TopicPartitionKey, int],
    latest: Mapping[TopicPartitionKey, int],
    earliest: Mapping[TopicPartitionKey, int],
    max_rows: int | None,
) -> Positions:
    """End positions of the next batch: `latest`, capped to `max_rows` rows in all.

    A partition missing from `start` begins at `earliest`; one missing from `latest` (deleted)
    keeps its start. Callers check `behind()` first: here latest >= start is assumed.

    >>> limit_ends({("t", 0): 10}, {("t", 0): 50, ("t", 1): 5}, {("t", 1): 0}, 20)
    {('t', 0): 25, ('t', 1): 5}
    """
    begin = {key: start.get(key, earliest.get(key, 0)) for key in latest}
    ends = {key: max(latest[key], begin[key]) for key in latest}
    if max_rows is not None:
        available = {key: ends[key] - begin[key] for key in ends}
        shares = fair_split(available, max_rows)
        ends = {key: begin[key] + shares[key] for key in ends}
    for key, offset in start.items():
        ends.setdefault(key, offset)
    return dict(sorted(ends.items()))


def behind(start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int]):
    """Partitions whose latest offset is below the query's position (topic recreated, log
    truncated): [(key, start, latest)]."""
    return [
        (key, offset, latest[key])
        for key, offset in sorted(start.items())
        if key in latest and latest[key] < offset
    ]


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int
    new_partition: bool = False  # start unknown when planned: read from the earliest offset

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_ranges(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int]
) -> list[OffsetRange]:
    """Non-empty ranges between two positions, one per partition, in (topic, partition) order."""
    ranges = []
    for (topic, partition), stop in sorted(end.items()):
        known = (topic, partition) in start
        begin = start[(topic, partition)] if known else 0
        if stop > begin:
            ranges.append(OffsetRange(topic, partition, begin, stop, new_partition=not known))
    return ranges


def parse_starting_offsets(text: str | None) -> str | Positions:
    """"earliest" | "latest" | Spark's JSON form {"topic": {"0": 23, "1": -2}} (-2 earliest,
    -1 latest)."""
    value = (text or EARLIEST).strip()
    if value.lower() in (EARLIEST, LATEST):
        return value.lower()
    try:
        positions = from_offsets(json.loads(value))
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(
            f"startingOffsets must be earliest, latest or JSON like "
            f'{{"topic": {{"0": 23}}}}, got {text!r}'
        ) from exc
    bad = [offset for offset in positions.values() if offset < SPARK_EARLIEST]
    if bad:
        raise ValueError(f"startingOffsets has invalid offsets {bad}")
    return positions


def parse_positive_int(text: str | int | None, name: str) -> int | None:
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a positive integer, got {text!r}") from exc
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {text!r}")
    return value


def topics_of(subscribe: str | None) -> tuple[str, ...]:
    topics = tuple(name.strip() for name in (subscribe or "").split(",") if name.strip())
    if not topics:
        raise ValueError("option 'subscribe' must name at least one topic")
    return topics


def keys_of(topics: Iterable[str], partitions: Mapping[str, int]) -> list[TopicPartitionKey]:
    return [(topic, p) for topic in topics for p in range(partitions.get(topic, 0))]
