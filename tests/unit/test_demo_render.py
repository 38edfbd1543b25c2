"""The demo's views: the final one (the findings still open, from the store's started / ended
records), and what each refresh of the live table prints, on a terminal and elsewhere."""

from __future__ import annotations

import signal

import pytest

from streaming.core.contract import FindingIdentity, FindingRecord, GroupMetrics
from streaming.demo import (
    CLEAR_SCREEN,
    DESCRIPTION,
    Interrupts,
    LiveView,
    open_findings,
    render_table,
)

pytestmark = pytest.mark.unit


def finding(status: str, kind: str, group: str = "g", queue=None, clients=("c1",)) -> FindingRecord:
    identity = FindingIdentity(kind, "TopicX" if queue else None, queue, tuple(clients))
    return FindingRecord(status, identity, group, "rocketmq", since=1, at=2)


def test_a_finding_is_open_when_its_latest_record_says_started():
    records = [finding("started", "double_assignment", queue=("broker-a", 0)),
               finding("started", "double_assignment", queue=("broker-a", 1)),
               finding("ended", "double_assignment", queue=("broker-a", 0)),
               finding("started", "skew", group="a-group"),
               finding("ended", "idle_client", clients=("c2",)),
               finding("started", "idle_client", clients=("c2",))]
    assert [(r.group, r.kind, r.queue) for r in open_findings(records)] == [
        ("a-group", "skew", None), ("g", "double_assignment", ("broker-a", 1)),
        ("g", "idle_client", None)]


def test_a_finding_started_again_after_it_ended_is_open_once():
    records = [finding("started", "skew"), finding("ended", "skew"), finding("started", "skew")]
    assert open_findings(records) == [finding("started", "skew")]


def test_the_findings_title_is_the_callers():
    text = render_table([], [finding("started", "skew")], "open findings (of the last 1 records):")
    assert text.splitlines()[-2:] == ["open findings (of the last 1 records):",
                                      f"  {'started':<7} {'skew':<22} {'g':<18} {'':<22} c1"]


def group(name: str = "g", double: int = 0) -> GroupMetrics:
    return GroupMetrics("rocketmq", name, 1, 3, {"TopicX": 8}, {"TopicX": double}, {"TopicX": 0},
                        None, 1.0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0)


def ticking():
    """A clock that says another time at each call."""
    seconds = iter(range(100))
    return lambda: f"12:00:{next(seconds):02d}"


def test_without_a_terminal_the_table_is_printed_only_when_it_changed():
    view = LiveView(interactive=False, clock=ticking())
    first = view.refresh([group()], [])
    assert first is not None and first.startswith("\n12:00:00  rebalance-monitor demo\n")
    assert CLEAR_SCREEN not in first
    # Only the clock moved: nothing to print, refresh after refresh.
    assert view.refresh([group()], []) is None
    assert view.refresh([group()], []) is None
    # A group changed, a finding came: the table again, with the clock of when it is printed.
    changed = view.refresh([group(double=2)], [])
    assert changed is not None and changed.startswith("\n12:00:01  ")
    assert view.refresh([group(double=2)], []) is None
    with_finding = view.refresh([group(double=2)], [finding("started", "skew")])
    assert with_finding is not None and with_finding.rstrip().endswith("c1")
    assert view.refresh([group(double=2)], [finding("started", "skew")]) is None


def test_on_a_terminal_the_table_is_redrawn_at_every_refresh():
    view = LiveView(interactive=True, clock=ticking())
    texts = [view.refresh([group()], []) for _ in range(3)]
    assert all(text is not None and text.startswith(CLEAR_SCREEN) for text in texts)
    assert [text.splitlines()[0] for text in texts] == [
        f"{CLEAR_SCREEN}12:00:0{i}  rebalance-monitor demo" for i in range(3)]


def test_the_live_table_is_the_rendered_one():
    view = LiveView(interactive=False, clock=ticking())
    text = view.refresh([group("collide-group", double=2)], [finding("started", "skew")])
    rendered = render_table([group("collide-group", double=2)], [finding("started", "skew")])
    assert text.splitlines()[2:] == rendered.splitlines()[1:]   # a blank line first, clock aside


def test_the_help_says_what_the_demo_runs_now():
    assert "Apache Kafka broker" in DESCRIPTION and "Spark's own Kafka source" in DESCRIPTION
    assert "falls back to the embedded broker" in DESCRIPTION


def test_an_interrupt_inside_a_call_into_spark_waits_until_the_call_returns():
    """A Ctrl-C that lands while the demo asks Spark for the query's state (py4j would log the
    cut call with its traceback) is raised once the call has returned; elsewhere at once."""
    interrupts, done = Interrupts(), []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.held():
            interrupts.handle(signal.SIGINT, None)
            done.append("the call")
    assert done == ["the call"]
    with pytest.raises(KeyboardInterrupt):
        interrupts.handle(signal.SIGINT, None)
    with interrupts.held():
        done.append("a call without an interrupt")
