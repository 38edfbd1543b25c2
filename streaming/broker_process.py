"""What starting and stopping a broker process takes, for either broker the project runs
(streaming/embedded_broker.py, streaming/kafka_broker.py)."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class BrokerUnavailable(RuntimeError):
    """A broker cannot be found or did not become ready."""


def wait_until_ready(process: subprocess.Popen, name: str, log_tail: Callable[[], str], *,
                     ready: Callable[[], bool], timeout_s: float,
                     interval_s: float = 0.05) -> None:
    """Until ready() holds; BrokerUnavailable with the log's tail if the process exits first
    or timeout_s passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BrokerUnavailable(
                f"{name} exited with code {process.returncode}: {log_tail()}")
        if ready():
            return
        time.sleep(interval_s)  # poll interval while it starts, bounded by the deadline
    raise BrokerUnavailable(
        f"{name} did not answer a metadata request within {timeout_s}s: {log_tail()}")


def stop_process(process: subprocess.Popen | None, name: str, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL after timeout_s; nothing for a process that is gone."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("%s did not stop within %ss: killing it", name, timeout_s)
        process.kill()
        process.wait(timeout=timeout_s)
