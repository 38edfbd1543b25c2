"""Prerender renders on its own thread after each change, and outlives a failing render."""

import logging
import threading

import pytest

from streaming.exporter.prerender import Prerender

pytestmark = pytest.mark.unit


class Renders:
    """A render that records its thread, fails while told to, and signals each call."""

    def __init__(self) -> None:
        self.threads, self.fail = [], False
        self.called = threading.Semaphore(0)

    def __call__(self) -> None:
        self.threads.append(threading.current_thread().name)
        self.called.release()
        if self.fail:
            raise ValueError("boom")


def test_a_change_is_rendered_on_the_prerender_thread():
    renders = Renders()
    prerender = Prerender(renders).start()
    try:
        prerender.changed()
        assert renders.called.acquire(timeout=30)
    finally:
        prerender.stop()
    assert renders.threads == ["metrics-prerender"]


def test_a_failing_render_is_logged_once_and_the_thread_goes_on(caplog):
    renders = Renders()
    renders.fail = True
    prerender = Prerender(renders).start()
    try:
        with caplog.at_level(logging.INFO, logger="streaming.exporter.prerender"):
            for _ in range(2):
                prerender.changed()
                assert renders.called.acquire(timeout=30)
            renders.fail = False
            prerender.changed()
            assert renders.called.acquire(timeout=30)
            prerender.stop()  # joins the thread: the last render's log is written
    finally:
        prerender.stop()
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["rendering /metrics after a batch failed; scrapes render it",
                        "rendering /metrics after a batch works again"]
