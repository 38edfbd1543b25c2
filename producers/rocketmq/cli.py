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
import json
import logging
import re
import sys
from dataclasses import dataclass

from producers import events
from producers.health import PollHealth, metrics_socket, serve_metrics
from producers.poll import poll_until_stopped
from producers.restate import RestateOptions
from producers.rocketmq.admin import RocketMQAdmin
from producers.rocketmq.bridge import STRATEGIES, AssumedStrategies
from producers.rocketmq.frames import LANGUAGES
from producers.rocketmq.observer import ObserverOptions, RocketMQObserver
from producers.rocketmq.remoting import AclSigner, RemotingClient
from streaming.common import option_values as values
from streaming.common.delivery import DeliveryStats, Outbox, Record, RetryPolicy
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.common.kafka_options import KafkaClientOptions, parse_kafka_options
from streaming.common.options import OptionError, declared_in, option, switch
from streaming.common.options import add_arguments as add_options
from streaming.core.switches import parse_bool

log = logging.getLogger("rebalance_monitor.observe_rocketmq")


def _sdk_strategy(text: str) -> tuple[str, str]:
    language, sep, strategy = str(text).partition("=")
    language, strategy = language.strip().upper(), strategy.strip().upper()
    known = sorted(set(STRATEGIES.values()))
    if not sep or language not in LANGUAGES or strategy not in known:
        raise argparse.ArgumentTypeError(
            f"expected LANGUAGE=STRATEGY with LANGUAGE one of {', '.join(LANGUAGES)} and "
            f"STRATEGY one of {', '.join(known)}, got {text!r}")
    return language, strategy


_seconds = values.number(above=0)


@dataclass(frozen=True)
class ObserveRocketMQOptions:
    namesrv: str = option(
        "NameServer address(es), HOST[:PORT][;HOST[:PORT]], port 9876 unless given",
        values.host_ports(default_port=9876, separators=";"), required=True,
        metavar="HOST[:PORT][;...]", fallback_env=("NAMESRV_ADDR", "ROCKETMQ_NAMESRV"))
    proxy: str | None = option(
        "RocketMQ 5 proxies' remoting address(es), HOST[:PORT][;...], port 8080 unless "
        "given: they list the gRPC clients, which no broker lists (docs/rocketmq.md)",
        values.host_ports(default_port=8080, separators=";"), default=None,
        metavar="HOST[:PORT][;...]", shown_default="none")
    bootstrap_servers: str | None = option(
        "Kafka of the events topic; not needed with --stdout", values.host_ports(), default=None,
        metavar="HOST:PORT[,...]", shown_default="none",
        fallback_env=("KAFKA_BOOTSTRAP_SERVERS",))
    topic: str = option("the events topic", values.not_empty, default="rebalance.events",
                        metavar="TOPIC")
    interval_seconds: float = option("seconds between polls", _seconds, default=10.0,
                                     metavar="SECONDS")
    once: bool = switch("poll once, send, and exit", parse_bool)
    stdout: bool = switch("print the events (JSON lines) instead of sending", parse_bool)
    include: re.Pattern | None = option("only groups whose name matches", values.pattern,
                                        default=None, metavar="REGEX", shown_default="all")
    exclude: re.Pattern | None = option("leave out groups whose name matches", values.pattern,
                                        default=None, metavar="REGEX", shown_default="none")
    include_system_groups: bool = switch(
        "also watch RocketMQ's own groups (TOOLS_CONSUMER, SELF_TEST_C_GROUP, ...)", parse_bool)
    default_strategy: str = option(
        "the strategy of clients that report none (Go, C++) and whose holdings do not tell it "
        "(AVG, AVG_BY_CIRCLE or CONSISTENT_HASH alone giving what they hold); events say "
        "which",
        values.one_of(*sorted(set(STRATEGIES.values()))), default="AVG", metavar="STRATEGY")
    sdk_strategy: tuple[tuple[str, str], ...] = option(
        "the strategy of one SDK's clients, never inferred, e.g. GO=CONSISTENT_HASH (a Go "
        "client is re-run with the Go client's own algorithm); repeatable", _sdk_strategy, default=(),
        repeated=True, metavar="LANGUAGE=STRATEGY", shown_default="none")
    go_virtual_nodes: int = option(
        "virtual nodes of a Go client's CONSISTENT_HASH, named or inferred (its code sets them)",
        values.whole(1, 10_000), default=10, metavar="N")
    running_info_budget: int = option(
        "clients asked for what they hold per poll at most (each call reaches a client)",
        values.non_negative, default=50, metavar="N")
    running_info_refresh_seconds: float = option(
        "seconds after which an unchanged client's holdings are asked again", _seconds,
        default=120.0, metavar="SECONDS")
    keepalive_seconds: float = option(
        "seconds between re-sends of an unchanged member or route (keep it well under the "
        "job's --session-timeout-ms, 120 s by default)", _seconds, default=30.0,
        metavar="SECONDS")
    restate_seconds: float = declared_in(RestateOptions, "restate_seconds")
    timeout_seconds: float = option("seconds per admin call (running info: 15)", _seconds,
                                    default=5.0, metavar="SECONDS")
    access_key: str | None = option(
        "ACL 1.0 AccessKey; with --secret-key, signs every call", values.not_empty,
        default=None, metavar="KEY", shown_default="none", fallback_env=("ROCKETMQ_ACCESS_KEY",))
    secret_key: str | None = option(
        "ACL SecretKey", values.not_empty, default=None, metavar="KEY", shown_default="none",
        fallback_env=("ROCKETMQ_SECRET_KEY",))
    metrics_port: int | None = option(
        "serve the bridge's own metrics on http://HOST:PORT/metrics (docs/metrics.md)",
        values.port, default=None, metavar="PORT", shown_default="off")
    metrics_host: str = option("address of --metrics-port", values.not_empty,
                               default="0.0.0.0", metavar="HOST")
    kafka_options: KafkaClientOptions = option(
        "a setting for the events producer, librdkafka's name, e.g. "
        "security.protocol=SASL_SSL (docs/deploy.md); repeatable, and the variable holds one "
        "KEY=VALUE a line", values.key_value, default=KafkaClientOptions(), flag="kafka-option",
        repeated=True, combine=parse_kafka_options, metavar="KEY=VALUE", shown_default="none")
    cluster: str | None = option(
        "the cluster's name in the events; the job shows a cluster that goes silent and "
        "keeps its groups stale", values.name, default=None, metavar="NAME",
        shown_default="observe-rocketmq@ the first --namesrv address")

    def check_options(self) -> None:
        if not self.stdout and not self.bootstrap_servers:
            raise OptionError("--bootstrap-servers (or REBALANCE_MONITOR_BOOTSTRAP_SERVERS or "
                              "KAFKA_BOOTSTRAP_SERVERS) is required without --stdout")
        if (self.access_key is None) != (self.secret_key is None):
            raise OptionError("--access-key and --secret-key go together (RocketMQ's ACL signs "
                              "with both)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, ObserveRocketMQOptions)


class NameServerUnreachable(Exception):
    """No NameServer answered this poll: it went on with the brokers last named, and counts as
    failed (rebalance_observer_poll_failures_total{cause="NameServerUnreachable"})."""


def main(args: ObserveRocketMQOptions) -> int:
    sock = metrics_socket(args.metrics_port, args.metrics_host)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signer = AclSigner(args.access_key, args.secret_key) if args.access_key and args.secret_key else None
    client = RemotingClient(signer)
    admin = RocketMQAdmin(client, [a for a in args.namesrv.split(";") if a.strip()],
                         args.timeout_seconds)
    cluster = args.cluster or f"observe-rocketmq@{args.namesrv.split(';')[0].strip()}"
    health = PollHealth("observe-rocketmq poll", logger=log)
    observer = RocketMQObserver(admin, _options(args), health.calls)
    outbox = None if args.stdout else _outbox(args)
    delivery = [] if outbox is None else [DeliveryCollector(outbox.stats)]
    serve_metrics(sock, health, *delivery)
    said: dict[tuple[str, str], tuple] = {}

    def poll_once() -> None:
        polled = observer.poll()
        for event in polled:
            _publish(events.stamped(event, cluster), outbox, args.topic)
            _say_strategy(event, said)
        if not observer.namesrv_answered:
            raise NameServerUnreachable(f"no answer from {args.namesrv}; went on with the "
                                        "brokers it last named")
        health.succeeded(groups=observer.groups_seen, members=observer.members_seen,
                         events=len(polled))

    return poll_until_stopped(poll_once, health, args.interval_seconds, args.once, outbox, args.topic,
                              closers=(observer.close, client.close))


def _options(args: ObserveRocketMQOptions) -> ObserverOptions:
    proxies = tuple(a.strip() for a in (args.proxy or "").split(";") if a.strip())
    return ObserverOptions(include=args.include, exclude=args.exclude, proxies=proxies,
                           exclude_system_groups=not args.include_system_groups,
                           strategies=AssumedStrategies(args.default_strategy,
                                                        dict(args.sdk_strategy),
                                                        args.go_virtual_nodes),
                           running_info_budget=args.running_info_budget,
                           running_info_refresh_s=args.running_info_refresh_seconds,
                           keepalive_s=args.keepalive_seconds,
                           restate_s=args.restate_seconds)


def _say_strategy(event: dict, said: dict[tuple[str, str], tuple]) -> None:
    """Once per change: how the strategy of a client that reports none was chosen (its events
    say it every time)."""
    key = (event.get("group"), event.get("client_id"))
    inferred, assumed = event.get("strategy_inferred"), event.get("strategy_assumed")
    named = event.get("strategy_named")
    if not (inferred or assumed or named):
        return
    now = (inferred, named, event.get("strategy_candidates"), event["strategy"])
    if said.get(key) == now:
        return
    said[key] = now
    if inferred:
        log.info("group %s: client %s reports no strategy; what it holds is %s's alone: "
                 "re-run as %s", event["group"], event["client_id"], inferred, event["strategy"])
    elif named:
        log.info("group %s: client %s reports no strategy; re-run as %s, named by "
                 "--sdk-strategy", event["group"], event["client_id"], event["strategy"])
    elif event.get("strategy_candidates") is not None:
        log.info("group %s: client %s reports no strategy and what it holds is given by %s; "
                 "assumed %s (no finding rests on it)", event["group"], event["client_id"],
                 ", ".join(event["strategy_candidates"]) or "none of AVG, AVG_BY_CIRCLE, "
                 "CONSISTENT_HASH", event["strategy"])
    else:
        log.info("group %s: client %s reports no strategy; assumed %s (no finding rests on "
                 "it)", event["group"], event["client_id"], event["strategy"])


# Each event gets 3 attempts of up to a minute: a 3-minute outage of the events broker loses
# nothing (the events wait in the producer); a longer one is counted, by cause, on /metrics.
PRODUCER_SETTINGS = {"linger.ms": 20, "message.timeout.ms": 60_000}


def _outbox(args: ObserveRocketMQOptions) -> Outbox:
    from confluent_kafka import Producer

    stats = DeliveryStats()
    settings = {"bootstrap.servers": args.bootstrap_servers, **PRODUCER_SETTINGS,
                **stats.client.settings(), **args.kafka_options.for_librdkafka()}
    return Outbox(Producer(settings), stats, RetryPolicy(attempts=3)).start()


def _publish(event: dict, outbox: Outbox | None, topic: str) -> None:
    value = json.dumps(event, separators=(",", ":"))
    if outbox is None:
        sys.stdout.write(value + "\n")
        sys.stdout.flush()
        return
    outbox.send(Record(topic, value.encode(),
                       event["group"].encode() if "group" in event else None))
