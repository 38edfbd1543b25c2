"""`rebalance-monitor observe-kafka`: heartbeat and route events for a Kafka cluster's groups.

    rebalance-monitor observe-kafka --bootstrap-servers kafka:9092 \\
        --events-bootstrap-servers monitor-kafka:9092 --topic rebalance.events --interval-seconds 10 \\
        --metrics-port 9110

Every interval it lists the cluster's consumer groups, describes them, reads the subscribed
topics' partition counts (producers/kafka/observer.py), and emits for every group (system
"kafka", key = group) a heartbeat per member, a route per topic and an unregister for each
member gone since the previous poll (producers/kafka/translate.py). What it cannot read of a
group it says on stderr, naming the group, once per change.

No fault ends it: a poll that fails (the observed cluster unreachable, a request timing out, a
describe refused) is counted by cause and logged once per change of state, and the next poll runs
at the next interval. Events go through streaming.common.delivery's Outbox: a produce failure never
raises, retriable ones are retried, and each record given up on is counted by topic and cause.
`--metrics-port` serves both (producers/health.py; docs/metrics.md, "Producer command metrics").
With `--once`, the exit code is 1 when the poll failed or an event was not delivered.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

from producers import events
from producers.health import PollHealth, metrics_socket, serve_metrics
from producers.kafka.observer import CapabilityCollector, KafkaGroupObserver
from producers.kafka.translate import Translation
from producers.poll import poll_until_stopped
from producers.restate import Restatements, RestateOptions
from streaming.common import option_values as values
from streaming.common.delivery import DeliveryStats, Outbox, Record, RetryPolicy
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.common.kafka_options import (
    KafkaClientOptions,
    for_kafka_python,
    parse_kafka_options,
)
from streaming.common.options import OptionError, declared_in, option, switch
from streaming.common.options import add_arguments as add_options
from streaming.core.switches import parse_bool

log = logging.getLogger("rebalance_monitor.observe_kafka")


_seconds = values.number(above=0)


def _kafka_option(help: str, flag: str) -> Any:
    return option(help + "; repeatable, and the variable holds one KEY=VALUE a line",
                  values.key_value, default=KafkaClientOptions(), flag=flag, repeated=True,
                  combine=parse_kafka_options, metavar="KEY=VALUE", shown_default="none")


@dataclass(frozen=True)
class ObserveKafkaOptions:
    bootstrap_servers: str = option(
        "the cluster whose groups are observed", values.host_ports(), required=True,
        metavar="HOST:PORT[,...]", fallback_env=("KAFKA_BOOTSTRAP_SERVERS",))
    events_bootstrap_servers: str | None = option(
        "where to publish events", values.host_ports(), default=None, metavar="HOST:PORT[,...]",
        shown_default="--bootstrap-servers")
    kafka_options: KafkaClientOptions = _kafka_option(
        "a Kafka client setting, librdkafka's name, e.g. security.protocol=SASL_SSL "
        "(docs/deploy.md), for the observed cluster and the events producer", "kafka-option")
    events_kafka_options: KafkaClientOptions = _kafka_option(
        "the events producer's settings instead of --kafka-option, for an events cluster that "
        "is not the observed one", "events-kafka-option")
    topic: str = option("the events topic", values.not_empty, default="rebalance.events",
                        metavar="TOPIC")
    interval_seconds: float = option("seconds between polls", _seconds, default=10.0,
                                     metavar="SECONDS")
    restate_seconds: float = declared_in(RestateOptions, "restate_seconds")
    timeout_seconds: float = option("seconds per request to the observed cluster", _seconds,
                                    default=10.0, metavar="SECONDS")
    once: bool = switch("poll once and exit", parse_bool)
    stdout: bool = switch("print events instead", parse_bool)
    metrics_port: int | None = option(
        "serve poll health (rebalance_observer_*) and event delivery "
        "(rebalance_monitor_produce_*) on http://HOST:PORT/metrics (docs/metrics.md)",
        values.port, default=None, metavar="PORT", shown_default="off")
    metrics_host: str = option("address of --metrics-port", values.not_empty,
                               default="0.0.0.0", metavar="HOST")
    cluster: str | None = option(
        "the observed cluster's name in the events; the job shows a cluster that goes silent "
        "and keeps its groups stale", values.name, default=None, metavar="NAME",
        shown_default="observe-kafka@ the first --bootstrap-servers address")

    def check_options(self) -> None:
        """The admin client (kafka-python) takes the observed cluster's options in its own
        names, built here so one it has no name for stops the start."""
        try:
            for_kafka_python(self.kafka_options)
        except ValueError as error:
            raise OptionError(f"--kafka-option: {error}") from None

    def events_options(self) -> KafkaClientOptions:
        """The events producer's: --events-kafka-option if given, else --kafka-option."""
        if self.events_kafka_options != KafkaClientOptions():
            return self.events_kafka_options
        return self.kafka_options

    def cluster_name(self) -> str:
        return self.cluster or f"observe-kafka@{self.bootstrap_servers.split(',')[0].strip()}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, ObserveKafkaOptions)


def main(args: ObserveKafkaOptions) -> int:
    sock = metrics_socket(args.metrics_port, args.metrics_host)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python logs every timed-out request; the poll's cause is logged once per change.
    kafka_log = logging.getLogger("kafka")
    kafka_level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        health = PollHealth("observe-kafka poll", logger=log)
        observer = KafkaGroupObserver(args.bootstrap_servers, health,
                                      timeout_s=args.timeout_seconds,
                                      client_options=args.kafka_options)
        outbox = None if args.stdout else _outbox(args.events_bootstrap_servers
                                                  or args.bootstrap_servers,
                                                  args.events_options())
        delivery = [] if outbox is None else [DeliveryCollector(outbox.stats)]
        serve_metrics(sock, health, CapabilityCollector(observer), *delivery)
        return run(args, observer, outbox)
    finally:
        kafka_log.setLevel(kafka_level)


def run(args: ObserveKafkaOptions, observer: KafkaGroupObserver, outbox: Outbox | None) -> int:
    """Poll every args.interval_seconds until SIGTERM or Ctrl-C (or once); then close and
    flush."""
    health = observer.health
    said: dict[str, tuple] = {}
    cluster = args.cluster_name()

    restate = Restatements(keepalive_s=0.0, restate_s=args.restate_seconds)

    def poll_once() -> None:
        results = observer.poll()
        now = time.monotonic()
        sent = sum(_publish(result, _due(result, restate, now), outbox, args.topic, said,
                            cluster) for result in results)
        members = sum(e["type"] == "heartbeat" for r in results for e in r.events)
        health.succeeded(groups=observer.groups_seen, members=members, events=sent)

    return poll_until_stopped(poll_once, health, args.interval_seconds, args.once, outbox,
                              args.topic, closers=(observer.close,),
                              close_timeout_s=CLOSE_TIMEOUT_S)


# Each event gets 3 attempts of up to a minute: a 3-minute outage of the events broker loses
# nothing (the events wait in the producer); a longer one is counted, by cause, on /metrics.
PRODUCER_SETTINGS = {"linger.ms": 20, "message.timeout.ms": 60_000}
CLOSE_TIMEOUT_S = 30.0


def _outbox(bootstrap_servers: str, options: KafkaClientOptions) -> Outbox:
    from confluent_kafka import Producer

    stats = DeliveryStats()
    producer = Producer({**PRODUCER_SETTINGS, **stats.client.settings(),
                         **options.for_librdkafka(), "bootstrap.servers": bootstrap_servers})
    return Outbox(producer, stats, RetryPolicy(attempts=3)).start()


def _due(result: Translation, restate: Restatements, now: float) -> list[dict]:
    """The group's events to send: its routes and unregisters, its changed members in full and
    the others in its `alive` (every poll is a keep-alive here)."""
    heartbeats = [e for e in result.events if e["type"] == "heartbeat"]
    gone = {(e["group"], e["client_id"]) for e in result.events if e["type"] == "unregister"}
    if gone:
        restate.forget(lambda source: source[:2] in gone)
    others = [e for e in result.events if e["type"] != "heartbeat"]
    return others + (restate.due(heartbeats, now, heartbeats[0]["ts"]) if heartbeats else [])


def _publish(result: Translation, sending: list[dict], outbox: Outbox | None, topic: str,
             said: dict[str, tuple], cluster: str) -> int:
    """Send (or print) a group's events; its warnings and summary (of the whole poll's
    translation) are said when they change."""
    beats = sum(e["type"] == "heartbeat" for e in result.events)
    summary = (f"observe-kafka: group {result.group}: {beats} members, topics "
               + ", ".join(f"{e['topic']}({e['partitions']})" for e in result.events
                           if e["type"] == "route")) if result.events else None
    if said.get(result.group) != (tuple(result.warnings), summary):
        said[result.group] = (tuple(result.warnings), summary)
        for warning in result.warnings:
            print(f"WARNING: {warning}", file=sys.stderr)
        if summary:
            print(summary, file=sys.stderr)
    for event in sending:
        value = json.dumps(events.stamped(event, cluster), separators=(",", ":"))
        if outbox is None:
            print(value)
        else:
            outbox.send(Record(topic, value.encode(), event["group"].encode()))
    return len(sending)
