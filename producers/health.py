"""A producer command's own metrics (observe-kafka, observe-rocketmq, simulate), on
prometheus_client's Counter and Gauge; the poll loop that feeds them is producers.poll.

    health = PollHealth()                               # rebalance_observer_* (docs/metrics.md)
    stats = DeliveryStats()                             # the events producer's, via an Outbox
    sock = metrics_socket(args.metrics_port, args.metrics_host)   # first: a port in use ends it
    ...
    serve_metrics(sock, health, DeliveryCollector(stats))

    def poll_once():
        with health.calls.timed("list_groups", cluster):    # per call: outcome and seconds
            groups = admin.list_groups()
        ...
        health.succeeded(groups=len(groups), members=m, events=e)

Every failing thing is logged once when it starts failing (or fails differently) and once when
it works again, never once per retry (streaming.common.faults.StateLog). A cause is librdkafka's
error name for a confluent-kafka error (`timed_out`, `transport`, ...), else the exception's
class (`RequestTimedOutError`, `KafkaTimeoutError`, `NoBrokersAvailable`, ...).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    make_wsgi_app,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streaming.common.faults import StateLog, error_cause
from streaming.common.listener import listen, serve_wsgi

log = logging.getLogger("rebalance_monitor.producers")
# A producer's counters show no `<name>_created` series, as the job's own families do not
# (the flag is read when a metric is collected, in this producer's process only).
disable_created_metrics()


class CallStats(Collector):
    """Requests to a cluster by request and outcome (`ok` or the failure's cause), and the
    seconds they took, as `<prefix>_calls_total` and `<prefix>_call_seconds_total`; each
    (request, target) logged once per change of state. Thread-safe."""

    def __init__(self, logger: logging.Logger = log, prefix: str = "rebalance_observer") -> None:
        self._lock = threading.Lock()
        self._calls = Counter(f"{prefix}_calls", "Requests to the observed cluster, by request "
                              "and outcome (ok, or the failure's cause).",
                              ["request", "outcome"], registry=None)
        self._seconds = Counter(f"{prefix}_call_seconds", "Seconds spent in requests, by "
                                f"request (divide by {prefix}_calls_total for the mean).",
                                ["request"], registry=None)
        self._states: dict[tuple[str, str], StateLog] = {}
        self._log = logger

    def record(self, request: str, target: str, outcome: str, elapsed_s: float,
               error: BaseException | None = None) -> None:
        self._calls.labels(request, outcome).inc()
        self._seconds.labels(request).inc(elapsed_s)
        with self._lock:
            state = self._states.get((request, target))
            if state is None:
                state = self._states[(request, target)] = StateLog(
                    f"{request} to {target}", self._log)
        if outcome == "ok":
            state.ok()
        else:
            state.failed(outcome, error)

    @contextlib.contextmanager
    def timed(self, request: str, target: str) -> Iterator[None]:
        """Times the block; an exception is recorded with its cause and raised again."""
        started = time.monotonic()
        try:
            yield
        except Exception as exc:
            self.record(request, target, error_cause(exc), time.monotonic() - started, exc)
            _mark_said(exc)
            raise
        self.record(request, target, "ok", time.monotonic() - started)

    def snapshot(self) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
        """({(request, outcome): calls}, {request: seconds})."""
        return (_by_labels(self._calls, "request", "outcome"),
                {request: value for (request,), value in _by_labels(self._seconds,
                                                                    "request").items()})

    def collect(self) -> Iterator[Metric]:
        yield from self._calls.collect()
        yield from self._seconds.collect()


class PollHealth(Collector):
    """A poll loop's health as `<prefix>_*` metrics (default `rebalance_observer`), on
    prometheus_client's own Counter and Gauge:

    calls_total{request,outcome}, call_seconds_total{request}   per request (`calls`)
    poll_failures_total{cause}     polls that failed, by cause
    group_errors_total{cause}      groups the cluster would not describe (skipped that poll)
    last_success_timestamp_seconds, groups, members             what the last good poll saw
    events_total                   events the command handed to its producer (or stdout)
    """

    def __init__(self, what: str = "poll", prefix: str = "rebalance_observer",
                 logger: logging.Logger = log, clock: Callable[[], float] = time.time) -> None:
        self.calls = CallStats(logger, prefix)
        self.state = StateLog(what, logger)
        self._clock = clock
        self._lock = threading.Lock()
        self._group_states: dict[str, StateLog] = {}
        self._logger = logger
        self._failures = Counter(f"{prefix}_poll_failures", "Polls that failed, by cause; the "
                                 "next one runs at the next interval.", ["cause"], registry=None)
        self._group_errors = Counter(
            f"{prefix}_group_errors", "Groups the cluster answered for with an error (e.g. not "
            "authorized), by cause; they are skipped, their members kept, until they answer.",
            ["cause"], registry=None)
        self._last_success = Gauge(f"{prefix}_last_success_timestamp_seconds",
                                   "Unix time the last poll completed; 0 before the first.",
                                   registry=None)
        self._groups = Gauge(f"{prefix}_groups", "Groups the last completed poll watched.",
                             registry=None)
        self._members = Gauge(f"{prefix}_members", "Members the last completed poll found.",
                              registry=None)
        self._events = Counter(f"{prefix}_events", "Events handed to the producer.",
                               registry=None)

    def succeeded(self, groups: int, members: int = 0, events: int = 0) -> None:
        self._last_success.set(self._clock())
        self._groups.set(groups)
        self._members.set(members)
        self._events.inc(events)
        self.state.ok()

    def failed(self, cause: str | BaseException) -> None:
        """A failed poll. One that a timed request failed was logged as that request's failure:
        it is counted, and named when the poll works again, not said twice."""
        error = cause if isinstance(cause, BaseException) else None
        label = error_cause(error) if error is not None else str(cause)
        self._failures.labels(label).inc()
        self.state.failed(label, error, already_said=getattr(error, SAID, False))

    def group_failed(self, group: str, cause: str, detail: str = "") -> None:
        """The cluster answered, but not for this group (e.g. not authorized to describe it)."""
        self._group_errors.labels(cause).inc()
        with self._lock:
            state = self._group_states.get(group)
            if state is None:
                state = self._group_states[group] = StateLog(f"group {group}", self._logger)
        state.failed(cause, detail=f"{detail}; skipped until it answers" if detail else "")

    def group_ok(self, group: str) -> None:
        state = self._group_states.get(group)
        if state is not None and state.ok():
            with self._lock:
                self._group_states.pop(group, None)

    # What the last polls saw, read back from the metrics (for the commands and their tests).
    @property
    def failures(self) -> dict[str, int]:
        return {cause: int(v) for (cause,), v in _by_labels(self._failures, "cause").items()}

    @property
    def group_errors(self) -> dict[str, int]:
        return {cause: int(v) for (cause,), v in _by_labels(self._group_errors, "cause").items()}

    @property
    def groups(self) -> int:
        return int(_value(self._groups))

    @property
    def members(self) -> int:
        return int(_value(self._members))

    @property
    def events(self) -> int:
        return int(_value(self._events))

    @property
    def last_success_seconds(self) -> float:
        return _value(self._last_success)

    def collect(self) -> Iterator[Metric]:
        yield from self.calls.collect()
        for metric in (self._failures, self._group_errors, self._last_success, self._groups,
                       self._members, self._events):
            yield from metric.collect()


def _by_labels(metric, *labels: str) -> dict[tuple[str, ...], float]:
    """A labelled Counter's values by its label values (its _total samples)."""
    return {tuple(sample.labels[name] for name in labels): sample.value
            for family in metric.collect() for sample in family.samples
            if sample.name.endswith("_total")}


def _value(metric) -> float:
    """An unlabelled Counter's or Gauge's value."""
    return next(sample.value for family in metric.collect() for sample in family.samples
                if not sample.name.endswith("_created"))


# Set on an exception that CallStats.timed recorded (and logged, if it started a failure).
SAID = "_rebalance_monitor_said"


def _mark_said(error: BaseException) -> None:
    try:
        setattr(error, SAID, True)
    except AttributeError:       # an exception type without a __dict__: said twice, then
        pass


def metrics_socket(port: int | None, host: str = "0.0.0.0") -> socket.socket | None:
    """The /metrics port, taken first thing (streaming.common.listener); None: no /metrics."""
    return None if port is None else listen(host, port)


def serve_metrics(sock: socket.socket | None, *collectors: Collector) -> CollectorRegistry:
    """A registry of `collectors`, served on `sock` (from metrics_socket) unless it is None."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    if sock is not None:
        serve_wsgi(sock, make_wsgi_app(registry))
        host, port = sock.getsockname()[:2]
        log.info("metrics on http://%s:%d/metrics", host, port)
    return registry


class CountCollector(Collector):
    """One counter or gauge read from a callable at each scrape (no work on the hot path)."""

    def __init__(self, name: str, documentation: str, read: Callable[[], float],
                 kind: str = "counter") -> None:
        self._family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        self._name, self._doc, self._read = name, documentation, read

    def collect(self) -> Iterator[Metric]:
        yield self._family(self._name, self._doc, value=float(self._read()))
