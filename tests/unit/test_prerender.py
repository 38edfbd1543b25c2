"""Prerender renders on its own thread after each change, keeps what a full scrape serves, and
outlives a failing render."""

import logging
import threading

import pytest

from streaming.exporter.prerender import Prerender

pytestmark = pytest.mark.unit


class Renders:
    """A render that records its thread, fails while told to, and numbers its texts."""

    def __init__(self) -> None:
        self.threads, self.fail, self.count = [], False, 0

    def __call__(self) -> bytes:
        self.threads.append(threading.current_thread().name)
        self.count += 1
        if self.fail:
            raise ValueError("boom")
        return b"text %d" % self.count


@pytest.fixture
def renders():
    return Renders()


@pytest.fixture
def prerender(renders):
    prerender = Prerender(renders).start()
    yield prerender
    prerender.stop()


def test_nothing_is_kept_before_the_first_change(prerender):
    assert prerender.latest is None


def test_after_a_change_the_text_is_rendered_on_its_thread_and_kept(prerender, renders):
    prerender.changed()
    assert prerender.wait_rendered(timeout_s=30)
    assert (prerender.latest, renders.threads) == (b"text 1", ["metrics-prerender"])
    prerender.changed()
    assert prerender.wait_rendered(timeout_s=30)
    assert prerender.latest == b"text 2"


def test_a_failing_render_keeps_nothing_is_logged_once_and_the_thread_goes_on(
        prerender, renders, caplog):
    prerender.changed()
    assert prerender.wait_rendered(timeout_s=30)
    renders.fail = True
    with caplog.at_level(logging.INFO, logger="streaming.exporter.prerender"):
        for _ in range(2):
            prerender.changed()
            assert prerender.wait_rendered(timeout_s=30)
            assert prerender.latest is None
        renders.fail = False
        prerender.changed()
        assert prerender.wait_rendered(timeout_s=30)
    assert prerender.latest == b"text 4"
    assert [record.getMessage() for record in caplog.records] == [
        "rendering /metrics after a batch failed; scrapes render it",
        "rendering /metrics after a batch works again"]
