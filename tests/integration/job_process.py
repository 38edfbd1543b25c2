"""The streaming job as a real separate process (`rebalance-monitor run`), so a test can SIGKILL it.

    job = JobProcess(bootstrap, topic, checkpoint, log_dir, findings_topic=..., dead_letter_topic=...)
    job.start()
    job.wait_for(lambda m: events_total(m) >= 100)
    job.kill()                                   # SIGKILL to the whole process group (driver + JVM)

The Python driver starts the JVM as its child, so the process runs in its own session and a
signal goes to the whole group: killing only the driver would leave the JVM running. (Spark's
Python worker daemon makes its own group; it ends its workers when the JVM's pipe closes.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from streaming.embedded_broker import free_port
from tests.environment import TEST_SOURCE
from tests.integration.monitor_harness import assert_nothing_lost
from tests.integration.spark_cluster import child_pids, cmdline
from tests.support import Scrape, wait_until

VENV_BIN = Path(sys.executable).parent
# Test-run tuning only (the job's own settings are untouched): no Spark UI, a JVM that starts fast.
SPARK_SUBMIT_ARGS = ("--conf spark.ui.enabled=false "
                     "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell")
# Wall-clock series: they differ between any two runs, crashed or not.
WALL_CLOCK_SERIES = frozenset({
    "rebalance_monitor_batch_duration_seconds",
    "rebalance_monitor_last_batch_timestamp_seconds",
    "rebalance_monitor_input_lag_seconds",
    "rebalance_monitor_source_last_success_timestamp_seconds",
})
# The job's connections, not the fleet: they say what a fault was, so a run that met one differs
# there from a run that did not (each test asserts them on its own).
CONNECTION_SERIES = frozenset({
    "rebalance_monitor_source_up",
    "rebalance_monitor_source_errors_total",
    "rebalance_monitor_produce_errors_total",
    "rebalance_monitor_query_restarts_total",
})


# Spark's own report of each batch reaches the job after the batch commits, so a kill or a
# query restart in between leaves that batch out of this sum (docs/metrics.md).
PROGRESS_SERIES = frozenset({"rebalance_monitor_source_records_total"})


def comparable_series(scrape: Scrape) -> dict[tuple, float]:
    """Every rebalance_* sample but the wall-clock, connection and progress ones: (name, sorted
    labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in scrape.samples
            if s.name.startswith("rebalance_")
            and s.name not in WALL_CLOCK_SERIES | CONNECTION_SERIES | PROGRESS_SERIES}


def events_total(scrape: Scrape) -> float:
    return sum(scrape.series("rebalance_monitor_events_total").values())


def settled(checkpoint: Path, final_watermark_ms: int) -> bool:
    """True when Spark has nothing left to run: its newest micro-batch is committed and ran with
    the final watermark (so no further no-data batch will fire event-time timeouts)."""
    offsets = _batch_ids(checkpoint / "offsets")
    if not offsets or not (checkpoint / "commits" / str(offsets[-1])).exists():
        return False
    lines = (checkpoint / "offsets" / str(offsets[-1])).read_text().splitlines()
    # Offset log v1: the version line, then the batch metadata, then one line per source.
    return json.loads(lines[1]).get("batchWatermarkMs") == final_watermark_ms


def batch_in_flight(checkpoint: Path) -> bool:
    """True while a micro-batch is planned (in the offset log) but not yet committed."""
    offsets = _batch_ids(checkpoint / "offsets")
    commits = _batch_ids(checkpoint / "commits")
    return bool(offsets) and (not commits or offsets[-1] > commits[-1])


def committed_batches(checkpoint: Path) -> int:
    return len(_batch_ids(checkpoint / "commits"))


def _batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


class JobProcess:
    """One `rebalance-monitor run` process on a given checkpoint, with its own /metrics port."""

    def __init__(self, bootstrap: str, topic: str, checkpoint: Path, log_dir: Path, *,
                 findings_topic: str, dead_letter_topic: str,
                 max_offsets_per_trigger: int | None = None,
                 trigger_interval_ms: int = 500,
                 env: dict[str, str] | None = None, extra_args: tuple[str, ...] = (),
                 source: str = TEST_SOURCE) -> None:
        self.port = free_port()
        self.findings_topic, self.dead_letter_topic = findings_topic, dead_letter_topic
        self.args = [
            str(VENV_BIN / "rebalance-monitor"), "run", "--bootstrap-servers", bootstrap,
            "--topic", topic, "--checkpoint", str(checkpoint), "--source", source,
            "--metrics-host", "127.0.0.1", "--metrics-port", str(self.port),
            "--trigger-interval-ms", str(trigger_interval_ms), "--shuffle-partitions", "2",
            "--findings-topic", findings_topic, "--dead-letter-topic", dead_letter_topic,
        ]
        if max_offsets_per_trigger is not None:
            self.args += ["--max-offsets-per-trigger", str(max_offsets_per_trigger)]
        self.args += list(extra_args)
        self.env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                    "PYSPARK_DRIVER_PYTHON": sys.executable, **(env or {})}
        self.log_path = log_dir / f"job-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self) -> JobProcess:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)
        return self

    def try_scrape(self) -> Scrape | None:
        """One scrape, or None while the endpoint does not answer yet."""
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=2) as response:
                return Scrape(response.read().decode())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def first_scrape(self, timeout: float = 90.0) -> Scrape:
        """The first scrape that answers: what /metrics shows the moment it is up."""
        return self.wait_for(lambda _: True, timeout)

    def wait_for(self, predicate: Callable[[Scrape], bool], timeout: float = 90.0,
                 poll: float = 0.1) -> Scrape:
        """Poll /metrics until predicate holds; fail with the job's log tail if it dies or hangs."""
        last: Scrape | None = None

        def holds() -> Scrape | None:
            nonlocal last
            if self.process.poll() is not None:
                raise AssertionError(f"job exited with {self.process.returncode}:\n{self.log_tail()}")
            last = self.try_scrape()
            return last if last is not None and predicate(last) else None

        def shown() -> str:
            series = "" if last is None else "\n".join(
                f"{k} {v}" for k, v in sorted(comparable_series(last).items()))
            return f"last scrape:\n{series}\n{self.log_tail()}"

        return wait_until(holds, timeout, "the /metrics waited for", interval=poll, details=shown)

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 60.0) -> int:
        """Signal the whole process group (driver and JVM) and wait for the driver to end."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        os.killpg(self.process.pid, sig)
        try:
            return self.process.wait(timeout)
        finally:
            self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        # After the driver ends, a JVM that ignored SIGTERM may still hold the group: end it.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def jvm_pid(self) -> int:
        """The JVM pyspark launched for this driver (its child running java)."""
        for pid in child_pids(self.process.pid):
            if (cmdline(pid) or [""])[0].endswith("java"):
                return pid
        raise AssertionError(f"no JVM under the driver {self.process.pid}")

    def wait_for_log(self, text: str, timeout: float = 30.0) -> None:
        """Until the job's log has `text`."""
        wait_until(lambda: text in self.log_path.read_text(errors="replace"), timeout,
                   f"{text!r} in the job's log", details=self.log_tail)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> JobProcess:
        return self.start()

    def __exit__(self, exc_type, *exc) -> None:
        try:
            scrape = self.try_scrape() if exc_type is None and self.process.poll() is None else None
            if scrape is not None:
                assert_nothing_lost(scrape)
        finally:
            self.kill()
