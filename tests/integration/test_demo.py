"""`rebalance-monitor demo` (the README's first command) as a user runs it: a real process with
the embedded broker, the simulated fleet, local Spark and /metrics."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.monitor_harness import Scrape

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COMMAND = Path(sys.executable).parent / "rebalance-monitor"


def test_demo_shows_a_double_assignment_and_a_skewed_group_within_a_minute(tmp_path):
    started = time.monotonic()
    process = subprocess.Popen(
        [str(COMMAND), "demo", "--duration", "120", "--metrics-port", "0", "--refresh", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    try:
        url = _metrics_url(process)
        # Keep reading what the demo prints, as a terminal would: a pipe left unread fills after
        # some 30 tables and then blocks the demo's printing (not its job).
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
        reader.start()
        seen = _wait_for_conflicts(url, started + 60)
        assert seen["double"] > 0, seen
        assert seen["skew"] >= 2.0, seen
        process.send_signal(signal.SIGINT)  # Ctrl-C stops it cleanly
        process.wait(timeout=60)
        reader.join(timeout=10)
        output = "".join(lines)
        assert process.returncode == 0, output[-3000:]
        assert "demo: stopped" in output
        assert "skew-group" in output and "double_assignment" in output
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def _metrics_url(process) -> str:
    for line in process.stdout:
        match = re.search(r"metrics (http://\S+/metrics)", line)
        if match:
            return match.group(1)
    raise AssertionError("the demo ended before announcing its metrics endpoint")


def _wait_for_conflicts(url: str, deadline: float) -> dict:
    import urllib.request

    seen = {"double": 0.0, "skew": 0.0}
    while time.monotonic() < deadline and not (seen["double"] > 0 and seen["skew"] >= 2.0):
        with urllib.request.urlopen(url, timeout=5) as response:
            scrape = Scrape(response.read().decode())
        seen["double"] = max([0.0, *scrape.series("rebalance_double_assigned_queues").values()])
        seen["skew"] = max([0.0, *scrape.series("rebalance_skew_ratio").values()])
        time.sleep(0.5)
    return seen
