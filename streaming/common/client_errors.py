"""A librdkafka client's own error reports, summarised: one line when its brokers stop
answering, one when they answer again, and every failed attempt counted by cause (for
/metrics), instead of librdkafka's line per connection attempt.

    errors = ClientErrors("findings producer")
    producer = Producer({**errors.settings(), "bootstrap.servers": ...})   # log_level 0 and callbacks
    errors.counts()          # {"transport": 12, "all_brokers_down": 3}

The callbacks run inside the client's poll(), so the client must be polled (every producer
here is, by a background thread). librdkafka reports failures (error_cb) but not recoveries:
the statistics it sends every STATS_INTERVAL_MS say whether a broker connection is up again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from typing import TYPE_CHECKING

from streaming.common.faults import cause_of

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

log = logging.getLogger("rebalance_monitor.kafka_client")

STATS_INTERVAL_MS = 5_000


class ClientErrors:
    """Thread-safe; `settings()` goes first in the client's configuration, so an operator's own
    `log_level` (for debugging) still wins."""

    def __init__(self, what: str, logger: logging.Logger = log) -> None:
        self.what = what
        self._log = logger
        self._lock = threading.Lock()
        self._counts: Counter = Counter()
        self._episode: Counter | None = None   # causes since the brokers last answered

    def settings(self) -> dict:
        return {"log_level": 0, "error_cb": self.on_error, "stats_cb": self.on_stats,
                "statistics.interval.ms": STATS_INTERVAL_MS}

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def on_error(self, error: KafkaError) -> None:
        cause = cause_of(error)
        with self._lock:
            self._counts[cause] += 1
            starting = self._episode is None
            if starting:
                self._episode = Counter()
            self._episode[cause] += 1
        if starting:
            self._log.warning("%s: brokers not answering (%s: %s); retrying, failed attempts "
                              "counted on /metrics", self.what, cause, error.str())

    def on_stats(self, text: str) -> None:
        if self._episode is None or not any_broker_up(text):
            return
        with self._lock:
            episode, self._episode = self._episode, None
        if episode:
            causes = ", ".join(f"{cause} {n}" for cause, n in sorted(episode.items()))
            self._log.info("%s: brokers answer again (failed attempts: %s)", self.what, causes)


def any_broker_up(stats_json: str) -> bool:
    """Whether librdkafka's statistics show a broker connection in state UP.

    >>> any_broker_up('{"brokers": {"b:9092/1": {"state": "UP"}, "b:9093/2": {"state": "DOWN"}}}')
    True
    >>> any_broker_up('{"brokers": {"b:9092/bootstrap": {"state": "CONNECT"}}}')
    False
    """
    brokers = json.loads(stats_json).get("brokers", {})
    return any(broker.get("state") == "UP" for broker in brokers.values())
