"""rebalance_monitor_produce_*, the undelivered and truncated counts and the producer client's
own errors on /metrics, from a DeliveryStats: the job's and every producer command's delivery,
shown alike."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector


class DeliveryCollector(Collector):
    """rebalance_monitor_produce_* from a streaming.common.delivery.DeliveryStats."""

    def __init__(self, stats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        counts = self._stats.snapshot()
        yield _by_topic_and_cause(
            "rebalance_monitor_produce_errors",
            "Failed produce attempts, by topic and cause (a retried record counts each time).",
            counts.errors)
        yield _by_topic_and_cause(
            "rebalance_monitor_undelivered_records",
            "Records given up on, by topic and cause: they are not in the topic (each is logged).",
            counts.undelivered)
        truncated = CounterMetricFamily(
            "rebalance_monitor_truncated_records",
            "Records cut to fit the topic's size limit (original size and SHA-256 in headers).",
            labels=["topic"])
        for topic, count in sorted(counts.truncated.items()):
            truncated.add_metric([topic], float(count))
        yield truncated
        client = CounterMetricFamily(
            "rebalance_monitor_producer_client_errors",
            "Errors the producer's Kafka client reported outside any record, by cause: each "
            "failed connection attempt to a broker counts (transport, all_brokers_down, ...).",
            labels=["cause"])
        for cause, count in sorted(self._stats.client.counts().items()):
            client.add_metric([cause], float(count))
        yield client


def _by_topic_and_cause(name: str, doc: str, counts: dict) -> Metric:
    family = CounterMetricFamily(name, doc, labels=["topic", "cause"])
    for (topic, cause), count in sorted(counts.items()):
        family.add_metric([topic, cause], float(count))
    return family
