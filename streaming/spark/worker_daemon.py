"""pyspark's Python worker daemon (spark.python.daemon.module), with a cancelled task told in one
line.

When Spark cancels a task (a stop cancels the batch in flight: docs/deploy.md), it closes the
task's socket, and pyspark's daemon then prints "PySpark daemon failed to flush the output to the
worker process:" and a BrokenPipeError traceback into the job's log. Nothing failed: the next
start replays the batch. This daemon is pyspark's own, run as is, except that this one message,
when its cause is the closed socket, becomes one line. Any other output, and that message with
any other cause, passes through unchanged.
"""

from __future__ import annotations

import sys
from typing import TextIO

from pyspark import daemon

FLUSH_FAILURE = "PySpark daemon failed to flush the output to the worker process:"
CLOSED_SOCKET = ("BrokenPipeError: [Errno 32] Broken pipe",
                 "ConnectionResetError: [Errno 104] Connection reset by peer")
CANCELLED_TASK_LINE = ("python worker: the task's output was not delivered, its socket was "
                       "closed (the task was cancelled: a stop or a failed batch; replayed by "
                       "the next batch or start)")


class CancelledTaskInOneLine:
    """A text stream passing everything through but the daemon's flush failure of a closed
    socket, which it writes as CANCELLED_TASK_LINE."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith(FLUSH_FAILURE) and text.rstrip().endswith(CLOSED_SOCKET):
            text = CANCELLED_TASK_LINE
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def worker(sock, authenticated: bool) -> int:
    """pyspark's daemon.worker (in the forked child), its stderr told cancelled tasks in one
    line. A reused worker's child calls it once per task."""
    if not isinstance(sys.stderr, CancelledTaskInOneLine):
        sys.stderr = CancelledTaskInOneLine(sys.stderr)  # type: ignore[assignment]
    return _PYSPARK_WORKER(sock, authenticated)


_PYSPARK_WORKER = daemon.worker


def main() -> None:
    daemon.worker = worker  # the manager calls the module's `worker` for each fork
    daemon.manager()


if __name__ == "__main__":
    main()
