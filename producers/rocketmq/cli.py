"""`rebalance-monitor observe-rocketmq`: a RocketMQ cluster's consumer groups as monitor events.

    rebalance-monitor observe-rocketmq --namesrv '10.0.0.1:9876;10.0.0.2:9876' \\
        --bootstrap-servers kafka:9092 --topic rebalance.events --interval-seconds 10 --metrics-port 9109

Asks the NameServer and every master broker what each group's clients are, what each holds and
what each topic's route is (docs/rocketmq.md), and writes heartbeat, route and unregister events
to the events topic. No client is changed. `--stdout` prints the events instead; `--once` polls
once and exits (1 if the poll failed or an event was not delivered).

No fault ends it (producers/health.py): a silent NameServer or broker, a malformed answer or a
refused event is counted by cause on `--metrics-port` and logged once per change of state.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys

from producers import events
from producers.health import (
    PollHealth,
    add_metrics_arguments,
    serve_metrics,
)
from producers.poll import poll_until_stopped
from producers.rocketmq.admin import RocketMQAdmin
from producers.rocketmq.bridge import STRATEGIES, AssumedStrategies
from producers.rocketmq.frames import LANGUAGES
from producers.rocketmq.observer import ObserverOptions, RocketMQObserver
from producers.rocketmq.remoting import AclSigner, RemotingClient
from streaming.common import option_values as values
from streaming.common.delivery import DeliveryStats, Outbox, Record, RetryPolicy
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.common.kafka_options import options_or_exit

log = logging.getLogger("rebalance_monitor.observe_rocketmq")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    add = parser.add_argument
    seconds = values.number(above=0)
    namesrv = values.from_env("NAMESRV", "NAMESRV_ADDR", "ROCKETMQ_NAMESRV")
    add("--namesrv", type=values.host_ports(default_port=9876, separators=";"), default=namesrv,
        required=namesrv is None,
        help="NameServer address(es), HOST[:PORT][;HOST[:PORT]], port 9876 unless given (env "
             "REBALANCE_MONITOR_NAMESRV, else NAMESRV_ADDR or ROCKETMQ_NAMESRV)")
    add("--proxy", type=values.host_ports(default_port=8080, separators=";"), default=None,
        help="RocketMQ 5 proxies' remoting address(es), HOST[:PORT][;...], port 8080 unless "
             "given: they list the gRPC clients, which no broker lists (docs/rocketmq.md)")
    add("--bootstrap-servers", type=values.not_empty,
        default=values.from_env("BOOTSTRAP_SERVERS", "KAFKA_BOOTSTRAP_SERVERS"),
        help="Kafka of the events topic (env REBALANCE_MONITOR_BOOTSTRAP_SERVERS, else "
             "KAFKA_BOOTSTRAP_SERVERS); not needed with --stdout")
    add("--topic", type=values.not_empty, default="rebalance.events",
        help="the events topic (default: %(default)s)")
    renamed = functools.partial(values.add_renamed, parser, type=seconds, metavar="SECONDS")
    renamed("--interval-seconds", "--interval", dest="interval", default=10.0,
            help="seconds between polls (default: %(default)s)")
    add("--once", action="store_true", help="poll once, send, and exit")
    add("--stdout", action="store_true", help="print the events (JSON lines) instead of sending")
    add("--include", type=values.pattern, default=None, metavar="REGEX",
        help="only groups whose name matches")
    add("--exclude", type=values.pattern, default=None, metavar="REGEX",
        help="leave out groups whose name matches")
    add("--include-system-groups", action="store_true",
        help="also watch RocketMQ's own groups (TOOLS_CONSUMER, SELF_TEST_C_GROUP, ...)")
    add("--default-strategy", default="AVG", choices=sorted(set(STRATEGIES.values())),
        help="the strategy of clients that do not report one (Go, C++); events say it was "
             "assumed (default: %(default)s)")
    add("--sdk-strategy", action="append", type=_sdk_strategy, default=[],
        metavar="LANGUAGE=STRATEGY",
        help="the strategy of one SDK's clients instead, e.g. GO=CONSISTENT_HASH (a Go client is "
             "re-run with the Go client's own algorithm); repeatable")
    add("--go-virtual-nodes", type=values.whole(1, 10_000), default=10,
        help="virtual nodes of a Go client's assumed CONSISTENT_HASH (its code sets them; "
             "default: %(default)s)")
    add("--running-info-budget", type=values.non_negative, default=50,
        help="clients asked for what they hold per poll at most (each call reaches a client; "
             "default: %(default)s)")
    renamed("--running-info-refresh-seconds", "--running-info-refresh",
            dest="running_info_refresh", default=120.0,
            help="seconds after which an unchanged client's holdings are asked again "
                 "(default: %(default)s)")
    renamed("--keepalive-seconds", "--keepalive", dest="keepalive", default=30.0,
            help="seconds between re-sends of an unchanged member or route (keep it well under "
                 "the job's --session-timeout-ms, 120 s by default; default: %(default)s)")
    renamed("--timeout-seconds", "--timeout", dest="timeout", default=5.0,
            help="seconds per admin call (running info: 15; default: %(default)s)")
    add("--access-key", type=values.not_empty, default=env("ROCKETMQ_ACCESS_KEY"),
        help="ACL 1.0 AccessKey (env ROCKETMQ_ACCESS_KEY); with --secret-key, signs every call")
    add("--secret-key", type=values.not_empty, default=env("ROCKETMQ_SECRET_KEY"),
        help="ACL SecretKey (env ROCKETMQ_SECRET_KEY)")
    add_metrics_arguments(parser, "the bridge's own metrics")
    add("--kafka-option", action="append", type=values.key_value, default=[],
        metavar="KEY=VALUE",
        help="a setting for the events producer, librdkafka's name, e.g. "
             "security.protocol=SASL_SSL (docs/deploy.md); repeatable")
    add("--cluster", type=values.not_empty, default=None, metavar="NAME",
        help="the cluster's name in the events; the job shows a cluster that goes silent and "
             "keeps its groups stale (default: observe-rocketmq@ the first --namesrv address)")


def _sdk_strategy(text: str) -> tuple[str, str]:
    language, sep, strategy = str(text).partition("=")
    language, strategy = language.strip().upper(), strategy.strip().upper()
    known = sorted(set(STRATEGIES.values()))
    if not sep or language not in LANGUAGES or strategy not in known:
        raise argparse.ArgumentTypeError(
            f"expected LANGUAGE=STRATEGY with LANGUAGE one of {', '.join(LANGUAGES)} and "
            f"STRATEGY one of {', '.join(known)}, got {text!r}")
    return language, strategy


class NameServerUnreachable(Exception):
    """No NameServer answered this poll: it went on with the brokers last named, and counts as
    failed (rebalance_observer_poll_failures_total{cause="NameServerUnreachable"})."""


def main(args: argparse.Namespace) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.stdout and not args.bootstrap_servers:
        raise SystemExit("--bootstrap-servers (or KAFKA_BOOTSTRAP_SERVERS) is required without --stdout")
    signer = AclSigner(args.access_key, args.secret_key) if args.access_key and args.secret_key else None
    client = RemotingClient(signer)
    admin = RocketMQAdmin(client, [a for a in args.namesrv.split(";") if a.strip()], args.timeout)
    cluster = args.cluster or f"observe-rocketmq@{args.namesrv.split(';')[0].strip()}"
    health = PollHealth("observe-rocketmq poll", logger=log)
    observer = RocketMQObserver(admin, _options(args), health.calls)
    outbox = None if args.stdout else _outbox(args)
    serve_metrics(args.metrics_port, args.metrics_host,
                  *([health] if outbox is None else [health, DeliveryCollector(outbox.stats)]))
    assumed: set[tuple[str, str]] = set()

    def poll_once() -> None:
        polled = observer.poll()
        for event in polled:
            _publish(events.stamped(event, cluster), outbox, args.topic)
            _say_assumed_strategy(event, assumed)
        if not observer.namesrv_answered:
            raise NameServerUnreachable(f"no answer from {args.namesrv}; went on with the "
                                        "brokers it last named")
        health.succeeded(groups=observer.groups_seen, members=observer.members_seen,
                         events=len(polled))

    return poll_until_stopped(poll_once, health, args.interval, args.once, outbox, args.topic,
                              closers=(observer.close, client.close))


def _options(args: argparse.Namespace) -> ObserverOptions:
    proxies = tuple(a.strip() for a in (args.proxy or "").split(";") if a.strip())
    return ObserverOptions(include=args.include, exclude=args.exclude, proxies=proxies,
                           exclude_system_groups=not args.include_system_groups,
                           strategies=AssumedStrategies(args.default_strategy,
                                                        dict(args.sdk_strategy),
                                                        args.go_virtual_nodes),
                           running_info_budget=args.running_info_budget,
                           running_info_refresh_s=args.running_info_refresh,
                           keepalive_s=args.keepalive)


def _say_assumed_strategy(event: dict, said: set[tuple[str, str]]) -> None:
    """Once per client: its events carry `strategy_assumed` every time."""
    key = (event.get("group"), event.get("client_id"))
    if event.get("strategy_assumed") and key not in said:
        said.add(key)
        log.info("group %s: client %s reports no strategy; assumed %s", event["group"],
                 event["client_id"], event["strategy"])


# Each event gets 3 attempts of up to a minute: a 3-minute outage of the events broker loses
# nothing (the events wait in the producer); a longer one is counted, by cause, on /metrics.
PRODUCER_SETTINGS = {"linger.ms": 20, "message.timeout.ms": 60_000}


def _outbox(args: argparse.Namespace) -> Outbox:
    from confluent_kafka import Producer

    settings = {"bootstrap.servers": args.bootstrap_servers, **PRODUCER_SETTINGS,
                **options_or_exit("observe-rocketmq", args.kafka_option).for_librdkafka()}
    return Outbox(Producer(settings), DeliveryStats(), RetryPolicy(attempts=3)).start()


def _publish(event: dict, outbox: Outbox | None, topic: str) -> None:
    value = json.dumps(event, separators=(",", ":"))
    if outbox is None:
        sys.stdout.write(value + "\n")
        sys.stdout.flush()
        return
    outbox.send(Record(topic, value.encode(),
                       event["group"].encode() if "group" in event else None))
