"""SIGTERM or SIGINT to a real `rebalance-monitor run` process group stops it cleanly and promptly.

The whole group gets the signal (the Python driver and its JVM, which ignores SIGTERM and
SIGINT: the driver ends it), as `timeout`, a supervisor (SIGTERM) or a terminal's Ctrl-C
(SIGINT) send it: one "stopping" line, exit status 0
within 10 s and no traceback, whether the events broker answers or its address does not even
resolve. SIGTERM to the Python driver alone (its JVM gets none) while the broker cannot be
reached. A second signal during the stop (an impatient operator) ends it at once, still with
status 0 and no traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from streaming.spark.job import WORKER_DAEMON
from tests.integration.job_process import SPARK_SUBMIT_ARGS, JobProcess, committed_batches
from tests.integration.spark_cluster import child_pids, cmdline
from tests.support import wait_until

pytestmark = [pytest.mark.integration]

STOP_WITHIN_S = 10.0
UNREACHABLE = "broker.invalid:9092"   # .invalid never resolves (RFC 2606)


def stop_and_check(job: JobProcess, whole_group: bool = True, signum: int = signal.SIGTERM,
                   again: bool = False) -> float:
    started = time.monotonic()
    try:
        if whole_group:
            os.killpg(job.process.pid, signum)
            if again:
                job.wait_for_log("stopping (")
                os.killpg(job.process.pid, signum)
        else:   # the Python driver only: it has to end its JVM itself
            job.process.send_signal(signum)
        status = job.process.wait(30)
    except subprocess.TimeoutExpired:
        status = None
    finally:
        job.kill()                  # whatever outlived the driver
    took = time.monotonic() - started
    output = job.log_path.read_text(errors="replace")
    stopping = [line for line in output.splitlines() if "stopping (" in line.lower()]
    print(f"stopped in {took:.1f} s, status {status}, {output.count('Traceback')} tracebacks, "
          f"{len(stopping)} stopping lines")
    assert "Traceback" not in output, output[-5000:]
    assert status == 0, f"exit status {status}:\n{job.log_tail()}"
    assert took < STOP_WITHIN_S, f"took {took:.1f} s to stop:\n{job.log_tail()}"
    assert len(stopping) == 1, f"stopping lines: {stopping}\n{job.log_tail()}"
    if again:
        assert "again: stopping now" in output, job.log_tail()
    return took


def signals_ignored(pid: int) -> set[signal.Signals]:
    """The signals the process ignores (SigIgn in /proc/PID/status)."""
    mask = next(int(line.split()[1], 16) for line in
                Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigIgn:"))
    return {each for each in signal.Signals if mask >> (each - 1) & 1}


@pytest.mark.parametrize(("signum", "again"), [(signal.SIGTERM, False), (signal.SIGINT, False),
                                             (signal.SIGTERM, True)],
                         ids=["sigterm", "sigint", "sigterm-twice"])
def test_a_signal_to_the_group_with_the_broker_reachable(kafka_bootstrap, make_topic, tmp_path,
                                                         signum, again):
    topic = make_topic()
    job = JobProcess(kafka_bootstrap, topic, tmp_path / "checkpoint", tmp_path,
                     findings_topic=f"{topic}.findings", dead_letter_topic=f"{topic}.dlq",
                     env={"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS}).start()
    try:
        job.first_scrape()
        wait_until(lambda: committed_batches(tmp_path / "checkpoint") >= 1, 90,
                   "the first batch committed")
        assert signal.SIGTERM in signals_ignored(job.jvm_pid())   # the driver stops the JVM
        assert any(WORKER_DAEMON in cmdline(pid) for pid in child_pids(job.jvm_pid())), (
            "the Python workers' daemon is not streaming.spark.worker_daemon")
        stop_and_check(job, signum=signum, again=again)
    finally:
        job.kill()


@pytest.mark.parametrize("whole_group", [True, False], ids=["group", "driver-only"])
def test_sigterm_with_the_broker_unresolvable(tmp_path, whole_group):
    job = JobProcess(UNREACHABLE, "rebalance.events", tmp_path / "checkpoint", tmp_path,
                     findings_topic="rebalance.findings", dead_letter_topic="rebalance.dlq",
                     env={"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS}).start()
    try:
        # The query is started (the probe starts just before it) and the broker is known down.
        job.wait_for(lambda m: m.value("rebalance_monitor_source_up") == 0
                     and (m.value("rebalance_monitor_source_errors_total") or 0) >= 1)
        stop_and_check(job, whole_group)
    finally:
        job.kill()
