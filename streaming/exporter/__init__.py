"""Prometheus exporter: a Collector over per-group snapshots and the /metrics endpoint."""

from streaming.exporter.collector import (
    ClientSeriesPolicy,
    JobHealth,
    JobHealthCollector,
    RebalanceCollector,
    SnapshotStore,
)
from streaming.exporter.exposition import GroupFamiliesText
from streaming.exporter.server import MetricsServer, MetricsServerConfig

__all__ = [
    "ClientSeriesPolicy",
    "GroupFamiliesText",
    "JobHealth",
    "JobHealthCollector",
    "MetricsServer",
    "MetricsServerConfig",
    "RebalanceCollector",
    "SnapshotStore",
]
