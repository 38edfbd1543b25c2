"""Properties of the RocketMQ strategies over one consensus view (hypothesis).

The oracles for unassigned queues are literal transcriptions of the Java loops, independent of
the engine's vectorised slices.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.core.allocation import (
    AllocationError,
    allocate,
    allocate_group,
    allocate_group_topics,
    sort_client_ids,
    sort_queues,
)
from streaming.core.allocation.javaorder import utf16_code_units

pytestmark = pytest.mark.unit

# Characters whose Java (UTF-16) order differs from Python's code point order, plus plain ones.
ID_CHARS = "ab9@#.\u00e9\ud7ff\ue000\uff21\U00010000\U0001f600"
client_id = st.text(alphabet=ID_CHARS, min_size=1, max_size=4)
BROKERS = ("broker-a", "broker-b", "idc1@broker-c", "\uff21", "\U00010000")


@st.composite
def views(draw, min_clients=1):
    """(queues of one topic in random order, client ids with possible duplicates)."""
    slots = draw(st.sets(st.tuples(st.sampled_from(BROKERS), st.integers(0, 30)), max_size=40))
    queues = draw(st.permutations([("T", broker, qid) for broker, qid in slots]))
    distinct = draw(st.lists(client_id, min_size=min_clients, max_size=8, unique=True))
    extra = draw(st.lists(st.sampled_from(distinct), max_size=3))
    clients = draw(st.permutations(distinct + extra))
    return queues, clients


def _per_client(strategy, params, queues, clients, wanted):
    mq, cids = sort_queues(queues), sort_client_ids(clients)
    results, errors = {}, {}
    for cid in wanted:
        try:
            results[cid] = allocate(strategy, params, cid, mq, cids)
        except AllocationError as error:
            results[cid], errors[cid] = None, str(error)
    return results, errors


def _java_avg_slot(index, n, m):
    """AllocateMessageQueueAveragely for slot `index`, transcribed line by line."""
    mod = n % m
    if n <= m:
        average = 1
    elif mod > 0 and index < mod:
        average = n // m + 1
    else:
        average = n // m
    start = index * average if (mod > 0 and index < mod) else index * average + mod
    return [start + i for i in range(min(average, n - start))]


def _java_circle_slot(index, n, m):
    return [i for i in range(index, n) if i % m == index]


def _unassigned_by_upstream(slot_fn, n, cids_sorted):
    """Positions of the slots that duplicate an earlier id: nobody consumes their share."""
    lost = set()
    for index, cid in enumerate(cids_sorted):
        if cids_sorted.index(cid) != index:
            lost.update(slot_fn(index, n, len(cids_sorted)))
    return lost


@settings(max_examples=150, deadline=None)
@given(views(), st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"]))
def test_distinct_clients_give_each_queue_to_exactly_one_client(view, strategy):
    queues, clients = view
    clients = list(dict.fromkeys(clients))
    group = allocate_group(strategy, {}, queues, clients)
    if not queues:
        assert set(group.errors.values()) == {
            "java.lang.IllegalArgumentException: mqAll is null or mqAll empty"}
        return
    held = [q for share in group.results.values() for q in share]
    assert sorted(held) == sorted(queues)
    assert group.errors == {}


@settings(max_examples=150, deadline=None)
@given(views(), st.sampled_from(["AVG", "AVG_BY_CIRCLE"]))
def test_a_duplicated_id_leaves_exactly_its_other_slots_share_unassigned(view, strategy):
    queues, clients = view
    if not queues:
        return
    slot_fn = _java_avg_slot if strategy == "AVG" else _java_circle_slot
    mq, cids = sort_queues(queues), sort_client_ids(clients)
    group = allocate_group(strategy, {}, queues, clients)
    held = {q for share in group.results.values() for q in share}
    lost = _unassigned_by_upstream(slot_fn, len(mq), cids)
    assert {i for i, q in enumerate(mq) if q not in held} == lost
    held_list = [q for share in group.results.values() for q in share]
    assert len(held_list) == len(held)  # still no queue in two distinct ids' shares


@settings(max_examples=100, deadline=None)
@given(views(min_clients=1), st.integers(0, 12))
def test_consistent_hash_assigns_every_queue_even_with_duplicated_ids(view, virtual_nodes):
    queues, clients = view
    if not queues:
        return
    group = allocate_group("CONSISTENT_HASH", {"virtual_nodes": virtual_nodes}, queues, clients)
    held = sorted(q for share in group.results.values() for q in share)
    assert held == (sorted(queues) if virtual_nodes else [])


@settings(max_examples=150, deadline=None)
@given(views(), st.sampled_from(["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "MACHINE_ROOM",
                                 "MACHINE_ROOM_NEARBY"]), st.data())
def test_allocate_group_equals_per_client_allocate(view, strategy, data):
    queues, clients = view
    outsiders = data.draw(st.lists(st.sampled_from(["", "zz", "\U00010000x"]), max_size=2))
    wanted = list(dict.fromkeys(clients + outsiders))
    params = {
        "CONSISTENT_HASH": {"virtual_nodes": data.draw(st.integers(0, 5))},
        "MACHINE_ROOM": {"consumer_idcs": ["idc1", ""]},
        "MACHINE_ROOM_NEARBY": {
            "inner": data.draw(st.sampled_from(["AVG", "AVG_BY_CIRCLE"])),
            "broker_rooms": {b: data.draw(st.sampled_from(["hz", "sh", ""])) for b in BROKERS},
            "client_rooms": {c: data.draw(st.sampled_from(["hz", "sh", "gz"]))
                             for c in clients if data.draw(st.booleans()) or len(clients) < 9},
        },
    }.get(strategy, {})
    group = allocate_group(strategy, params, queues, clients, for_clients=wanted)
    assert (group.results, group.errors) == _per_client(strategy, params, queues, clients, wanted)


@settings(max_examples=60, deadline=None)
@given(st.lists(client_id, max_size=12))
def test_client_ids_sort_by_utf16_code_units(ids):
    assert [utf16_code_units(c) for c in sort_client_ids(ids)] == sorted(
        utf16_code_units(c) for c in ids)


def test_seed_ten_queues_three_clients_is_four_three_three():
    group = allocate_group("AVG", {}, [("T", "broker-a", i) for i in range(10)], ["c1", "c2", "c3"])
    assert [len(group.results[c]) for c in ("c1", "c2", "c3")] == [4, 3, 3]
    assert [q[2] for q in group.results["c1"]] == [0, 1, 2, 3]


def test_seed_four_clients_two_topics_of_two_queues_is_two_two_zero_zero():
    by_topic = {t: [(t, "broker-a", 0), (t, "broker-a", 1)] for t in ("A", "B")}
    groups = allocate_group_topics("AVG", {}, by_topic, ["c1", "c2", "c3", "c4"])
    loads = [sum(len(groups[t].results[c]) for t in by_topic) for c in ("c1", "c2", "c3", "c4")]
    assert loads == [2, 2, 0, 0]
