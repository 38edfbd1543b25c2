"""Every line of tests/data/conformance/rocketmq_allocate.jsonl, through both call paths.

The vectors were produced by the upstream Java classes; lists must match in content and order,
errors must match as text.
"""

from __future__ import annotations

import pytest

from streaming.core.allocation import (
    AllocationError,
    allocate,
    allocate_group,
    sort_client_ids,
    sort_queues,
)
from tests.unit.conformance_vectors import load_cases

pytestmark = pytest.mark.unit


CASES = load_cases("rocketmq_allocate.jsonl")


def _queues(case: dict) -> list[tuple[str, str, int]]:
    return [(q["topic"], q["broker"], q["queue_id"]) for q in case["queues"]]


def _expected(case: dict) -> dict[str, list[tuple[str, str, int]] | None]:
    return {
        cid: None if share is None else [tuple(q) for q in share]
        for cid, share in case["results"].items()
    }


def test_the_public_file_has_every_case_the_readme_lists():
    strategies = [case["strategy"] for case in CASES]
    assert len(CASES) == 398
    assert {s: strategies.count(s) for s in set(strategies)} == {
        "AVG": 93, "AVG_BY_CIRCLE": 93, "CONSISTENT_HASH": 92,
        "MACHINE_ROOM": 60, "MACHINE_ROOM_NEARBY": 60,
    }


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_allocate_group_matches_java(case):
    group = allocate_group(case["strategy"], case["params"], _queues(case), case["clients"],
                           for_clients=list(case["results"]))
    assert group.results == _expected(case)
    assert group.errors == case.get("errors", {})


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_per_client_allocate_matches_java(case):
    queues_sorted = sort_queues(_queues(case))
    cids_sorted = sort_client_ids(case["clients"])
    results, errors = {}, {}
    for cid in case["results"]:
        try:
            results[cid] = allocate(case["strategy"], case["params"], cid, queues_sorted,
                                    cids_sorted)
        except AllocationError as error:
            results[cid], errors[cid] = None, str(error)
    assert results == _expected(case)
    assert errors == case.get("errors", {})
