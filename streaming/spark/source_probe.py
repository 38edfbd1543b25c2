"""Whether the events broker answers, asked from the driver on a timer.

The stream reader's own calls run in Spark's Python planner process and on executors, out of
reach of the driver's /metrics; they wait out an outage by themselves (source_embedded). This
probe is what /metrics shows of it: a metadata request for the events topic every interval.

    probe = SourceProbe(settings, "rebalance.events", interval_s=5).start()
    probe.health()        # SourceHealth(up=True, errors={}, last_ok_seconds=...)
    probe.stop()
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from streaming.common.faults import cause_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceHealth:
    up: bool | None = None            # None until the first answer or failure
    errors: Mapping[str, int] = field(default_factory=dict)   # failed probes by cause
    last_ok_seconds: float = 0.0      # unix time of the last answer


def topic_answers(admin, topic: str, timeout_s: float) -> str | None:
    """None when the broker answers with the topic's metadata, else the cause."""
    try:
        metadata = admin.list_topics(topic=topic, timeout=timeout_s).topics.get(topic)
    except KafkaException as exc:
        return cause_of(exc.args[0])
    if metadata is None:
        return "unknown_topic_or_part"
    if metadata.error is not None and metadata.error.code() != KafkaError.NO_ERROR:
        return cause_of(metadata.error)
    return None


class SourceProbe:
    def __init__(self, settings: Mapping[str, str], topic: str, interval_s: float = 5.0,
                 timeout_s: float = 5.0, admin_factory=AdminClient,
                 on_change: Callable[[bool], None] | None = None) -> None:
        self._settings = dict(settings)
        self._topic = topic
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._admin_factory = admin_factory
        self._on_change = on_change            # called with `up` when reachability changes
        self._lock = threading.Lock()
        self._health = SourceHealth()
        self._errors: Counter = Counter()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SourceProbe:
        self._thread = threading.Thread(target=self._run, name="source-probe", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """Ends the probing; waits up to `timeout_s` (default: one probe's timeout and a margin)
        for a probe in flight. The thread is a daemon: one still waiting does not hold the exit."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout_s + 2 if timeout_s is None else timeout_s)

    def health(self) -> SourceHealth:
        with self._lock:
            return self._health

    def probe_once(self, admin) -> None:
        cause = topic_answers(admin, self._topic, self._timeout_s)
        with self._lock:
            before = self._health
            if cause is None:
                self._health = SourceHealth(True, dict(self._errors), time.time())
            else:
                self._errors[cause] += 1
                self._health = SourceHealth(False, dict(self._errors), before.last_ok_seconds)
        if before.up is not (cause is None):
            if cause is None:
                log.info("events topic %s reachable", self._topic)   # good news: no warning
            else:
                log.warning("events topic %s unreachable (%s): the job waits and resumes "
                            "where it stopped", self._topic, cause)
            if self._on_change is not None:
                self._on_change(cause is None)

    def down(self) -> bool:
        """The last probe found the events topic unreachable."""
        return self.health().up is False

    def _run(self) -> None:
        admin = self._admin_factory({**self._settings, "log_level": 0})
        while not self._stopping.is_set():
            self.probe_once(admin)
            self._stopping.wait(self._interval_s)
