"""`rebalance-monitor observe-kafka`: heartbeat and route events for a Kafka cluster's groups.

    rebalance-monitor observe-kafka --bootstrap-servers kafka:9092 \\
        --events-bootstrap-servers monitor-kafka:9092 --topic rebalance.events --interval 10

Every interval it lists the cluster's consumer groups, describes them (kafka-python decodes each
member's subscription and assignment), reads the subscribed topics' partition counts, and emits
for every group (system "kafka", key = group): one heartbeat per member (client_id = member id,
address = client host, topics = subscription, strategy = the group's assignor, owned = the
member's assignment, group_instance_id, generation when the subscription carries it), one route
per topic (`partitions`), and an unregister for each member gone since the previous poll.

Some brokers answer DescribeGroups without members, or with members whose subscription and
assignment are empty (the embedded tansu broker does). The observer says so on stderr, naming
the group, and still reports the group's topics (from its committed offsets) and their partition
counts. `translate_group` is the pure part: describe-groups result in, events out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

KAFKA_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")


@dataclass
class Translation:
    events: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    members: tuple[str, ...] = ()   # member ids seen, for the next poll's unregisters
    topics: tuple[str, ...] = ()


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
    event = {"v": 1, "type": "heartbeat", "system": "kafka", "ts": ts_ms, "group": group,
             "client_id": _get(member, "member_id"), "topics": topics, "strategy": assignor,
             "owned": _assignment(_get(member, "member_assignment"))}
    host = (_get(member, "client_host") or "").lstrip("/")
    if host:
        event["address"] = host
    if _get(member, "group_instance_id"):
        event["group_instance_id"] = _get(member, "group_instance_id")
    if generation is not None and generation >= 0:
        event["generation"] = generation
    return event


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
    out = Translation()
    beats = [_heartbeat(group, m, assignor, ts_ms) for m in members]
    if not members or any(b is None for b in beats):
        out.warnings.append(
            f"group {group}: the broker's DescribeGroups returned "
            + ("no members" if not members else "members without subscription or assignment")
            + "; reporting the group's topics and partition counts only")
    elif assignor not in KAFKA_ASSIGNORS:
        out.warnings.append(f"group {group}: assignor {assignor!r} is not one of "
                            f"{', '.join(KAFKA_ASSIGNORS)}; members not reported")
        beats = []
    out.events.extend(b for b in beats if b is not None)
    out.members = tuple(b["client_id"] for b in out.events)
    gone = sorted(set(previous_members) - set(out.members))
    out.events.extend({"v": 1, "type": "unregister", "system": "kafka", "ts": ts_ms,
                       "group": group, "client_id": m} for m in gone)
    topics = sorted({t for m in members for t in _subscription(_get(m, "member_metadata"))[0]}
                    | set(committed_topics))
    out.topics = tuple(topics)
    for topic in topics:
        if topic in partitions:
            out.events.append({"v": 1, "type": "route", "system": "kafka", "ts": ts_ms,
                               "group": group, "topic": topic, "partitions": partitions[topic]})
        else:
            out.warnings.append(f"group {group}: topic {topic} is not in the cluster metadata")
    return out


def _admin_class():
    from kafka.admin import KafkaAdminClient

    class TolerantAdmin(KafkaAdminClient):
        """kafka-python 3 raises on authorized-operation bits it does not know (tansu sends
        them); the observer does not need them."""

        def _process_acl_operations(self, obj):
            try:
                return super()._process_acl_operations(obj)
            except ValueError:
                obj.pop("authorized_operations", None)
                return obj

    return TolerantAdmin


class KafkaGroupObserver:
    """Configure (no I/O), then `poll()` as often as wanted, then `close()`."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.previous: dict[str, tuple[str, ...]] = {}
        self._admin = None
        self._metadata = None

    def poll(self, ts_ms: int | None = None) -> list[Translation]:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = _admin_class()(bootstrap_servers=self.bootstrap_servers)
            self._metadata = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        ts_ms = int(time.time() * 1000) if ts_ms is None else ts_ms
        listed = self._admin.list_groups()
        names = sorted({g["group_id"] for g in listed
                        if g.get("protocol_type") in ("consumer", "", None)})
        names = sorted(set(names) | set(self.previous))
        descriptions = self._admin.describe_groups(names) if names else {}
        topics = self._metadata.list_topics(timeout=10).topics
        partitions = {name: len(t.partitions) for name, t in topics.items() if t.error is None}
        results = []
        for name in names:
            committed = self._committed_topics(name)
            result = translate_group(descriptions.get(name, {"group_id": name}), partitions,
                                     ts_ms, committed_topics=committed,
                                     previous_members=self.previous.get(name, ()))
            self.previous[name] = result.members
            results.append(result)
        return results

    def _committed_topics(self, group: str) -> list[str]:
        try:
            offsets = self._admin.list_group_offsets({group: None}).get(group, {})
        except Exception:  # noqa: BLE001 - a group without offsets is still reported
            return []
        return sorted({tp.topic for tp in offsets})

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument("--bootstrap-servers", default=env("KAFKA_BOOTSTRAP_SERVERS"),
                        required=env("KAFKA_BOOTSTRAP_SERVERS") is None,
                        help="the cluster whose groups are observed")
    parser.add_argument("--events-bootstrap-servers",
                        help="where to publish events (default: --bootstrap-servers)")
    parser.add_argument("--topic", default="rebalance.events")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between polls")
    parser.add_argument("--once", action="store_true", help="poll once and exit")
    parser.add_argument("--stdout", action="store_true", help="print events instead")


def main(args: argparse.Namespace) -> int:
    observer = KafkaGroupObserver(args.bootstrap_servers)
    producer = None
    if not args.stdout:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": args.events_bootstrap_servers
                             or args.bootstrap_servers, "linger.ms": 20})
    try:
        while True:
            started = time.monotonic()
            for result in observer.poll():
                _publish(result, producer, args.topic)
            if producer is not None:
                producer.flush(30)
            if args.once:
                return 0
            time.sleep(max(0.0, args.interval - (time.monotonic() - started)))  # poll cadence
    except KeyboardInterrupt:
        return 0
    finally:
        observer.close()


def _publish(result: Translation, producer, topic: str) -> None:
    for warning in result.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    beats = sum(e["type"] == "heartbeat" for e in result.events)
    if result.events:
        group = result.events[0]["group"]
        print(f"observe-kafka: group {group}: {beats} members, topics "
              + ", ".join(f"{e['topic']}({e['partitions']})" for e in result.events
                          if e["type"] == "route"), file=sys.stderr)
    for event in result.events:
        value = json.dumps(event, separators=(",", ":"))
        if producer is None:
            print(value)
        else:
            producer.produce(topic, value.encode(), event["group"].encode())
