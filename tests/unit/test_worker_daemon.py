"""The job's Python worker daemon: pyspark's own, with a cancelled task's closed socket told in
one line (streaming.spark.worker_daemon). Each case runs pyspark's real `daemon.worker` in a
child process, on a socket whose peer (the JVM's side) is closed, with pyspark's worker main
replaced by one that leaves a few bytes to flush."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streaming.spark.worker_daemon import CANCELLED_TASK_LINE, FLUSH_FAILURE

pytestmark = pytest.mark.unit

# argv[1]: whose worker function runs; argv[2]: what the task's main does.
CHILD = """
import socket, sys
import pyspark.worker
from pyspark import daemon
from streaming.spark import worker_daemon

def leaves_bytes(infile, outfile):
    outfile.write(b"x" * 100)          # within the buffer: written by the daemon's flush

def fails(infile, outfile):
    print("the task's own error", file=sys.stderr)

pyspark.worker.main = {"leaves_bytes": leaves_bytes, "fails": fails}[sys.argv[2]]
ours, jvm_side = socket.socketpair()
jvm_side.close()
work = worker_daemon.worker if sys.argv[1] == "ours" else daemon.worker
for _ in range(2):                      # a reused worker runs several tasks
    work(ours, True)
"""


def run_child(whose: str, task: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHILD, whose, task], capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stderr


def test_pysparks_daemon_prints_a_traceback_for_a_closed_socket():
    """The case the daemon exists for, as pyspark has it: what the next test quiets."""
    stderr = run_child("theirs", "leaves_bytes")
    assert FLUSH_FAILURE in stderr
    assert "Traceback (most recent call last)" in stderr
    assert "BrokenPipeError" in stderr


def test_a_closed_socket_is_one_line_per_task():
    stderr = run_child("ours", "leaves_bytes")
    assert stderr.splitlines() == [CANCELLED_TASK_LINE] * 2


def test_other_output_passes_through():
    stderr = run_child("ours", "fails")
    assert stderr.splitlines() == ["the task's own error"] * 2

