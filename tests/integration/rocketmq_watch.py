"""A RocketMQ group watched end to end, for the tests against real RocketMQ clusters
(test_observe_rocketmq.py, test_rocketmq_route_changes.py, test_go_consumer.py): observe-rocketmq
as a real process writing the group's events to a topic of their own, the real job reading it,
and the job's /metrics read per group."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.integration.monitor_harness import RunningMonitor
from tests.integration.producer_process import ProducerProcess
from tests.support import Scrape

SYSTEM = "rocketmq"


def fresh(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def watching(namesrv: str, group: str, spark, kafka_bootstrap: str, make_topic, workdir: Path,
             *bridge_args: str, events: str | None = None, **job_options: object,
             ) -> Iterator[tuple[RunningMonitor, ProducerProcess]]:
    """The job reading an events topic of its own (`events`, or a new one), and observe-rocketmq
    (polling every second, only `group`) writing to it."""
    events = events or make_topic()
    workdir.mkdir(parents=True, exist_ok=True)
    with RunningMonitor(spark, kafka_bootstrap, events, workdir, **job_options) as monitor, \
            ProducerProcess(["observe-rocketmq", "--namesrv", namesrv,
                             "--bootstrap-servers", kafka_bootstrap, "--topic", events,
                             "--interval-seconds", "1", "--keepalive-seconds", "5", "--include",
                             f"^{group}$", *bridge_args], workdir) as bridge:
        yield monitor, bridge


def group_value(scrape: Scrape, name: str, group: str, **labels: str) -> float | None:
    return scrape.value(name, system=SYSTEM, group=group, **labels)
