"""Small collectors for the job's own health: its events source and the restarts of its query
(delivery to the topics it produces to: streaming.common.delivery_metrics). Each reads a live
object on every scrape, so /metrics tells the truth during an outage, when no micro-batch runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import Counter, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# The job's counters show no `<name>_created` series, as its own families do not.
disable_created_metrics()


class SourceCollector(Collector):
    """rebalance_monitor_source_* from a callable returning a SourceHealth."""

    def __init__(self, health: Callable) -> None:
        self._health = health

    def collect(self) -> Iterator[Metric]:
        health = self._health()
        yield GaugeMetricFamily(
            "rebalance_monitor_source_up",
            "1 when the events broker answered the last metadata request for the events "
            "topic, 0 when it did not (the job waits and resumes where it stopped).",
            value=1.0 if health.up else 0.0)
        errors = CounterMetricFamily(
            "rebalance_monitor_source_errors",
            "Failed requests to the events broker from the driver, by cause.", labels=["cause"])
        for cause, count in sorted(health.errors.items()):
            errors.add_metric([cause], float(count))
        yield errors
        yield GaugeMetricFamily(
            "rebalance_monitor_source_last_success_timestamp_seconds",
            "Unix time the events broker last answered; 0 before it first did.",
            value=health.last_ok_seconds)


def query_restarts() -> Counter:
    """rebalance_monitor_query_restarts_total{cause}: the job restarted its failed query."""
    return Counter("rebalance_monitor_query_restarts",
                   "Times the streaming query failed and was restarted from its checkpoint, by "
                   "the failure's exception class.", ["cause"], registry=None)
