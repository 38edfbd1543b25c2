"""The series the job's /metrics emits are exactly the ones docs/metrics.md documents: its
"Group metrics" and "Job health metrics" tables. The job side is built as `run` builds it
(streaming/spark/job.py) and fed a group of every kind, so every family shows."""

from __future__ import annotations

import re
from io import BytesIO

import pytest
from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry

from streaming.common.delivery import DeliveryStats
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.core.contract import GroupKey
from streaming.exporter import (
    ClientSeriesPolicy,
    GroupFamiliesText,
    JobHealthCollector,
    SnapshotStore,
)
from streaming.exporter.health import SourceCollector, query_restarts
from streaming.exporter.server import metrics_app
from streaming.spark.source_probe import SourceHealth
from tests.support import Scrape
from tests.unit.metric_contract import REPO
from tests.unit.state_helpers import group_metrics

pytestmark = pytest.mark.unit

EVERY_TOPIC_MAP = {"T": 2}


def documented() -> set[str]:
    """The metric names in the tables of the doc's two job sections."""
    text = (REPO / "docs" / "metrics.md").read_text()
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    job = [s for s in sections if s.startswith(("Group metrics", "Job health metrics"))]
    assert len(job) == 2
    return {m for s in job for m in re.findall(r"^\| `(rebalance_[a-z_]+)`", s, re.MULTILINE)}


def every_kind_of_group() -> list:
    maps = dict(queues=EVERY_TOPIC_MAP, double_assigned=EVERY_TOPIC_MAP, orphaned=EVERY_TOPIC_MAP,
                client_queues={"c1": 2}, conflict_since_ms=1)
    return [
        group_metrics("rmq", "rocketmq", members=2, assignor="AVG", share_readers=EVERY_TOPIC_MAP,
                      broker_split=EVERY_TOPIC_MAP, **maps),
        group_metrics("k848", "kafka", members=2, group_type="consumer", assignor="uniform",
                      reconciling_members=1, handoff_since_ms=1, group_epoch=3,
                      assignment_epoch=3, target_unassigned=EVERY_TOPIC_MAP, **maps),
        group_metrics("kshare", "kafka", members=2, group_type="share", assignor="simple",
                      share_readers=EVERY_TOPIC_MAP, **maps),
        group_metrics("kstreams", "kafka", members=2, group_type="streams", assignor="sticky",
                      standby_with_active=EVERY_TOPIC_MAP, standby_missing=EVERY_TOPIC_MAP,
                      **maps),
    ]


def emitted() -> set[str]:
    text = GroupFamiliesText(ClientSeriesPolicy(True, 500))
    store = SnapshotStore(text)
    for metrics in every_kind_of_group():
        store.replace_group(metrics)
    store.update_health(events_total={"heartbeat": 1}, invalid_events_total={"not_json": 1},
                        last_batch_timestamp_seconds=1.0, max_event_time_ms=5,
                        clusters={"default": (5, False), "gone": (1, True)},
                        stale_groups=[GroupKey("rocketmq", "rmq-stale", "gone")])
    delivery, restarts = DeliveryStats(), query_restarts()
    for counter in ("errors", "undelivered"):
        delivery.count(counter, ("dlq", "invalid_record"))
    delivery.count("truncated", "dlq")
    delivery.client.on_error(KafkaError(KafkaError._TRANSPORT))
    restarts.labels("StreamingQueryException").inc()
    source = SourceHealth(up=False, errors={"all_brokers_down": 1})
    registry = CollectorRegistry()
    for collector in (JobHealthCollector(store), SourceCollector(lambda: source),
                      DeliveryCollector(delivery), restarts):
        registry.register(collector)
    app = metrics_app(registry, lambda names: text.chunks(store.health(), names))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "",
               "wsgi.input": BytesIO()}
    body = b"".join(app(environ, lambda status, headers: None)).decode()
    return {sample.name for sample in Scrape(body).samples}


def test_the_job_emits_exactly_the_documented_metrics():
    shown, docs = emitted(), documented()
    assert shown - docs == set(), "emitted but not in docs/metrics.md"
    assert docs - shown == set(), "documented but never emitted"
