"""What the group API and its pages both show (api.py answers JSON, pages.py HTML): a row of the
group list, a group's view, their status, paths and links.

    >>> from streaming.core.contract import GroupKey
    >>> group_path(PAGE_PREFIX, GroupKey("kafka", "orders/eu", "prod-1"))
    '/groups/kafka/prod-1/orders%2Feu'
    >>> PageLinks("https://grafana.example.com/").dashboard(GroupKey("kafka", "a b", "prod"))
    'https://grafana.example.com/d/rebalance-group?var-system=kafka&var-cluster=prod&var-group=a%20b'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

from streaming.common.runbooks import finding_runbook_url
from streaming.core.contract import GroupDetail, GroupKey, GroupMetrics
from streaming.core.findings import CONFLICT_KINDS
from streaming.exporter.details import DetailSummary
from streaming.exporter.history import GroupHistory

API_PREFIX = "/api/v1/groups"
PAGE_PREFIX = "/groups"
# trouble: open findings; unknown: no detail yet; stale: its cluster is silent, shown as it was.
STATUS_ORDER = {"trouble": 0, "unknown": 1, "stale": 2, "ok": 3}
# The group dashboard (dashboards/grafana/dashboards/rebalance-group.json): its uid, and the
# template variables that pick one group.
GROUP_DASHBOARD_UID = "rebalance-group"
GROUP_DASHBOARD_VARIABLES = ("system", "cluster", "group")


@dataclass(frozen=True)
class GroupRow:
    """One line of the group list."""

    key: GroupKey
    status: str
    stale: bool
    kinds: tuple[tuple[str, int], ...]
    since_ms: int | None
    members: int
    event_time_ms: int


@dataclass(frozen=True)
class GroupView:
    """One group as its page shows it: the latest metrics, the latest detail (None: not arrived
    yet), whether its cluster is silent, and its recent history."""

    key: GroupKey
    status: str
    stale: bool
    metrics: GroupMetrics
    detail: GroupDetail | None
    history: GroupHistory


@dataclass(frozen=True)
class PageLinks:
    """Where the pages link out to, when the operator gives it: Grafana (the group dashboard)
    and their copy of docs/metrics.md (a finding's runbook)."""

    dashboard_base_url: str | None = None
    runbook_base_url: str | None = None

    def dashboard(self, key: GroupKey) -> str | None:
        if self.dashboard_base_url is None:
            return None
        query = "&".join(f"var-{name}={quote(getattr(key, name), safe='')}"
                         for name in GROUP_DASHBOARD_VARIABLES)
        return f"{self.dashboard_base_url.rstrip('/')}/d/{GROUP_DASHBOARD_UID}?{query}"

    def runbook(self, kind: str) -> str | None:
        if self.runbook_base_url is None:
            return None
        return finding_runbook_url(self.runbook_base_url, kind)


NO_LINKS = PageLinks()


def status_of(summary: DetailSummary | None, stale: bool) -> str:
    if summary is None:
        return "unknown"
    if summary.kinds:
        return "trouble"
    return "stale" if stale else "ok"


def group_rows(groups: Iterable[GroupMetrics], summaries: dict[GroupKey, DetailSummary],
               stale: set[GroupKey]) -> list[GroupRow]:
    """Every group, in trouble first (a double assignment or an orphan before other findings,
    then the oldest first), then those whose detail has not arrived, then the stale, then the
    fine, each by key."""
    rows = []
    for metrics in groups:
        key = metrics.key
        summary = summaries.get(key)
        rows.append(GroupRow(key, status_of(summary, key in stale), key in stale,
                             summary.kinds if summary else (),
                             summary.since_ms if summary else None, metrics.members,
                             metrics.event_time_ms))

    def order(row: GroupRow):
        conflict = any(kind in CONFLICT_KINDS for kind, _ in row.kinds)
        since = row.since_ms if row.since_ms is not None else 2**63
        return STATUS_ORDER[row.status], not conflict, since, row.key

    return sorted(rows, key=order)


def group_path(prefix: str, key: GroupKey) -> str:
    return "/".join([prefix, *(quote(part, safe="") for part in (key.system, key.cluster,
                                                                   key.group))])


def conflicted_queues(detail: GroupDetail) -> tuple[set, set]:
    """The (topic, queue) of the open double assignments, and of the open orphans."""
    doubled = {(f.topic, f.queue) for f in detail.findings if f.kind == "double_assignment"}
    orphaned = {(f.topic, f.queue) for f in detail.findings if f.kind == "orphaned_queue"}
    return doubled, orphaned
