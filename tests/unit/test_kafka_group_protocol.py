"""Kafka groups the broker assigns (KIP-848 consumer groups, KIP-932 share groups), and the
assignor of any group, through the core: the event fields, the findings (a hand-off in progress,
partitions in no member's target, the target's skew), the metrics and the state blob."""

from __future__ import annotations

import pytest

from streaming.core.state.codec import decode, encode
from streaming.core.state.events import GroupProtocol, Invalid, parse_event
from streaming.core.state.group import GroupState, apply_event
from streaming.core.state.stored import Stored
from tests.unit.state_helpers import Run, kinds

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000
TOPIC = "orders"


def kip848(member, owned, target=None, ts=T0, *, epoch=5, group_epoch=5, assignment_epoch=5,
           assignor="uniform", group_type="consumer", topics=(TOPIC,)):
    """A heartbeat as observe-kafka writes one for a member of a broker-assigned group."""
    return {"type": "heartbeat", "system": "kafka", "ts": ts, "group": "g", "client_id": member,
            "topics": list(topics), "strategy": assignor, "group_type": group_type,
            "owned": [[TOPIC, p] for p in owned],
            "target": [[TOPIC, p] for p in (owned if target is None else target)],
            "member_epoch": epoch, "group_epoch": group_epoch,
            "assignment_epoch": assignment_epoch}


def route(partitions, ts=T0):
    return {"type": "route", "system": "kafka", "ts": ts, "group": "g", "topic": TOPIC,
            "partitions": partitions}


def classic(member, owned, ts=T0, assignor="range"):
    return {"type": "heartbeat", "system": "kafka", "ts": ts, "group": "g", "client_id": member,
            "topics": [TOPIC], "strategy": assignor, "owned": [[TOPIC, p] for p in owned]}


def settled_group(ts=T0):
    return [route(6, ts), kip848("m1", [0, 1, 2], ts=ts), kip848("m2", [3, 4, 5], ts=ts)]


def test_a_settled_kip_848_group_has_no_finding_and_shows_its_type_epochs_and_assignor():
    run = Run()
    run.batch(settled_group())
    assert kinds(run) == {}
    metrics = run.metrics
    assert (metrics.group_type, metrics.assignor, metrics.group_epoch,
            metrics.assignment_epoch) == ("consumer", "uniform", 5, 5)
    assert (metrics.reconciling_members, metrics.handoff_since_ms, metrics.max_epoch_lag) == (
        0, None, 0)
    assert metrics.target_unassigned == {TOPIC: 0} and metrics.target_skew_ratio == 1.0
    assert metrics.allocation_mismatch_clients == 0      # no re-run: the broker assigns


def test_a_hand_off_in_progress_is_a_finding_from_its_start_until_the_member_reaches_its_target():
    run = Run()
    run.batch(settled_group())
    # m3 joins: the broker's new target gives it 2 and 5; m1 and m2 still hold them.
    moving = [kip848("m1", [0, 1, 2], [0, 1], ts=T0 + 1_000, epoch=5, group_epoch=6,
                     assignment_epoch=6),
              kip848("m2", [3, 4, 5], [3, 4], ts=T0 + 1_000, epoch=5, group_epoch=6,
                     assignment_epoch=6),
              kip848("m3", [], [2, 5], ts=T0 + 1_000, epoch=6, group_epoch=6,
                     assignment_epoch=6)]
    run.batch(moving)
    assert [c for _, _, c in kinds(run)["handoff_pending"]] == [("m1",), ("m2",), ("m3",)]
    started = {r.clients[0]: r for r in run.findings if r.kind == "handoff_pending"}
    assert started["m1"].detail == {"to_revoke": 1, "to_receive": 0, "epoch_lag": 1,
                                    "member_epoch": 5, "assignment_epoch": 6}
    assert started["m3"].detail["to_receive"] == 2 and started["m3"].since == T0 + 1_000
    assert (run.metrics.reconciling_members, run.metrics.max_epoch_lag,
            run.metrics.handoff_since_ms) == (3, 1, T0 + 1_000)
    assert "double_assignment" not in kinds(run)
    # m1 and m2 revoke; m3 gets both at epoch 6: the hand-off is over.
    run.batch([kip848("m1", [0, 1], ts=T0 + 2_000, epoch=6, group_epoch=6, assignment_epoch=6),
               kip848("m2", [3, 4], ts=T0 + 2_000, epoch=6, group_epoch=6, assignment_epoch=6),
               kip848("m3", [2, 5], ts=T0 + 2_000, epoch=6, group_epoch=6, assignment_epoch=6)])
    assert kinds(run) == {}
    ended = [r for r in run.findings if r.kind == "handoff_pending" and r.status == "ended"]
    assert {r.at for r in ended} == {T0 + 2_000}
    assert run.metrics.handoff_since_ms is None and run.metrics.reconciling_members == 0


def test_a_member_behind_the_target_epoch_is_in_a_hand_off_even_with_its_target_held():
    run = Run()
    run.batch([route(2), kip848("m1", [0, 1], epoch=3, group_epoch=4, assignment_epoch=4)])
    assert kinds(run) == {"handoff_pending": [(None, (), ("m1",))]}
    assert run.metrics.max_epoch_lag == 1


def test_partitions_in_no_members_target_and_a_skewed_target_are_findings():
    run = Run()
    run.batch([route(6), kip848("m1", [0, 1, 2, 3], [0, 1, 2, 3]), kip848("m2", [4], [4])])
    found = kinds(run)
    assert found["target_unassigned"] == [(TOPIC, ("", 5), ())]
    assert found["target_skew"] == [(None, (), ())]
    assert found["orphaned_queue"] == [(TOPIC, ("", 5), ())]
    assert run.metrics.target_unassigned == {TOPIC: 1}
    assert run.metrics.target_skew_ratio == pytest.approx(4 / 3)


def test_a_partition_in_two_members_current_assignments_is_a_double_assignment():
    run = Run()
    run.batch([route(2), kip848("m1", [0, 1], [0]), kip848("m2", [1], [1])])
    found = kinds(run)
    assert found["double_assignment"] == [(TOPIC, ("", 1), ("m1", "m2"))]
    assert found["handoff_pending"] == [(None, (), ("m1",))]


def test_a_share_groups_members_share_partitions_by_design_but_an_unread_partition_is_orphaned():
    run = Run()
    share = dict(group_type="share", assignor="simple", epoch=2, group_epoch=2,
                 assignment_epoch=2)
    run.batch([route(3), kip848("s1", [0, 1], **share), kip848("s2", [0, 1], **share)])
    found = kinds(run)
    assert "double_assignment" not in found and "skew" not in found
    assert found["orphaned_queue"] == [(TOPIC, ("", 2), ())]
    assert run.metrics.group_type == "share" and run.metrics.target_unassigned == {}
    assert run.metrics.share_readers == {TOPIC: 2}


def test_a_group_migrating_from_classic_to_consumer_raises_no_false_conflict():
    run = Run()
    run.batch([route(4), classic("m1", [0, 1]), classic("m2", [2, 3])])
    assert kinds(run) == {} and run.metrics.group_type == "classic"
    # The first KIP-848 member joins: the broker converts the group; m1 (still classic, as the
    # broker describes it in the consumer group) keeps its partitions and gets a target.
    run.batch([kip848("m1", [0, 1], ts=T0 + 1_000, assignor="uniform"),
               kip848("m2", [2, 3], ts=T0 + 1_000, assignor="uniform")])
    assert kinds(run) == {}
    assert run.metrics.group_type == "consumer"
    assert run.metrics.assignor_changes_total == 1       # range (the leader's) -> uniform


def test_the_assignor_change_of_a_classic_group_is_counted_once_when_most_members_switch():
    run = Run()
    members = ("m1", "m2", "m3")
    run.batch([route(3)] + [classic(m, [i]) for i, m in enumerate(members)])
    assert (run.metrics.assignor, run.metrics.assignor_changes_total) == ("range", 0)
    for n, member in enumerate(members, start=1):      # a rolling restart, one member a second
        run.batch([classic(member, [n - 1], ts=T0 + n * 1_000, assignor="roundrobin")])
    assert (run.metrics.assignor, run.metrics.assignor_changes_total) == ("roundrobin", 1)


@pytest.mark.parametrize("field, value, reason", [
    ("group_type", "connect", "bad_value"),
    ("member_epoch", -2, "bad_value"),
    ("assignment_epoch", "5", "wrong_type"),
    ("target", [["orders"]], "wrong_type"),
])
def test_a_bad_protocol_field_is_rejected_with_its_reason(field, value, reason):
    result = parse_event({**kip848("m1", [0]), field: value})
    assert isinstance(result, Invalid) and result.reason == reason, result


def test_a_classic_groups_strategy_is_still_one_of_the_client_assignors():
    assert parse_event(classic("m1", [0], assignor="uniform")).reason == "unknown_strategy"
    [event] = parse_event(kip848("m1", [0], assignor="my-assignor"))
    assert event.strategy == "my-assignor"
    assert event.protocol == GroupProtocol("consumer", ((TOPIC, "", 0),), 5, 5, 5)
    [plain] = parse_event(classic("m1", [0]))
    assert plain.protocol is None


def test_the_state_blob_keeps_a_members_protocol_and_reads_rows_written_without_one():
    state = GroupState("g", "kafka", 45_000)
    for raw in (route(2), kip848("m1", [0], [0, 1], epoch=4, group_epoch=5, assignment_epoch=5),
                classic("m2", [1])):
        [event] = parse_event(raw)
        apply_event(state, event)
    state.assignor, state.assignor_changes = "uniform", 2
    back = decode(encode(Stored(state, [], 0, {}, T0))).settled
    assert {k: m.protocol for k, m in back.members.items()} == {
        k: m.protocol for k, m in state.members.items()}
    assert (back.assignor, back.assignor_changes) == ("uniform", 2)
