"""Runs the real streaming job in-process against a real broker, and reads its real /metrics.

    with RunningMonitor(spark, bootstrap, topic, tmp_path) as monitor:
        produce_events(bootstrap, topic, events)
        monitor.wait_for(lambda m: m.value("rebalance_group_members", group="g") == 4)
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from confluent_kafka import Producer

from streaming.spark.config import JobConfig
from streaming.spark.job import Monitor
from tests.environment import TEST_SOURCE
from tests.support import COUNTED_WRITES, Scrape, wait_until


def produce_events(bootstrap: str, topic: str, events: Iterable[Mapping | bytes]) -> int:
    """Produce JSON events keyed by group, with the Kafka timestamp = the event's ts."""
    producer = Producer({"bootstrap.servers": bootstrap, **COUNTED_WRITES})
    count = 0
    for event in events:
        if isinstance(event, bytes | bytearray):
            producer.produce(topic, value=bytes(event))
        else:
            kwargs = {"timestamp": event["ts"]} if isinstance(event.get("ts"), int) else {}
            key = event.get("group")
            producer.produce(topic, key=key.encode() if isinstance(key, str) else None,
                             value=json.dumps(event).encode(), **kwargs)
        count += 1
    producer.flush(30)
    return count


# Every job a test runs ends with these at 0: no row dropped behind the watermark, no record
# read and neither applied nor dead-lettered (docs/events.md, Ordering).
LOST_RECORD_SERIES = ("rebalance_monitor_rows_dropped_by_watermark_total",
                      "rebalance_monitor_unaccounted_records_total")


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def assert_nothing_lost(scrape: Scrape) -> None:
    lost = {name: scrape.value(name) for name in LOST_RECORD_SERIES}
    assert lost == dict.fromkeys(LOST_RECORD_SERIES, 0.0), lost


class RunningMonitor:
    def __init__(self, spark, bootstrap: str, topic: str, workdir: Path, **overrides) -> None:
        config = JobConfig(bootstrap_servers=bootstrap, topic=topic, source=TEST_SOURCE,
                           checkpoint=str(workdir / "checkpoint"), metrics_host="127.0.0.1",
                           metrics_port=0, trigger_interval_ms=500,
                           findings_topic=topic + ".findings", dead_letter_topic=topic + ".dlq",
                           shuffle_partitions=2)
        self.config = replace(config, **overrides)
        self.monitor = Monitor(self.config, spark)

    def __enter__(self) -> RunningMonitor:
        self.monitor.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        try:
            if exc_type is None:
                assert_nothing_lost(self.scrape())
        finally:
            self.monitor.stop()

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.monitor.metrics.port}/metrics"

    def scrape(self) -> Scrape:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            return Scrape(response.read().decode())

    def group(self, system: str, group: str) -> dict:
        """The group API's answer for one group (docs/api.md), found by its system and name."""
        base = f"http://127.0.0.1:{self.monitor.metrics.port}"
        listed = _get_json(base + "/api/v1/groups")["groups"]
        [url] = [g["url"] for g in listed if (g["system"], g["group"]) == (system, group)]
        return _get_json(base + url)

    def wait_for(self, predicate: Callable[[Scrape], bool], timeout: float = 90.0) -> Scrape:
        """Poll /metrics until predicate holds; fail at once if the query failed, else after
        timeout with the last scrape."""
        last: Scrape | None = None

        def holds() -> Scrape | None:
            nonlocal last
            last = self.scrape()
            if predicate(last):
                return last
            query = self.monitor.query
            if query is not None and query.exception() is not None:
                raise AssertionError(f"streaming query failed: {query.exception()}")
            return None

        def shown() -> str:
            return "last scrape:\n" + "\n".join(
                f"{s.name}{s.labels} {s.value}" for s in last.samples
                if s.name.startswith("rebalance_"))

        return wait_until(holds, timeout, "the /metrics waited for", interval=0.2,
                          details=shown)

    def catch_up(self) -> Scrape:
        """Block until the query has processed everything in the topic; then scrape."""
        self.monitor.query.processAllAvailable()
        assert self.monitor.prerender.wait_rendered(), "/metrics was not rendered after the batch"
        return self.scrape()
