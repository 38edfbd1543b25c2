"""The event contract v1: normalisation of valid events, a stable reason for every invalid one."""

import json

import pytest

from streaming.core.state.codec import decode
from streaming.core.state.events import INVALID_REASONS, Heartbeat, Invalid, parse_event
from streaming.core.step import step
from tests.unit.state_helpers import T0, hb, parsed, route

pytestmark = pytest.mark.unit


def test_heartbeat_is_normalised():
    [event] = parse_event(json.dumps({
        "v": 1, "type": "heartbeat", "ts": "2023-11-14T22:13:20.000Z", "group": "g",
        "client_id": "10.0.0.1@123", "topics": ["B", "A", "A"], "strategy": "avg",
        "strategy_params": {"virtual_nodes": 3}, "address": "10.0.0.1:50000",
        "broker": "broker-a", "view": {"clients": ["c2", "c1"],
                                        "queues": {"A": [["b", 1], ["b", 0]]}},
        "owned": [["A", "b", 1], ["A", "b", 0]], "unknown_field": "ignored"}).encode())
    assert event == Heartbeat(
        ts=T0, group="g", system="rocketmq", client_id="10.0.0.1@123",
        topics=("A", "B"), strategy="AVG", strategy_params={"virtual_nodes": 3},
        address="10.0.0.1:50000", broker="broker-a", view_clients=("c1", "c2"),
        view_queues={"A": (("b", 0), ("b", 1))}, owned=(("A", "b", 0), ("A", "b", 1)))


def test_route_forms_and_fan_out():
    by_brokers = parse_event(route("T", brokers={"b": 2, "a": 1}))
    by_queues = parse_event(route("T", queues=[["b", 1], ["a", 0], ["b", 0]]))
    assert by_brokers == by_queues
    assert by_brokers[0].queues == (("a", 0), ("b", 0), ("b", 1))
    fanned = parse_event({"type": "route", "ts": T0, "groups": ["g1", "g2", "g1"], "topic": "T",
                          "queues": []})
    assert [(e.group, e.queues) for e in fanned] == [("g1", ()), ("g2", ())]
    [kafka] = parse_event({"type": "route", "ts": T0, "group": "g", "system": "kafka",
                           "topic": "T", "partitions": 3})
    assert kafka.queues == (("", 0), ("", 1), ("", 2))


def test_kafka_heartbeat_and_unregister():
    [event] = parse_event(hb("m1", ["T"], strategy="cooperative-sticky", system="kafka",
                             owned=[["T", 2], ["T", 0]], generation=4, group_instance_id="i1"))
    assert (event.owned, event.generation, event.group_instance_id) == (
        (("T", "", 0), ("T", "", 2)), 4, "i1")
    [leave] = parse_event({"type": "unregister", "ts": str(T0), "group": "g", "client_id": "c"})
    assert (leave.type, leave.ts, leave.client_id) == ("unregister", T0, "c")


@pytest.mark.parametrize("raw, reason", [
    (b"{not json", "not_json"),
    (b"\xff\xfe", "not_json"),
    (b"[1, 2]", "not_object"),
    (b'"text"', "not_object"),
    (b" " * (1024 * 1024 + 1), "oversized"),
    ({"ts": T0, "group": "g"}, "missing_field"),
    ({"type": "heartbeat", "group": "g", "client_id": "c", "topics": [], "strategy": "AVG"},
     "missing_field"),
    (hb("c", ["T"], strategy=None), "missing_field"),
    ({"type": "heartbeat", "ts": T0, "group": "g", "topics": [], "strategy": "AVG"},
     "missing_field"),
    (route("T"), "missing_field"),
    ({**hb("c", []), "topics": "T"}, "wrong_type"),
    (hb("c", ["T"], owned=[["T", "b", "1"]]), "wrong_type"),
    (hb("c", ["T"], view=[]), "wrong_type"),
    (hb("c", ["T"], ts=True), "wrong_type"),
    (hb("c", ["T"], group=7), "wrong_type"),
    ({"type": "rebalance", "ts": T0, "group": "g"}, "unknown_type"),
    (hb("c", ["T"], group=""), "missing_group"),
    ({"type": "heartbeat", "ts": T0, "client_id": "c", "topics": [], "strategy": "AVG"},
     "missing_group"),
    ({"type": "route", "ts": T0, "groups": [], "topic": "T", "queues": []}, "missing_group"),
    (hb("c", ["T"], ts=0), "bad_timestamp"),
    (hb("c", ["T"], ts=4_102_444_800_000), "bad_timestamp"),
    (hb("c", ["T"], ts="yesterday"), "bad_timestamp"),
    (hb("c", ["T"], strategy="RANDOM"), "unknown_strategy"),
    (hb("c", ["T"], strategy="range"), "unknown_strategy"),
    (hb("c", ["T"], v=2), "bad_version"),
    (hb("c", ["T"], v="1"), "bad_version"),
    (hb("c", ["T"], system="pulsar"), "unknown_system"),
    (hb("c", ["T"], group="g\u0000x"), "bad_value"),
    (route("T", queues=[["b", -1]]), "bad_value"),
    (hb("c", ["T"], message_model="FANOUT"), "bad_value"),
])
def test_invalid_events_are_rejected_with_a_stable_reason(raw, reason):
    result = parse_event(raw if isinstance(raw, bytes) else json.dumps(raw))
    assert isinstance(result, Invalid)
    assert result.reason == reason, result
    assert result.reason in INVALID_REASONS


LED = b'{"v":1,"type":"heartbeat","ts":1700000000000,"group":"g"'
BODY = b',"client_id":"c","topics":["T"],"strategy":"AVG"'


@pytest.mark.parametrize("raw", [
    LED + BODY + b',"group":"h"}', LED + BODY + b',"ts":1700000000001}',
    LED + BODY + b',"ts":"2023-11-14T22:13:21Z"}', LED + BODY + b',"gro\\u0075p":"h"}',
    LED + b',"cluster":"eu"' + BODY + b',"cluster":null}',
    LED + b',"system":"rocketmq","cluster":"eu"' + BODY + b',"system":"kafka","strategy":"range"}',
    LED + BODY + b',"clu\\u0073ter":"eu"}',
])
def test_a_member_contradicting_the_leading_ones_is_a_repeated_envelope(raw):
    """The job routes an event that starts with its leading members by them
    (streaming/spark/parse.py); a later member saying otherwise would have sent it elsewhere."""
    assert not isinstance(parse_event(LED + BODY + b"}"), Invalid)
    result = parse_event(raw)
    assert isinstance(result, Invalid) and result.reason == "repeated_envelope", result


@pytest.mark.parametrize("raw", [
    LED + BODY + b',"group":"g","ts":1700000000000}',                      # said again, alike
    LED + BODY + b',"ts":"2023-11-14T22:13:20Z","cluster":null}',          # the same time
    LED + BODY + b',"cluster":"eu"}',                  # written later, so not led: from_json
    LED + BODY + b',"system":"kafka","strategy":"range"}',
    LED + b',"system":"rocketmq","cluster":"eu"' + BODY + b',"cluster":"eu"}',
    b'{"v":1,"type":"heartbeat","ts":1700000000000' + BODY + b',"group":"g","group":"h"}',
    b'{"v":1, "type":"heartbeat", "ts":1700000000000, "group":"g"' + BODY + b',"group":"h"}',
])
def test_members_that_agree_or_an_event_without_leading_members_are_not_contradicted(raw):
    assert not isinstance(parse_event(raw), Invalid), parse_event(raw)


def test_a_route_led_by_its_group_cannot_name_groups():
    route = (b'{"v":1,"type":"route","ts":1700000000000,"group":"a","topic":"T",'
             b'"brokers":{"b":2}')
    assert not isinstance(parse_event(route + b"}"), Invalid)
    assert parse_event(route + b',"groups":["b"]}').reason == "repeated_envelope"


def test_parse_never_raises_on_odd_input():
    for raw in (None, 12, b"", b"null", b"{" * 100_000, {"type": ["heartbeat"]},
                {"type": "heartbeat", "ts": float("nan"), "group": "g"}):
        assert isinstance(parse_event(raw), Invalid)


def test_invalid_events_leave_state_untouched():
    good = parsed([route("T", brokers={"a": 4}), hb("c1", ["T"]), hb("c2", ["T"])])
    before = step(None, good)
    bad = [b"{", hb("c3", ["T"], strategy="NOPE"), hb("c3", ["T"], ts=1)]
    results = [parse_event(raw if isinstance(raw, bytes) else json.dumps(raw)) for raw in bad]
    assert all(isinstance(r, Invalid) for r in results)
    valid_only = [item for r in results if isinstance(r, list) for item in r]
    after = step(before.blob, valid_only)
    assert after.metrics == before.metrics
    assert decode(after.blob).open_findings == decode(before.blob).open_findings
    assert after.findings == []


def test_every_example_in_the_contract_doc_parses():
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[2] / "docs" / "events.md").read_text()
    examples = re.findall(r"```json\n(.*?)```", text, re.S)
    assert len(examples) == 7
    for example in examples:
        assert isinstance(parse_event(example), list), example


def test_every_invalid_reason_has_its_row_in_the_contract_doc():
    import pathlib

    text = (pathlib.Path(__file__).parents[2] / "docs" / "events.md").read_text()
    assert [reason for reason in INVALID_REASONS if f"| `{reason}` |" not in text] == []


def test_schema_file_is_shipped_beside_the_parser():
    import pathlib

    schema = json.loads((pathlib.Path(__file__).parents[2] / "streaming" / "core" / "state"
                         / "event.schema.json").read_text())
    assert schema["properties"]["type"]["enum"] == ["heartbeat", "unregister", "route", "alive"]
