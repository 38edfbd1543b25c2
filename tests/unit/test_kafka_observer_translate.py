"""translate_group: a describe-groups result (kafka-python 3 dicts or 2.x tuples) -> events."""

from __future__ import annotations

from collections import namedtuple

import pytest

from producers.kafka.protocol import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    ShareGroupDescription,
    ShareGroupMember,
)
from producers.kafka.translate import (
    translate_consumer_group,
    translate_group,
    translate_share_group,
)
from streaming.core.state.events import Event, parse_event

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000


def member(mid, topics, assigned, host="/10.0.0.1", instance=None, generation=None):
    metadata = {"topics": topics, "user_data": None, "owned_partitions": []}
    if generation is not None:
        metadata["generation_id"] = generation
    return {"member_id": mid, "group_instance_id": instance, "client_id": "app",
            "client_host": host, "member_metadata": metadata,
            "member_assignment": {"assigned_partitions": [
                {"topic": t, "partitions": ps} for t, ps in assigned.items()], "user_data": None}}


def group(members, assignor="range", name="orders"):
    return {"group_id": name, "group_state": "Stable", "protocol_type": "consumer",
            "protocol_data": assignor, "members": members, "error": None}


def test_members_become_heartbeats_and_topics_routes():
    described = group([
        member("m-1", ["A", "B"], {"A": [0], "B": [0]}, instance="pod-1", generation=7),
        member("m-2", ["B", "A"], {"A": [1], "B": [1]}, host="/10.0.0.2"),
        member("m-3", ["A", "B"], {}, host="/10.0.0.3"),
    ])
    out = translate_group(described, {"A": 2, "B": 2, "C": 9}, TS)
    assert out.warnings == []
    assert out.members == ("m-1", "m-2", "m-3")
    assert out.events == [
        {"v": 1, "type": "heartbeat", "system": "kafka", "ts": TS, "group": "orders",
         "client_id": "m-1", "topics": ["A", "B"], "strategy": "range",
         "owned": [["A", 0], ["B", 0]], "address": "10.0.0.1", "group_instance_id": "pod-1",
         "generation": 7},
        {"v": 1, "type": "heartbeat", "system": "kafka", "ts": TS, "group": "orders",
         "client_id": "m-2", "topics": ["A", "B"], "strategy": "range",
         "owned": [["A", 1], ["B", 1]], "address": "10.0.0.2"},
        {"v": 1, "type": "heartbeat", "system": "kafka", "ts": TS, "group": "orders",
         "client_id": "m-3", "topics": ["A", "B"], "strategy": "range", "owned": [],
         "address": "10.0.0.3"},
        {"v": 1, "type": "route", "system": "kafka", "ts": TS, "group": "orders",
         "topic": "A", "partitions": 2},
        {"v": 1, "type": "route", "system": "kafka", "ts": TS, "group": "orders",
         "topic": "B", "partitions": 2},
    ]
    for event in out.events:
        parsed = parse_event(event)
        assert isinstance(parsed, list) and isinstance(parsed[0], Event), parsed


def test_members_gone_since_the_previous_poll_unregister():
    out = translate_group(group([member("m-2", ["A"], {"A": [0, 1]})]), {"A": 2}, TS,
                          previous_members=["m-1", "m-2"])
    assert [(e["type"], e.get("client_id")) for e in out.events] == [
        ("heartbeat", "m-2"), ("unregister", "m-1"), ("route", None)]


def test_members_mid_rebalance_are_kept_as_they_were_not_unregistered():
    rebalancing = group([{"member_id": "m-1", "client_host": "/10.0.0.1",
                          "member_metadata": b"", "member_assignment": b""}])
    out = translate_group(rebalancing, {"A": 2}, TS, committed_topics=["A"],
                          previous_members=["m-1", "m-2"])
    assert [(e["type"], e.get("topic")) for e in out.events] == [("route", "A")]
    assert out.members == ("m-1", "m-2") and out.warnings


def test_no_members_warns_naming_the_group_and_still_reports_partitions():
    out = translate_group(group([], assignor=""), {"A": 3, "B": 2}, TS,
                          committed_topics=["B", "A"])
    assert out.warnings == ["group orders: the broker's DescribeGroups returned no members; "
                            "reporting the group's topics and partition counts only"]
    assert [(e["type"], e["topic"], e["partitions"]) for e in out.events] == [
        ("route", "A", 3), ("route", "B", 2)]


def test_members_without_metadata_are_not_reported_as_heartbeats():
    # What the embedded broker answers: member ids, empty metadata and assignment.
    bare = {"member_id": "m-1", "group_instance_id": None, "client_id": "", "client_host": "",
            "member_metadata": "", "member_assignment": ""}
    out = translate_group(group([bare], assignor=""), {"A": 3}, TS, committed_topics=["A"])
    assert out.warnings == ["group orders: the broker's DescribeGroups returned members without "
                            "subscription or assignment; reporting the group's topics and "
                            "partition counts only"]
    assert out.members == ()
    assert [e["type"] for e in out.events] == ["route"]


def test_unknown_assignor_is_a_warning_not_an_invalid_event():
    out = translate_group(group([member("m-1", ["A"], {"A": [0]})], assignor="my-custom"),
                          {"A": 1}, TS)
    assert out.warnings == ["group orders: assignor 'my-custom' is not one of range, "
                            "roundrobin, sticky, cooperative-sticky; members not reported"]
    assert [e["type"] for e in out.events] == ["route"]


def test_unknown_topic_is_a_warning():
    out = translate_group(group([member("m-1", ["A", "Gone"], {"A": [0]})]), {"A": 1}, TS)
    assert out.warnings == ["group orders: topic Gone is not in the cluster metadata"]
    assert [e.get("topic") for e in out.events] == [None, "A"]


def test_kafka_python_2_namedtuples():
    Info = namedtuple("GroupInformation", "error_code group state protocol_type protocol "
                                          "members authorized_operations")
    Member = namedtuple("MemberInformation", "member_id client_id client_host member_metadata "
                                             "member_assignment")
    Meta = namedtuple("ConsumerProtocolMemberMetadata", "version subscription user_data")
    Assign = namedtuple("ConsumerProtocolMemberAssignment", "version assignment user_data")
    described = Info(0, "legacy", "Stable", "consumer", "roundrobin",
                     [Member("m-1", "app", "/10.0.0.9", Meta(0, ["A"], b""),
                             Assign(0, [("A", [2, 0])], b""))], None)
    out = translate_group(described, {"A": 3}, TS)
    assert out.events[0] == {"v": 1, "type": "heartbeat", "system": "kafka", "ts": TS,
                             "group": "legacy", "client_id": "m-1", "topics": ["A"],
                             "strategy": "roundrobin", "owned": [["A", 0], ["A", 2]],
                             "address": "10.0.0.9"}


def kip848_member(mid, assignment, target, epoch=7, instance=None, host="/10.0.0.2",
                  member_type="consumer"):
    return ConsumerGroupMember(mid, instance, None, "app", host, epoch, ("orders",),
                               tuple(("orders", p) for p in assignment),
                               tuple(("orders", p) for p in target), member_type)


def kip848_group(members, group_epoch=7, assignment_epoch=7):
    return ConsumerGroupDescription("orders", 0, None, "Reconciling", group_epoch,
                                    assignment_epoch, "uniform", tuple(members))


def test_a_kip_848_member_heartbeats_its_current_and_target_assignment_and_epochs():
    described = kip848_group([kip848_member("m1", [0, 1, 2], [0, 1], epoch=6, instance="pod-1"),
                              kip848_member("m2", [], [2], member_type="classic")])
    out = translate_consumer_group(described, {"orders": 3}, TS, previous_members=["gone"])
    events = [e for raw in out.events for e in parse_event(raw)]
    m1, m2, unregister, route = events
    assert (m1.client_id, m1.address, m1.strategy, m1.group_instance_id) == (
        "m1", "10.0.0.2", "uniform", "pod-1")
    assert m1.owned == (("orders", "", 0), ("orders", "", 1), ("orders", "", 2))
    assert m1.protocol.target == (("orders", "", 0), ("orders", "", 1))
    assert (m1.protocol.group_type, m1.protocol.member_epoch, m1.protocol.group_epoch,
            m1.protocol.assignment_epoch, m1.protocol.epoch_lag) == ("consumer", 6, 7, 7, 1)
    assert m2.owned == () and m2.protocol.target == (("orders", "", 2),)
    assert (unregister.type, unregister.client_id) == ("unregister", "gone")
    assert (route.topic, len(route.queues)) == ("orders", 3)
    assert out.members == ("m1", "m2") and out.warnings == []


def test_a_share_groups_members_heartbeat_what_they_are_assigned_with_no_target():
    described = ShareGroupDescription("jobs", 0, None, "Stable", 3, 3, "simple", (
        ShareGroupMember("s1", None, 3, "app", "/10.0.0.3", ("orders",),
                         (("orders", 0), ("orders", 1))),
        ShareGroupMember("s2", None, 3, "app", "/10.0.0.4", ("orders",),
                         (("orders", 0), ("orders", 1)))))
    out = translate_share_group(described, {"orders": 2}, TS)
    s1, s2, _route = [e for raw in out.events for e in parse_event(raw)]
    assert s1.protocol.group_type == "share" and s1.protocol.target is None
    assert s1.owned == s2.owned and s1.strategy == "simple"
