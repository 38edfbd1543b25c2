"""A long-running producer command (`rebalance-monitor observe-kafka`, `simulate`) as a real
process with its own /metrics port, and what the fault tests need around it:

    with ProducerProcess(["observe-kafka", "--bootstrap-servers", b, ...]) as command:
        command.wait_for(lambda m: m.value("rebalance_observer_events_total") > 0)
        with paused(broker):                            # SIGSTOP ... SIGCONT
            command.wait_for(lambda m: m.total("rebalance_observer_poll_failures_total") >= 2)

Not a test module itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from streaming.embedded_broker import free_port
from tests.support import Scrape, wait_until

COMMAND = str(Path(sys.executable).parent / "rebalance-monitor")


class ProducerProcess:
    def __init__(self, args: list[str], log_dir: Path | None = None) -> None:
        self.port = free_port()
        self.args = [COMMAND, *args, "--metrics-host", "127.0.0.1",
                     "--metrics-port", str(self.port)]
        self.log_path = Path(log_dir or tempfile.mkdtemp()) / f"{args[0]}-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> ProducerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def try_scrape(self) -> Scrape | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=2) as response:
                return Scrape(response.read().decode())
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def wait_for(self, predicate: Callable[[Scrape], bool], timeout: float = 30.0,
                 what: str = "") -> Scrape:
        """Scrape until predicate holds; fail with the log tail if it exits or the time is up."""
        last: Scrape | None = None

        def holds() -> Scrape | None:
            nonlocal last
            if not self.running:
                raise AssertionError(f"{self.args[1]} exited with {self.process.returncode} "
                                     f"while waiting for {what}:\n{self.log()[-3000:]}")
            last = self.try_scrape()
            return last if last is not None and predicate(last) else None

        return wait_until(holds, timeout, what, interval=0.2, details=lambda: (
            f"last scrape:\n{last.text if last else None}\n{self.log()[-3000:]}"))

    def wait_exit(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def stop(self, timeout: float = 30.0) -> int:
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> ProducerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.running:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def paused(broker) -> Iterator[None]:
    """The embedded broker stops answering (SIGSTOP) until the block ends (SIGCONT)."""
    os.kill(broker.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(broker.pid, signal.SIGCONT)
