"""The upstream Java reference vectors, kept in tests/data/conformance/ (see its README.md)."""

from __future__ import annotations

import json
from pathlib import Path

CONFORMANCE = Path(__file__).resolve().parents[1] / "data" / "conformance"


def load_cases(name: str) -> list[dict]:
    path = CONFORMANCE / name
    if not path.is_file():
        # Not a skip: the vectors are part of the repository, so absence is a failure.
        raise FileNotFoundError(f"conformance vectors missing: {path}")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def case_queues(case: dict) -> list[tuple[str, str, int]]:
    return [(q["topic"], q["broker"], q["queue_id"]) for q in case["queues"]]


def expected(case: dict) -> tuple[dict, dict]:
    """(results, errors) as the reference client gave them: client id -> share (None on error)."""
    results = {cid: None if share is None else [tuple(q) for q in share]
               for cid, share in case["results"].items()}
    return results, case.get("errors", {})


def group_outcome(case: dict) -> tuple[dict, dict]:
    """(results, errors) of `allocate_group`, the job's path."""
    from streaming.core.allocation import allocate_group

    group = allocate_group(case["strategy"], case["params"], case_queues(case), case["clients"],
                           for_clients=list(case["results"]))
    return group.results, group.errors


def per_client_outcome(case: dict, sort_queues, sort_client_ids) -> tuple[dict, dict]:
    """(results, errors) of one `allocate` call per client, inputs sorted as that SDK sorts."""
    from streaming.core.allocation import AllocationError, allocate

    queues_sorted, cids_sorted = sort_queues(case_queues(case)), sort_client_ids(case["clients"])
    results, errors = {}, {}
    for cid in case["results"]:
        try:
            results[cid] = allocate(case["strategy"], case["params"], cid, queues_sorted,
                                    cids_sorted)
        except AllocationError as error:
            results[cid], errors[cid] = None, str(error)
    return results, errors
