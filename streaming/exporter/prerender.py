"""Prerender: the full /metrics text rendered once after each batch, off the scrape's path.

A scrape that follows a batch would otherwise join every group's text itself while the next
batch runs: at 10,000 groups that took a full scrape 0.1 s at the median and up to 1 s, and one
that came while the text was rendered waited for it (docs/benchmarks.md). The sink calls
`changed()` when a batch's snapshots are in; this thread renders, and `latest` is what a full
scrape serves (scrape_text.ScrapeText): the text as of the last batch whose render has finished,
so at most one batch behind while the next one's is rendered. None before the first render and
after a failed one: the scrape then renders for itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Rendered = TypeVar("Rendered")


class Prerender(Generic[Rendered]):
    def __init__(self, render: Callable[[], Rendered | None]) -> None:
        self._render = render
        self.latest: Rendered | None = None
        self._changes = threading.Condition()
        self._asked = self._rendered = 0     # changes asked for, and rendered up to
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> Prerender:
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._serve, name="metrics-prerender",
                                            daemon=True)
            self._thread.start()
        return self

    def changed(self) -> None:
        """A batch's snapshots are in: render them (one render covers every change before it)."""
        with self._changes:
            self._asked += 1
            self._changes.notify_all()

    def wait_rendered(self, timeout_s: float = 60.0) -> bool:
        """Until every change asked for so far is rendered (or failed): then `latest` is as of
        the last batch. For a caller that scrapes right after a batch, as the tests do."""
        with self._changes:
            asked = self._asked
            return self._changes.wait_for(lambda: self._rendered >= asked, timeout_s)

    def stop(self) -> None:
        with self._changes:
            self._stopping = True
            self._changes.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _serve(self) -> None:
        while True:
            with self._changes:
                self._changes.wait_for(lambda: self._stopping or self._asked > self._rendered)
                if self._stopping:
                    return
                asked = self._asked
            self._render_once()
            with self._changes:
                self._rendered = asked
                self._changes.notify_all()

    def _render_once(self) -> None:
        # A failure here is a bug of ours, not an outside fault: the scrape renders for itself
        # then, so log it once per streak and go on.
        try:
            self.latest = self._render()
        except Exception:  # noqa: BLE001 - the thread must outlive a bug in a render
            self.latest = None
            if not self._failing:
                log.exception("rendering /metrics after a batch failed; scrapes render it")
            self._failing = True
            return
        if self._failing:
            log.info("rendering /metrics after a batch works again")
        self._failing = False
