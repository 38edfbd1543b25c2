"""Upstream behaviour the public vectors do not pin down, and the Java String helpers."""

from __future__ import annotations

import pytest

from streaming.core.allocation import (
    InvalidAllocationInput,
    allocate,
    allocate_group,
    allocate_group_topics,
    sort_queues,
)
from streaming.core.allocation.consistent_hash import ConsistentHashRouter, md5_hash
from streaming.core.allocation.javaorder import (
    java_sorted,
    java_split,
    java_string_hash,
    java_utf8,
)

pytestmark = pytest.mark.unit

IAE = "java.lang.IllegalArgumentException: "
QUEUES = [("T", "broker-a", i) for i in range(4)]


def test_check_order_is_current_cid_then_mq_all_then_cid_all_then_membership():
    # AbstractAllocateMessageQueueStrategy.check tests currentCID first.
    empty = allocate_group("AVG", {}, [], ["c1"], for_clients=["", "c1", "x"])
    assert empty.errors == {"": IAE + "currentCID is empty",
                            "c1": IAE + "mqAll is null or mqAll empty",
                            "x": IAE + "mqAll is null or mqAll empty"}
    nobody = allocate_group("AVG_BY_CIRCLE", {}, QUEUES, [], for_clients=["c1", ""])
    assert nobody.errors == {"c1": IAE + "cidAll is null or cidAll empty",
                             "": IAE + "currentCID is empty"}
    assert nobody.results == {"c1": None, "": None}


def test_machine_room_nearby_outsiders_return_before_rooms_are_resolved():
    params = {"inner": "AVG", "broker_rooms": {}, "client_rooms": {}}
    group = allocate_group("MACHINE_ROOM_NEARBY", params, QUEUES, ["c1"],
                           for_clients=["c1", "outsider"])
    assert group.results == {"c1": None, "outsider": []}
    assert group.errors == {"c1": IAE + "Machine room is null for mq "
                                  "MessageQueue [topic=T, brokerName=broker-a, queueId=0]"}


def test_machine_room_nearby_shares_a_room_without_consumers_among_everyone():
    params = {"inner": "AVG", "broker_rooms": {"b-hz": "hz", "b-sh": "sh", "b-gz": "gz"},
              "client_rooms": {"c1": "hz", "c2": "sh"}}
    queues = [(t, b, 0) for t in ("T",) for b in ("b-hz", "b-sh", "b-gz")] + [("T", "b-gz", 1)]
    group = allocate_group("MACHINE_ROOM_NEARBY", params, queues, ["c2", "c1"])
    assert group.results == {"c1": [("T", "b-hz", 0), ("T", "b-gz", 0)],
                             "c2": [("T", "b-sh", 0), ("T", "b-gz", 1)]}


def test_config_returns_the_configured_list_without_any_check():
    mine = [("T", "broker-b", 7), ("U", "broker-a", 0)]
    group = allocate_group("CONFIG", {}, [], [], for_clients=["c1", "", "c2"],
                           client_params={"c1": {"queues": mine}, "": {"queues": mine[:1]}})
    assert group.results == {"c1": mine, "": mine[:1], "c2": []}
    assert group.errors == {}
    assert allocate("CONFIG", {"queues": [{"topic": "T", "broker": "b", "queue_id": 1}]},
                    "anyone", [], []) == [("T", "b", 1)]


def test_consistent_hash_constructor_errors_and_an_empty_ring():
    negative = allocate_group("CONSISTENT_HASH", {"virtual_nodes": -1}, QUEUES, ["c1"],
                              for_clients=["c1", ""])
    assert negative.errors == dict.fromkeys(["c1", ""], IAE + "illegal virtualNodeCnt :-1")
    empty_ring = allocate_group("CONSISTENT_HASH", {"virtual_nodes": 0}, QUEUES, ["c1", "c2"])
    assert empty_ring.results == {"c1": [], "c2": []}


def test_equal_ring_hashes_keep_the_later_virtual_node_as_a_treemap_put_does():
    # "n11593-0" and "n38145-0" share their first four MD5 bytes.
    assert md5_hash("n11593-0") == md5_hash("n38145-0") == 0x6FD56D8C
    ring = ConsistentHashRouter(["n11593", "n38145"], virtual_nodes=1)
    assert ring.route("anything") == "n38145"
    group = allocate_group("CONSISTENT_HASH", {"virtual_nodes": 1}, QUEUES, ["n38145", "n11593"])
    assert group.results == {"n11593": [], "n38145": QUEUES}
    # The replaced node lost its replica, so adding it again reuses replica number 0.
    ring.add_node("n11593", 1)
    assert ring.route("anything") == "n11593"


def test_consistent_hash_ring_is_reused_across_topics_with_identical_results():
    by_topic = {t: [(t, b, i) for b in ("a", "b") for i in range(6)] for t in ("T", "U", "V")}
    clients = ["c3", "c1", "c2", "c1"]
    groups = allocate_group_topics("CONSISTENT_HASH", {"virtual_nodes": 3}, by_topic, clients)
    for topic, queues in by_topic.items():
        assert groups[topic] == allocate_group("CONSISTENT_HASH", {"virtual_nodes": 3}, queues,
                                               clients)


def test_machine_room_uses_java_split():
    brokers = ["idc1@broker-x@", "idc1@@", "@broker-z", "@@", "idc1@a@b", "idc2@c", "plain"]
    queues = [("T", b, 0) for b in brokers]
    group = allocate_group("MACHINE_ROOM", {"consumer_idcs": ["idc1", ""]}, queues, ["c1"])
    assert group.results == {"c1": [("T", "@broker-z", 0), ("T", "idc1@broker-x@", 0)]}


def test_java_split_semantics():
    assert java_split("idc1@broker-x@", "@") == ["idc1", "broker-x"]
    assert java_split("idc1@@", "@") == ["idc1"]
    assert java_split("@broker-z", "@") == ["", "broker-z"]
    assert java_split("@@", "@") == []
    assert java_split("", "@") == [""]
    assert java_split("no-separator", "@") == ["no-separator"]


def test_java_string_helpers():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert java_string_hash("\U00010000") == 0xD800 * 31 + 0xDC00
    assert java_sorted(["\uff21", "\U00010000", "b", "\ue000"]) == [
        "b", "\U00010000", "\ue000", "\uff21"]
    assert java_utf8("a\ud800b") == b"a?b"
    assert java_utf8("\ud800\udc00") == "\U00010000".encode()


def test_queues_are_a_set_sorted_by_topic_broker_then_numeric_id():
    queues = [("T", "b", 10), ("T", "a", 2), ("S", "z", 0), ("T", "b", 9), ("T", "a", 2)]
    assert sort_queues(queues) == [("S", "z", 0), ("T", "a", 2), ("T", "b", 9), ("T", "b", 10)]


@pytest.mark.parametrize(("call", "reason"), [
    (lambda: allocate_group("NOPE", {}, QUEUES, ["c"]), "unknown strategy 'NOPE'"),
    (lambda: allocate_group("AVG", {}, [("T", "b", "1")], ["c"]), "32-bit int queue id"),
    (lambda: allocate_group("AVG", {}, [["T", "b", 1]], ["c"]), "tuple"),
    (lambda: allocate_group("AVG", {}, QUEUES, ["c", 7]), "client ids must be str"),
    (lambda: allocate_group("CONSISTENT_HASH", {"virtual_nodes": "9"}, QUEUES, ["c"]),
     "virtual_nodes"),
    (lambda: allocate_group("MACHINE_ROOM", {"consumer_idcs": "idc1"}, QUEUES, ["c"]),
     "consumer_idcs"),
    (lambda: allocate_group_topics("AVG", {}, {"U": QUEUES}, ["c"]), "another topic"),
])
def test_malformed_input_is_rejected_with_a_reason(call, reason):
    with pytest.raises(InvalidAllocationInput, match=reason):
        call()
