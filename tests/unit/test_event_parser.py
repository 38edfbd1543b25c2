"""EventParser: the remembering parser always answers what parse_event answers."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.core.state import events as events_module
from streaming.core.state.events import PARSER_CACHE_EVENTS, EventParser, parse_event, with_ts
from tests.unit.state_helpers import T0

pytestmark = pytest.mark.unit

HEARTBEAT = {"type": "heartbeat", "ts": T0, "group": "g", "client_id": "c@1", "topics": ["T"],
             "strategy": "AVG", "address": "10.0.0.1:1"}


def _with_ts_text(raw: bytes, old: int, new: str) -> bytes:
    return raw.replace(str(old).encode(), new.encode(), 1)


def test_a_repeated_heartbeat_is_parsed_once(monkeypatch):
    calls = []
    full = events_module.parse_event
    monkeypatch.setattr(events_module, "parse_event", lambda raw: calls.append(raw) or full(raw))
    parser = EventParser()
    raw = json.dumps(HEARTBEAT).encode()
    for k in range(50):
        moved = _with_ts_text(raw, T0, str(T0 + k))
        assert parser.parse(moved) == full(moved)
    assert len(calls) == 1 and len(parser) == 1


TRICKY_TEXTS = [
    # a nested "ts" and no top-level epoch ms: the nested number must not be taken for the ts
    '{"type":"route","ts":"2023-11-14T22:13:20Z","group":"g","topic":"T","brokers":{"ts":%s}}',
    # a key that ends in ts: the quote before ts is escaped
    '{"type":"route","ts":"2023-11-14T22:13:20Z","group":"g","topic":"T","a\\"ts":%s,"brokers":{"b":1}}',
    # two top-level ts (JSON keeps the last)
    '{"type":"unregister","ts":%s,"group":"g","client_id":"c","ts":1700000000000}',
    # the top-level ts written with an escape, and a nested "ts" of the same number: only the
    # nested one is found, and its digits equal the event's ts in the first text
    '{"type":"route","t\\u0073":1700000000000,"group":"g","topic":"T","brokers":{"b":1},'
    '"x":{"ts":%s}}',
    # ts after a nested value
    '{"type":"heartbeat","group":"g","client_id":"c","topics":["T"],"strategy":"AVG","ts":%s}',
    # spaces around the member
    '{ "type" : "unregister" , "ts" :  %s , "group" : "g" , "client_id" : "c" }',
]
TRICKY_TS = ("1700000000000", "1700000000001", "5", "01700000000000", "1700000000000.5",
             "-1700000000000", "99999999999999999999", "1700000000002", "1700000000000e0")


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_tricky_texts_equal_the_full_parse(text):
    parser = EventParser()
    for ts in TRICKY_TS:
        raw = (text % ts).encode()
        assert parser.parse(raw) == parse_event(raw), raw


@pytest.mark.parametrize("room", [PARSER_CACHE_EVENTS, 1], ids=["room", "full"])
@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_texts_of_one_stem_parse_to_the_same_events_but_their_time(text, room):
    _assert_stems_vouch(EventParser(room), [(text % ts).encode() for ts in TRICKY_TS])


def _assert_stems_vouch(parser: EventParser, texts: list[bytes]) -> None:
    """parse_stemmed answers what parse_event does, and a stem names one list of events."""
    first_of_stem: dict[bytes, list] = {}
    for text in texts:
        parsed, stem = parser.parse_stemmed(text)
        assert parsed == parse_event(text), text
        if stem is not None:
            assert isinstance(parsed, list), text
            first = first_of_stem.setdefault(stem, parsed)
            assert [with_ts(e, 0) for e in parsed] == [with_ts(e, 0) for e in first], text


KEYS = st.sampled_from(["type", "ts", "group", "groups", "client_id", "topics", "strategy",
                        "brokers", "topic", "view", "address", "v", "system", "a\"ts"])
SCALARS = st.one_of(
    st.sampled_from(["heartbeat", "route", "unregister", "g", "AVG", "T", "c@1", "rocketmq",
                     "2023-11-14T22:13:20Z"]),
    st.integers(min_value=-5, max_value=T0 + 10), st.just(T0), st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)), max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(body=st.dictionaries(KEYS, VALUES, max_size=8),
       separators=st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]),
       new_ts=st.sampled_from([T0, T0 + 1, 0, 1, -T0, 10**19]))
def test_any_object_and_its_ts_twins_parse_as_parse_event(body, separators, new_ts):
    parser = EventParser()
    raw = json.dumps(body, separators=separators).encode()
    twin = json.dumps({**body, "ts": new_ts} if "ts" in body else body,
                      separators=separators).encode()
    for text in (raw, twin, raw, twin):
        assert parser.parse(text) == parse_event(text), text
    _assert_stems_vouch(EventParser(), [raw, twin, raw, twin])


def _misses(monkeypatch, parser: EventParser, clients: list[str], rounds: int) -> list[int]:
    """The full parses of each round in which every client heartbeats once, in turn."""
    calls = []
    full = events_module.parse_event
    monkeypatch.setattr(events_module, "parse_event", lambda raw: calls.append(raw) or full(raw))
    per_round = []
    for k in range(rounds):
        before = len(calls)
        for client in clients:
            raw = json.dumps({**HEARTBEAT, "ts": T0 + k, "client_id": client}).encode()
            assert parser.parse(raw) == full(raw)
        per_round.append(len(calls) - before)
    return per_round


def test_a_fleet_larger_than_the_cache_still_hits_on_what_it_holds(monkeypatch):
    """A fleet's events come back in a cycle: 96 clients through a cache of 64. A cache that
    made room at each miss (emptied when full, or its oldest dropped) would miss all 96 every
    round."""
    parser = EventParser(max_entries=64)
    misses = _misses(monkeypatch, parser, [f"c{i}" for i in range(96)], rounds=12)
    assert misses[0] == 96
    assert max(misses[2:]) <= 96 - 48          # at least half the fleet hits, every round
    assert len(parser) <= 64


def test_a_full_cache_makes_way_for_a_fleet_that_changed(monkeypatch):
    parser = EventParser(max_entries=64)
    _misses(monkeypatch, parser, [f"old{i}" for i in range(64)], rounds=2)
    misses = _misses(monkeypatch, parser, [f"new{i}" for i in range(64)], rounds=20)
    assert misses[-1] == 0 and len(parser) == 64
