"""Prerender: the full /metrics text rendered once after each batch, off the scrape's path.

A scrape that follows a batch would otherwise join every group's text itself while the next
batch runs: at 10,000 groups that took a full scrape 0.1 s at the median and up to 1 s
(docs/benchmarks.md). The sink calls `changed()` when a batch's snapshots are in; this thread
then renders (GroupFamiliesText.exposition keeps the bytes) and the scrapes until the next
batch serve them. A scrape that comes first renders for itself: same bytes, only slower.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Prerender:
    def __init__(self, render: Callable[[], object]) -> None:
        self._render = render
        self._wanted = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> Prerender:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="metrics-prerender",
                                            daemon=True)
            self._thread.start()
        return self

    def changed(self) -> None:
        """A batch's snapshots are in: render them (at most once per wake-up)."""
        self._wanted.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _serve(self) -> None:
        while True:
            self._wanted.wait()
            if self._stopping.is_set():
                return
            self._wanted.clear()
            self._render_once()

    def _render_once(self) -> None:
        # A failure here is a bug of ours, not an outside fault: the scrape renders for itself
        # then, so log it once per streak and go on.
        try:
            self._render()
        except Exception:  # noqa: BLE001 - the thread must outlive a bug in a render
            if not self._failing:
                log.exception("rendering /metrics after a batch failed; scrapes render it")
            self._failing = True
            return
        if self._failing:
            log.info("rendering /metrics after a batch works again")
        self._failing = False
