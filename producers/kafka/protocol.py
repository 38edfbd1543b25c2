"""Ask a Kafka 4.x broker about KIP-848 consumer groups, KIP-932 share groups and KIP-1071
streams groups, through kafka-python 3's own protocol machinery.

    from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers="kafka:9092")
    describe_consumer_groups(client, ["orders"], timeout_s=10)   # {"orders": ConsumerGroupDescription}
    describe_share_groups(client, ["jobs"], timeout_s=10)        # {"jobs": ShareGroupDescription}
    describe_streams_groups(client, ["app"], timeout_s=10)       # {"app": StreamsGroupDescription}
    list_groups(client, timeout_s=10)                            # [ListedGroup, ...]

What it asks, and why:

- ConsumerGroupDescribe (API key 69, KIP-848) of each group's coordinator. kafka-python decodes
  DescribeGroups (key 15), which only knows classic groups: a KIP-848 group comes back there
  without its members. confluent-kafka's describe_consumer_groups does use key 69 and exposes
  the group type and each member's target assignment, but not the epochs. The group epoch, the
  assignment epoch and each member's epoch say where a rebalance stands: a member whose epoch
  is behind the assignment epoch, or whose assignment differs from its target, has not
  reconciled yet. This module reads them from the raw response.
- ShareGroupDescribe (API key 77, KIP-932) of each group's coordinator: the same for share
  groups (no target assignment, no instance id, no member type in that API).
- StreamsGroupDescribe (API key 89, KIP-1071) of each group's coordinator: a Kafka Streams
  application run with `group.protocol=streams` is a group whose broker assigns *tasks*
  (subtopology, partition), active, standby and warm-up, each current and target per member,
  with the group's, the target assignment's and the topology's epochs. The broker answers it
  only while streams groups are enabled (the `streams.version` feature, on by default from 4.2):
  otherwise UNSUPPORTED_VERSION for the whole request.
- ListGroups (API key 16) of every broker, at the highest version both sides speak; v5 gives
  each group's type ("classic", "consumer", "share", "streams"). KafkaAdminClient already
  negotiates that version and keeps the field; list_groups only wraps its answer.

kafka-python 3 ships no schema for keys 69, 77 and 89, so producers/kafka/schemas/ holds Apache
Kafka 4.3.1's own JSON message schemas (verbatim, from kafka-clients-4.3.1-sources.jar) and the
request/response classes below are generated from them, exactly as kafka-python generates its
own. Requests are grouped by coordinator, one per coordinator, at the highest version both the
schema and the broker support.

A group-level error (GROUP_ID_NOT_FOUND = 69 for a classic group asked as a consumer group, or a
consumer group asked as a share group; GROUP_AUTHORIZATION_FAILED; ...) comes back in the
description's error_code and error_message, not as an exception. Exceptions are for the call
as a whole: UnsupportedGroupApi when the broker does not know the API,
kafka.errors.KafkaTimeoutError when timeout_s passes, and the client's connection errors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import kafka.errors as Errors
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import CoordinatorType

from producers.kafka import schemas

__all__ = [
    "TopicPartition", "UnsupportedGroupApi",
    "ConsumerGroupMember", "ConsumerGroupDescription",
    "ShareGroupMember", "ShareGroupDescription", "ListedGroup",
    "StreamsTasks", "StreamsGroupMember", "Subtopology", "StreamsGroupDescription",
    "describe_consumer_groups", "describe_share_groups", "describe_streams_groups", "list_groups",
    "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse",
    "ShareGroupDescribeRequest", "ShareGroupDescribeResponse",
    "StreamsGroupDescribeRequest", "StreamsGroupDescribeResponse",
    "consumer_group_describe_request", "share_group_describe_request",
    "streams_group_describe_request",
    "parse_consumer_group_describe", "parse_share_group_describe", "parse_streams_group_describe",
]

TopicPartition = tuple[str, int]
Task = tuple[str, int]   # a Kafka Streams task: (subtopology id, partition), "0_1" in its logs


# Declaring a response class registers it with kafka-python by API key, so a connection decodes
# the broker's answer into it.
class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


# ConsumerGroupDescribe v1+ (KIP-1099): -1 unknown, 0 a classic member (a consumer still on the
# classic protocol inside a KIP-848 group), 1 a consumer member.
MEMBER_TYPES = {0: "classic", 1: "consumer"}
# Group-level errors that mean "ask another broker": the cached coordinator is dropped and the
# group asked once more (a coordinator moves when __consumer_offsets' leadership does).
_COORDINATOR_MOVED = (Errors.NotCoordinatorError.errno, Errors.CoordinatorNotAvailableError.errno)


class UnsupportedGroupApi(Errors.KafkaError):
    """The broker does not support the API (ConsumerGroupDescribe needs Kafka 3.7+ with the
    new group coordinator, ShareGroupDescribe v1 needs Kafka 4.1+)."""


@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    member_epoch: int
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]          # sorted
    target_assignment: tuple[TopicPartition, ...]   # sorted
    member_type: str | None                         # "consumer" / "classic"; None before v1


@dataclass(frozen=True)
class GroupDescription:
    """What ConsumerGroupDescribe, ShareGroupDescribe and StreamsGroupDescribe all say of a
    group."""

    group_id: str
    error_code: int
    error_message: str | None
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str

    @property
    def error(self) -> type[Errors.KafkaError] | None:
        """The error's kafka-python class, None when error_code is 0."""
        return None if self.error_code == 0 else Errors.for_code(self.error_code)


@dataclass(frozen=True)
class ConsumerGroupDescription(GroupDescription):
    members: tuple[ConsumerGroupMember, ...]


@dataclass(frozen=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]
    assignment: tuple[TopicPartition, ...]          # sorted


@dataclass(frozen=True)
class ShareGroupDescription(GroupDescription):
    members: tuple[ShareGroupMember, ...]


@dataclass(frozen=True)
class StreamsTasks:
    """One assignment of a streams member (current or target), each kind sorted."""

    active: tuple[Task, ...] = ()
    standby: tuple[Task, ...] = ()
    warmup: tuple[Task, ...] = ()


@dataclass(frozen=True)
class StreamsGroupMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str          # the stream thread's consumer client id
    client_host: str
    member_epoch: int
    topology_epoch: int
    process_id: str         # the KafkaStreams instance: its threads are members of one process
    assignment: StreamsTasks
    target_assignment: StreamsTasks


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    repartition_source_topics: tuple[tuple[str, int], ...]   # (name, partitions)
    changelog_topics: tuple[str, ...] = ()    # its state stores' (none: stateless)


@dataclass(frozen=True)
class StreamsGroupDescription(GroupDescription):
    """`subtopologies` is None while the broker has no configured topology for the group (not
    initialized, or source or internal topics missing: state NotReady)."""

    topology_epoch: int | None
    subtopologies: tuple[Subtopology, ...] | None
    members: tuple[StreamsGroupMember, ...]


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str | None   # ListGroups v4+
    group_type: str | None    # ListGroups v5+: "classic", "consumer", "share", "streams"


# -- Pure part: requests and responses -----------------------------------------------------

R = TypeVar("R")


def _describe_request(request_class: type[R], group_ids: Iterable[str],
                      version: int | None = None) -> R:
    """version None: the connection picks the highest version both sides support."""
    request = request_class(group_ids=list(group_ids), include_authorized_operations=False)
    if version is not None:
        request.API_VERSION = version
    return request


def consumer_group_describe_request(group_ids: Iterable[str], version: int | None = None
                                    ) -> ConsumerGroupDescribeRequest:
    return _describe_request(ConsumerGroupDescribeRequest, group_ids, version)


def share_group_describe_request(group_ids: Iterable[str], version: int | None = None
                                 ) -> ShareGroupDescribeRequest:
    return _describe_request(ShareGroupDescribeRequest, group_ids, version)


def streams_group_describe_request(group_ids: Iterable[str], version: int | None = None
                                   ) -> StreamsGroupDescribeRequest:
    return _describe_request(StreamsGroupDescribeRequest, group_ids, version)


def _partitions(assignment) -> tuple[TopicPartition, ...]:
    if assignment is None:
        return ()
    return tuple(sorted((topic.topic_name, partition)
                        for topic in assignment.topic_partitions or ()
                        for partition in topic.partitions))


def parse_consumer_group_describe(response: ConsumerGroupDescribeResponse
                                  ) -> dict[str, ConsumerGroupDescription]:
    version = response.API_VERSION
    has_member_type = version is not None and version >= 1
    described = {}
    for group in response.groups:
        members = tuple(
            ConsumerGroupMember(
                **_member_fields(member),
                instance_id=member.instance_id,
                subscribed_topics=tuple(member.subscribed_topic_names or ()),
                assignment=_partitions(member.assignment),
                target_assignment=_partitions(member.target_assignment),
                member_type=MEMBER_TYPES.get(member.member_type) if has_member_type else None,
            )
            for member in group.members or ())
        described[group.group_id] = ConsumerGroupDescription(**_group_fields(group),
                                                              members=members)
    return described


def _group_fields(group, assignor_name: str | None = None) -> dict:
    """The GroupDescription fields of a described group, as the three APIs name them
    (StreamsGroupDescribe names no assignor: `assignor_name` says it)."""
    return {"group_id": group.group_id, "error_code": group.error_code,
            "error_message": group.error_message, "group_state": group.group_state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.assignor_name if assignor_name is None else assignor_name}


def _member_fields(member) -> dict:
    """The fields every described member has, as the three APIs name them."""
    return {"member_id": member.member_id, "rack_id": member.rack_id,
            "client_id": member.client_id, "client_host": member.client_host,
            "member_epoch": member.member_epoch}


def parse_share_group_describe(response: ShareGroupDescribeResponse
                               ) -> dict[str, ShareGroupDescription]:
    described = {}
    for group in response.groups:
        members = tuple(
            ShareGroupMember(
                **_member_fields(member),
                subscribed_topics=tuple(member.subscribed_topic_names or ()),
                assignment=_partitions(member.assignment),
            )
            for member in group.members or ())
        described[group.group_id] = ShareGroupDescription(**_group_fields(group),
                                                           members=members)
    return described


# Kafka 4.3's streams groups have one task assignor, the broker's StickyTaskAssignor; the
# describe API does not name it.
STREAMS_ASSIGNOR = "sticky"


def _tasks(task_ids) -> tuple[Task, ...]:
    return tuple(sorted((task.subtopology_id, partition)
                        for task in task_ids or () for partition in task.partitions))


def _streams_tasks(assignment) -> StreamsTasks:
    if assignment is None:
        return StreamsTasks()
    return StreamsTasks(_tasks(assignment.active_tasks), _tasks(assignment.standby_tasks),
                        _tasks(assignment.warmup_tasks))


def parse_streams_group_describe(response: StreamsGroupDescribeResponse
                                 ) -> dict[str, StreamsGroupDescription]:
    described = {}
    for group in response.groups:
        topology = group.topology
        subtopologies = None if topology is None or topology.subtopologies is None else tuple(
            Subtopology(subtopology_id=sub.subtopology_id,
                        source_topics=tuple(sub.source_topics or ()),
                        repartition_source_topics=tuple(
                            (topic.name, topic.partitions)
                            for topic in sub.repartition_source_topics or ()),
                        changelog_topics=tuple(
                            topic.name for topic in sub.state_changelog_topics or ()))
            for sub in topology.subtopologies)
        members = tuple(
            StreamsGroupMember(
                **_member_fields(member),
                instance_id=member.instance_id,
                topology_epoch=member.topology_epoch,
                process_id=member.process_id,
                assignment=_streams_tasks(member.assignment),
                target_assignment=_streams_tasks(member.target_assignment),
            )
            for member in group.members or ())
        described[group.group_id] = StreamsGroupDescription(
            **_group_fields(group, STREAMS_ASSIGNOR),
            topology_epoch=None if topology is None else topology.epoch,
            subtopologies=subtopologies, members=members)
    return described


# -- Talking to the cluster ----------------------------------------------------------------

D = TypeVar("D")


def _run(client, timeout_s: float, work: Callable[[], Any]):
    """Run the coroutine function `work` on the admin client's IO loop; KafkaTimeoutError once
    timeout_s has passed (what is still in flight is left to finish and be dropped)."""
    manager = client._manager

    async def bounded():
        return await manager.wait_for(manager.call_soon(work), int(timeout_s * 1000))

    return manager.run(bounded)


def unsupported_group_types(client) -> tuple[str, ...]:
    """The group types ("consumer", "share", "streams") whose describe API the cluster's broker
    lacks (a 3.x broker has no ShareGroupDescribe or StreamsGroupDescribe; one before 3.7 no
    ConsumerGroupDescribe either); () before the client has bootstrapped."""
    versions = client._manager.broker_version_data
    if versions is None:
        return ()
    missing = []
    for kind, request_class in (("consumer", ConsumerGroupDescribeRequest),
                                ("share", ShareGroupDescribeRequest),
                                ("streams", StreamsGroupDescribeRequest)):
        try:
            versions.api_version(request_class)
        except Errors.IncompatibleBrokerVersion:
            missing.append(kind)
    return tuple(missing)


def _check_supported(client, request_class: type[ApiMessage]) -> None:
    versions = client._manager.broker_version_data
    if versions is None:
        return  # not bootstrapped: the connection checks when it sends
    try:
        versions.api_version(request_class)
    except Errors.IncompatibleBrokerVersion as exc:
        raise UnsupportedGroupApi(str(exc)) from exc


def _describe(client, group_ids: Iterable[str], timeout_s: float,
              request_class: type[ApiMessage],
              parse: Callable[[Any], dict[str, D]]) -> dict[str, D]:
    wanted = list(dict.fromkeys(group_ids))
    if not wanted:
        return {}
    _check_supported(client, request_class)
    manager = client._manager

    async def ask(groups: list[str]) -> dict[str, D]:
        coordinators = await client._find_coordinator_ids(groups)
        by_node: dict[int, list[str]] = defaultdict(list)
        for group in groups:
            by_node[coordinators[group]].append(group)
        found: dict[str, D] = {}
        for node_id, node_groups in by_node.items():
            try:
                response = await manager.send(_describe_request(request_class, node_groups),
                                              node_id=node_id)
            except Errors.IncompatibleBrokerVersion as exc:
                raise UnsupportedGroupApi(f"broker {node_id}: {exc}") from exc
            found.update(parse(response))
        return found

    async def work() -> dict[str, D]:
        found = await ask(wanted)
        moved = [group for group, description in found.items()
                 if description.error_code in _COORDINATOR_MOVED]
        if moved:
            for group in moved:
                manager.cluster._coordinators.pop((CoordinatorType.GROUP, group), None)
            found.update(await ask(moved))
        return found

    return _run(client, timeout_s, work)


def describe_consumer_groups(client, group_ids: Iterable[str], timeout_s: float = 30.0
                             ) -> dict[str, ConsumerGroupDescription]:
    """ConsumerGroupDescribe of each group's coordinator (one request per coordinator).
    `client` is a kafka.admin.KafkaAdminClient. A group the coordinator does not know as a
    KIP-848 group (a classic group, a share group, no such group) comes back with
    error_code 69 (GROUP_ID_NOT_FOUND) and no members."""
    return _describe(client, group_ids, timeout_s, ConsumerGroupDescribeRequest,
                     parse_consumer_group_describe)


def describe_share_groups(client, group_ids: Iterable[str], timeout_s: float = 30.0
                          ) -> dict[str, ShareGroupDescription]:
    """ShareGroupDescribe of each group's coordinator (one request per coordinator). A group
    that is not a share group comes back with error_code 69 (GROUP_ID_NOT_FOUND)."""
    return _describe(client, group_ids, timeout_s, ShareGroupDescribeRequest,
                     parse_share_group_describe)


def describe_streams_groups(client, group_ids: Iterable[str], timeout_s: float = 30.0
                            ) -> dict[str, StreamsGroupDescription]:
    """StreamsGroupDescribe of each group's coordinator (one request per coordinator). A group
    that is not a streams group comes back with error_code 69 (GROUP_ID_NOT_FOUND)."""
    return _describe(client, group_ids, timeout_s, StreamsGroupDescribeRequest,
                     parse_streams_group_describe)


def list_groups(client, timeout_s: float = 30.0) -> list[ListedGroup]:
    """ListGroups of every broker the client knows (each lists the groups it coordinates), at
    the highest version both sides support: group_type is None below v5, group_state below v4.
    A broker-level error raises (kafka-python's list_groups does)."""
    listed = _run(client, timeout_s, client._async_list_groups)
    return [ListedGroup(group_id=group["group_id"], protocol_type=group["protocol_type"],
                        group_state=group.get("group_state"), group_type=group.get("group_type"))
            for group in listed]
