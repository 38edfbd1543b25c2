"""The runtime of a long-running producer command (observe-kafka, observe-rocketmq, simulate): its
poll loop survives every fault, and /metrics says how it is doing.

    health = PollHealth()                               # rebalance_observer_* (docs/metrics.md)
    stats = DeliveryStats()                             # the events producer's, via an Outbox
    serve_metrics(args.metrics_port, args.metrics_host, health, DeliveryCollector(stats))

    def poll_once():
        with health.calls.timed("list_groups", cluster):    # per call: outcome and seconds
            groups = admin.list_groups()
        ...
        health.succeeded(groups=len(groups), members=m, events=e)

    with stop_on_sigterm() as stopping:
        run_polls(poll_once, health, interval_s=10, stopping=stopping)

`run_polls` calls `poll_once` every interval; an exception from it (the cluster unreachable, a
request timing out, a bug) is counted by cause (`health.failed`) and the loop goes on at the
next interval. Every failing thing is logged once when it starts failing (or fails differently)
and once when it works again, never once per retry (`StateLog`).

A cause is librdkafka's error name for a confluent-kafka error (`timed_out`, `transport`, ...;
as streaming.common.delivery names produce errors), else the exception's class (`RequestTimedOutError`,
`KafkaTimeoutError`, `NoBrokersAvailable`, ...).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streaming.common import option_values as values
from streaming.common.faults import StateLog, error_cause

log = logging.getLogger("rebalance_monitor.producers")


class CallStats:
    """Requests to a cluster by request and outcome (`ok` or the failure's cause), and the
    seconds they took; each (request, target) logged once per change of state. Thread-safe."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._lock = threading.Lock()
        self._calls: Counter = Counter()     # (request, outcome) -> count
        self._seconds: Counter = Counter()   # request -> seconds, summed
        self._states: dict[tuple[str, str], StateLog] = {}
        self._log = logger

    def record(self, request: str, target: str, outcome: str, elapsed_s: float,
               error: BaseException | None = None) -> None:
        with self._lock:
            self._calls[(request, outcome)] += 1
            self._seconds[request] += elapsed_s
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
            raise
        self.record(request, target, "ok", time.monotonic() - started)

    def snapshot(self) -> tuple[dict, dict]:
        with self._lock:
            return dict(self._calls), dict(self._seconds)


class PollHealth(Collector):
    """A poll loop's health as `<prefix>_*` metrics (default `rebalance_observer`):

    calls_total{request,outcome}, call_seconds_total{request}   per request (`calls`)
    poll_failures_total{cause}     polls that failed, by cause
    group_errors_total{cause}      groups the cluster would not describe (skipped that poll)
    last_success_timestamp_seconds, groups, members             what the last good poll saw
    events_total                   events the command handed to its producer (or stdout)
    """

    def __init__(self, what: str = "poll", prefix: str = "rebalance_observer",
                 logger: logging.Logger = log, clock: Callable[[], float] = time.time) -> None:
        self.prefix = prefix
        self.calls = CallStats(logger)
        self.state = StateLog(what, logger)
        self._clock = clock
        self._lock = threading.Lock()
        self.failures: Counter = Counter()
        self.group_errors: Counter = Counter()
        self._group_states: dict[str, StateLog] = {}
        self._logger = logger
        self.last_success_seconds = 0.0
        self.groups = 0
        self.members = 0
        self.events = 0

    def succeeded(self, groups: int, members: int = 0, events: int = 0) -> None:
        with self._lock:
            self.last_success_seconds = self._clock()
            self.groups, self.members = groups, members
            self.events += events
        self.state.ok()

    def failed(self, cause: str | BaseException) -> None:
        error = cause if isinstance(cause, BaseException) else None
        label = error_cause(error) if error is not None else str(cause)
        with self._lock:
            self.failures[label] += 1
        self.state.failed(label, error)

    def group_failed(self, group: str, cause: str, detail: str = "") -> None:
        """The cluster answered, but not for this group (e.g. not authorized to describe it)."""
        with self._lock:
            self.group_errors[cause] += 1
            state = self._group_states.get(group)
            if state is None:
                state = self._group_states[group] = StateLog(f"group {group}", self._logger)
        state.failed(cause, detail=f"{detail}; skipped until it answers" if detail else "")

    def group_ok(self, group: str) -> None:
        state = self._group_states.get(group)
        if state is not None and state.ok():
            with self._lock:
                self._group_states.pop(group, None)

    def collect(self) -> Iterator[Metric]:
        calls, seconds = self.calls.snapshot()
        with self._lock:
            failures = sorted(self.failures.items())
            group_errors = sorted(self.group_errors.items())
            last, groups, members, events = (self.last_success_seconds, self.groups,
                                             self.members, self.events)
        name = self.prefix
        family = CounterMetricFamily(
            f"{name}_calls", "Requests to the observed cluster, by request and outcome (ok, "
            "or the failure's cause).", labels=["request", "outcome"])
        for (request, outcome), count in sorted(calls.items()):
            family.add_metric([request, outcome], float(count))
        yield family
        family = CounterMetricFamily(
            f"{name}_call_seconds", "Seconds spent in requests, by request (divide by "
            f"{name}_calls_total for the mean).", labels=["request"])
        for request, total in sorted(seconds.items()):
            family.add_metric([request], total)
        yield family
        family = CounterMetricFamily(
            f"{name}_poll_failures", "Polls that failed, by cause; the next one runs at the "
            "next interval.", labels=["cause"])
        for cause, count in failures:
            family.add_metric([cause], float(count))
        yield family
        family = CounterMetricFamily(
            f"{name}_group_errors", "Groups the cluster answered for with an error (e.g. not "
            "authorized), by cause; they are skipped, their members kept, until they answer.",
            labels=["cause"])
        for cause, count in group_errors:
            family.add_metric([cause], float(count))
        yield family
        yield GaugeMetricFamily(f"{name}_last_success_timestamp_seconds",
                                "Unix time the last poll completed; 0 before the first.",
                                value=last)
        yield GaugeMetricFamily(f"{name}_groups", "Groups the last completed poll watched.",
                                value=groups)
        yield GaugeMetricFamily(f"{name}_members", "Members the last completed poll found.",
                                value=members)
        yield CounterMetricFamily(f"{name}_events", "Events handed to the producer.",
                                  value=events)


def run_polls(poll_once: Callable[[], object], health: PollHealth, interval_s: float,
              stopping: threading.Event, once: bool = False) -> bool:
    """poll_once() every interval_s until `stopping` is set (or once); a poll that raises is
    counted by cause and the loop goes on. Returns whether the last poll succeeded."""
    while True:
        started = time.monotonic()
        try:
            poll_once()
            ok = True
        except Exception as exc:  # noqa: BLE001 - no fault of one poll ends the command
            health.failed(exc)
            ok = False
        if once or stopping.wait(max(0.0, interval_s - (time.monotonic() - started))):
            return ok


def poll_until_stopped(poll_once: Callable[[], object], health: PollHealth, interval_s: float,
                       once: bool, outbox=None, topic: str = "",
                       closers: tuple[Callable[[], object], ...] = (),
                       close_timeout_s: float = 30.0) -> int:
    """A poll command's whole run: run_polls until SIGTERM or Ctrl-C (or once), then `closers`,
    then the outbox (a streaming.common.delivery.Outbox, or None for --stdout) flushed for up to
    close_timeout_s, what is left counted unflushed. The exit code: 1 only when `once` and the
    poll failed or an event was not delivered; a fault in a long run never ends it."""
    ok = True
    try:
        with stop_on_sigterm() as stopping:
            ok = run_polls(poll_once, health, interval_s, stopping, once=once)
    finally:
        for close in closers:
            close()
        if outbox is not None:
            count_unflushed(outbox.stats, topic, outbox.close(close_timeout_s))
    if once and outbox is not None:
        ok = ok and not outbox.stats.snapshot().undelivered
    return 0 if ok or not once else 1


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[threading.Event]:
    """An event set by SIGTERM (and by Ctrl-C), so the loop ends cleanly and the producer
    flushes. Off the main thread (a library caller) nothing is installed."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return
    before = signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        yield stopping
    except KeyboardInterrupt:
        stopping.set()
    finally:
        signal.signal(signal.SIGTERM, before)


def serve_metrics(port: int | None, host: str = "0.0.0.0",
                  *collectors: Collector) -> CollectorRegistry:
    """A registry of `collectors`, served on http://host:port/metrics unless port is None."""
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    if port is not None:
        start_http_server(port, addr=host, registry=registry)
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


def count_unflushed(stats, topic: str, left: int) -> None:
    """Records still in the producer when it closed are lost: count them (cause `unflushed`)
    in a streaming.common.delivery.DeliveryStats, so /metrics and the exit code say so."""
    for _ in range(left):
        stats.count("undelivered", (topic, "unflushed"))
    if left:
        log.warning("%d record(s) to %s undelivered when the producer closed", left, topic)


def stamped(event: dict, cluster: str) -> dict:
    """The event naming the cluster it describes (docs/events.md, cluster)."""
    return {"cluster": cluster, **event}


def add_metrics_arguments(parser, what: str) -> None:
    parser.add_argument(
        "--metrics-port", type=values.port, default=None, metavar="PORT",
        help=f"serve {what} on http://HOST:PORT/metrics (default: off; docs/metrics.md)")
    parser.add_argument("--metrics-host", type=values.not_empty, default="0.0.0.0",
                        help="with --metrics-port (default: %(default)s)")
