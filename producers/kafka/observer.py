"""One poll of a Kafka cluster's consumer groups: listed, described, translated into events.

    observer = KafkaGroupObserver("kafka:9092", PollHealth("observe-kafka poll"))
    results = observer.poll()       # a Translation per group (producers/kafka/translate.py)
    observer.close()

Per poll: ListGroups (v5 says which type each group is), a description of each group the way its
type needs (DescribeGroups for a classic group; ConsumerGroupDescribe, API 69, for a KIP-848
group; ShareGroupDescribe, API 77, for a share group; StreamsGroupDescribe, API 89, for a
streams group: producers/kafka/protocol.py), a classic
group's committed offsets (its topics when its members are unreadable), and the topics' partition
counts. A group that migrates from classic to consumer is asked the new way from the next poll
on, with the same member ids.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from functools import partial

import kafka.errors as Errors
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from producers.health import PollHealth
from producers.kafka import protocol
from producers.kafka.admin import (
    NO_OPTIONS,
    confluent_admin,
    described_error,
    kafka_python_admin,
)
from producers.kafka.translate import (
    Translation,
    field_of,
    translate_consumer_group,
    translate_gone_group,
    translate_group,
    translate_share_group,
    translate_streams_group,
)
from streaming.common.faults import error_cause
from streaming.common.kafka_options import KafkaClientOptions
from streaming.core.contract import BROKER_ASSIGNED

log = logging.getLogger("rebalance_monitor.observe_kafka")

# How each group type is described: DescribeGroups (kafka-python) for classic groups, the KIP-848,
# KIP-932 and KIP-1071 APIs (producers/kafka/protocol.py) for the groups the broker assigns.
DESCRIBE_REQUESTS = {"classic": "describe_groups", "consumer": "describe_consumer_groups",
                     "share": "describe_share_groups", "streams": "describe_streams_groups"}
TRANSLATIONS = {protocol.ConsumerGroupDescription: translate_consumer_group,
                protocol.ShareGroupDescription: translate_share_group,
                protocol.StreamsGroupDescription: translate_streams_group}
GROUP_ID_NOT_FOUND = 69
# A streams group's config (KIP-1071) giving the standby copies each stateful task is to have;
# DescribeConfigs gives the group's own value, else the broker's group.streams.* default.
STANDBY_REPLICAS = "streams.num.standby.replicas"


def _watched_types(listed: Iterable[Mapping]) -> dict[str, str]:
    """group -> type of the listed groups the observer watches: consumer groups of every type
    (ListGroups v5 names it; older brokers list classic groups only), share groups and streams
    groups (KIP-1071). Classic groups of other protocols (Connect, or Kafka Streams on the
    classic protocol, whose assignment is its own) are not watched.

    >>> _watched_types([{"group_id": "a", "protocol_type": "consumer", "group_type": "consumer"},
    ...                 {"group_id": "b", "protocol_type": "consumer"},
    ...                 {"group_id": "c", "protocol_type": "share", "group_type": "share"},
    ...                 {"group_id": "d", "protocol_type": "connect", "group_type": "classic"},
    ...                 {"group_id": "e", "protocol_type": "streams", "group_type": "streams"}])
    {'a': 'consumer', 'b': 'classic', 'c': 'share', 'e': 'streams'}
    """
    watched = {}
    for group in listed:
        kind = (group.get("group_type") or "classic").lower()
        if kind in BROKER_ASSIGNED or (
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
        self._admin_factory = admin_factory or partial(kafka_python_admin, options=options)
        self._metadata_factory = metadata_factory or partial(confluent_admin, options=options)
        self._admin = None
        self._metadata = None
        self.groups_seen = 0
        self.unwatchable: tuple[str, ...] = ()   # group types the cluster cannot describe
        self.standby_replicas: dict[str, int] = {}   # streams group -> its num.standby.replicas

    def poll(self, ts_ms: int | None = None) -> list[Translation]:
        self._connect()
        self._note_capabilities()
        ts_ms = int(time.time() * 1000) if ts_ms is None else ts_ms
        with self.health.calls.timed("list_groups", self.bootstrap_servers):
            listed = _watched_types(self._admin.list_groups())
        self.types.update(listed)
        names = sorted(set(listed) | set(self.previous))
        by_type: dict[str, list[str]] = {}
        for name in names:
            by_type.setdefault(self.types.get(name, "classic"), []).append(name)
        descriptions = self._describe(by_type)
        partitions = self._partition_counts()
        self.standby_replicas = self._standby_replicas(by_type.get("streams", []))
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

    def _connect(self) -> None:
        if self._metadata is None:
            self._metadata = self._metadata_factory(self.bootstrap_servers, self.timeout_s)
        if self._admin is None:
            with self.health.calls.timed("bootstrap", self.bootstrap_servers):
                self._admin = self._admin_factory(self.bootstrap_servers, self.timeout_s)

    def _note_capabilities(self) -> None:
        """What the cluster cannot describe, logged when it changes (once for a 3.x broker),
        never once a poll; its groups of those types are then counted as unreadable."""
        asked = getattr(self._admin, "unsupported_group_types", None)
        unwatchable = asked() if asked is not None else ()
        if unwatchable != self.unwatchable and unwatchable:
            log.warning("the cluster at %s does not support describing %s groups (its broker "
                        "lacks the API): such groups cannot be watched there; classic groups "
                        "are", self.bootstrap_servers, " or ".join(unwatchable))
        self.unwatchable = unwatchable

    def _partition_counts(self) -> dict[str, int]:
        with self.health.calls.timed("list_topics", self.bootstrap_servers):
            topics = self._metadata.list_topics(timeout=self.timeout_s).topics
        return {name: len(t.partitions) for name, t in topics.items() if t.error is None}

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
            except protocol.UnsupportedGroupApi as refused:
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

    def _standby_replicas(self, groups: list[str]) -> dict[str, int]:
        """Each streams group's num.standby.replicas, in one DescribeConfigs. When it fails
        (counted and logged by cause) no group's is known this poll, and no copy is judged
        missing."""
        if not groups:
            return {}
        from confluent_kafka.admin import ConfigResource, ResourceType

        try:
            with self.health.calls.timed("describe_configs", self.bootstrap_servers):
                futures = self._metadata.describe_configs(
                    [ConfigResource(ResourceType.GROUP, name) for name in groups],
                    request_timeout=self.timeout_s)
                answers = {resource.name: future.result(self.timeout_s).get(STANDBY_REPLICAS)
                           for resource, future in futures.items()}
        except Exception:  # noqa: BLE001 - counted above; the poll goes on without them
            return {}
        # A broker whose group configs lack it (before KIP-1071's) leaves it unknown.
        return {name: int(entry.value) for name, entry in answers.items() if entry is not None}

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
        if isinstance(description, protocol.GroupDescription):
            return self._translate_broker_assigned(name, description, partitions, ts_ms,
                                                   listed, previous)
        error = field_of(description, "error")
        if error:
            self.health.group_failed(name, *described_error(error))
            return None
        try:
            return translate_group(description, partitions, ts_ms,
                                   committed_topics=self._committed_topics(name),
                                   previous_members=previous)
        except Exception as exc:  # noqa: BLE001 - a description it cannot read: that group only
            self.health.group_failed(name, error_cause(exc), f"unreadable description: {exc}")
            return None

    def _translate_broker_assigned(self, name: str, description: protocol.GroupDescription,
                                   partitions: Mapping[str, int], ts_ms: int, listed: bool,
                                   previous: tuple[str, ...]) -> Translation | None:
        """A KIP-848, share or streams group's events; None when its description is an error
        (counted)."""
        if description.error_code == 0:
            extra = {"standby_replicas": self.standby_replicas.get(name)} \
                if isinstance(description, protocol.StreamsGroupDescription) else {}
            return TRANSLATIONS[type(description)](description, partitions, ts_ms,
                                                   previous_members=previous, **extra)
        if not listed and description.error_code == GROUP_ID_NOT_FOUND:
            return translate_gone_group(name, ts_ms, previous)
        error = description.error
        self.health.group_failed(name, error.__name__ if error else "describe_error",
                                 description.error_message or "")
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


class CapabilityCollector(Collector):
    """rebalance_observer_unwatchable_group_types{group_type}: 1 for each group type the
    observed cluster cannot describe (a 3.x broker: share; before 3.7: consumer too)."""

    def __init__(self, observer: KafkaGroupObserver) -> None:
        self._observer = observer

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "rebalance_observer_unwatchable_group_types",
            "Group types the observed cluster cannot describe (its broker lacks the API): "
            "1 each.", labels=["group_type"])
        for kind in self._observer.unwatchable:
            family.add_metric([kind], 1.0)
        yield family
