"""Every line of tests/data/conformance/rocketmq_allocate.jsonl, through both call paths.

The vectors were produced by the upstream Java classes; lists must match in content and order,
errors must match as text.
"""

from __future__ import annotations

import pytest

from streaming.core.allocation import (
    sort_client_ids,
    sort_queues,
)
from tests.unit.conformance_vectors import expected, group_outcome, load_cases, per_client_outcome

pytestmark = pytest.mark.unit


CASES = load_cases("rocketmq_allocate.jsonl")


def test_the_public_file_has_every_case_the_readme_lists():
    strategies = [case["strategy"] for case in CASES]
    assert len(CASES) == 398
    assert {s: strategies.count(s) for s in set(strategies)} == {
        "AVG": 93, "AVG_BY_CIRCLE": 93, "CONSISTENT_HASH": 92,
        "MACHINE_ROOM": 60, "MACHINE_ROOM_NEARBY": 60,
    }


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_allocate_group_matches_java(case):
    assert group_outcome(case) == expected(case)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_per_client_allocate_matches_java(case):
    assert per_client_outcome(case, sort_queues, sort_client_ids) == expected(case)
