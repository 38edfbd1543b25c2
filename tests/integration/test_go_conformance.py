"""The Go client's own strategies against the Python port, on freshly generated cases.

Builds tests/conformance/go_allocate (the real github.com/apache/rocketmq-client-go/v2 strategy
functions, at the version its go.mod pins) with `go build`, feeds it cases from make_cases.py
with a new seed each run (GO_CONFORMANCE_SEED repeats one), and compares every result with
`allocate_group` and the per-client `allocate`. Go's own caches (GOMODCACHE, GOCACHE) are used;
the first build downloads the modules go.sum lists from the module proxy.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from streaming.core.allocation.rocketmq_go import sort_client_ids_go, sort_queues_go
from tests.unit.conformance_vectors import expected, group_outcome, per_client_outcome

pytestmark = pytest.mark.integration

PROGRAM = Path(__file__).resolve().parents[1] / "conformance" / "go_allocate"
CHECKED_IN_SEED = 20250601  # tests/data/conformance/rocketmq_go_allocate.jsonl
CASES = 300


def _make_cases_module():
    spec = importlib.util.spec_from_file_location("go_make_cases", PROGRAM / "make_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seed() -> int:
    chosen = os.environ.get("GO_CONFORMANCE_SEED")
    seed = int(chosen) if chosen else random.SystemRandom().randrange(1, 2**31)
    return seed + 1 if seed == CHECKED_IN_SEED else seed


@pytest.fixture(scope="module")
def go_allocate(tmp_path_factory) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.fail("`go` is not on PATH: the Go conformance test needs a Go toolchain "
                    "(https://go.dev/dl/) to build tests/conformance/go_allocate")
    binary = tmp_path_factory.mktemp("go_allocate") / "go_allocate"
    # -buildvcs=false: the module sits inside the project's git checkout, whose status the
    # build would otherwise try to stamp (and fail on, for a checkout owned by another user).
    built = subprocess.run([go, "build", "-buildvcs=false", "-o", str(binary), "."],
                           cwd=PROGRAM, capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        pytest.fail(f"go build in {PROGRAM} failed:\n{built.stdout}{built.stderr}")
    return binary


def test_python_port_matches_the_go_client_on_fresh_cases(go_allocate):
    seed = _seed()
    cases = _make_cases_module().make_cases(seed, CASES)
    stdin = "".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases)
    ran = subprocess.run([str(go_allocate)], input=stdin.encode(), capture_output=True,
                         timeout=300)
    assert ran.returncode == 0, f"seed {seed}: go_allocate failed: {ran.stderr.decode()}"
    outputs = [json.loads(line) for line in ran.stdout.decode().splitlines()]
    assert [o["id"] for o in outputs] == [c["id"] for c in cases], f"seed {seed}"
    mismatches = []
    for case in outputs:
        go = expected(case)
        for path, got in (("allocate_group", group_outcome(case)),
                          ("allocate", per_client_outcome(case, sort_queues_go,
                                                          sort_client_ids_go))):
            if got != go:
                mismatches.append(f"{case['id']} ({case['strategy']}, {path}): Go {go}, "
                                  f"Python {got}")
    assert not mismatches, (f"seed {seed} (GO_CONFORMANCE_SEED={seed} repeats it): "
                            f"{len(mismatches)} mismatches; first: {mismatches[:3]}")
