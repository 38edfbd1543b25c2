"""The project's one on/off parser, and the switch that routes every step through the full
definition.

    >>> parse_bool("Yes", "--client-metrics", default=False), parse_bool(None, "x", default=True)
    (True, True)
"""

from __future__ import annotations

import os

TRUE_WORDS = ("on", "true", "yes", "1")
FALSE_WORDS = ("off", "false", "no", "0")

# On, every StepConfig made without `exact` takes the full definition: how the test suite runs
# a second time (Makefile), and the default of the job's --exact (the same variable).
EXACT_VARIABLE = "REBALANCE_MONITOR_EXACT"


def parse_bool(text: str | bool | None, name: str, default: bool) -> bool:
    """`rebalance-monitor run`'s flags and variables, the embedded source's Spark options and
    EXACT_VARIABLE (None: `default`)."""
    if text is None:
        return default
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    raise ValueError(f"{name} must be on or off (true/false, yes/no, 1/0), got {text!r}")


def exact_by_default() -> bool:
    return parse_bool(os.environ.get(EXACT_VARIABLE) or None, EXACT_VARIABLE, default=False)
