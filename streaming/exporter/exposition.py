"""The per-group families as exposition text kept rendered, so that a scrape joins text instead
of formatting every sample again.

prometheus_client formats each sample on every scrape. A fleet of 10,000 groups of 10 clients is
about 250,000 series, and one scrape took 2.87 s (docs/benchmarks.md). Here prometheus_client
itself renders a group's lines when what they show changes (the sink writes each batch's
metrics); a scrape joins the groups' lines family by family, in the order RebalanceCollector
yields them. Only the ages (of a conflict, of a KIP-848 hand-off) depend on the job's clock, so
only the groups with an open one are rendered at the scrape. The text is byte for byte what a registry with
RebalanceCollector gives (tests/unit/test_exposition.py).

    text = GroupFamiliesText(ClientSeriesPolicy())
    store = SnapshotStore(text)          # replace_group / remove_group keep the text up to date
    text.render(store.health())          # every per-group family
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass, replace

from prometheus_client import generate_latest
from prometheus_client.core import Metric

from streaming.core.contract import GroupKey, GroupMetrics
from streaming.exporter.collector import AGE_FAMILIES, ClientSeriesPolicy, JobHealth, group_families


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def _exposition_of(families: list[Metric]) -> str:
    return generate_latest(_Families(families)).decode()


def _exposition(family: Metric) -> str:
    return _exposition_of([family])


def _sample_lines(family: Metric) -> str:
    """prometheus_client's text for a family's samples, without its HELP and TYPE lines."""
    return _exposition(family).split("\n", 2)[2]


@dataclass(frozen=True)
class _Family:
    name: str
    sample_name: str           # what `name[]` asks for: a counter's samples end in `_total`
    header: str                # its HELP and TYPE lines


@dataclass(frozen=True)
class _GroupLines:
    shown: GroupMetrics        # the metrics with what only the ages read cleared
    metrics: GroupMetrics
    lines: tuple[str, ...]     # one text per family; the ages' as if none were open


def _shown(metrics: GroupMetrics) -> GroupMetrics:
    return replace(metrics, event_time_ms=0, conflict_since_ms=None, handoff_since_ms=None)


class GroupFamiliesText:
    """Each group's rendered lines, and the families' text joined from them."""

    def __init__(self, clients: ClientSeriesPolicy) -> None:
        self._clients = clients
        self._lock = threading.Lock()
        self._groups: dict[GroupKey, _GroupLines] = {}
        self._order: list[GroupKey] | None = []
        self._joined: dict[int, str] = {}
        self._version = 0                             # moves on at every put and remove
        self._full: tuple[tuple[int, int], bytes] | None = None   # (version, event time), text
        self._families = tuple(
            _Family(f.name, f.name + ("_total" if f.type == "counter" else ""), _exposition(f))
            for f in group_families([], JobHealth(), clients))
        names = [f.name for f in self._families]
        self._ages_at = {names.index(name): (since_of, family_of)
                         for name, since_of, family_of in AGE_FAMILIES}

    def put(self, metrics: GroupMetrics) -> None:
        """Keep the group's lines; render them again only when what they show changed."""
        shown = _shown(metrics)
        with self._lock:
            known = self._groups.get(metrics.key)
        if known is not None and known.shown == shown:
            lines = known.lines
        else:
            lines = self._render(shown)
        with self._lock:
            self._version += 1
            if known is None or known.lines is not lines:
                self._joined.clear()
            if metrics.key not in self._groups:
                self._order = None
            self._groups[metrics.key] = _GroupLines(shown, metrics, lines)

    def _render(self, shown: GroupMetrics) -> tuple[str, ...]:
        """The group's lines, family by family, from one call of prometheus_client. Each family
        starts where its HELP and TYPE lines are: a label value cannot hold them, since
        prometheus_client escapes its newlines."""
        text = _exposition_of(list(group_families([shown], JobHealth(), self._clients)))
        starts = []
        for family in self._families:
            starts.append(text.index(family.header, starts[-1] if starts else 0))
        ends = [*starts[1:], len(text)]
        return tuple(text[start + len(family.header):end]
                     for family, start, end in zip(self._families, starts, ends, strict=True))

    def remove(self, key: GroupKey) -> None:
        with self._lock:
            self._version += 1
            if self._groups.pop(key, None) is not None:
                self._order, self._joined = None, {}

    def render(self, health: JobHealth, names: Collection[str] | None = None) -> str:
        """The families, or only those whose samples `names` asks for (as prometheus_client
        answers `?name[]=`: a family without samples is then left out)."""
        with self._lock:
            return self._render_families(health, names)

    def exposition(self, health: JobHealth, names: Collection[str] | None = None) -> bytes:
        """render() as bytes. The full text is kept until a group changes or the job's event
        time moves (only an open conflict's age reads it): a scrape after `exposition(health)`
        has run, as the job runs it after each batch (Prerender), serves kept bytes."""
        with self._lock:
            if names is not None:
                return self._render_families(health, names).encode()
            key = (self._version, health.max_event_time_ms)
            if self._full is None or self._full[0] != key:
                self._full = (key, self._render_families(health, None).encode())
            return self._full[1]

    def _render_families(self, health: JobHealth, names: Collection[str] | None) -> str:
        if self._order is None:
            self._order = sorted(self._groups)
        parts = []
        for index, family in enumerate(self._families):
            if names is not None and family.sample_name not in names:
                continue
            body = (self._ages(health, index) if index in self._ages_at
                    else self._joined_lines(index))
            if names is None or body:
                parts.append(family.header + body)
        return "".join(parts)

    def _joined_lines(self, index: int) -> str:
        if index not in self._joined:
            self._joined[index] = "".join(self._groups[k].lines[index] for k in self._order)
        return self._joined[index]

    def _ages(self, health: JobHealth, index: int) -> str:
        # Where none is open the age is 0 whatever the clock, as rendered at put().
        since_of, family_of = self._ages_at[index]
        lines = []
        for key in self._order:
            group = self._groups[key]
            if since_of(group.metrics) is None:
                lines.append(group.lines[index])
            else:
                lines.append(_sample_lines(family_of([group.metrics], health)))
        return "".join(lines)

