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
