"""producers/kafka/protocol.py without a broker: the requests' bytes, responses built with the
generated Response classes and decoded back into the dataclasses, group-level errors, the
"broker does not know the API" error, and one request per coordinator (a scripted client)."""

from __future__ import annotations

import importlib.resources
import json
import re
import uuid
from types import SimpleNamespace

import kafka.errors as Errors
import pytest
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.metadata import CoordinatorType

from producers.kafka import protocol as kp
from producers.kafka.protocol import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    UnsupportedGroupApi,
)

pytestmark = pytest.mark.unit

ORDERS_ID, AUDIT_ID = uuid.uuid4(), uuid.uuid4()
NO_OPERATIONS = -2147483648

CG = ConsumerGroupDescribeResponse
CGGroup = CG.DescribedGroup
CGMember = CGGroup.Member
CGAssignment = CGMember.Assignment
CGTopic = CGAssignment.TopicPartitions
SG = ShareGroupDescribeResponse
SGGroup = SG.DescribedGroup
SGMember = SGGroup.Member
SGAssignment = SGMember.Assignment
SGTopic = SGAssignment.TopicPartitions
ST = StreamsGroupDescribeResponse
STGroup = ST.DescribedGroup
STTopology = STGroup.Topology
STSub = STTopology.Subtopology
STMember = STGroup.Member
STAssignment = STMember.Assignment


def cg_assignment(**topics):
    ids = {"orders": ORDERS_ID, "audit": AUDIT_ID}
    return CGAssignment(topic_partitions=[
        CGTopic(topic_id=ids[name], topic_name=name, partitions=parts)
        for name, parts in topics.items()])


def cg_member(member_id, epoch, assignment, target, member_type=1, instance_id=None):
    return CGMember(member_id=member_id, instance_id=instance_id, rack_id=None,
                    member_epoch=epoch, client_id="app", client_host="/10.0.0.1",
                    subscribed_topic_names=["orders", "audit"], subscribed_topic_regex=None,
                    assignment=assignment, target_assignment=target, member_type=member_type)


def cg_group(group_id, members=(), error_code=0, error_message=None, state="Stable",
             group_epoch=7, assignment_epoch=7):
    return CGGroup(error_code=error_code, error_message=error_message, group_id=group_id,
                   group_state=state, group_epoch=group_epoch, assignment_epoch=assignment_epoch,
                   assignor_name="uniform" if not error_code else "", members=list(members),
                   authorized_operations=NO_OPERATIONS)


def on_the_wire(response, version):
    """The response as a broker would send it at `version`, decoded as a connection does."""
    return type(response).decode(bytes(response.encode(version=version)), version=version)


# -- the schemas ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, api_key, versions", [
    ("ConsumerGroupDescribeRequest", 69, "0-1"), ("ConsumerGroupDescribeResponse", 69, "0-1"),
    ("ShareGroupDescribeRequest", 77, "1"), ("ShareGroupDescribeResponse", 77, "1"),
    ("StreamsGroupDescribeRequest", 89, "0"), ("StreamsGroupDescribeResponse", 89, "0")])
def test_the_schemas_are_kafka_4_3s_files_with_their_license(name, api_key, versions):
    text = importlib.resources.files("producers.kafka.schemas").joinpath(f"{name}.json").read_text()
    assert text.startswith("// Licensed to the Apache Software Foundation (ASF)")
    schema = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    assert (schema["name"], schema["apiKey"], schema["validVersions"]) == (name, api_key, versions)


def test_the_classes_speak_the_schemas_versions():
    assert (ConsumerGroupDescribeRequest.API_KEY, ConsumerGroupDescribeRequest.max_version) == (69, 1)
    assert (ShareGroupDescribeRequest.API_KEY, ShareGroupDescribeRequest.max_version) == (77, 1)
    assert (StreamsGroupDescribeRequest.API_KEY, StreamsGroupDescribeRequest.max_version) == (89, 0)


# -- requests ---------------------------------------------------------------------------------

def test_a_consumer_group_describe_request_is_compact_and_asks_no_acls():
    request = kp.consumer_group_describe_request(["a", "bc"], version=1)
    # flexible from v0: compact array (n+1), compact strings (len+1), bool, empty tag buffer
    assert bytes(request.encode()) == b"\x03\x02a\x03bc\x00\x00"
    decoded = ConsumerGroupDescribeRequest.decode(bytes(request.encode()), version=1)
    assert decoded.group_ids == ["a", "bc"] and decoded.include_authorized_operations is False


def test_a_share_group_describe_request_is_v1():
    request = kp.share_group_describe_request(["jobs"], version=1)
    assert bytes(request.encode()) == b"\x02\x05jobs\x00\x00"


def test_a_streams_group_describe_request_is_v0():
    request = kp.streams_group_describe_request(["app"], version=0)
    assert bytes(request.encode()) == b"\x02\x04app\x00\x00"


def test_without_a_version_the_connection_picks_one():
    assert kp.consumer_group_describe_request(["a"]).API_VERSION is None


# -- responses --------------------------------------------------------------------------------

def test_a_consumer_group_describe_response_decodes_into_the_dataclasses():
    response = CG(throttle_time_ms=0, groups=[cg_group("orders-app", [
        cg_member("m-1", 7, cg_assignment(orders=[2, 0], audit=[1]),
                  cg_assignment(audit=[1], orders=[0, 2]), instance_id="pod-1"),
        cg_member("m-2", 7, cg_assignment(orders=[1, 3]), cg_assignment(orders=[3, 1]),
                  member_type=0),
    ])])
    described = kp.parse_consumer_group_describe(on_the_wire(response, 1))
    assert described == {"orders-app": ConsumerGroupDescription(
        group_id="orders-app", error_code=0, error_message=None, group_state="Stable",
        group_epoch=7, assignment_epoch=7, assignor_name="uniform", members=(
            ConsumerGroupMember(
                member_id="m-1", instance_id="pod-1", rack_id=None, client_id="app",
                client_host="/10.0.0.1", member_epoch=7, subscribed_topics=("orders", "audit"),
                assignment=(("audit", 1), ("orders", 0), ("orders", 2)),
                target_assignment=(("audit", 1), ("orders", 0), ("orders", 2)),
                member_type="consumer"),
            ConsumerGroupMember(
                member_id="m-2", instance_id=None, rack_id=None, client_id="app",
                client_host="/10.0.0.1", member_epoch=7, subscribed_topics=("orders", "audit"),
                assignment=(("orders", 1), ("orders", 3)),
                target_assignment=(("orders", 1), ("orders", 3)), member_type="classic"),
        ))}
    assert described["orders-app"].error is None


def test_a_member_revoking_keeps_its_epoch_and_lists_what_it_still_owns():
    # What the 4.3 coordinator answers while m-1 revokes orders-1 for m-2 (UNREVOKED_PARTITIONS):
    # m-1 stays at epoch 4 behind the assignment epoch 5 and its assignment still holds the
    # partition pending revocation; m-2 (epoch 5) waits for it (UNRELEASED_PARTITIONS).
    response = CG(throttle_time_ms=0, groups=[cg_group("g", [
        cg_member("m-1", 4, cg_assignment(orders=[0, 1]), cg_assignment(orders=[0])),
        cg_member("m-2", 5, cg_assignment(), cg_assignment(orders=[1])),
    ], state="Reconciling", group_epoch=5, assignment_epoch=5)])
    group = kp.parse_consumer_group_describe(on_the_wire(response, 1))["g"]
    revoking, waiting = group.members
    assert group.group_state == "Reconciling" and group.assignment_epoch == 5
    assert (revoking.member_epoch, revoking.assignment, revoking.target_assignment) == (
        4, (("orders", 0), ("orders", 1)), (("orders", 0),))
    assert (waiting.member_epoch, waiting.assignment, waiting.target_assignment) == (
        5, (), (("orders", 1),))


def test_version_0_has_no_member_type():
    response = CG(throttle_time_ms=0, groups=[cg_group("g", [
        cg_member("m-1", 3, cg_assignment(orders=[0]), cg_assignment(orders=[0]))])])
    (member,) = kp.parse_consumer_group_describe(on_the_wire(response, 0))["g"].members
    assert member.member_type is None and member.assignment == (("orders", 0),)


def test_a_group_level_error_is_a_description_not_an_exception():
    response = CG(throttle_time_ms=0, groups=[
        cg_group("classic-app", error_code=69,
                 error_message="Group classic-app is not a consumer group.",
                 state="", group_epoch=0, assignment_epoch=0),
        cg_group("orders-app", [cg_member("m-1", 2, cg_assignment(orders=[0]),
                                          cg_assignment(orders=[0]))]),
    ])
    described = kp.parse_consumer_group_describe(on_the_wire(response, 1))
    classic = described["classic-app"]
    assert (classic.error_code, classic.error, classic.members) == (
        69, Errors.GroupIdNotFoundError, ())
    assert classic.error_message == "Group classic-app is not a consumer group."
    assert described["orders-app"].error_code == 0 and len(described["orders-app"].members) == 1


def test_a_share_group_describe_response_decodes_into_the_dataclasses():
    response = SG(throttle_time_ms=0, groups=[SGGroup(
        error_code=0, error_message=None, group_id="jobs", group_state="Stable", group_epoch=3,
        assignment_epoch=3, assignor_name="simple", authorized_operations=NO_OPERATIONS,
        members=[SGMember(member_id="s-1", rack_id="r1", member_epoch=3, client_id="worker",
                          client_host="/10.0.0.9", subscribed_topic_names=["orders"],
                          assignment=SGAssignment(topic_partitions=[SGTopic(
                              topic_id=ORDERS_ID, topic_name="orders", partitions=[3, 0])]))])])
    assert kp.parse_share_group_describe(on_the_wire(response, 1)) == {
        "jobs": kp.ShareGroupDescription(
            group_id="jobs", error_code=0, error_message=None, group_state="Stable",
            group_epoch=3, assignment_epoch=3, assignor_name="simple", members=(
                kp.ShareGroupMember(member_id="s-1", rack_id="r1", member_epoch=3,
                                    client_id="worker", client_host="/10.0.0.9",
                                    subscribed_topics=("orders",),
                                    assignment=(("orders", 0), ("orders", 3))),))}


def st_tasks(active=(), standby=(), warmup=()):
    """An Assignment from {subtopology: [partitions]} per kind."""
    def ids(kind):
        return [STAssignment.TaskIds(subtopology_id=sub, partitions=list(parts))
                for sub, parts in dict(kind).items()]
    return STAssignment(active_tasks=ids(active), standby_tasks=ids(standby),
                         warmup_tasks=ids(warmup))


def st_member(member_id, epoch, assignment, target, process="p-1"):
    return STMember(member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
                    client_id=f"app-{process}-StreamThread-1-consumer", client_host="/10.0.0.5",
                    topology_epoch=0, process_id=process, user_endpoint=None, client_tags=[],
                    task_offsets=[], task_end_offsets=[], assignment=assignment,
                    target_assignment=target, is_classic=False)


def st_group(group_id, members=(), state="Stable", subtopologies=None, epochs=(5, 5)):
    topology = None if subtopologies is None else STTopology(epoch=0, subtopologies=subtopologies)
    return STGroup(error_code=0, error_message=None, group_id=group_id, group_state=state,
                   group_epoch=epochs[0], assignment_epoch=epochs[1], topology=topology,
                   members=list(members), authorized_operations=NO_OPERATIONS)


def test_a_streams_group_describe_response_decodes_into_the_dataclasses():
    # What the 4.3 coordinator answers for a stateful app of two instances: subtopology 0 reads
    # "orders" (4 partitions) into a repartition topic, subtopology 1 reads that (4 partitions);
    # each member holds active tasks, and a standby of a task the other runs.
    repartition = STSub.TopicInfo(name="app-agg-repartition", partitions=4, replication_factor=0,
                               topic_configs=[])
    response = ST(throttle_time_ms=0, groups=[st_group("app", [
        st_member("m-1", 5, st_tasks({"0": [2, 0], "1": [0]}, {"1": [1]}),
                  st_tasks({"0": [0, 2], "1": [0]}, {"1": [1]})),
        st_member("m-2", 5, st_tasks({"0": [1, 3], "1": [1, 2, 3]}, warmup={"1": [0]}),
                  st_tasks({"0": [1, 3], "1": [1, 2, 3]}), process="p-2"),
    ], subtopologies=[
        STSub(subtopology_id="0", source_topics=["orders"], repartition_sink_topics=[
            "app-agg-repartition"], state_changelog_topics=[], repartition_source_topics=[]),
        STSub(subtopology_id="1", source_topics=["app-agg-repartition"],
              repartition_sink_topics=[], state_changelog_topics=[],
              repartition_source_topics=[repartition]),
    ])])
    group = kp.parse_streams_group_describe(on_the_wire(response, 0))["app"]
    assert (group.group_state, group.group_epoch, group.assignment_epoch, group.topology_epoch,
            group.assignor_name, group.error) == ("Stable", 5, 5, 0, "sticky", None)
    assert group.subtopologies == (
        kp.Subtopology("0", ("orders",), ()),
        kp.Subtopology("1", ("app-agg-repartition",), (("app-agg-repartition", 4),)))
    first, second = group.members
    assert first.assignment == kp.StreamsTasks(
        active=(("0", 0), ("0", 2), ("1", 0)), standby=(("1", 1),))
    assert first.target_assignment == first.assignment
    assert (first.process_id, first.member_epoch, first.client_host) == ("p-1", 5, "/10.0.0.5")
    assert second.assignment.warmup == (("1", 0),)
    assert second.target_assignment.warmup == ()


def test_a_streams_group_not_ready_has_no_topology():
    response = ST(throttle_time_ms=0, groups=[st_group("app", [
        st_member("m-1", 0, st_tasks(), st_tasks())], state="NotReady", epochs=(1, 0))])
    group = kp.parse_streams_group_describe(on_the_wire(response, 0))["app"]
    assert (group.group_state, group.topology_epoch, group.subtopologies) == (
        "NotReady", None, None)
    assert group.members[0].assignment == kp.StreamsTasks()


# -- against a scripted client ----------------------------------------------------------------

class ScriptedManager:
    """What _describe uses of KafkaAdminClient._manager, answering without IO: every await
    completes at once, so run() drives the coroutine to its end in one step."""

    def __init__(self, api_versions, answers):
        self.broker_version_data = BrokerVersionData(api_versions=api_versions)
        self.cluster = SimpleNamespace(_coordinators={})
        self.answers = answers        # node_id -> [response, ...] taken in order
        self.sent = []                # (node_id, request)

    def run(self, coro_fn):
        coro = coro_fn()
        try:
            coro.send(None)
        except StopIteration as done:
            return done.value
        raise AssertionError("the scripted client never suspends")

    async def wait_for(self, awaitable, timeout_ms):
        return await awaitable

    def call_soon(self, coro_fn):
        return coro_fn()

    async def send(self, request, node_id=None):
        self.sent.append((node_id, request))
        return self.answers[node_id].pop(0)


class ScriptedClient:
    def __init__(self, coordinators, answers, api_versions=None):
        self.coordinators = coordinators   # [{group: node_id}, ...]: one per lookup
        self._manager = ScriptedManager(api_versions or {69: (0, 1), 77: (1, 1)}, answers)

    async def _find_coordinator_ids(self, keys):
        found = self.coordinators.pop(0)
        for key in keys:
            self._manager.cluster._coordinators[(CoordinatorType.GROUP, key)] = found[key]
        return {key: found[key] for key in keys}


def answered(*groups, version=1):
    return on_the_wire(CG(throttle_time_ms=0, groups=list(groups)), version)


def test_one_request_per_coordinator():
    client = ScriptedClient([{"a": 1, "b": 2, "c": 1}], {
        1: [answered(cg_group("a"), cg_group("c"))], 2: [answered(cg_group("b"))]})
    described = kp.describe_consumer_groups(client, ["a", "b", "c", "a"], timeout_s=5)
    assert sorted(described) == ["a", "b", "c"]
    assert [(node, request.group_ids) for node, request in client._manager.sent] == [
        (1, ["a", "c"]), (2, ["b"])]


def test_a_group_whose_coordinator_moved_is_asked_again_of_the_new_one():
    not_coordinator = cg_group("b", error_code=Errors.NotCoordinatorError.errno,
                               state="", group_epoch=0, assignment_epoch=0)
    client = ScriptedClient([{"a": 1, "b": 1}, {"b": 2}], {
        1: [answered(cg_group("a"), not_coordinator)], 2: [answered(cg_group("b"))]})
    described = kp.describe_consumer_groups(client, ["a", "b"], timeout_s=5)
    assert described["a"].error_code == 0 and described["b"].error_code == 0
    assert [(node, request.group_ids) for node, request in client._manager.sent] == [
        (1, ["a", "b"]), (2, ["b"])]


def test_a_broker_without_the_api_raises_unsupported_group_api():
    client = ScriptedClient([], {}, api_versions={15: (0, 6), 16: (0, 5)})
    with pytest.raises(UnsupportedGroupApi, match="ConsumerGroupDescribe"):
        kp.describe_consumer_groups(client, ["a"], timeout_s=5)
    with pytest.raises(UnsupportedGroupApi, match="ShareGroupDescribe"):
        kp.describe_share_groups(client, ["a"], timeout_s=5)
    assert client._manager.sent == []


def test_no_groups_asks_nothing():
    client = ScriptedClient([], {})
    assert kp.describe_consumer_groups(client, [], timeout_s=5) == {}
    assert client._manager.sent == []
