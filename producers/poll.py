"""The runtime of a long-running producer command (observe-kafka, observe-rocketmq): its poll
loop survives every fault, and SIGTERM or Ctrl-C ends it cleanly, flushing the producer.

    with stop_on_sigterm() as stopping:
        run_polls(poll_once, health, interval_s=10, stopping=stopping)

`run_polls` calls `poll_once` every interval; an exception from it (the cluster unreachable, a
request timing out, a bug) is counted by cause (`health.failed`, producers.health) and the loop
goes on at the next interval.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator

from producers.health import PollHealth
from streaming.common.delivery import count_unflushed


def run_polls(poll_once: Callable[[], object], health: PollHealth, interval_s: float,
              stopping: threading.Event, once: bool = False) -> bool:
    """poll_once() every interval_s until `stopping` is set (or once); a poll that raises is
    counted by cause and the loop goes on. Returns whether the last poll succeeded."""
    while True:
        started = time.monotonic()
        try:
            poll_once()
            ok = True
        except Exception as exc:  # noqa: BLE001 - no fault of one poll ends the command
            health.failed(exc)
            ok = False
        if once or stopping.wait(max(0.0, interval_s - (time.monotonic() - started))):
            return ok


def poll_until_stopped(poll_once: Callable[[], object], health: PollHealth, interval_s: float,
                       once: bool, outbox=None, topic: str = "",
                       closers: tuple[Callable[[], object], ...] = (),
                       close_timeout_s: float = 30.0) -> int:
    """A poll command's whole run: run_polls until SIGTERM or Ctrl-C (or once), then `closers`,
    then the outbox (a streaming.common.delivery.Outbox, or None for --stdout) flushed for up to
    close_timeout_s, what is left counted unflushed. The exit code: 1 only when `once` and the
    poll failed or an event was not delivered; a fault in a long run never ends it."""
    ok = True
    try:
        with stop_on_sigterm() as stopping:
            ok = run_polls(poll_once, health, interval_s, stopping, once=once)
    finally:
        for close in closers:
            close()
        if outbox is not None:
            count_unflushed(outbox.stats, topic, outbox.close(close_timeout_s))
    if once and outbox is not None:
        ok = ok and not outbox.stats.snapshot().undelivered
    return 0 if ok or not once else 1


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[threading.Event]:
    """An event set by SIGTERM (and by Ctrl-C), so the loop ends cleanly and the producer
    flushes. Off the main thread (a library caller) nothing is installed."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return
    before = signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        yield stopping
    except KeyboardInterrupt:
        stopping.set()
    finally:
        signal.signal(signal.SIGTERM, before)
