"""`rebalance-monitor observe-kafka`: heartbeat and route events for a Kafka cluster's groups.

    rebalance-monitor observe-kafka --bootstrap-servers kafka:9092 \\
        --events-bootstrap-servers monitor-kafka:9092 --topic rebalance.events --interval-seconds 10 \\
        --metrics-port 9110

Every interval it lists the cluster's consumer groups, describes them (kafka-python decodes each
member's subscription and assignment), reads the subscribed topics' partition counts, and emits
for every group (system "kafka", key = group): one heartbeat per member (client_id = member id,
address = client host, topics = subscription, strategy = the group's assignor, owned = the
member's assignment, group_instance_id, generation when the subscription carries it), one route
per topic (`partitions`), and an unregister for each member gone since the previous poll.

A KIP-848 consumer group (`group.protocol=consumer`, Kafka 4.0+) is assigned by the broker, and
DescribeGroups does not describe it: the observer asks ConsumerGroupDescribe (API 69,
producers/kafka_protocol.py) and adds to each member's heartbeat the group type, the member's
target assignment and the member, group and target-assignment epochs; `owned` is then the
member's current assignment (with the partitions it still has to revoke) and `strategy` the
broker's assignor. A share group (KIP-932) is asked with ShareGroupDescribe (API 77). ListGroups
v5 says which type each group is, so a group that migrates from classic to consumer is asked the
new way from the next poll on, with the same member ids.

Some brokers answer DescribeGroups without members, or with members whose subscription and
assignment are empty (the embedded tansu broker does). The observer says so on stderr, naming
the group, and still reports the group's topics (from its committed offsets) and their partition
counts. `translate_group` is the pure part: describe-groups result in, events out.

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
import re
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial

import kafka.errors as Errors

from producers import events
from producers.health import (
    PollHealth,
    add_metrics_arguments,
    serve_metrics,
)
from producers.kafka import protocol as kafka_protocol
from producers.poll import poll_until_stopped
from streaming.common import option_values as values
from streaming.common.delivery import DeliveryStats, Outbox, Record, RetryPolicy
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.common.faults import error_cause
from streaming.common.kafka_options import (
    KafkaClientOptions,
    for_kafka_python,
    options_or_exit,
)

log = logging.getLogger("rebalance_monitor.observe_kafka")

KAFKA_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


@dataclass
class Translation:
    events: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    members: tuple[str, ...] = ()   # member ids seen, for the next poll's unregisters
    topics: tuple[str, ...] = ()
    group: str | None = None


def _get(obj, name: str, default=None):
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _subscription(metadata) -> tuple[list[str], int | None]:
    """(topics, generation) from a decoded subscription: kafka-python 3 dicts or 2.x tuples."""
    if not metadata or isinstance(metadata, bytes | str):
        return [], None
    topics = _get(metadata, "topics")
    if topics is None:
        topics = _get(metadata, "subscription") or []
    generation = _get(metadata, "generation_id")
    return sorted(set(topics)), generation if isinstance(generation, int) else None


def _assignment(assignment) -> list[list]:
    if not assignment or isinstance(assignment, bytes | str):
        return []
    parts = _get(assignment, "assigned_partitions")
    if parts is None:
        parts = _get(assignment, "assignment") or []
    owned = set()
    for entry in parts:
        if isinstance(entry, Mapping):
            topic, partitions = entry["topic"], entry["partitions"]
        else:
            topic, partitions = entry[0], entry[1]
        owned.update((topic, int(p)) for p in partitions)
    return [[t, p] for t, p in sorted(owned)]


def _heartbeat(group: str, member, assignor: str, ts_ms: int) -> dict | None:
    topics, generation = _subscription(_get(member, "member_metadata"))
    if not topics:
        return None
    return events.heartbeat(
        ts_ms, group, _get(member, "member_id"), topics, assignor, system="kafka",
        owned=_assignment(_get(member, "member_assignment")),
        address=(_get(member, "client_host") or "").lstrip("/") or None,
        group_instance_id=_get(member, "group_instance_id") or None,
        generation=generation if generation is not None and generation >= 0 else None)


def translate_group(description, partitions: Mapping[str, int], ts_ms: int, *,
                    committed_topics: Iterable[str] = (),
                    previous_members: Iterable[str] = ()) -> Translation:
    """Events for one described group.

    >>> d = {"group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
    ...      "protocol_data": "range", "members": [{"member_id": "m1", "client_host": "/10.0.0.1",
    ...      "member_metadata": {"topics": ["A"]},
    ...      "member_assignment": {"assigned_partitions": [{"topic": "A", "partitions": [1, 0]}]}}]}
    >>> [(e["type"], e.get("owned"), e.get("partitions")) for e in
    ...  translate_group(d, {"A": 2}, 1_700_000_000_000).events]
    [('heartbeat', [['A', 0], ['A', 1]], None), ('route', None, 2)]
    """
    group = _get(description, "group_id") or _get(description, "group")
    assignor = (_get(description, "protocol_data") or _get(description, "protocol") or "")
    members = list(_get(description, "members") or [])
    out = Translation(group=group)
    beats = [_heartbeat(group, m, assignor, ts_ms) for m in members]
    unread = bool(members) and any(b is None for b in beats)
    if not members or unread:
        out.warnings.append(
            f"group {group}: the broker's DescribeGroups returned "
            + ("no members" if not members else "members without subscription or assignment")
            + "; reporting the group's topics and partition counts only")
    if unread:
        # A classic group is described with its members' subscriptions and assignments only
        # while it is Stable: mid-rebalance, or on a broker that never gives them, the members
        # are there but unreadable, and they stay as last reported (none is unregistered).
        beats = []
    elif members and assignor not in KAFKA_ASSIGNORS:
        out.warnings.append(f"group {group}: assignor {assignor!r} is not one of "
                            f"{', '.join(KAFKA_ASSIGNORS)}; members not reported")
        beats = []
    out.events.extend(b for b in beats if b is not None)
    topics = {t for m in members for t in _subscription(_get(m, "member_metadata"))[0]}
    return _leavers_and_routes(out, topics | set(committed_topics), partitions, ts_ms,
                               previous_members, keep_previous=unread)


def translate_consumer_group(description: kafka_protocol.ConsumerGroupDescription,
                             partitions: Mapping[str, int], ts_ms: int, *,
                             previous_members: Iterable[str] = ()) -> Translation:
    """Events for one KIP-848 group as ConsumerGroupDescribe gives it: per member, its current
    assignment (`owned`), its target, and the epochs. Members that still speak the classic
    protocol inside it (a group being migrated) are described the same way by the broker."""
    beats = []
    for member in description.members:
        beat = _broker_assigned_heartbeat(description, member, "consumer", ts_ms)
        beat["target"] = [[t, p] for t, p in member.target_assignment]
        if member.instance_id:
            beat["group_instance_id"] = member.instance_id
        beats.append(beat)
    return _translation(description.group_id, beats, partitions, ts_ms, previous_members)


def translate_share_group(description: kafka_protocol.ShareGroupDescription,
                          partitions: Mapping[str, int], ts_ms: int, *,
                          previous_members: Iterable[str] = ()) -> Translation:
    """Events for one share group (KIP-932): members share partitions by design."""
    beats = [_broker_assigned_heartbeat(description, member, "share", ts_ms)
             for member in description.members]
    return _translation(description.group_id, beats, partitions, ts_ms, previous_members)


def _broker_assigned_heartbeat(description, member, group_type: str, ts_ms: int) -> dict:
    assigned = {t for t, _ in member.assignment}
    if group_type == "consumer":
        assigned |= {t for t, _ in member.target_assignment}
    return events.heartbeat(
        ts_ms, description.group_id, member.member_id,
        sorted(set(member.subscribed_topics) | assigned), description.assignor_name or "unknown",
        system="kafka", group_type=group_type, owned=[[t, p] for t, p in member.assignment],
        member_epoch=member.member_epoch, group_epoch=description.group_epoch,
        assignment_epoch=description.assignment_epoch,
        address=(member.client_host or "").lstrip("/") or None)


def _translation(group: str, beats: list[dict], partitions: Mapping[str, int], ts_ms: int,
                 previous_members: Iterable[str]) -> Translation:
    out = Translation(group=group, events=list(beats))
    return _leavers_and_routes(out, {t for b in beats for t in b["topics"]}, partitions, ts_ms,
                               previous_members)


def _leavers_and_routes(out: Translation, topics: Iterable[str], partitions: Mapping[str, int],
                        ts_ms: int, previous_members: Iterable[str], *,
                        keep_previous: bool = False) -> Translation:
    """After a group's heartbeats: an unregister for each member gone since the previous poll
    (none when the members could not be read, `keep_previous`), and a route per topic (a
    warning for a topic the cluster metadata lacks)."""
    group = out.group
    out.members = (tuple(previous_members) if keep_previous else
                   tuple(e["client_id"] for e in out.events if e["type"] == "heartbeat"))
    gone = sorted(set(previous_members) - set(out.members))
    out.events.extend(events.unregister(ts_ms, group, m, system="kafka") for m in gone)
    out.topics = tuple(sorted(topics))
    for topic in out.topics:
        if topic in partitions:
            out.events.append(events.route(ts_ms, topic, system="kafka", group=group,
                                           partitions=partitions[topic]))
        else:
            out.warnings.append(f"group {group}: topic {topic} is not in the cluster metadata")
    return out


def _admin_class():
    from kafka.admin import KafkaAdminClient

    class TolerantAdmin(KafkaAdminClient):
        """kafka-python 3 raises on authorized-operation bits it does not know (tansu sends
        them); the observer does not need them. Its connection-setup timeouts (10 s growing to
        30 s by default) are accepted as settings, so a poll in an outage lasts --timeout-seconds."""

        DEFAULT_CONFIG = {"socket_connection_setup_timeout_ms": 10_000,
                          "socket_connection_setup_timeout_max_ms": 30_000,
                          **KafkaAdminClient.DEFAULT_CONFIG}

        def _process_acl_operations(self, obj):
            try:
                return super()._process_acl_operations(obj)
            except ValueError:
                obj.pop("authorized_operations", None)
                return obj

        def describe_consumer_groups(self, group_ids):
            return kafka_protocol.describe_consumer_groups(self, group_ids, self._timeout_s())

        def describe_share_groups(self, group_ids):
            return kafka_protocol.describe_share_groups(self, group_ids, self._timeout_s())

        def _timeout_s(self) -> float:
            return self.config["request_timeout_ms"] / 1000

    return TolerantAdmin


# How each group type is described: DescribeGroups (kafka-python) for classic groups, the KIP-848
# and KIP-932 APIs (producers/kafka_protocol.py) for the groups the broker assigns.
DESCRIBE_REQUESTS = {"classic": "describe_groups", "consumer": "describe_consumer_groups",
                     "share": "describe_share_groups"}
GROUP_ID_NOT_FOUND = 69


def _watched_types(listed: Iterable[Mapping]) -> dict[str, str]:
    """group -> type of the listed groups the observer watches: consumer groups of every type
    (ListGroups v5 names it; older brokers list classic groups only) and share groups. Streams
    groups (KIP-1071) and other protocols (Connect) are not consumer groups.

    >>> _watched_types([{"group_id": "a", "protocol_type": "consumer", "group_type": "consumer"},
    ...                 {"group_id": "b", "protocol_type": "consumer"},
    ...                 {"group_id": "c", "protocol_type": "share", "group_type": "share"},
    ...                 {"group_id": "d", "protocol_type": "connect", "group_type": "classic"},
    ...                 {"group_id": "e", "protocol_type": "streams", "group_type": "streams"}])
    {'a': 'consumer', 'b': 'classic', 'c': 'share'}
    """
    watched = {}
    for group in listed:
        kind = (group.get("group_type") or "classic").lower()
        if kind in ("consumer", "share") or (
                kind == "classic" and group.get("protocol_type") in ("consumer", "", None)):
            watched[group["group_id"]] = kind
    return watched


class KafkaGroupObserver:
    """Configure (no I/O), then `poll()` as often as wanted, then `close()`.

    Each request is timed and counted in `health.calls` (producers.health); a request that fails
    fails the poll (raised), except a group's committed offsets (the group is still reported).
    A group the cluster will not describe (its error in the answer) is counted and skipped for
    this poll: its members stay as they were, none is unregistered on a transient error."""

    def __init__(self, bootstrap_servers: str, health: PollHealth | None = None,
                 timeout_s: float = 10.0, admin_factory=None, metadata_factory=None,
                 client_options: KafkaClientOptions | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.health = health or PollHealth("observe-kafka poll", logger=log)
        self.timeout_s = timeout_s
        self.previous: dict[str, tuple[str, ...]] = {}
        self.types: dict[str, str] = {}          # group -> its type, as last listed
        options = client_options or NO_OPTIONS
        self._admin_factory = admin_factory or partial(_kafka_python_admin, options=options)
        self._metadata_factory = metadata_factory or partial(_confluent_admin, options=options)
        self._admin = None
        self._metadata = None
        self.groups_seen = 0

    def poll(self, ts_ms: int | None = None) -> list[Translation]:
        calls, cluster = self.health.calls, self.bootstrap_servers
        if self._metadata is None:
            self._metadata = self._metadata_factory(cluster, self.timeout_s)
        if self._admin is None:
            with calls.timed("bootstrap", cluster):
                self._admin = self._admin_factory(cluster, self.timeout_s)
        ts_ms = int(time.time() * 1000) if ts_ms is None else ts_ms
        with calls.timed("list_groups", cluster):
            listed = _watched_types(self._admin.list_groups())
        self.types.update(listed)
        names = sorted(set(listed) | set(self.previous))
        by_type: dict[str, list[str]] = {}
        for name in names:
            by_type.setdefault(self.types.get(name, "classic"), []).append(name)
        descriptions = self._describe(by_type)
        with calls.timed("list_topics", cluster):
            topics = self._metadata.list_topics(timeout=self.timeout_s).topics
        partitions = {name: len(t.partitions) for name, t in topics.items() if t.error is None}
        results = []
        for name in names:
            result = self._translate(name, descriptions.get(name, {"group_id": name}),
                                     partitions, ts_ms, listed=name in listed)
            if result is None:
                continue
            self.health.group_ok(name)
            self.previous[name] = result.members
            if not result.members and name not in listed:
                del self.previous[name]  # gone, its members unregistered: stop asking
                self.types.pop(name, None)
            results.append(result)
        self.groups_seen = len(names)
        return results

    def _describe(self, by_type: dict[str, list[str]]) -> dict:
        """Each group described the way its type needs. A broker without the KIP-848 or share
        API fails those groups, not the poll; so does a broker's error answer for some group
        (its coordinator moving or loading): the groups are then asked one by one, and only
        those that fail again are skipped (counted per group)."""
        descriptions: dict = {}
        for kind, names in sorted(by_type.items()):
            request = DESCRIBE_REQUESTS[kind]
            try:
                descriptions.update(self._described(request, names))
            except kafka_protocol.UnsupportedGroupApi as refused:
                descriptions.update((name, refused) for name in names)
            except Errors.BrokerResponseError as refused:
                if isinstance(refused, Errors.RequestTimedOutError):
                    raise
                for name in names:
                    try:
                        descriptions.update(self._described(request, [name]))
                    except Errors.BrokerResponseError as failed:
                        if isinstance(failed, Errors.RequestTimedOutError):
                            raise
                        descriptions[name] = failed
        return descriptions

    def _described(self, request: str, names: list[str]) -> dict:
        with self.health.calls.timed(request, self.bootstrap_servers):
            return getattr(self._admin, request)(names)

    def _translate(self, name: str, description, partitions: Mapping[str, int], ts_ms: int,
                   listed: bool) -> Translation | None:
        """The group's events, or None when it could not be read this poll (counted)."""
        previous = self.previous.get(name, ())
        # Refused: UnsupportedGroupApi, or the broker's error answer for this group.
        if isinstance(description, Exception):
            self.health.group_failed(name, error_cause(description), str(description))
            return None
        if isinstance(description, kafka_protocol.GroupDescription):
            if description.error_code == 0:
                translate = (translate_consumer_group if isinstance(
                    description, kafka_protocol.ConsumerGroupDescription) else translate_share_group)
                return translate(description, partitions, ts_ms, previous_members=previous)
            if not listed and description.error_code == GROUP_ID_NOT_FOUND:
                return _translation(name, [], partitions, ts_ms, previous)   # the group is gone
            error = description.error
            self.health.group_failed(name, error.__name__ if error else "describe_error",
                                     description.error_message or "")
            return None
        error = _get(description, "error")
        if error:
            self.health.group_failed(name, *_described_error(error))
            return None
        try:
            return translate_group(description, partitions, ts_ms,
                                   committed_topics=self._committed_topics(name),
                                   previous_members=previous)
        except Exception as exc:  # noqa: BLE001 - a description it cannot read: that group only
            self.health.group_failed(name, error_cause(exc), f"unreadable description: {exc}")
            return None

    def _committed_topics(self, group: str) -> list[str]:
        try:
            with self.health.calls.timed("list_group_offsets", self.bootstrap_servers):
                offsets = self._admin.list_group_offsets({group: None}).get(group, {})
        except Exception:  # noqa: BLE001 - counted; a group without offsets is still reported
            return []
        return sorted({tp.topic for tp in offsets})

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            except Exception:  # noqa: BLE001 - closing during an outage
                log.debug("closing the admin client failed", exc_info=True)
            self._admin = None


# Reconnect attempts back off up to this, so the first poll after an outage finds the
# connection up (the clients' defaults, 30 s and 10 s, would cost several polls).
MAX_RECONNECT_BACKOFF_S = 2.0
NO_OPTIONS = KafkaClientOptions()


def _kafka_python_admin(bootstrap_servers: str, timeout_s: float,
                        options: KafkaClientOptions = NO_OPTIONS):
    ms = int(timeout_s * 1000)
    return _admin_class()(bootstrap_servers=bootstrap_servers, **for_kafka_python(options),
                          request_timeout_ms=ms,
                          bootstrap_timeout_ms=ms, socket_connection_setup_timeout_ms=ms,
                          socket_connection_setup_timeout_max_ms=ms,
                          reconnect_backoff_max_ms=int(MAX_RECONNECT_BACKOFF_S * 1000))


def _confluent_admin(bootstrap_servers: str, timeout_s: float,
                     options: KafkaClientOptions = NO_OPTIONS):
    from confluent_kafka.admin import AdminClient

    # Failures are raised to the poll, counted and logged there: not librdkafka's own log lines.
    return AdminClient({**options.for_librdkafka(),
                        "bootstrap.servers": bootstrap_servers, "log_level": 0,
                        "reconnect.backoff.max.ms": int(MAX_RECONNECT_BACKOFF_S * 1000)})


def _described_error(error) -> tuple[str, str]:
    """kafka-python's per-group error, "[Error 30] GroupAuthorizationFailedError: msg", as
    (name, message).

    >>> _described_error("[Error 30] GroupAuthorizationFailedError: not allowed")
    ('GroupAuthorizationFailedError', 'not allowed')
    """
    match = re.match(r"^(?:\[Error -?\d+\] )?(\w+)(?:: ?(.*))?$", str(error), re.DOTALL)
    if match is None:
        return "describe_error", str(error)
    return match.group(1), match.group(2) or ""


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
