"""`rebalance-monitor observe-rocketmq`: a RocketMQ cluster's consumer groups as monitor events.

    rebalance-monitor observe-rocketmq --namesrv 10.0.0.1:9876;10.0.0.2:9876 \\
        --bootstrap-servers kafka:9092 --topic rebalance.events --interval 10 --metrics-port 9109

Asks the NameServer and every master broker what each group's clients are, what each holds and
what each topic's route is (docs/rocketmq.md), and writes heartbeat, route and unregister events
to the events topic. No client is changed. `--stdout` prints the events instead; `--once` polls
once and exits.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from producers.rocketmq.admin import RocketMQAdmin
from producers.rocketmq.bridge import STRATEGIES
from producers.rocketmq.observer import CallStats, ObserverOptions, RocketMQObserver
from producers.rocketmq.remoting import AclSigner, RemotingClient

log = logging.getLogger("rebalance_monitor.observe_rocketmq")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    add = parser.add_argument
    add("--namesrv", default=env("ROCKETMQ_NAMESRV"), required=env("ROCKETMQ_NAMESRV") is None,
        help="NameServer address(es), HOST:PORT[;HOST:PORT] (env ROCKETMQ_NAMESRV)")
    add("--bootstrap-servers", default=env("KAFKA_BOOTSTRAP_SERVERS"),
        help="Kafka of the events topic (env KAFKA_BOOTSTRAP_SERVERS); not needed with --stdout")
    add("--topic", default="rebalance.events", help="the events topic")
    add("--interval", type=float, default=10.0, help="seconds between polls")
    add("--once", action="store_true", help="poll once, send, and exit")
    add("--stdout", action="store_true", help="print the events (JSON lines) instead of sending")
    add("--include", type=re.compile, default=None, metavar="REGEX",
        help="only groups whose name matches")
    add("--exclude", type=re.compile, default=None, metavar="REGEX",
        help="leave out groups whose name matches")
    add("--include-system-groups", action="store_true",
        help="also watch RocketMQ's own groups (TOOLS_CONSUMER, SELF_TEST_C_GROUP, ...)")
    add("--default-strategy", default="AVG", choices=sorted(set(STRATEGIES.values())),
        help="the strategy of clients that do not report one (Go, C++); events say it was assumed")
    add("--running-info-budget", type=int, default=50,
        help="clients asked for what they hold per poll at most (each call reaches a client)")
    add("--running-info-refresh", type=float, default=120.0,
        help="seconds after which an unchanged client's holdings are asked again")
    add("--keepalive", type=float, default=30.0,
        help="seconds between re-sends of an unchanged member or route (keep it well under the "
             "job's --session-timeout-ms, 120 s by default)")
    add("--timeout", type=float, default=5.0, help="seconds per admin call (running info: 15)")
    add("--access-key", default=env("ROCKETMQ_ACCESS_KEY"),
        help="ACL 1.0 AccessKey (env ROCKETMQ_ACCESS_KEY); with --secret-key, signs every call")
    add("--secret-key", default=env("ROCKETMQ_SECRET_KEY"), help="ACL SecretKey (env ROCKETMQ_SECRET_KEY)")
    add("--metrics-port", type=int, default=None,
        help="serve the bridge's own metrics on this port (default: none)")
    add("--metrics-host", default="0.0.0.0")
    add("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
        help="a librdkafka setting for the events producer, e.g. security.protocol=SASL_SSL")


class PollState:
    """The loop's own health: last successful poll and what it saw; thread-safe reads."""

    def __init__(self) -> None:
        self.last_success_seconds = 0.0
        self.groups = 0
        self.members = 0
        self.failures: dict[str, int] = {}
        self.sent = 0


class ObserverCollector(Collector):
    """rebalance_observer_* for the bridge's /metrics."""

    def __init__(self, stats: CallStats, state: PollState) -> None:
        self._stats = stats
        self._state = state

    def collect(self) -> Iterator[Metric]:
        calls, seconds = self._stats.snapshot()
        family = CounterMetricFamily(
            "rebalance_observer_calls", "Admin calls to the RocketMQ cluster, by request and "
            "outcome (ok, timeout, connect_failed, code_<n>, malformed_body, ...).",
            labels=["request", "outcome"])
        for (request, outcome), count in sorted(calls.items()):
            family.add_metric([request, outcome], float(count))
        yield family
        family = CounterMetricFamily(
            "rebalance_observer_call_seconds", "Seconds spent in admin calls, by request "
            "(divide by rebalance_observer_calls_total for the mean).", labels=["request"])
        for request, total in sorted(seconds.items()):
            family.add_metric([request], total)
        yield family
        failures = CounterMetricFamily(
            "rebalance_observer_poll_failures", "Polls that ended early, by exception class.",
            labels=["cause"])
        for cause, count in sorted(self._state.failures.items()):
            failures.add_metric([cause], float(count))
        yield failures
        yield GaugeMetricFamily("rebalance_observer_last_success_timestamp_seconds",
                                "Unix time the last poll completed.",
                                value=self._state.last_success_seconds)
        yield GaugeMetricFamily("rebalance_observer_groups", "Groups the last poll watched.",
                                value=self._state.groups)
        yield GaugeMetricFamily("rebalance_observer_members",
                                "Client processes the last poll found.", value=self._state.members)
        yield CounterMetricFamily("rebalance_observer_events", "Events written.",
                                  value=self._state.sent)


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.stdout and not args.bootstrap_servers:
        raise SystemExit("--bootstrap-servers (or KAFKA_BOOTSTRAP_SERVERS) is required without --stdout")
    signer = AclSigner(args.access_key, args.secret_key) if args.access_key and args.secret_key else None
    client = RemotingClient(signer)
    admin = RocketMQAdmin(client, [a for a in args.namesrv.split(";") if a.strip()], args.timeout)
    options = ObserverOptions(include=args.include, exclude=args.exclude,
                              exclude_system_groups=not args.include_system_groups,
                              default_strategy=args.default_strategy,
                              running_info_budget=args.running_info_budget,
                              running_info_refresh_s=args.running_info_refresh,
                              keepalive_s=args.keepalive)
    observer = RocketMQObserver(admin, options, CallStats())
    state = PollState()
    publish, close = _publisher(args)
    registry = CollectorRegistry()
    registry.register(ObserverCollector(observer.stats, state))
    if args.metrics_port is not None:
        start_http_server(args.metrics_port, addr=args.metrics_host, registry=registry)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    try:
        while not stopping.is_set():
            started = time.monotonic()
            _poll_once(observer, state, publish)
            if args.once:
                break
            stopping.wait(max(0.0, args.interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        pass
    finally:
        observer.close()
        client.close()
        close()
    return 0


def _poll_once(observer: RocketMQObserver, state: PollState, publish) -> None:
    try:
        events = observer.poll()
    except Exception as exc:  # noqa: BLE001 - a bug in one poll must not end the bridge
        cause = type(exc).__name__
        state.failures[cause] = state.failures.get(cause, 0) + 1
        log.exception("poll failed (%s); polling again at the next interval", cause)
        return
    for event in events:
        publish(event)
    state.sent += len(events)
    state.groups, state.members = observer.groups_seen, observer.members_seen
    state.last_success_seconds = time.time()
    for event in events:
        if event.get("strategy_assumed"):
            log.info("group %s: client %s reports no strategy; assumed %s", event["group"],
                     event["client_id"], event["strategy"])


def _publisher(args: argparse.Namespace):
    """(publish(event), close()) to stdout or to the events topic through an Outbox."""
    if args.stdout:
        def to_stdout(event: dict) -> None:
            sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        return to_stdout, lambda: None
    from confluent_kafka import Producer

    from streaming.delivery import DeliveryStats, Outbox, Record

    settings = {"bootstrap.servers": args.bootstrap_servers, "linger.ms": 20,
                "message.timeout.ms": 60_000,
                **dict(option.split("=", 1) for option in args.kafka_option)}
    outbox = Outbox(Producer(settings), DeliveryStats()).start()

    def to_topic(event: dict) -> None:
        outbox.send(Record(args.topic, json.dumps(event, separators=(",", ":")).encode(),
                           event["group"].encode() if "group" in event else None))

    return to_topic, lambda: outbox.close(10)
