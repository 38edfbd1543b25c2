"""A group's recent history (streaming/exporter/history.py) as the sink fills it through the
SnapshotStore (finding records, then metrics), and as the group page and API show it, with the
links to Grafana and the runbooks that the operator's base URLs give."""

import json
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from streaming.core.contract import FindingIdentity, FindingRecord, GroupKey
from streaming.exporter import SnapshotStore
from streaming.exporter.api import call, group_api
from streaming.exporter.history import FindingSpan, GroupHistories, Rebalances
from streaming.exporter.views import (
    GROUP_DASHBOARD_UID,
    GROUP_DASHBOARD_VARIABLES,
    NO_LINKS,
    PageLinks,
)
from tests.unit.metric_contract import REPO
from tests.unit.page_helpers import Rows, collision, put_stepped
from tests.unit.state_helpers import group_metrics

pytestmark = pytest.mark.unit

KEY = GroupKey("rocketmq", "g")
DOUBLE = FindingIdentity("double_assignment", "T", ("b", 0), ("c1", "c1"))
ORPHAN = FindingIdentity("orphaned_queue", "T", ("b", 2))
STARTED_AT = 1_700_000_000_000          # the job's start, wall clock
PAGE, API = "/groups/rocketmq/default/g", "/api/v1/groups/rocketmq/default/g"


def record(status: str, identity: FindingIdentity, since: int, at: int,
           key: GroupKey = KEY) -> FindingRecord:
    return FindingRecord.of(status, identity, key, since, at)


def metrics(at: int, rebalances: int, moves: int, key: GroupKey = KEY):
    return replace(group_metrics(key.group, key.system, event_time_ms=at,
                                 rebalances_total=rebalances, queue_moves_total=moves),
                   cluster=key.cluster)


@pytest.fixture
def store() -> SnapshotStore:
    return SnapshotStore(history=GroupHistories(kept_since_ms=STARTED_AT))


def entries(store: SnapshotStore, key: GroupKey = KEY) -> tuple:
    return store.history.get(key).entries


def test_a_finding_is_one_entry_from_its_start_to_its_end(store):
    store.record_finding(record("started", DOUBLE, 1_000, 1_000))
    assert entries(store) == (FindingSpan(DOUBLE, 1_000),)
    store.record_finding(record("ended", DOUBLE, 1_000, 5_000))
    assert entries(store) == (FindingSpan(DOUBLE, 1_000, 5_000),)


def test_an_end_whose_start_came_before_the_jobs_start_shows_both_times(store):
    store.record_finding(record("ended", ORPHAN, 200, 3_000))
    assert entries(store) == (FindingSpan(ORPHAN, 200, 3_000),)


def test_a_finding_that_starts_again_is_a_new_entry_and_records_seen_again_change_nothing(store):
    batch = [record("started", DOUBLE, 1_000, 1_000), record("ended", DOUBLE, 1_000, 2_000),
             record("started", DOUBLE, 4_000, 4_000)]
    for each in batch + batch:                  # the batch re-run after a failure
        store.record_finding(each)
    assert entries(store) == (FindingSpan(DOUBLE, 4_000), FindingSpan(DOUBLE, 1_000, 2_000))


def test_rebalances_come_from_the_counters_changing_between_batches(store):
    store.replace_group(metrics(1_000, 7, 30), restored=True)   # counted before the start
    store.replace_group(metrics(2_000, 7, 30))  # no rebalance in this batch
    store.replace_group(metrics(3_000, 9, 34))
    store.replace_group(metrics(4_000, 0, 0))   # a reset state starts its counters again
    store.replace_group(metrics(5_000, 1, 4))
    assert entries(store) == (Rebalances(4_000, 5_000, 1, 4), Rebalances(2_000, 3_000, 2, 4))


def test_a_groups_first_metrics_since_the_start_count_its_rebalances_since_it_appeared(store):
    store.replace_group(metrics(1_000, 3, 8))
    assert entries(store) == (Rebalances(None, 1_000, 3, 8),)
    page = page_of(store)
    assert "3 rebalances, 8 queue moves" in page
    assert "since the group appeared, by 1970-01-01 00:00:01.000 UTC" in page
    store.replace_group(metrics(2_000, 4, 9))          # not merged: its start is not known
    assert entries(store)[0] == Rebalances(1_000, 2_000, 1, 1)


def test_entries_are_newest_first_findings_and_rebalances_together(store):
    store.replace_group(metrics(1_000, 0, 0))
    store.record_finding(record("started", DOUBLE, 1_500, 1_500))
    store.replace_group(metrics(2_000, 1, 2))
    store.record_finding(record("started", ORPHAN, 2_500, 2_500))
    assert [entry.at_ms for entry in entries(store)] == [2_500, 2_000, 1_500]


def test_the_history_is_bounded_per_group_and_says_when_it_let_entries_go(store):
    store.replace_group(metrics(0, 0, 0))
    for n in range(1, 31):
        store.record_finding(record("started", DOUBLE._replace(queue=("b", n)), n, n))
        store.replace_group(metrics(n * 1_000, n, n))
    history = store.history.get(KEY)
    assert history.dropped and len(history.entries) == 20
    assert [e.at_ms for e in history.entries if isinstance(e, FindingSpan)] == [
        *range(30, 20, -1)]
    assert [e.at_ms for e in history.entries if isinstance(e, Rebalances)] == [
        *range(30_000, 20_000, -1_000)]
    assert not store.history.get(GroupKey("rocketmq", "other")).dropped


def test_rebalances_in_a_row_within_a_minute_are_one_entry(store):
    store.replace_group(metrics(0, 0, 0))
    for n in range(1, 41):                      # a storm: one rebalance every 2 s, for 80 s
        store.replace_group(metrics(n * 2_000, n, 3 * n))
    assert entries(store) == (Rebalances(60_000, 80_000, 10, 30), Rebalances(0, 60_000, 30, 90))
    store.record_finding(record("started", DOUBLE, 80_000, 80_000))
    store.replace_group(metrics(82_000, 41, 123))        # after a finding: an entry of its own
    assert entries(store)[0] == Rebalances(80_000, 82_000, 1, 3)


def test_a_removed_groups_history_goes_with_it(store):
    store.replace_group(metrics(1_000, 0, 0))
    store.record_finding(record("started", DOUBLE, 1_000, 1_000))
    store.remove_group(KEY)
    assert (entries(store), len(store.history)) == ((), 0)


def page_of(store: SnapshotStore, links: PageLinks = NO_LINKS) -> str:
    answer = call(group_api(store, links), PAGE)
    assert answer.status == "200 OK"
    return answer.body.decode()


def test_an_empty_history_says_it_starts_at_the_jobs_start(store):
    store.replace_group(metrics(1_000, 3, 9), restored=True)
    page = page_of(store)
    assert "Recent history" in page
    assert "since it started, 2023-11-14 22:13:20.000 UTC" in page
    assert "a restart starts this history afresh" in page
    assert "No finding has started or ended and the group has not rebalanced" in page
    assert "3 rebalances and 9 queue moves in all" in page
    history = call(group_api(store), API).json()["history"]
    assert history == {"kept_since_ms": STARTED_AT, "dropped": False, "entries": []}


def test_the_page_lists_each_entry_with_its_times_in_utc(store):
    store.replace_group(metrics(STARTED_AT, 0, 0))
    store.record_finding(record("started", DOUBLE, STARTED_AT + 1_000, STARTED_AT + 1_000))
    store.record_finding(record("ended", DOUBLE, STARTED_AT + 1_000, STARTED_AT + 61_000))
    store.record_finding(record("started", ORPHAN, STARTED_AT + 2_000, STARTED_AT + 2_000))
    store.replace_group(metrics(STARTED_AT + 3_000, 2, 5))
    page = page_of(store)
    assert "No finding has started" not in page
    rows = [cells for css, cells in Rows(page).rows if css.startswith("entry")]
    assert rows == [
        ["2023-11-14 22:13:23.000 UTC", "", "2 rebalances, 5 queue moves",
         "between 2023-11-14 22:13:20.000 UTC and 2023-11-14 22:13:23.000 UTC"],
        ["2023-11-14 22:13:22.000 UTC", "still open", "orphaned_queue", "topic T; queue b:2"],
        ["2023-11-14 22:13:21.000 UTC", "2023-11-14 22:14:21.000 UTC", "double_assignment",
         "topic T; queue b:0; clients c1, c1"]]
    listed = call(group_api(store), API).json()["history"]["entries"]
    assert listed[0] == {"type": "rebalances", "after_ms": STARTED_AT,
                         "at_ms": STARTED_AT + 3_000, "rebalances": 2, "queue_moves": 5}
    assert listed[2] == {"type": "finding", "kind": "double_assignment", "topic": "T",
                         "queue": ["b", 0], "clients": ["c1", "c1"], "address": None,
                         "brokers": [], "started_ms": STARTED_AT + 1_000,
                         "ended_ms": STARTED_AT + 61_000, "runbook_url": None}


def test_names_in_the_history_are_escaped(store):
    key = GroupKey("rocketmq", "g")
    store.replace_group(metrics(0, 0, 0, key))
    store.record_finding(record("started", FindingIdentity("skew", "<b>T</b>"), 1, 1, key))
    page = page_of(store)
    assert "<b>T</b>" not in page and "topic &lt;b&gt;T&lt;/b&gt;" in page


class Links(HTMLParser):
    """The page's links: (class, href)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append((dict(attrs).get("class") or "", dict(attrs)["href"]))


GRAFANA, RUNBOOKS = "https://grafana.example.com/", "https://wiki.example.com/ops/metrics.md"
ODD = GroupKey("rocketmq", 'a&b <"x">', "eu/1")


@pytest.fixture
def doubled() -> SnapshotStore:
    """A group with open findings (a double assignment among them) and their history."""
    store = SnapshotStore(history=GroupHistories(kept_since_ms=STARTED_AT))
    put_stepped(store, collision(), ODD)
    for finding in store.details.get(ODD).findings:
        store.record_finding(FindingRecord.of("started", finding.identity, ODD, finding.since,
                                              finding.since))
    return store


def odd_page(store: SnapshotStore, links: PageLinks) -> str:
    return call(group_api(store, links), "/groups/rocketmq/eu%2F1/a%26b%20%3C%22x%22%3E"
                ).body.decode()


def test_without_base_urls_the_page_links_neither_grafana_nor_a_runbook(doubled):
    page = odd_page(doubled, PageLinks())
    assert [css for css, _ in Links(page).links if css] == []
    assert "Grafana" not in page and "Runbook" not in page
    group = call(group_api(doubled), "/api/v1/groups/rocketmq/eu%2F1/a%26b%20%3C%22x%22%3E").json()
    assert group["dashboard_url"] is None
    assert {f["runbook_url"] for f in group["detail"]["findings"]} == {None}


def test_with_base_urls_the_page_links_the_dashboard_and_each_findings_runbook(doubled):
    links = PageLinks(GRAFANA, RUNBOOKS)
    found = Links(odd_page(doubled, links)).links
    dashboard = ("https://grafana.example.com/d/rebalance-group?var-system=rocketmq"
                 "&var-cluster=eu%2F1&var-group=a%26b%20%3C%22x%22%3E")
    assert [href for css, href in found if css == "dashboard"] == [dashboard]
    runbooks = [href for css, href in found if css == "runbook"]
    # Each open finding's, then each history entry's: the double assignment's among them.
    assert len(runbooks) == 2 * len(doubled.details.get(ODD).findings)
    assert f"{RUNBOOKS}#rebalancedoubleassignment" in runbooks
    assert f"{RUNBOOKS}#rebalanceclientidcollision" in runbooks
    group = call(group_api(doubled, links),
                 "/api/v1/groups/rocketmq/eu%2F1/a%26b%20%3C%22x%22%3E").json()
    assert group["dashboard_url"] == dashboard
    assert {e["kind"]: e["runbook_url"] for e in group["history"]["entries"]
            if e["type"] == "finding"}["orphaned_queue"] == f"{RUNBOOKS}#rebalanceorphanedqueues"


def test_the_links_are_escaped_in_the_page(doubled):
    page = odd_page(doubled, PageLinks(GRAFANA, "https://wiki.example.com/m.md?a=1&b=<2>"))
    assert ('href="https://grafana.example.com/d/rebalance-group?var-system=rocketmq&amp;'
            'var-cluster=eu%2F1&amp;var-group=a%26b%20%3C%22x%22%3E"') in page
    assert 'href="https://wiki.example.com/m.md?a=1&amp;b=&lt;2&gt;#rebalance' in page


def test_a_finding_without_a_runbook_says_so(store):
    store.replace_group(metrics(0, 0, 0))
    store.record_finding(record("started", FindingIdentity("allocation_mismatch"), 1, 1))
    page = page_of(store, PageLinks(runbook_base_url=RUNBOOKS))
    rows = [cells for css, cells in Rows(page).rows if css.startswith("entry finding")]
    assert rows[0][-1] == "none"


def test_the_dashboard_link_names_the_group_dashboards_uid_and_variables():
    dashboard = json.loads((REPO / "dashboards" / "grafana" / "dashboards"
                            / "rebalance-group.json").read_text())
    assert dashboard["uid"] == GROUP_DASHBOARD_UID
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert set(GROUP_DASHBOARD_VARIABLES) <= set(names)
