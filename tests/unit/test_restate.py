"""producers.restate: which heartbeats an observer sends in full, and which in an `alive`."""

import pytest

from producers.restate import Restatements

pytestmark = pytest.mark.unit


def beat(client: str, topics=("T",)) -> dict:
    return {"type": "heartbeat", "ts": 1, "group": "g", "client_id": client,
            "topics": list(topics), "strategy": "AVG", "address": f"{client}:1", "broker": "b"}


def poll(restate: Restatements, now: float, changed: str | None = None) -> list[tuple]:
    beats = [beat(c, ("T", "U") if c == changed else ("T",)) for c in ("c1", "c2", "c3")]
    return [(e["type"], e.get("client_id") or tuple(m[0] for m in e["members"]))
            for e in restate.due(beats, now, ts_ms=int(now * 1000))]


def test_one_alive_names_every_member_of_the_group_even_after_one_changed():
    """A member sent in full between two keep-alives is named in the next one with the others:
    one `alive` per group and broker, the same members each time."""
    restate = Restatements(keepalive_s=30, restate_s=600)
    assert [kind for kind, _ in poll(restate, 0)] == ["heartbeat"] * 3
    assert poll(restate, 20, changed="c1") == [("heartbeat", "c1")]
    assert poll(restate, 30, changed="c1") == [("alive", ("c1", "c2", "c3"))]
    assert poll(restate, 45, changed="c1") == []
    assert poll(restate, 60, changed="c1") == [("alive", ("c1", "c2", "c3"))]


def test_a_member_due_for_its_restate_goes_in_full_and_is_named_all_the_same():
    restate = Restatements(keepalive_s=30, restate_s=90)
    poll(restate, 0)
    poll(restate, 20, changed="c1")
    poll(restate, 30, changed="c1")
    poll(restate, 60, changed="c1")
    assert poll(restate, 90, changed="c1") == [("heartbeat", "c2"), ("heartbeat", "c3"),
                                               ("alive", ("c1", "c2", "c3"))]


def test_restating_every_keepalive_sends_no_alive():
    restate = Restatements(keepalive_s=30, restate_s=0)
    poll(restate, 0)
    assert poll(restate, 30) == [("heartbeat", "c1"), ("heartbeat", "c2"), ("heartbeat", "c3")]
    assert poll(restate, 40) == []


def test_a_member_that_left_and_came_back_is_sent_in_full():
    restate = Restatements(keepalive_s=30, restate_s=600)
    poll(restate, 0)
    restate.forget(lambda source: source[1] == "c2")
    assert poll(restate, 10) == [("heartbeat", "c2")]
