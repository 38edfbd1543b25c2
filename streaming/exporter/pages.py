"""The group pages: plain HTML rendered on the server from the group API's views (views.py), no
script. Every value from a group (names, client ids, addresses, details) goes through
html.escape.

    >>> from streaming.core.contract import GroupKey
    >>> from streaming.exporter.views import GroupRow
    >>> page = groups_page([GroupRow(GroupKey("rocketmq", "<g>"), "unknown", False, (), None, 2, 0)])
    >>> "&lt;g&gt;" in page and "<g>" not in page
    True
"""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from streaming.core.contract import GroupDetail, Identified, MemberDetail, MemberRef, OpenFinding
from streaming.exporter.history import FindingSpan, Rebalances
from streaming.exporter.views import (
    API_PREFIX,
    NO_LINKS,
    PAGE_PREFIX,
    GroupRow,
    GroupView,
    PageLinks,
    conflicted_queues,
    group_path,
)

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #eee; }
ul.owners { margin: 0; padding-left: 1.1em; }
.banner { padding: 0.6em 1em; margin-bottom: 1em; border: 2px solid; font-weight: bold; }
.banner.unknown, .banner.stale { border-color: #b80; background: #fff4d6; }
.status { font-weight: bold; }
.status.trouble, tr.double td.state { color: #fff; background: #c00; }
.status.unknown, .status.stale, tr.orphaned td.state { color: #000; background: #fc3; }
.status.ok { color: #fff; background: #080; }
tr.double { background: #fdd; }
tr.orphaned { background: #fff4d6; }
"""


def groups_page(rows: list[GroupRow], show_all: bool = False) -> str:
    """The group list: every group not known to be fine (or every group with show_all)."""
    shown = rows if show_all else [row for row in rows if row.status != "ok"]
    fine = sum(1 for row in rows if row.status == "ok")
    lines = [f"<p>{len(rows)} groups: {_count(rows, 'trouble')} in trouble, "
             f"{_count(rows, 'unknown')} whose detail has not arrived, "
             f"{_count(rows, 'stale')} stale (cluster silent), {fine} with no open finding. "
             f"<a href=\"{API_PREFIX}\">JSON</a></p>"]
    if not show_all and fine:
        lines.append(f'<p><a href="{PAGE_PREFIX}?all=1">Show all {len(rows)} groups</a></p>')
    if not rows:
        lines.append('<p class="banner unknown">No group known yet: the job has not seen any '
                     "events, or has not finished its first batch.</p>")
    body = "".join(
        f"<tr><td><a href=\"{escape(group_path(PAGE_PREFIX, row.key))}\">"
        f"{escape(row.key.group)}</a></td><td>{escape(row.key.system)}</td>"
        f"<td>{escape(row.key.cluster)}</td>{_status_cell(row.status, row.stale)}"
        f"<td>{escape(', '.join(f'{kind} ({n})' for kind, n in row.kinds))}</td>"
        f"<td>{_time(row.since_ms)}</td><td>{row.members}</td></tr>" for row in shown)
    lines.append("<table><tr><th>Group</th><th>System</th><th>Cluster</th><th>Status</th>"
                 f"<th>Open findings</th><th>Oldest since</th><th>Members</th></tr>{body}</table>")
    return _document("Consumer groups", "".join(lines))


def group_page(view: GroupView, links: PageLinks = NO_LINKS) -> str:
    key, detail = view.key, view.detail
    dashboard = links.dashboard(key)
    head = (f"<p>{escape(key.system)} group <b>{escape(key.group)}</b> in cluster "
            f"<b>{escape(key.cluster)}</b>: {_status_cell(view.status, view.stale, 'span')}, "
            f"{view.metrics.members} members, latest event {_time(view.metrics.event_time_ms)}. "
            f"<a href=\"{PAGE_PREFIX}\">All groups</a> · "
            f"<a href=\"{escape(group_path(API_PREFIX, key))}\">JSON</a>"
            + (f' · <a class="dashboard" href="{escape(dashboard)}">Grafana dashboard</a>'
               if dashboard else "") + "</p>")
    if view.stale:
        head += ('<p class="banner stale">This group\'s cluster is silent: its producers send '
                 "nothing, so the group is shown as it was when they stopped. It may have "
                 "changed since.</p>")
    history = _history(view, links)
    if detail is None:
        return _document(f"Group {key.group}", head + (
            '<p class="banner unknown">The group\'s detail has not arrived yet: its queues, '
            "members and findings are not known. This is not an all-clear.</p>") + history)
    body = (_findings(detail.findings, view.metrics.event_time_ms, links) + history
            + _queues(detail) + _members(detail.members))
    return _document(f"Group {key.group}", head + body)


def not_found(message: str) -> str:
    return _document("Not found", f"<p>{escape(message)}. <a href=\"{PAGE_PREFIX}\">All groups</a>"
                                  "</p>")


def _findings(findings: tuple[OpenFinding, ...], event_time_ms: int, links: PageLinks) -> str:
    if not findings:
        return "<h2>Open findings</h2><p>None open.</p>"
    runbooks = links.runbook_base_url is not None
    rows = "".join(
        f'<tr class="finding {escape(f.kind)}"><td>{escape(f.kind)}</td><td>{_subject(f)}</td>'
        f"<td>{_time(f.since)}</td><td>{_age(event_time_ms - f.since)}</td>"
        f"<td>{_mapping(f.detail)}</td>"
        + (_runbook_cell(links, f.kind) if runbooks else "") + "</tr>" for f in findings)
    return ("<h2>Open findings</h2><table><tr><th>Kind</th><th>Subject</th><th>Since</th>"
            "<th>Open for (to the latest event)</th><th>Detail</th>"
            + ("<th>Runbook</th>" if runbooks else "") + f"</tr>{rows}</table>")


def _history(view: GroupView, links: PageLinks) -> str:
    history, metrics = view.history, view.metrics
    intro = (f"<p>{metrics.rebalances_total} rebalances and {metrics.queue_moves_total} queue "
             "moves in all (the group's counters). Below, newest first: the findings and "
             f"rebalances the job has seen since it started, {_time(history.kept_since_ms)}; "
             "a restart starts this history afresh, so what came before is not listed here"
             + (" (an open finding is listed above with its start)" if view.detail else "")
             + ("; older entries were let go, the last of each kind are kept"
                if history.dropped else "") + ".</p>")
    if not history.entries:
        return (f'<h2>Recent history</h2>{intro}<p class="history-empty">No finding has started '
                "or ended and the group has not rebalanced since the job started.</p>")
    runbooks = links.runbook_base_url is not None
    rows = "".join(_history_row(entry, links, runbooks) for entry in history.entries)
    return (f'<h2>Recent history</h2>{intro}<table class="history"><tr><th>When</th>'
            "<th>Until</th><th>What</th><th>Subject</th>"
            + ("<th>Runbook</th>" if runbooks else "") + f"</tr>{rows}</table>")


def _history_row(entry: FindingSpan | Rebalances, links: PageLinks, runbooks: bool) -> str:
    if isinstance(entry, Rebalances):
        return (f'<tr class="entry rebalances"><td class="when">{_time(entry.at_ms)}</td>'
                f'<td class="until"></td><td class="what">{_plural(entry.rebalances, "rebalance")}'
                f", {_plural(entry.queue_moves, 'queue move')}</td><td>{_span(entry)}</td>"
                + ("<td></td>" if runbooks else "") + "</tr>")
    until = "still open" if entry.ended_ms is None else _time(entry.ended_ms)
    return (f'<tr class="entry finding {escape(entry.kind)}">'
            f'<td class="when">{_time(entry.started_ms)}</td><td class="until">{until}</td>'
            f'<td class="what">{escape(entry.kind)}</td><td>{_subject(entry)}</td>'
            + (_runbook_cell(links, entry.kind) if runbooks else "") + "</tr>")


def _span(rebalances: Rebalances) -> str:
    if rebalances.after_ms is None:
        return f"since the group appeared, by {_time(rebalances.at_ms)}"
    return f"between {_time(rebalances.after_ms)} and {_time(rebalances.at_ms)}"


def _runbook_cell(links: PageLinks, kind: str) -> str:
    url = links.runbook(kind)
    if url is None:
        return "<td><i>none</i></td>"
    return f'<td><a class="runbook" href="{escape(url)}">runbook</a></td>'


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


# The holder columns after reported and re-run, each shown once a queue has such a holder.
BROKER_COLUMNS = (("target", "Owners (broker's target)"), ("standby", "Standby copies"),
                  ("warmup", "Warm-up copies"))


def _queues(detail: GroupDetail) -> str:
    doubled, orphaned = conflicted_queues(detail)
    shown = [(kind, title) for kind, title in BROKER_COLUMNS
             if any(getattr(q, kind) for q in detail.queues)]
    rows = []
    for q in detail.queues:
        place = (q.topic, (q.broker, q.queue_id))
        state, css = ("double-assigned", "double") if place in doubled else (
            ("orphaned", "orphaned") if place in orphaned else
            ("not in route", "off-route") if not q.in_route else ("", "held"))
        rows.append(
            f'<tr class="queue {css}"><td>{escape(q.topic)}</td>'
            f'<td class="queue-id">{escape(_queue_name(q.broker, q.queue_id))}</td>'
            f'<td class="state">{state}</td><td class="reported">{_owner_list(q.reported)}</td>'
            f'<td class="rerun">{_owner_list(q.rerun)}</td>'
            + "".join(f'<td class="{kind}">{_owner_list(getattr(q, kind))}</td>'
                      for kind, _ in shown) + "</tr>")
    header = ("<tr><th>Topic</th><th>Queue</th><th>State</th><th>Owners (reported)</th>"
              "<th>Owners (monitor's re-run)</th>"
              + "".join(f"<th>{title}</th>" for _, title in shown) + "</tr>")
    if not rows:
        return "<h2>Queues</h2><p>No queue: no member subscribes to a topic with a route.</p>"
    return f'<h2>Queues</h2><table class="queues">{header}{"".join(rows)}</table>'


def _strategy(member: MemberDetail) -> str:
    """The strategy, and how it is known when the client does not say it itself."""
    basis = _STRATEGY_BASES.get(member.strategy_basis)
    shown = escape(member.strategy)
    return shown if basis is None else f'{shown} <span class="basis">({basis})</span>'


_STRATEGY_BASES = {"named": "named by the operator", "inferred": "inferred from its holdings",
                   "assumed": "unknown: assumed, no finding rests on it"}


def _members(members: tuple[MemberDetail, ...]) -> str:
    if not members:
        return "<h2>Members</h2><p>No live member.</p>"
    rows = "".join(
        f'<tr class="member"><td>{escape(m.client_id)}</td><td>{escape(m.address)}</td>'
        f"<td>{_strategy(m)}</td><td>{escape(m.model)}{' (shared)' if m.shared else ''}"
        f"</td><td>{_topics(m)}</td><td>{_view_clients(m)}</td>"
        f"<td>{_view_queues(m)}</td><td>{_owned(m)}</td>"
        f"<td>{escape(', '.join(m.brokers))}</td></tr>" for m in members)
    return ("<h2>Members</h2><table class=\"members\"><tr><th>Client id</th><th>Address</th>"
            "<th>Strategy</th><th>Model</th><th>Topics</th><th>Clients it sees</th>"
            "<th>Queues it sees</th><th>Queues it reports holding</th>"
            f"<th>Listed by brokers</th></tr>{rows}</table>")


def _topics(member: MemberDetail) -> str:
    topics = escape(", ".join(member.topics))
    if member.lite_topics is None:
        return topics
    return f"{topics} " + _folded(f"lite topics: {len(member.lite_topics)}",
                                  list(member.lite_topics))


def _view_clients(member: MemberDetail) -> str:
    if member.view_clients is None:
        return "<i>not reported (the group's consensus)</i>"
    return _folded(f"{len(member.view_clients)} clients", list(member.view_clients))


def _view_queues(member: MemberDetail) -> str:
    if member.view_queues is None:
        return "<i>not reported (the routes)</i>"
    return "<br>".join(_folded(f"{topic}: {len(queues)} queues",
                               [_queue_name(b, q) for b, q in queues])
                       for topic, queues in member.view_queues.items())


def _owned(member: MemberDetail) -> str:
    if member.owned is None:
        return "<i>not reported</i>"
    return _folded(f"{len(member.owned)} queues",
                   [f"{topic} {_queue_name(b, q)}" for topic, b, q in member.owned])


def _folded(summary: str, items: list[str]) -> str:
    return (f"<details><summary>{escape(summary)}</summary>"
            f"{escape(', '.join(items))}</details>")


def _owner_list(refs: tuple[MemberRef, ...]) -> str:
    if not refs:
        return "<i>none</i>"
    return '<ul class="owners">' + "".join(
        f'<li class="owner">{escape(cid)}' + (f" ({escape(addr)})" if addr else "") + "</li>"
        for cid, addr in refs) + "</ul>"


def _subject(finding: Identified) -> str:
    parts = []
    if finding.topic is not None:
        parts.append(f"topic {finding.topic}")
    if finding.queue is not None:
        parts.append(f"queue {_queue_name(*finding.queue)}")
    if finding.clients:
        parts.append("clients " + ", ".join(finding.clients))
    if finding.address:
        parts.append(f"address {finding.address}")
    if finding.brokers:
        parts.append("brokers " + ", ".join(finding.brokers))
    return escape("; ".join(parts) or "the group")


def _mapping(detail) -> str:
    if not detail:
        return ""
    return escape("; ".join(f"{k}: {v}" for k, v in sorted(detail.items())))


def _queue_name(broker: str, queue_id: int) -> str:
    return f"{broker}:{queue_id}" if broker else f"partition {queue_id}"


def _status_cell(status: str, stale: bool, tag: str = "td") -> str:
    text = status + (" (stale)" if stale and status != "stale" else "")
    return f'<{tag} class="status {escape(status)}">{escape(text)}</{tag}>'


def _count(rows: list[GroupRow], status: str) -> int:
    return sum(1 for row in rows if row.status == status)


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d} UTC"


def _age(ms: int) -> str:
    seconds = max(0, ms) // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return (f"{hours} h " if hours else "") + (f"{minutes} min " if hours or minutes else "") \
        + f"{seconds} s"


def _document(title: str, body: str) -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)} - rebalance-monitor</title><style>{STYLE}</style></head>"
            f"<body><h1>{escape(title)}</h1>{body}</body></html>")
