"""Prometheus exporter: a Collector over per-group snapshots and the /metrics endpoint."""

from streaming.exporter.collector import (
    ClientSeriesPolicy,
    JobHealth,
    RebalanceCollector,
    SnapshotStore,
)
from streaming.exporter.server import MetricsServer, MetricsServerConfig

__all__ = [
    "ClientSeriesPolicy",
    "JobHealth",
    "MetricsServer",
    "MetricsServerConfig",
    "RebalanceCollector",
    "SnapshotStore",
]
