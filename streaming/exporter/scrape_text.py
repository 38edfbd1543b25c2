"""What a scrape shows of the job's batches: the groups' families, then the job's health
families, both from one view of the store taken between two batches (SnapshotStore.batch). So a
scrape never shows a batch's counts without its groups, nor its groups without its counts; a
test, or an operator's query, that sees a batch's events counted sees that batch's groups.

A scrape, full or `name[]`, comes from the last render (Prerender), with the health it was
rendered with: it is at most one batch behind, as a whole, and does not wait for the batch the
sink is applying (the sink holds the store's batch lock for as long as a batch of thousands of
new groups takes). A scrape before the first render or after a failed one is rendered now.
Without kept text (`--exact on`) the store is read through RebalanceCollector, the definition,
at every scrape.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest

from streaming.exporter.collector import (
    ClientSeriesPolicy,
    HealthView,
    JobHealthCollector,
    RebalanceCollector,
    SnapshotStore,
)
from streaming.exporter.exposition import FamilyParts, GroupFamiliesText, asked


@dataclass(frozen=True)
class RenderedGroups:
    """The group families' full text, and the view of the job's health it was rendered with."""

    families: FamilyParts      # GroupFamiliesText.family_parts
    view: HealthView


class ScrapeText:
    def __init__(self, store: SnapshotStore, group_text: GroupFamiliesText | None,
                 clients: ClientSeriesPolicy, clock=time.time) -> None:
        self._store = store
        self._group_text = group_text
        self._clock = clock
        self._definition = CollectorRegistry(auto_describe=True)
        self._definition.register(RebalanceCollector(store, clients, clock))

    def render_full(self) -> RenderedGroups | None:
        """The full text of the groups as the store holds them now (None without kept text):
        what Prerender renders after each batch."""
        if self._group_text is None:
            return None
        with self._store.batch():
            view = self._store.health_view()
            return RenderedGroups(self._group_text.family_parts(view.health), view)

    def served(self, rendered: RenderedGroups | None,
               names: Collection[str] | None) -> tuple[bytes, ...]:
        """The text of a scrape asking for `names` (None: every family), given the last render:
        its parts, in order."""
        if rendered is not None:
            return (*asked(rendered.families, names), self._health_text(rendered.view, names))
        if self._group_text is None:
            return (generate_latest(_restricted(self._definition, names)),)
        with self._store.batch():
            view = self._store.health_view()
            groups = self._group_text.chunks(view.health, names)
        return (*groups, self._health_text(view, names))

    def _health_text(self, view: HealthView, names: Collection[str] | None) -> bytes:
        collector = JobHealthCollector(self._store, self._clock, view=lambda: view)
        if not names:
            return generate_latest(collector)      # a full scrape: no registry to build
        registry = CollectorRegistry()
        registry.register(collector)
        return generate_latest(registry.restricted_registry(names))


def _restricted(registry: CollectorRegistry, names: Collection[str] | None):
    return registry.restricted_registry(names) if names else registry
