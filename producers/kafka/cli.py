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

from producers import events
from producers.health import (
    PollHealth,
    add_metrics_arguments,
    serve_metrics,
)
from producers.kafka.observer import KafkaGroupObserver
from producers.kafka.translate import Translation
from producers.poll import poll_until_stopped
from streaming.common import option_values as values
from streaming.common.delivery import DeliveryStats, Outbox, Record, RetryPolicy
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.common.kafka_options import (
    KafkaClientOptions,
    for_kafka_python,
    options_or_exit,
)

log = logging.getLogger("rebalance_monitor.observe_kafka")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    bootstrap = values.from_env("BOOTSTRAP_SERVERS", "KAFKA_BOOTSTRAP_SERVERS")
    seconds = values.number(above=0)
    parser.add_argument("--bootstrap-servers", type=values.not_empty, default=bootstrap,
                        required=bootstrap is None,
                        help="the cluster whose groups are observed (env "
                             "REBALANCE_MONITOR_BOOTSTRAP_SERVERS, else KAFKA_BOOTSTRAP_SERVERS)")
    parser.add_argument("--events-bootstrap-servers", type=values.not_empty,
                        help="where to publish events (default: --bootstrap-servers)")
    parser.add_argument("--kafka-option", action="append", type=values.key_value, default=[],
                        metavar="KEY=VALUE",
                        help="a Kafka client setting, librdkafka's name, e.g. "
                             "security.protocol=SASL_SSL (docs/deploy.md), for the observed "
                             "cluster and the events producer; repeatable")
    parser.add_argument("--events-kafka-option", action="append", type=values.key_value,
                        default=[], metavar="KEY=VALUE",
                        help="the events producer's settings instead of --kafka-option, for "
                             "an events cluster that is not the observed one; repeatable")
    parser.add_argument("--topic", type=values.not_empty, default="rebalance.events",
                        help="the events topic (default: %(default)s)")
    values.add_renamed(parser, "--interval-seconds", "--interval", dest="interval", type=seconds,
                       default=10.0, metavar="SECONDS",
                       help="seconds between polls (default: %(default)s)")
    values.add_renamed(parser, "--timeout-seconds", "--timeout", dest="timeout", type=seconds,
                       default=10.0, metavar="SECONDS",
                       help="seconds per request to the observed cluster (default: %(default)s)")
    parser.add_argument("--once", action="store_true", help="poll once and exit")
    parser.add_argument("--stdout", action="store_true", help="print events instead")
    add_metrics_arguments(parser, "poll health (rebalance_observer_*) and event delivery "
                                  "(rebalance_monitor_produce_*)")
    parser.add_argument("--cluster", type=values.not_empty, default=None, metavar="NAME",
                        help="the observed cluster's name in the events; the job shows a "
                             "cluster that goes silent and keeps its groups stale (default: "
                             "observe-kafka@ the first --bootstrap-servers address)")


def main(args: argparse.Namespace) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # kafka-python logs every timed-out request; the poll's cause is logged once per change.
    kafka_log = logging.getLogger("kafka")
    kafka_level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        observed, for_events = _client_options(args)
        health = PollHealth("observe-kafka poll", logger=log)
        observer = KafkaGroupObserver(args.bootstrap_servers, health,
                                      timeout_s=getattr(args, "timeout", 10.0),
                                      client_options=observed)
        outbox = None if args.stdout else _outbox(args.events_bootstrap_servers
                                                  or args.bootstrap_servers, for_events)
        serve_metrics(getattr(args, "metrics_port", None),
                      getattr(args, "metrics_host", "0.0.0.0"),
                      *([health] if outbox is None else [health, DeliveryCollector(outbox.stats)]))
        args.cluster = (getattr(args, "cluster", None)
                        or f"observe-kafka@{args.bootstrap_servers.split(',')[0].strip()}")
        return run(args, observer, outbox)
    finally:
        kafka_log.setLevel(kafka_level)


def run(args: argparse.Namespace, observer: KafkaGroupObserver, outbox: Outbox | None) -> int:
    """Poll every args.interval until SIGTERM or Ctrl-C (or once); then close and flush."""
    health = observer.health
    said: dict[str, tuple] = {}
    cluster = getattr(args, "cluster", None) or "observe-kafka"

    def poll_once() -> None:
        results = observer.poll()
        sent = sum(_publish(result, outbox, args.topic, said, cluster) for result in results)
        members = sum(e["type"] == "heartbeat" for r in results for e in r.events)
        health.succeeded(groups=observer.groups_seen, members=members, events=sent)

    return poll_until_stopped(poll_once, health, args.interval, args.once, outbox, args.topic,
                              closers=(observer.close,), close_timeout_s=CLOSE_TIMEOUT_S)


# Each event gets 3 attempts of up to a minute: a 3-minute outage of the events broker loses
# nothing (the events wait in the producer); a longer one is counted, by cause, on /metrics.
PRODUCER_SETTINGS = {"linger.ms": 20, "message.timeout.ms": 60_000}
CLOSE_TIMEOUT_S = 30.0


def _client_options(args: argparse.Namespace) -> tuple[KafkaClientOptions, KafkaClientOptions]:
    """(observed cluster's, events producer's) options; each refusal ends the command."""
    observed = options_or_exit("observe-kafka", getattr(args, "kafka_option", []),
                               check=for_kafka_python)
    own = getattr(args, "events_kafka_option", [])
    return observed, options_or_exit("observe-kafka", own) if own else observed


def _outbox(bootstrap_servers: str, options: KafkaClientOptions) -> Outbox:
    from confluent_kafka import Producer

    producer = Producer({**PRODUCER_SETTINGS, **options.for_librdkafka(),
                         "bootstrap.servers": bootstrap_servers})
    return Outbox(producer, DeliveryStats(), RetryPolicy(attempts=3)).start()


def _publish(result: Translation, outbox: Outbox | None, topic: str,
             said: dict[str, tuple], cluster: str) -> int:
    """Send (or print) a group's events; its warnings and summary are said when they change."""
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
    for event in result.events:
        value = json.dumps(events.stamped(event, cluster), separators=(",", ":"))
        if outbox is None:
            print(value)
        else:
            outbox.send(Record(topic, value.encode(), event["group"].encode()))
    return len(result.events)
