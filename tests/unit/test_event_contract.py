"""The event contract is declared once (streaming/core/state/fields.py), and everything else is
held to it: the JSON Schema and the docs' tables are what the table gives, the producers'
builders write exactly its fields, the parser reads exactly its fields (each sample reaches the
parsed event; the parser's source names no other key), and the schema and the parser accept
and reject the same documents."""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib.util
import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producers import events as builders
from streaming.core.state.events import EVENT_CLASSES, Invalid, parse_event
from streaming.core.state.fields import BY_NAME, COMMON, EVENT_TYPES, FIELDS, names_for
from tests.unit.metric_contract import REPO
from tests.unit.step_strategies import scenario

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000
BASE = {
    "heartbeat": {"type": "heartbeat", "ts": TS, "group": "g", "client_id": "c1",
                  "topics": ["T"], "strategy": "AVG"},
    "unregister": {"type": "unregister", "ts": TS, "group": "g", "client_id": "c1"},
    "route": {"type": "route", "ts": TS, "group": "g", "topic": "T", "brokers": {"b": 1}},
    "alive": {"type": "alive", "ts": TS, "group": "g", "members": [["c1", "h:1"]]},
}
SCHEMA = json.loads((REPO / "streaming" / "core" / "state" / "event.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _sync():
    spec = importlib.util.spec_from_file_location(
        "sync_event_contract", REPO / "scripts" / "sync_event_contract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_schema_and_the_docs_tables_are_the_tables():
    assert _sync().main(["--check"]) == 0


def test_each_builder_writes_exactly_the_fields_of_its_type():
    assert builders.HEARTBEAT_FIELDS | {"v", "type", "ts", "group", "client_id", "topics",
                                        "strategy"} == names_for("heartbeat")
    assert builders.UNREGISTER_FIELDS | {"v", "type", "ts", "group",
                                         "client_id"} == names_for("unregister")
    assert builders.ROUTE_FIELDS | {"v", "type", "ts", "topic"} == names_for("route")
    assert builders.ALIVE_FIELDS | {"v", "type", "ts", "group", "members"} == names_for("alive")


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_each_event_type_holds_exactly_the_attributes_its_fields_fill(event_type):
    filled = {attr for f in FIELDS if event_type in f.types and f.read
              for attr in (f.attr, *f.more_attrs) if attr not in (None, "type")}
    assert filled == {f.name for f in dataclasses.fields(EVENT_CLASSES[event_type])}


def _with_field(event_type: str, name: str) -> tuple[dict, dict]:
    """The base event of the type with the field's companions, without and with the field (a
    field every event has: its companions only with it, e.g. kafka's strategy)."""
    field = BY_NAME[name]
    base = {**BASE[event_type], **field.extra}
    return (BASE[event_type] if name in COMMON else base), {**base, name: field.sample}


@pytest.mark.parametrize(("event_type", "name"), [
    (event_type, f.name) for f in FIELDS for event_type in EVENT_TYPES
    if event_type in f.types and f.read and f.attr is not None and f.name != "type"])
def test_every_field_the_parser_reads_reaches_the_parsed_event(event_type, name):
    base, given_field = _with_field(event_type, name)
    without, with_it = parse_event(base), parse_event(given_field)
    assert not isinstance(without, Invalid), without
    assert not isinstance(with_it, Invalid), with_it
    attr = BY_NAME[name].attr
    assert [getattr(e, attr) for e in with_it] != [getattr(e, attr) for e in without]


def _keys_the_parser_reads() -> set[str]:
    """Every literal key the parser's source reads of an event object: obj.get(K), obj[K],
    K in obj, and the helpers' _str(obj, K) and _list(obj, K). (A key held in a variable, as in
    a loop over a few names, is not seen here; the reach test above covers those fields.)"""
    tree = ast.parse((REPO / "streaming" / "core" / "state" / "events.py").read_text())
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _is_obj(node.args[0]) and isinstance(
                node.func, ast.Name) and node.func.id in ("_str", "_list"):
            key = node.args[1]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and _is_obj(node.func.value)):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and _is_obj(node.value):
            key = node.slice
        elif (isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn)
              and _is_obj(node.comparators[0])):
            key = node.left
        else:
            continue
        if isinstance(key, ast.Constant):
            keys.add(key.value)
    return keys


def _is_obj(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "obj"


def test_the_parser_reads_no_field_the_table_does_not_declare():
    literal = _keys_the_parser_reads()
    assert literal <= set(BY_NAME), literal - set(BY_NAME)
    # And the other way: every field the job reads is read (by name or through the table).
    assert {f.name for f in FIELDS if f.read} - literal <= {
        "member_epoch", "group_epoch", "assignment_epoch"}


# The schema and the parser on the same documents: each type's base with one declared field
# (valid to both), then with a required field dropped or a field of the wrong JSON type
# (invalid to both).
OTHER_TYPE = {"string": 5, "number": "five", "integer": "five", "boolean": "yes",
              "array": {"a": 1}, "object": ["a"]}


def _json_type(schema: dict) -> str | None:
    if "type" in schema:
        return schema["type"]
    if "$ref" in schema:
        return {"#/$defs/name": "string", "#/$defs/queues": "array"}.get(schema["$ref"])
    if "enum" in schema:
        return "string"
    return None


@st.composite
def documents(draw) -> tuple[dict, bool]:
    event_type = draw(st.sampled_from(EVENT_TYPES))
    name = draw(st.sampled_from(sorted(names_for(event_type) - COMMON)))
    _, document = _with_field(event_type, name)
    document = copy.deepcopy(document)
    change = draw(st.sampled_from(["none", "drop_required", "wrong_type"]))
    if change == "drop_required":
        required = [f for f in ("ts", "client_id", "topics", "strategy", "topic")
                    if f in document]
        document.pop(draw(st.sampled_from(required)))
        return document, False
    if change == "wrong_type" and (kind := _json_type(dict(BY_NAME[name].schema))):
        document[name] = OTHER_TYPE[kind]
        return document, False
    return document, True


@settings(max_examples=300, deadline=None)
@given(documents())
def test_the_schema_and_the_parser_accept_and_refuse_the_same_documents(case):
    document, valid = case
    by_schema = VALIDATOR.is_valid(document)
    by_parser = not isinstance(parse_event(document), Invalid)
    assert (by_schema, by_parser) == (valid, valid), document


# What the step's property tests never draw, and why: their scenarios are of one group, and
# `pop` is `shared`'s older name.
NOT_DRAWN = {"groups", "pop"}


def test_the_step_property_tests_draw_every_field_the_job_reads():
    """So that every field (POP readers, broker assignments, KIP-848 targets, ...) reaches the
    differential tests: a field added to the table fails here until the generators draw it."""
    seen: set[str] = set()

    @settings(max_examples=400, database=None, deadline=None)
    @given(scenario())
    def collect(case):
        for raw in case[0]:
            seen.update(raw)

    collect()
    read = {f.name for f in FIELDS if f.read and f.attr is not None}
    assert read - seen - NOT_DRAWN == set()


@pytest.mark.parametrize("system", ["rocketmq", "kafka"])
def test_every_fact_a_heartbeat_gives_its_member_survives_the_state_codec(system):
    """A field that reaches a member but not the blob would be lost at the next step: each
    heartbeat field's sample (with its companions) is set on a member, and the state read back
    from its blob holds the same member facts."""
    from streaming.core.state.codec import decode, encode
    from streaming.core.state.group import GroupState, apply_event
    from streaming.core.state.stored import Stored
    from streaming.core.times import LONG_AGO

    for f in FIELDS:
        if "heartbeat" not in f.types or f.name in COMMON or not f.read:
            continue
        if f.extra.get("system", "rocketmq") != system:
            continue
        _, document = _with_field("heartbeat", f.name)
        [event] = parse_event(document)
        state = GroupState("g", system, 120_000)
        apply_event(state, event)
        blob = encode(Stored(state, [], LONG_AGO, {}, LONG_AGO))
        [member] = decode(blob).settled.members.values()
        [original] = state.members.values()
        assert (member.inputs(), member.address) == (original.inputs(), original.address), f.name
