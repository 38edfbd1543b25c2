"""`rebalance-monitor demo` (the README's first command, `make demo`) as a user runs it: a real
process with its Apache Kafka broker (the embedded one where the jars are not fetched), the
simulated fleet, local Spark and /metrics, its output read from a pipe, not a terminal."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from itertools import takewhile
from pathlib import Path

import pytest

from streaming.jars import KAFKA_VERSION, kafka_broker_jars
from tests.support import Scrape

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COMMAND = Path(sys.executable).parent / "rebalance-monitor"
COLUMNS = ("group", "sys", "members", "queues", "double", "orphan", "skew", "idle", "rebal")


def test_demo_shows_a_double_assignment_and_a_skewed_group_and_prints_them_when_stopped(tmp_path):
    started = time.monotonic()
    process = subprocess.Popen(
        [str(COMMAND), "demo", "--duration-seconds", "300", "--metrics-port", "0", "--refresh-seconds", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        url, announced = _metrics_url(process)
        if kafka_broker_jars():  # what `make demo` runs on, once `make jars` fetched them
            assert f"(Apache Kafka {KAFKA_VERSION})" in announced, announced
        # Keep reading what the demo prints, as a terminal would: a pipe left unread fills after
        # some 30 tables and then blocks the demo's printing (not its job).
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        # A failure deadline only: the demo is stopped as soon as both show. Its broker and Spark
        # start slower while other tests run beside it (pytest -n 2): 60 s was once too short.
        doubled, skewed = _wait_for_conflicts(url, started + 240)
        assert doubled and skewed, (doubled, skewed)
        # Ctrl-C: a terminal signals the whole foreground group, the demo and its Spark JVM (its
        # broker runs in a session of its own, so that the demo stops the job before it).
        asked = len(lines)
        stopping = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
        took = time.monotonic() - stopping
        reader.join(timeout=10)
        output = "".join(lines)
        assert process.returncode == 0, output[-3000:]
        assert output.rstrip().endswith("demo: stopped"), output[-3000:]
        assert "Traceback" not in output, output
        after = lines[asked:]
        assert not [line for line in after if re.search(r"Connect to .* failed|FAIL\|", line)], \
            "".join(after)[-3000:]
        assert took < 30, (took, "".join(after)[-3000:])
        rows, findings = _final_state(output)
        # The final table reads the store /metrics showed, moments later: no group is gone (none
        # has lost its members), and client-id-collision's double assignment and
        # multi-topic-skew's skew last their scenario's whole run, so each conflict still shows.
        assert doubled | skewed <= rows.keys(), (doubled, skewed, output[-3000:])
        assert any(("double_assignment", group) in findings for group in doubled), output[-3000:]
        assert any(("skew", group) in findings and float(rows[group]["skew"]) >= 2.0
                   for group in skewed), output[-3000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def _metrics_url(process) -> tuple[str, str]:
    """The metrics URL the demo announces, and the line that announces it."""
    for line in process.stdout:
        match = re.search(r"metrics (http://\S+/metrics)", line)
        if match:
            return match.group(1), line
    raise AssertionError("the demo ended before announcing its metrics endpoint")


def _wait_for_conflicts(url: str, deadline: float) -> tuple[set[str], set[str]]:
    """The groups /metrics shows with a double-assigned queue, and with a skew of 2 or more."""
    import urllib.request

    doubled: set[str] = set()
    skewed: set[str] = set()
    while time.monotonic() < deadline and not (doubled and skewed):
        with urllib.request.urlopen(url, timeout=5) as response:
            scrape = Scrape(response.read().decode())
        doubled = _groups_where(scrape, "rebalance_double_assigned_queues", lambda v: v > 0)
        skewed = _groups_where(scrape, "rebalance_skew_ratio", lambda v: v >= 2.0)
        time.sleep(0.5)
    return doubled, skewed


def _groups_where(scrape: Scrape, name: str, holds) -> set[str]:
    return {dict(labels)["group"] for labels, value in scrape.series(name).items() if holds(value)}


def _final_state(output: str) -> tuple[dict[str, dict], set[tuple[str, str]]]:
    """From what follows "demo: final state": the group table's rows by group, and the
    (kind, group) of each open finding."""
    assert "demo: final state" in output, output[-3000:]
    final = output.split("demo: final state", 1)[1].splitlines()
    separator = next(i for i, line in enumerate(final) if line.startswith("---"))
    title = next(i for i, line in enumerate(final) if line.startswith("open findings"))
    rows = [dict(zip(COLUMNS, line.split(), strict=False))  # flags, if any, follow the columns
            for line in takewhile(str.strip, final[separator + 1:])]
    records = [line.split() for line in takewhile(lambda line: line.startswith("  "),
                                                  final[title + 1:])]
    return {row["group"]: row for row in rows}, {(record[1], record[2]) for record in records}
