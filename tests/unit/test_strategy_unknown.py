"""A member whose strategy is a guess (`strategy_assumed`: it reports none, no operator named it,
its holdings tell none): the job re-runs it with the guess but raises nothing that rests on it,
and says the member's strategy is unknown. Each case is checked against the same events with
the strategy named, where the finding the guess would give is raised."""

from __future__ import annotations

import dataclasses

import pytest

from streaming.core.state.events import Heartbeat, Invalid, parse_event
from streaming.core.state.group import FACTS, Member
from tests.unit.state_helpers import Run, hb, kinds, route

pytestmark = pytest.mark.unit

TOPIC = "T"
MARKS = {"assumed": {"strategy_assumed": True}, "named": {"strategy_named": True}}


def owned(ids) -> list:
    return [[TOPIC, "broker-a", i] for i in ids]


def group(go: dict, java_1=(2,), java_2=(3,), go_strategy="GO_AVG") -> Run:
    """Java clients on AVG that report what they hold, and a Go client: go-1, java-1, java-2
    sort in that order, so AVG over 4 queues gives go-1 queues 0 and 1."""
    run = Run()
    run.batch([route(TOPIC, brokers={"broker-a": 4}),
               hb("java-1", [TOPIC], owned=owned(java_1)),
               hb("java-2", [TOPIC], owned=owned(java_2)),
               hb("go-1", [TOPIC], strategy=go_strategy, **go)])
    return run


def queues(run: Run, kind: str) -> list:
    return [queue for _, queue, _ in kinds(run).get(kind, [])]


def test_holdings_that_differ_from_a_guess_are_no_mismatch():
    named = group({"owned": owned([0]), **MARKS["named"]})
    assert kinds(named)["allocation_mismatch"] == [(None, (), ("go-1",))]

    guessed = group({"owned": owned([0]), **MARKS["assumed"]})
    assert "allocation_mismatch" not in kinds(guessed)
    assert kinds(guessed)["strategy_unknown"] == [(None, (), ("go-1",))]
    # What the holdings show is a fact, raised all the same: nobody holds queue 1.
    assert queues(guessed, "orphaned_queue") == [("broker-a", 1)]
    assert guessed.metrics.strategy_unknown_clients == 1
    assert named.metrics.strategy_unknown_clients == 0


def test_a_guessed_share_makes_no_double_and_its_topic_no_orphan():
    # java-1 reports queue 0 beside its own; nobody reports queue 3; go-1 reports nothing, so
    # its claim is the re-run's share (queues 0 and 1).
    named = group(MARKS["named"], java_1=(0, 2), java_2=())
    assert queues(named, "double_assignment") == [("broker-a", 0)]
    assert queues(named, "orphaned_queue") == [("broker-a", 3)]

    guessed = group(MARKS["assumed"], java_1=(0, 2), java_2=())
    assert "double_assignment" not in kinds(guessed)
    assert "orphaned_queue" not in kinds(guessed)
    assert kinds(guessed)["strategy_unknown"] == [(None, (), ("go-1",))]


def test_a_process_sharing_a_client_id_doubles_whatever_the_strategy():
    """Two processes of one client id take the same share under any strategy: the second
    process's claim (its holdings could not be asked) doubles the first's reported one."""
    run = Run()
    run.batch([route(TOPIC, brokers={"broker-a": 4}),
               hb("java-1", [TOPIC], owned=owned([2])),
               hb("go-1", [TOPIC], strategy="GO_AVG", address="h1:1", owned=owned([0]),
                  strategy_assumed=True),
               hb("go-1", [TOPIC], strategy="GO_AVG", address="h2:1", strategy_assumed=True)])
    assert ("broker-a", 0) in queues(run, "double_assignment")
    assert len(kinds(run)["strategy_unknown"]) == 2


def test_a_guessed_strategy_is_no_inconsistency():
    named = group({"owned": owned([0, 2]), **MARKS["named"]}, go_strategy="GO_AVG_BY_CIRCLE")
    assert kinds(named)["strategy_inconsistent"] == [(None, (), ("go-1",))]
    guessed = group({"owned": owned([0, 2]), **MARKS["assumed"]},
                    go_strategy="GO_AVG_BY_CIRCLE")
    assert "strategy_inconsistent" not in kinds(guessed)


@pytest.mark.parametrize("marks, basis", [
    ({}, "reported"), (MARKS["named"], "named"), ({"strategy_inferred": "AVG"}, "inferred"),
    ({**MARKS["assumed"], "strategy_candidates": ["AVG", "AVG_BY_CIRCLE"]}, "assumed")])
def test_the_member_says_how_its_strategy_is_known(marks, basis):
    run = group({"owned": owned([0, 1]), **marks})
    [go] = [m for m in run.out.detail.members if m.client_id == "go-1"]
    assert go.strategy_basis == basis
    unknown = [f for f in run.out.findings if f.kind == "strategy_unknown"]
    if basis == "assumed":
        assert [f.detail for f in unknown] == [
            {"assumed": "GO_AVG", "candidates": ["AVG", "AVG_BY_CIRCLE"]}]
    else:
        assert unknown == []


def test_a_guess_learned_later_is_a_change_of_the_member():
    """The same strategy, first assumed and then inferred: the member changed, and its
    strategy_unknown finding ends."""
    run = group({"owned": owned([0]), **MARKS["assumed"]})
    assert "strategy_unknown" in kinds(run)
    run.batch([hb("go-1", [TOPIC], ts=run.out.metrics.event_time_ms + 1_000, strategy="GO_AVG",
                  owned=owned([0]), strategy_inferred="AVG")])
    assert "strategy_unknown" not in kinds(run)
    assert "allocation_mismatch" in kinds(run)


@pytest.mark.parametrize("marks, reason", [
    ({"strategy_assumed": True, "strategy_inferred": "AVG"}, "bad_value"),
    ({"strategy_named": True, "strategy_assumed": True}, "bad_value"),
    ({"strategy_assumed": "yes"}, "wrong_type"),
    ({"strategy_inferred": 3}, "wrong_type"),
])
def test_marks_that_contradict_or_have_the_wrong_type_are_rejected(marks, reason):
    result = parse_event(hb("go-1", [TOPIC], **marks))
    assert isinstance(result, Invalid) and result.reason == reason, result


def test_candidates_are_read_only_beside_an_assumed_strategy():
    [event] = parse_event(hb("go-1", [TOPIC], strategy_candidates=["AVG"]))
    assert (event.strategy_basis, event.strategy_candidates) == ("reported", None)


def test_every_fact_of_a_heartbeat_is_a_fact_of_its_member():
    """FACTS is the one list a heartbeat is applied, compared and rebuilt from: it holds every
    field of both but a member's identity, times and brokers."""
    heartbeat = {f.name for f in dataclasses.fields(Heartbeat)} - {e for _, e in FACTS}
    member = {f.name for f in dataclasses.fields(Member)} - {m for m, _ in FACTS}
    assert heartbeat == {"ts", "group", "system", "client_id", "address", "broker"}
    assert member == {"client_id", "address", "last_seen", "joined", "brokers", "key"}


def test_a_member_idle_by_a_guessed_share_is_not_said_idle():
    # go-1's own view leaves it out of the client list, so its re-run gives it nothing.
    view = {"view": {"clients": ["java-1", "java-2"]}}
    named = group({**view, **MARKS["named"]}, java_1=(0, 1), java_2=(2, 3))
    assert kinds(named)["idle_client"] == [(None, (), ("go-1",))]
    guessed = group({**view, **MARKS["assumed"]}, java_1=(0, 1), java_2=(2, 3))
    assert "idle_client" not in kinds(guessed)
