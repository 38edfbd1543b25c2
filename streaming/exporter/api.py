"""The group API and pages: read-only, on the same HTTP server as /metrics (docs/api.md).

    GET /api/v1/groups                               every group, those in trouble first
    GET /api/v1/groups/<system>/<cluster>/<group>    one group: queues, members, open findings,
                                                     recent history
    GET /groups                                      the list as a page
    GET /groups/<system>/<cluster>/<group>           the group as a page

Path segments are percent-encoded (a group name may hold "/"). Only GET and HEAD are answered
(405 otherwise); an unknown group is a 404. A group whose detail has not arrived says so
(status "unknown"), and a group of a silent cluster is marked stale: neither is shown as fine.

    >>> from streaming.exporter.collector import SnapshotStore
    >>> app = group_api(SnapshotStore())
    >>> answer = call(app, "/api/v1/groups/rocketmq/default/nope")
    >>> answer.status, answer.json()
    ('404 Not Found', {'error': 'no group rocketmq/default/nope'})
    >>> call(app, "/api/v1/groups", method="POST").status
    '405 Method Not Allowed'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import unquote

from streaming.core.contract import OWNER_KINDS, GroupKey, Identified, MemberRef
from streaming.exporter import pages
from streaming.exporter.history import FindingSpan, GroupHistory, Rebalances
from streaming.exporter.views import (
    API_PREFIX,
    NO_LINKS,
    PAGE_PREFIX,
    GroupRow,
    GroupView,
    PageLinks,
    conflicted_queues,
    group_path,
    group_rows,
    status_of,
)

JSON_TYPE = "application/json"
HTML_TYPE = "text/html; charset=utf-8"


def resolve(rest: str, known: Callable[[GroupKey], bool]) -> GroupKey | None:
    """<system>/<cluster>/<group> (decoded): the group may hold "/", and so may a cluster, so
    each split is tried and the first known one wins; None if none is known."""
    parts = rest.split("/")
    if len(parts) < 3:
        return None
    for cut in range(2, len(parts)):
        key = GroupKey(parts[0], "/".join(parts[cut:]), "/".join(parts[1:cut]))
        if key.group and known(key):
            return key
    if "+" in rest:   # an alert's link: Prometheus' urlquery writes a space as "+"
        return resolve(rest.replace("+", " "), known)
    return None


def row_json(row: GroupRow) -> dict:
    return {"system": row.key.system, "cluster": row.key.cluster, "group": row.key.group,
            "status": row.status, "stale": row.stale, "findings": dict(row.kinds),
            "since_ms": row.since_ms, "members": row.members,
            "event_time_ms": row.event_time_ms,
            "url": group_path(API_PREFIX, row.key), "page": group_path(PAGE_PREFIX, row.key)}


def group_json(view: GroupView, links: PageLinks = NO_LINKS) -> dict:
    key, detail, metrics = view.key, view.detail, view.metrics
    out = {"system": key.system, "cluster": key.cluster, "group": key.group,
           "status": view.status, "stale": view.stale,
           "event_time_ms": metrics.event_time_ms, "members": metrics.members,
           "assignor": metrics.assignor, "group_type": metrics.group_type,
           "rebalances_total": metrics.rebalances_total,
           "queue_moves_total": metrics.queue_moves_total,
           "page": group_path(PAGE_PREFIX, key), "dashboard_url": links.dashboard(key),
           "history": history_json(view.history, links)}
    if detail is None:
        return {**out, "detail": None,
                "note": "the group's detail has not arrived yet: nothing is known to be fine"}
    doubled, orphaned = conflicted_queues(detail)
    return {**out, "detail": {
        "queues": [{"topic": q.topic, "broker": q.broker, "queue_id": q.queue_id,
                    "in_route": q.in_route,
                    "double_assigned": (q.topic, (q.broker, q.queue_id)) in doubled,
                    "orphaned": (q.topic, (q.broker, q.queue_id)) in orphaned,
                    **{kind: _owners(getattr(q, kind)) for kind in OWNER_KINDS}}
                   for q in detail.queues],
        "members": [{"client_id": m.client_id, "address": m.address, "topics": list(m.topics),
                     "strategy": m.strategy, "strategy_basis": m.strategy_basis,
                     "model": m.model, "shared": m.shared,
                     "lite_topics": None if m.lite_topics is None else list(m.lite_topics),
                     "view": {"clients": None if m.view_clients is None else list(m.view_clients),
                              "queues": None if m.view_queues is None else
                              {t: [list(q) for q in qs] for t, qs in m.view_queues.items()}},
                     "owned": None if m.owned is None else [list(o) for o in m.owned],
                     "brokers": list(m.brokers)} for m in detail.members],
        "findings": [{**_subject(f), "since_ms": f.since, "detail": f.detail,
                      "runbook_url": links.runbook(f.kind)} for f in detail.findings]}}


def history_json(history: GroupHistory, links: PageLinks) -> dict:
    return {"kept_since_ms": history.kept_since_ms, "dropped": history.dropped,
            "entries": [_entry(entry, links) for entry in history.entries]}


def _entry(entry: FindingSpan | Rebalances, links: PageLinks) -> dict:
    if isinstance(entry, Rebalances):
        return {"type": "rebalances", "after_ms": entry.after_ms, "at_ms": entry.at_ms,
                "rebalances": entry.rebalances, "queue_moves": entry.queue_moves}
    return {"type": "finding", **_subject(entry), "started_ms": entry.started_ms,
            "ended_ms": entry.ended_ms, "runbook_url": links.runbook(entry.kind)}


def _subject(finding: Identified) -> dict:
    return {"kind": finding.kind, "topic": finding.topic,
            "queue": None if finding.queue is None else list(finding.queue),
            "clients": list(finding.clients), "address": finding.address,
            "brokers": list(finding.brokers)}


def _owners(refs: tuple[MemberRef, ...]) -> list[dict]:
    return [{"client_id": client_id, "address": address} for client_id, address in refs]


class Answer:
    """A WSGI answer: status, headers, body."""

    def __init__(self, status: str, content_type: str, body: bytes,
                 headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.status, self.content_type, self.body, self.headers = (status, content_type, body,
                                                                   headers)

    def json(self):
        return json.loads(self.body)


def _json(status: str, data, headers=()) -> Answer:
    return Answer(status, JSON_TYPE, json.dumps(data, ensure_ascii=False).encode(), headers)


def group_api(store, links: PageLinks = NO_LINKS):
    """The WSGI app over a SnapshotStore (collector.py): its groups, details, histories and
    health; `links` to the operator's Grafana and runbooks, where given."""

    def views() -> tuple[list[GroupRow], set[GroupKey]]:
        stale = set(store.health().stale_groups)
        return group_rows(store.groups(), store.details.summaries(), stale), stale

    def view_of(rest: str) -> GroupView | None:
        key = resolve(rest, lambda k: store.group(k) is not None)
        metrics = store.group(key) if key is not None else None
        if metrics is None:
            return None
        stale = key in set(store.health().stale_groups)
        return GroupView(key, status_of(store.details.summary(key), stale), stale, metrics,
                         store.details.get(key), store.history.get(key))

    def answer(method: str, path: str, query: str) -> Answer:
        if method not in ("GET", "HEAD"):
            return _json("405 Method Not Allowed", {"error": "read-only: GET only"},
                         (("Allow", "GET, HEAD"),))
        if path in (API_PREFIX, API_PREFIX + "/"):
            rows, _ = views()
            return _json("200 OK", {"groups": [row_json(row) for row in rows],
                                    "event_time_ms": store.health().max_event_time_ms})
        if path in (PAGE_PREFIX, PAGE_PREFIX + "/"):
            rows, _ = views()
            return Answer("200 OK", HTML_TYPE,
                          pages.groups_page(rows, show_all="all=1" in query.split("&")).encode())
        for prefix, as_page in ((API_PREFIX + "/", False), (PAGE_PREFIX + "/", True)):
            if path.startswith(prefix):
                view = view_of(path[len(prefix):])
                if view is None:
                    message = f"no group {path[len(prefix):]}"
                    if not as_page:
                        return _json("404 Not Found", {"error": message})
                    return Answer("404 Not Found", HTML_TYPE, pages.not_found(message).encode())
                if not as_page:
                    return _json("200 OK", group_json(view, links))
                return Answer("200 OK", HTML_TYPE, pages.group_page(view, links).encode())
        return _json("404 Not Found", {"error": f"no such endpoint {path}"})

    def app(environ, start_response):
        method = environ["REQUEST_METHOD"]
        path = _utf8_path(environ.get("PATH_INFO", ""))
        result = answer(method, path, environ.get("QUERY_STRING", ""))
        body = b"" if method == "HEAD" else result.body
        start_response(result.status, [("Content-Type", result.content_type),
                                       ("Content-Length", str(len(result.body))),
                                       ("Cache-Control", "no-store"), *result.headers])
        return [body]

    return app


def _utf8_path(path: str) -> str:
    """wsgiref decodes the path's percent-escapes as latin-1; the bytes were UTF-8."""
    try:
        return path.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return path


def serves(path: str) -> bool:
    """Whether the path is the group API's or its pages' (the rest is /metrics)."""
    return any(path == prefix or path.startswith(prefix + "/")
               for prefix in (API_PREFIX, PAGE_PREFIX, "/api"))


def call(app, path: str, method: str = "GET", query: str = "") -> Answer:
    """Call a WSGI app in process (tests, doctests), with the path as a client sends it
    (percent-encoded) and as wsgiref decodes it."""
    started: list[tuple[str, dict]] = []

    def start_response(status, headers):
        started.append((status, dict(headers)))

    environ = {"REQUEST_METHOD": method, "PATH_INFO": unquote(path, encoding="latin-1"),
               "QUERY_STRING": query}
    body = b"".join(app(environ, start_response))
    status, headers = started[-1]
    return Answer(status, headers["Content-Type"], body, tuple(headers.items()))
