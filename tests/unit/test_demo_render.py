"""The demo's final view: the findings still open, from the store's started / ended records."""

from __future__ import annotations

import pytest

from streaming.core.contract import FindingIdentity, FindingRecord
from streaming.demo import open_findings, render_table

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
