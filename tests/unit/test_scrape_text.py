"""A scrape shows each batch whole: never a batch's counts without its groups, nor its groups
without its counts. The sink applies real batches on one thread while scrapes are taken on
another, with kept text (Prerender) and without (the exact twin); then the text served."""

import json
import sys
import threading
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import Row

from streaming.common.delivery import DeliveryStats, Outbox
from streaming.exporter import (
    ClientSeriesPolicy,
    GroupFamiliesText,
    RebalanceCollector,
    SnapshotStore,
)
from streaming.exporter.prerender import Prerender
from streaming.exporter.scrape_text import ScrapeText
from streaming.spark.checkpoint_files import LocalTextFile
from streaming.spark.sinks import BatchSink
from tests.unit.fake_producer import FakeProducer
from tests.unit.state_helpers import group_metrics

pytestmark = pytest.mark.unit

BATCHES = 300
CLOCK = 100.0


def row(kind: str, payload: bytes) -> Row:
    """One row of the state function's output, as foreachBatch collects it."""
    return Row(system="rocketmq", group="g", cluster="default", kind=kind, reason=None,
               payload=payload)


def batch(n: int) -> list:
    """The n-th batch: one heartbeat, after which g has n members."""
    counts = {"events": {"heartbeat": 1}, "invalid": {}, "event_time_ms": n}
    return [row("metrics", group_metrics("g", members=n, event_time_ms=n).to_json()),
            row("counts", json.dumps(counts).encode())]


def run_beside(call, timeout_s: float = 10.0):
    """call() on another thread, as the metrics server runs a scrape; fails if it is still
    waiting (on a lock this thread holds) after timeout_s."""
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert answers, f"still waiting after {timeout_s} s"
    return answers[0]


def members_and_heartbeats(parts: Sequence[bytes]) -> tuple[float | None, float | None]:
    values = {sample.name: sample.value
              for family in text_string_to_metric_families(b"".join(parts).decode())
              for sample in family.samples
              if sample.name in ("rebalance_group_members", "rebalance_monitor_events_total")}
    return values.get("rebalance_group_members"), values.get("rebalance_monitor_events_total")


@pytest.fixture
def frequent_thread_switches():
    """Threads switch every microsecond, not every 5 ms: a scrape lands inside a batch."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("kept_text", [True, False], ids=["kept-text", "exact"])
def test_every_scrape_shows_a_batchs_groups_with_its_counts(tmp_path, kept_text,
                                                            frequent_thread_switches):
    clients = ClientSeriesPolicy()
    group_text = GroupFamiliesText(clients) if kept_text else None
    store = SnapshotStore(group_text)
    scrape_text = ScrapeText(store, group_text, clients, clock=lambda: CLOCK)
    prerender = Prerender(scrape_text.render_full).start()
    sink = BatchSink(store, LocalTextFile(tmp_path / "counters.json"),
                     Outbox(FakeProducer(), DeliveryStats()), "findings", "dlq",
                     after_batch=prerender.changed)

    def run_batches():
        for n in range(1, BATCHES + 1):
            sink(FakeBatch(batch(n)), n)

    batches = threading.Thread(target=run_batches)
    batches.start()
    seen = []
    try:
        while batches.is_alive():
            seen.append(members_and_heartbeats(scrape_text.served(prerender.latest, None)))
    finally:
        batches.join()
        prerender.wait_rendered(timeout_s=30)
        prerender.stop()
    seen.append(members_and_heartbeats(scrape_text.served(prerender.latest, None)))
    torn = [(members, heartbeats) for members, heartbeats in seen if members != heartbeats]
    assert not torn, f"{len(torn)} of {len(seen)} scrapes showed a batch in part: {torn[:5]}"
    assert seen[-1] == (BATCHES, BATCHES)


class FakeBatch:
    """A micro-batch's DataFrame, as far as the sink reads it (named fake: no Spark here)."""

    def __init__(self, rows: list) -> None:
        self._rows = rows

    def collect(self) -> list:
        return self._rows


@pytest.mark.parametrize("kept_text", [True, False], ids=["kept-text", "exact"])
def test_the_served_text_is_the_definitions_and_declares_each_family_once(kept_text):
    clients = ClientSeriesPolicy()
    group_text = GroupFamiliesText(clients) if kept_text else None
    store = SnapshotStore(group_text)
    scrape_text = ScrapeText(store, group_text, clients, clock=lambda: CLOCK)
    store.replace_group(group_metrics("g", members=2, double_assigned={"T": 1},
                                      conflict_since_ms=1_000, event_time_ms=2_000))
    store.update_health(events_total={"heartbeat": 2}, max_event_time_ms=5_000)
    definition = CollectorRegistry()
    definition.register(RebalanceCollector(store, clients, clock=lambda: CLOCK))

    full = b"".join(scrape_text.served(scrape_text.render_full(), None))
    assert full == generate_latest(definition)
    declared = [line for line in full.decode().splitlines() if line.startswith("# TYPE ")]
    assert len(declared) == len(set(declared))
    one = ["rebalance_monitor_events_total", "rebalance_double_assigned_queues"]
    assert b"".join(scrape_text.served(scrape_text.render_full(), one)) == \
        generate_latest(definition.restricted_registry(one))


def test_a_full_scrape_serves_the_last_render_with_the_health_it_was_rendered_with():
    clients = ClientSeriesPolicy()
    group_text = GroupFamiliesText(clients)
    store = SnapshotStore(group_text)
    scrape_text = ScrapeText(store, group_text, clients, clock=lambda: CLOCK)
    store.replace_group(group_metrics("g", members=1))
    store.update_health(events_total={"heartbeat": 1})
    rendered = scrape_text.render_full()
    store.replace_group(group_metrics("g", members=2))
    store.update_health(events_total={"heartbeat": 2})
    assert members_and_heartbeats(scrape_text.served(rendered, None)) == (1, 1)
    assert members_and_heartbeats(scrape_text.served(None, None)) == (2, 2)   # none kept
    # A family asked for by name comes from the same render, with the same health: it does
    # not wait for a batch the sink is applying.
    asked = ["rebalance_group_members", "rebalance_monitor_events_total"]
    assert members_and_heartbeats(scrape_text.served(rendered, asked)) == (1, 1)
    with store.batch():     # held by the sink while it applies a batch
        served = run_beside(lambda: scrape_text.served(rendered, asked))
    assert members_and_heartbeats(served) == (1, 1)
    assert members_and_heartbeats(scrape_text.served(None, asked)) == (2, 2)   # none kept
