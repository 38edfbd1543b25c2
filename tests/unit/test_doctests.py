"""Every docstring example in streaming/, producers/ and the benchmarks runs: each module whose
source holds a `>>> ` line is collected here, so an example that drifts from the code fails the
suite."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def modules_with_examples() -> list[str]:
    found = []
    for package in ("streaming", "producers", "tests/benchmarks"):
        for path in sorted((REPO / package).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                found.append(".".join(path.relative_to(REPO).with_suffix("").parts))
    return found


MODULES = modules_with_examples()


def test_the_collector_finds_the_examples():
    assert len(MODULES) >= 40
    assert {"streaming.core.step", "streaming.core.state.codec", "streaming.core.state.events",
            "streaming.core.state.group", "streaming.core.contract",
            "streaming.core.findings"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_example_of_the_module_runs(name):
    outcome = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS,
                              report=True)
    assert outcome.attempted > 0, f"{name}: a '>>> ' line that doctest does not collect"
    assert outcome.failed == 0, f"{name}: {outcome.failed} example(s) failed (printed above)"
