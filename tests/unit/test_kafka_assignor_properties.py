"""Properties of the Kafka assignors over generated groups (hypothesis).

- range, roundrobin, sticky: every subscribed partition that has metadata goes to exactly one
  member, and only to a member subscribed to its topic;
- range reproduces the multi-topic skew (the same members get the extra partition per topic);
- sticky and cooperative-sticky keep every owned partition when nothing changes;
- cooperative-sticky never hands a partition to a new owner while its old owner still owns it.
"""

from __future__ import annotations

import doctest
import importlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.core.allocation.kafka import KafkaAssignError, KafkaMember, assign

pytestmark = pytest.mark.unit

TOPICS = ["Z", "orders", "a-b", "payments", "t0", "\uff21", "\U00010000x", "gone"]
MEMBER_IDS = ["c-1", "c-2", "c-10", "C-3", "app-\uff21", "app-\U00010000", "z", "m"]
INSTANCE_IDS = ["i1", "i2", "I0", "i\uff21"]

Assignment = dict[str, list[tuple[str, int]]]


@st.composite
def groups(draw, max_members: int = 6) -> tuple[dict[str, int], list[KafkaMember]]:
    """Metadata (some topics absent or empty) and members with different subscriptions."""
    counts = {t: draw(st.integers(0, 6)) for t in TOPICS if draw(st.booleans())}
    ids = draw(st.lists(st.sampled_from(MEMBER_IDS), min_size=1, max_size=max_members,
                        unique=True))
    statics = draw(st.lists(st.sampled_from(INSTANCE_IDS), max_size=len(ids), unique=True))
    members = []
    for i, member_id in enumerate(ids):
        topics = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True))
        instance = statics[i] if i < len(statics) else None
        members.append(KafkaMember(member_id, instance, tuple(topics)))
    return counts, members


def _every_partition(counts: dict[str, int], members: list[KafkaMember]) -> set:
    subscribed = {t for m in members for t in m.topics}
    return {(t, p) for t, n in counts.items() if t in subscribed for p in range(n)}


def _check_each_partition_once(counts, members, got: Assignment) -> None:
    assert set(got) == {m.member_id for m in members}
    handed_out = Counter(tp for tps in got.values() for tp in tps)
    assert set(handed_out) == _every_partition(counts, members)
    assert set(handed_out.values()) <= {1}
    topics_of = {m.member_id: set(m.topics) for m in members}
    for member_id, tps in got.items():
        assert {t for t, _ in tps} <= topics_of[member_id]


def _with_owned(members: list[KafkaMember], got: Assignment, generation: int) -> list:
    return [
        KafkaMember(m.member_id, m.group_instance_id, m.topics, tuple(got[m.member_id]),
                    generation)
        for m in members
    ]


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky"])
@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_each_partition_goes_to_exactly_one_subscribed_member(assignor, group) -> None:
    counts, members = group
    _check_each_partition_once(counts, members, assign(assignor, counts, members))


@settings(max_examples=150, deadline=None)
@given(group=groups(), data=st.data())
def test_sticky_with_previous_claims_still_assigns_each_partition_once(group, data) -> None:
    """Claims on the member's own topics, even conflicting ones of mixed generations, never
    double-assign. (A stale claim on a topic the member has since dropped can make upstream
    hand that partition back to it, or throw a NullPointerException: see the test below.)"""
    counts, members = group
    claimed = []
    for m in members:
        own = sorted(_every_partition(counts, [m]))
        owned = data.draw(st.lists(st.sampled_from(own), unique=True)) if own else []
        generation = data.draw(st.sampled_from([-1, 1, 2, 3]))
        claimed.append(KafkaMember(m.member_id, m.group_instance_id, m.topics, tuple(owned),
                                   generation))
    _check_each_partition_once(counts, claimed, assign("sticky", counts, claimed))


def test_upstream_null_pointer_on_a_stale_claim_is_an_error_not_a_crash() -> None:
    """From the Java source (not a vector): prevAssignment names c-1, an older-generation
    claimant of gone-0 that no longer subscribes to it; c-1 holds nothing it could move, so
    upstream drops it from currentAssignment and then reads its size: NullPointerException."""
    members = [
        KafkaMember("c-1", None, ("Z",), (("gone", 0),), 1),
        KafkaMember("c-2", None, ("gone",), (), 2),
        KafkaMember("c-10", None, ("gone",)),
        KafkaMember("C-3", None, ("Z", "gone"), (("gone", 0), ("gone", 1), ("gone", 2)), 1),
    ]
    with pytest.raises(KafkaAssignError, match="NullPointerException"):
        assign("sticky", {"gone": 3}, members)


def test_range_multi_topic_skew_seed_examples() -> None:
    three = [KafkaMember(f"c{i}", None, ("t1", "t2")) for i in range(3)]
    got = assign("range", {"t1": 2, "t2": 2}, three)
    assert [len(got[f"c{i}"]) for i in range(3)] == [2, 2, 0]
    four = [KafkaMember(f"c{i}", None, ("t1", "t2")) for i in range(4)]
    got = assign("range", {"t1": 2, "t2": 2}, four)
    assert [len(got[f"c{i}"]) for i in range(4)] == [2, 2, 0, 0]


@settings(max_examples=100, deadline=None)
@given(
    n_members=st.integers(2, 7),
    n_topics=st.integers(1, 4),
    data=st.data(),
)
def test_range_gives_every_topic_extra_to_the_same_members(n_members, n_topics, data) -> None:
    per_topic = data.draw(st.integers(1, n_members - 1))
    topics = tuple(f"topic{i}" for i in range(n_topics))
    ids = data.draw(st.permutations([f"consumer-{i}" for i in range(n_members)]))
    members = [KafkaMember(member_id, None, topics) for member_id in ids]
    got = assign("range", dict.fromkeys(topics, per_topic), members)
    in_order = sorted(ids)  # ASCII ids: Java order is Python order here
    assert [len(got[c]) for c in in_order] == (
        [n_topics] * per_topic + [0] * (n_members - per_topic))


@pytest.mark.parametrize("assignor", ["sticky", "cooperative-sticky"])
@settings(max_examples=100, deadline=None)
@given(group=groups())
def test_sticky_keeps_everything_when_membership_is_unchanged(assignor, group) -> None:
    counts, members = group
    first = assign(assignor, counts, members)
    again = assign(assignor, counts, _with_owned(members, first, 1))
    assert {m: sorted(tps) for m, tps in again.items()} == {
        m: sorted(tps) for m, tps in first.items()
    }


def _no_handover_while_owned(members: list[KafkaMember], got: Assignment) -> None:
    owner = {tp: m.member_id for m in members for tp in m.owned}
    for member_id, tps in got.items():
        for tp in tps:
            assert owner.get(tp, member_id) == member_id, (tp, owner.get(tp), member_id)


@settings(max_examples=150, deadline=None)
@given(before=groups(), after=groups(), grow=st.integers(0, 3))
def test_cooperative_never_hands_over_a_partition_still_owned(before, after, grow) -> None:
    """Rebalance 1 from scratch; then members join, leave, change topics and partitions grow;
    then a follow-up. No step gives a partition to a member while another member owns it."""
    counts, members = before
    first = assign("cooperative-sticky", counts, members)
    grown = {t: n + grow for t, n in counts.items()}
    previous = {m.member_id: m for m in _with_owned(members, first, 1)}
    changed = [
        KafkaMember(m.member_id, m.group_instance_id, m.topics,
                    previous[m.member_id].owned if m.member_id in previous else (),
                    1 if m.member_id in previous else -1)
        for m in after[1]
    ]
    second = assign("cooperative-sticky", grown, changed)
    _no_handover_while_owned(changed, second)
    followup_members = _with_owned(changed, second, 2)
    followup = assign("cooperative-sticky", grown, followup_members)
    _no_handover_while_owned(followup_members, followup)
    handed_out = Counter(tp for tps in followup.values() for tp in tps)
    assert set(handed_out.values()) <= {1}


def test_cooperative_join_leaves_moving_partitions_unassigned() -> None:
    a = KafkaMember("a", None, ("t",), tuple(("t", i) for i in range(4)), 1)
    b = KafkaMember("b", None, ("t",))
    assert assign("cooperative-sticky", {"t": 4}, [a, b]) == {"a": [("t", 0), ("t", 1)], "b": []}
    a_after = KafkaMember("a", None, ("t",), (("t", 0), ("t", 1)), 2)
    b_after = KafkaMember("b", None, ("t",), (), 2)
    assert assign("cooperative-sticky", {"t": 4}, [a_after, b_after]) == {
        "a": [("t", 0), ("t", 1)], "b": [("t", 2), ("t", 3)]}


@pytest.mark.parametrize(
    ("assignor", "counts", "members", "reason"),
    [
        ("fair", {"t": 1}, [KafkaMember("a", None, ("t",))], "unknown assignor"),
        ("range", {"t": "3"}, [KafkaMember("a", None, ("t",))], "bad partition count"),
        ("sticky", {"t": 1}, [KafkaMember("a", None, ("t",), (("t", "0"),))], "bad owned"),
        ("range", {"t": 1}, [("a", None, ("t",))], "not a KafkaMember"),
        ("range", {"t": 1}, [KafkaMember("a", None, "t")], "topics must be strings"),
        ("sticky", {"t": 1}, [KafkaMember("a", None, ("t",), (), None)], "bad generation"),
        ("range", {"t": 1}, [KafkaMember("a", 7, ("t",))], "bad group_instance_id"),
    ],
)
def test_bad_input_is_rejected_with_a_reason(assignor, counts, members, reason) -> None:
    with pytest.raises(KafkaAssignError, match=reason):
        assign(assignor, counts, members)


def test_empty_group_and_missing_topics_give_empty_lists() -> None:
    assert assign("sticky", {"t": 3}, []) == {}
    members = [KafkaMember("a", None, ("missing",)), KafkaMember("b", "i", ("t",))]
    for assignor in ("range", "roundrobin", "sticky", "cooperative-sticky"):
        assert assign(assignor, {"t": 2, "u": 5}, members) == {
            "a": [], "b": [("t", 0), ("t", 1)]}


@pytest.mark.parametrize(
    "module",
    ["", ".model", ".java_collections", ".range", ".roundrobin", ".sticky", ".cooperative",
     ".sticky_constrained", ".sticky_general", ".partition_movements"],
)
def test_docstring_worked_examples_hold(module: str) -> None:
    mod = importlib.import_module("streaming.core.allocation.kafka" + module)
    result = doctest.testmod(mod)
    assert result.attempted > 0
    assert result.failed == 0
