"""GroupState: membership, newer-fact-wins, re-run triggers, expiry order, and the codec."""

import pytest

from streaming.core.state.codec import CodecError, decode, encode, queues_in, queues_out
from streaming.core.state.events import parse_event
from streaming.core.state.group import GroupState, apply_event, expire_next, expire_until
from streaming.core.state.rerun import claims_of, rerun
from streaming.core.state.stored import Stored
from streaming.core.step import StepConfig, metrics_of, step
from tests.unit.state_helpers import T0, Run, hb, parsed, route

pytestmark = pytest.mark.unit


def _state(*raws) -> GroupState:
    state = GroupState("g", "rocketmq", 120_000)
    for raw in raws:
        for event in parse_event(raw):
            apply_event(state, event)
    return state


def _apply(state, raw):
    [event] = parse_event(raw)
    return apply_event(state, event)


def test_rerun_only_when_an_input_changes():
    state = _state(route("T", brokers={"a": 4}))
    assert _apply(state, hb("c1", ["T"])).alloc                        # join
    assert not _apply(state, hb("c1", ["T"], ts=T0 + 30_000)).alloc    # refresh only
    assert state.members[("c1", "")].last_seen == T0 + 30_000
    change = _apply(state, hb("c1", ["T"], ts=T0 + 31_000, strategy="AVG_BY_CIRCLE"))
    assert change.alloc and change.members == frozenset({("c1", "")})  # only its own share
    assert not _apply(state, route("T", ts=T0 + 32_000, brokers={"a": 4})).alloc
    assert _apply(state, route("T", ts=T0 + 33_000, brokers={"a": 5})).members is None


def test_an_older_event_never_undoes_a_newer_fact():
    state = _state(route("T", ts=T0 + 10, brokers={"a": 4}), hb("c1", ["T", "U"], ts=T0 + 10))
    _apply(state, hb("c1", ["T"], ts=T0 + 5))
    assert state.members[("c1", "")].topics == ("T", "U")
    assert state.members[("c1", "")].last_seen == T0 + 10
    _apply(state, route("T", ts=T0 + 5, brokers={"a": 1}))
    assert len(state.routes["T"][1]) == 4
    _apply(state, {"type": "unregister", "ts": T0 + 20, "group": "g", "client_id": "c1"})
    assert state.members == {}
    _apply(state, hb("c1", ["T"], ts=T0 + 15))                         # before it left
    assert state.members == {}


def test_expiry_in_deadline_order_members_and_broker_entries():
    state = _state(hb("c1", ["T"], broker="a"), hb("c1", ["T"], ts=T0 + 50, broker="b"),
                   hb("c2", ["T"], ts=T0 + 10))
    expired = expire_until(state, T0 + 120_051)
    assert [t for t, _ in expired] == [T0 + 120_001, T0 + 120_011, T0 + 120_051]
    assert [(c.alloc, c.brokers) for _, c in expired] == [(False, True), (True, True),
                                                          (True, True)]
    assert state.members == {}


def test_expire_next_takes_only_the_earliest_deadline():
    state = _state(hb("c1", ["T"]), hb("c2", ["T"], ts=T0 + 10))
    assert expire_next(state, T0 + 120_000) is None
    deadline, change = expire_next(state, T0 + 120_051)
    assert (deadline, change.alloc) == (T0 + 120_001, True)
    assert list(state.members) == [("c2", "")]           # c2's later deadline waits its turn
    assert expire_next(state, T0 + 120_051)[0] == T0 + 120_011
    assert expire_next(state, T0 + 120_051) is None and state.members == {}


def test_cid_all_counts_unsubscribed_clients_and_shared_ids_twice():
    state = _state(route("T", brokers={"a": 6}), hb("c1", ["T"]), hb("c2", []),
                   hb("c3", ["T"], address="x:1"), hb("c3", ["T"], address="y:1"))
    rerun(state)
    claims = claims_of(state)
    # cidAll = [c1, c2, c3, c3]: c2 takes a slot without reading T; both c3 compute slot 2.
    assert claims[("c1", "")] == {"T": (("a", 0), ("a", 1))}
    assert claims[("c2", "")] == {}
    assert claims[("c3", "x:1")] == claims[("c3", "y:1")] == {"T": (("a", 4),)}


def test_allocation_error_keeps_the_previous_share():
    state = _state(route("T", brokers={"a": 2}), hb("c1", ["T"]))
    rerun(state)
    _apply(state, route("T", ts=T0 + 1, queues=[]))     # Java throws "mqAll ... empty"
    rerun(state)
    assert claims_of(state)[("c1", "")] == {"T": (("a", 0), ("a", 1))}


def test_codec_round_trip_and_version():
    run = Run()
    run.batch([route("T", brokers={"a": 1000, "b": 3}), hb("c1", ["T"], broker="a",
               view={"queues": {"T": [["a", 1], ["a", 2]]}}, owned=[["T", "a", 1]]),
               hb("c2", ["T"], address="h:1"),
               {"type": "unregister", "ts": T0, "group": "g", "client_id": "c9"}])
    stored = decode(run.blob)
    again = decode(encode(stored))
    assert again.settled == stored.settled
    assert (again.pending, again.horizon, again.open_findings, again.now) == (
        stored.pending, stored.horizon, stored.open_findings, stored.now)
    assert run.blob[0] == 2
    assert len(run.blob) < 600
    with pytest.raises(CodecError, match="unknown state version 1"):
        decode(b"\x01" + run.blob[1:])       # layout 1: state keyed by group name only
    with pytest.raises(CodecError, match="corrupt"):
        decode(b"\x02garbage")


def test_the_blob_does_not_depend_on_the_order_a_rerun_reached_the_topics():
    """A member's re-run shares are keyed by topic in the order its re-runs reached them, which
    follows the order members entered the group's dict (decoded states list them sorted,
    replayed ones as they joined). Equal states must encode to the same bytes."""
    state = GroupState("g", "rocketmq", 120_000)
    for raw in [route("T1", brokers={"a": 2}), route("T2", brokers={"a": 2}),
                hb("c1", ["T1", "T2"]), hb("c2", ["T1", "T2"])]:
        apply_event(state, parse_event(raw)[0])
    rerun(state)
    reordered = decode(encode(Stored(state, [], 0, {}, T0))).settled
    reordered.computed = {key: dict(reversed(by_topic.items()))
                          for key, by_topic in state.computed.items()}
    assert [list(t) for t in reordered.computed.values()] == [["T2", "T1"]] * 2
    assert [list(t) for t in state.computed.values()] == [["T1", "T2"]] * 2
    assert (encode(Stored(reordered, [], 0, {}, T0))
            == encode(Stored(state, [], 0, {}, T0)))


def test_queue_runs_encoding():
    queues = (("a", 0), ("a", 1), ("a", 2), ("a", 5), ("a", 7), ("a", 8), ("b", 3))
    assert queues_out(queues) == {"a": [[0, 2], 5, [7, 8]], "b": [3]}
    assert queues_in(queues_out(queues)) == queues


def test_metrics_of_blob_equals_the_steps_snapshot():
    out = step(None, parsed([route("T", brokers={"a": 3}), hb("c1", ["T"]), hb("c2", ["T"]),
                             hb("c3", ["T"], ts=T0 + 5, strategy="AVG_BY_CIRCLE")]))
    assert metrics_of(out.blob) == out.metrics


def test_event_later_than_the_reorder_window_is_merged_newest_fact_wins():
    config = StepConfig(reorder_window_ms=1_000)
    first = step(None, parsed([route("T", brokers={"a": 2}), hb("c1", ["T"], ts=T0 + 5_000)]),
                 config=config)
    late = step(first.blob, parsed([hb("c1", ["T", "U"], ts=T0 + 1_000),
                                    hb("c2", ["T"], ts=T0 + 2_000)], 2), config=config)
    assert late.metrics.late_events_total == 2
    assert late.metrics.members == 2
    assert late.metrics.client_queues == {"c1": 1, "c2": 1}
    assert late.metrics.subscription_inconsistent == 0   # c1's older topics did not win
