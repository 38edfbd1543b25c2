"""Every line of tests/data/conformance/rocketmq_go_allocate.jsonl, through both call paths.

The vectors were produced by the Go client's own strategy functions (tests/conformance/
go_allocate); lists must match in content and order, panics must match as text.
"""

from __future__ import annotations

import doctest

import pytest

from streaming.core.allocation import (
    InvalidAllocationInput,
    allocate_group,
    rocketmq_go,
)
from streaming.core.allocation.rocketmq_go import sort_client_ids_go, sort_queues_go
from tests.unit.conformance_vectors import (
    case_queues,
    expected,
    group_outcome,
    load_cases,
    per_client_outcome,
)

pytestmark = pytest.mark.unit


CASES = load_cases("rocketmq_go_allocate.jsonl")


def test_the_file_has_every_case_the_readme_lists():
    strategies = [case["strategy"] for case in CASES]
    assert len(CASES) == 402
    assert {s: strategies.count(s) for s in set(strategies)} == {
        "GO_AVG": 65, "GO_AVG_BY_CIRCLE": 73, "GO_CONSISTENT_HASH": 124,
        "GO_MACHINE_ROOM": 105, "GO_MACHINE_ROOM_NEARBY": 35,
    }


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_allocate_group_matches_go(case):
    assert group_outcome(case) == expected(case)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_per_client_allocate_matches_go(case):
    assert per_client_outcome(case, sort_queues_go, sort_client_ids_go) == expected(case)


def test_go_consistent_hash_is_not_javas():
    """The CRC32 ring gives other owners than Java's MD5 ring on the same input."""
    differing = 0
    for case in CASES:
        if case["strategy"] != "GO_CONSISTENT_HASH" or case.get("errors"):
            continue
        java = allocate_group("CONSISTENT_HASH", case["params"], case_queues(case), case["clients"],
                              for_clients=list(case["results"]))
        differing += java.results != expected(case)[0]
    assert differing > 0


def test_go_sorts_by_utf8_bytes_and_keeps_duplicate_queues():
    fullwidth, supplementary = "b-\uff21", "b-\U00010000"  # Java sorts these the other way
    queues = [("T", supplementary, 0), ("T", fullwidth, 1), ("T", fullwidth, 1)]
    assert sort_queues_go(queues) == [("T", fullwidth, 1), ("T", fullwidth, 1),
                                      ("T", supplementary, 0)]
    assert sort_client_ids_go([supplementary, fullwidth, fullwidth]) == [
        fullwidth, fullwidth, supplementary]


@pytest.mark.parametrize("strategy, params, reason", [
    ("GO_CONSISTENT_HASH", {}, "needs virtual_nodes"),
    ("GO_CONSISTENT_HASH", None, "needs virtual_nodes"),
    ("GO_CONSISTENT_HASH", {"virtual_nodes": 2**31}, "32-bit"),
    ("GO_MACHINE_ROOM", {"consumer_idcs": "IDC1"}, "consumer_idcs"),
    ("MACHINE_ROOM_NEARBY", {"inner": "GO_AVG"}, "Java one"),
])
def test_go_params_are_checked(strategy, params, reason):
    with pytest.raises(InvalidAllocationInput, match=reason):
        allocate_group(strategy, params, [("T", "b", 0)], ["c"])


def test_docstring_examples_hold():
    outcome = doctest.testmod(rocketmq_go)
    assert outcome.attempted > 0
    assert outcome.failed == 0
