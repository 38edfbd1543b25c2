"""Findings as comparable sets of intervals, for checking a monitor against a ground truth.

An interval is (identity, since, ended_at), ended_at None for a finding still open. The identity
is what the simulator's ground truth knows: kind, group, topic, queue, clients and brokers (no
`address`, which the ground truth does not carry).

    >>> started = {"status": "started", "kind": "skew", "group": "g", "topic": None,
    ...            "queue": None, "clients": [], "since": 5, "at": 5}
    >>> intervals_of([started, {**started, "status": "ended", "at": 9}])
    {(('skew', 'g', None, None, (), ()), 5, 9)}
    >>> intervals_of([started])
    {(('skew', 'g', None, None, (), ()), 5, None)}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from streaming.core.contract import FindingRecord


def _as_published(record: Mapping | FindingRecord) -> Mapping:
    """A record as the findings topic carries it (the core's records are serialised first)."""
    return json.loads(record.to_json()) if isinstance(record, FindingRecord) else record


def identity_of(record: Mapping | FindingRecord) -> tuple:
    """(kind, group, topic, queue, clients, brokers) of a finding record, hashable."""
    record = _as_published(record)
    queue = record["queue"]
    return (record["kind"], record["group"], record["topic"],
            None if queue is None else tuple(queue), tuple(record["clients"]),
            tuple(record.get("brokers", ())))


def intervals_of(records: Iterable[Mapping | FindingRecord]) -> set[tuple]:
    """Started/ended records, in the order they were published per group -> intervals."""
    open_: dict[tuple, int] = {}
    closed: set[tuple] = set()
    for record in map(_as_published, records):
        identity = identity_of(record)
        if record["status"] == "started":
            open_[identity] = record["since"]
        else:
            open_.pop(identity, None)
            closed.add((identity, record["since"], record["at"]))
    return closed | {(identity, since, None) for identity, since in open_.items()}


def expected_intervals(ground_truth: Iterable) -> set[tuple]:
    """The simulator's ExpectedFindings as intervals."""
    return {((f.kind, f.group, f.topic, f.queue, f.clients, f.brokers), f.begins_ms, f.ends_ms)
            for f in ground_truth}
