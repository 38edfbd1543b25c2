"""Do the step() property tests catch the bugs they are there for? Each mutation below breaks
one of step()'s shortcuts (or the invariant it rests on) in a copy of the repository; the step
tests then run on the copy with a fixed Hypothesis seed. CAUGHT is what a mutation should give,
except for the EQUIVALENT ones: keeping tombstones past the edge, and keeping the claims across
a restart, change no output any test can see (the next re-run replaces the claims; a tombstone
past the edge matches no event). The script exits 1 when a mutation that should be caught is
not.

    python -m tests.step_mutations
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STEP = "streaming/core/step.py"
MUTATIONS = {
    "following ignores a watermark-driven now": (
        STEP, "if new[0][0].ts < body.now or (", "if ("),
    "following ignores a changed session timeout": (
        STEP, "if not events or body.view_session_timeout_ms() != config.timeout_for(body.system()):",
        "if not events:"),
    "edge in new events taken as edge past window": (
        STEP, "if following.events[0][0].ts < following.horizon:", "if False:"),
    "view keeps tombstones past the edge": (
        STEP, "    forget_tombstones(view.state, following.horizon)\n", ""),
    "restart keeps the old claims": (
        STEP, "replay.state, replay.claims, replay.findings = fresh, {}, None",
        "replay.state, replay.findings = fresh, None"),
    "a re-run's change is not a change of the detail": (
        STEP, "    replay.changed |= (at, offset) > replay.published\n", ""),
    "an event behind the published point is not a change of the detail": (
        STEP, "              or any(_order(item) <= published for item in events))",
        "              or False)"),
    "broker-only change keeps the old findings": (
        "streaming/core/findings.py",
        "    return GroupFindings(head + _broker_divergence(state) + tail, previous.queues,",
        "    return GroupFindings(previous.findings, previous.queues,"),
}
# Mutations that change no output (see the module docstring): MISSED is their expected result.
EQUIVALENT = {"view keeps tombstones past the edge", "restart keeps the old claims"}
TESTS = ["tests/unit/test_step_properties.py", "tests/unit/test_step_transitions.py",
         "tests/unit/test_findings_seeds.py", "tests/unit/test_simulator.py",
         "tests/unit/test_group_detail.py"]


def run_mutation(path: str, before: str, after: str) -> tuple[bool, str]:
    """(caught, the first failing test or pytest's last line) for one mutation."""
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch) / "repo"
        shutil.copytree(REPO, work, ignore=shutil.ignore_patterns(".venv", ".git", "checkpoints"))
        target = work / path
        text = target.read_text()
        if text.count(before) != 1:
            raise SystemExit(f"{path}: the mutated text is no longer there once: {before!r}")
        target.write_text(text.replace(before, after))
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
             "--hypothesis-seed=0", *TESTS],
            cwd=work, capture_output=True, text=True, env={"PYTHONPATH": str(work), "PATH": "/usr/bin:/bin"})
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    lines = result.stdout.strip().splitlines()
    return result.returncode != 0, (failed or lines[-1:] or [result.stderr[-300:]])[0]


def main() -> int:
    """0 when the tests catch every mutation but the equivalent ones; 1 (naming the missed ones
    last) when not."""
    missed = []
    for name, (path, before, after) in MUTATIONS.items():
        caught, detail = run_mutation(path, before, after)
        print(f"{'CAUGHT' if caught else 'MISSED'}  {name}: {detail}", flush=True)
        if not caught and name not in EQUIVALENT:
            missed.append(name)
    if missed:
        print(f"{len(missed)} mutation(s) not caught: {', '.join(missed)}", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
