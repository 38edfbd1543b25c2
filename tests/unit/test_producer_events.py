"""producers/events.py builds every event a producer writes: the contract's fields in one place,
`v`, `type` and `ts` first, None left out, a misspelled field refused; and no producer builds an
event dict by hand."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from producers import events
from streaming.core.state.events import Invalid, parse_event

pytestmark = pytest.mark.unit

PRODUCERS = Path(__file__).resolve().parents[2] / "producers"
TS = 1_700_000_000_000


def test_each_builder_writes_what_the_job_parses():
    beat = events.heartbeat(TS, "g", "c1", ["T"], "AVG", address="h:1", owned=None,
                            broker_assignments={"broker-a": {"T": [["broker-a", 0]]}})
    assert list(beat)[:3] == ["v", "type", "ts"] and "owned" not in beat
    parsed = [parse_event(e) for e in (
        beat, events.unregister(TS, "g", "c1", address="h:1"),
        events.route(TS, "T", groups=["g", "h"], brokers={"broker-a": 2}),
        events.route(TS, "P", system="kafka", group="g", partitions=3))]
    assert not [p for p in parsed if isinstance(p, Invalid)], parsed


@pytest.mark.parametrize("build", [
    lambda: events.heartbeat(TS, "g", "c1", [], "AVG", ownd=[]),
    lambda: events.unregister(TS, "g", "c1", broker="b"),
    lambda: events.route(TS, "T", partition=3)])
def test_a_field_the_contract_does_not_name_is_refused_where_it_is_built(build):
    with pytest.raises(TypeError, match="docs/events.md"):
        build()


def test_no_producer_builds_an_event_by_hand():
    """No dict literal with a "type" of an event type outside events.py (the simulator's byte
    templates are encoded from the builders' output)."""
    kinds = {"heartbeat", "route", "unregister"}
    found = []
    for path in sorted(PRODUCERS.rglob("*.py")):
        if path.name == "events.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == "type"
                    and isinstance(v, ast.Constant) and v.value in kinds
                    for k, v in zip(node.keys, node.values, strict=True)):
                found.append(f"{path.relative_to(PRODUCERS)}:{node.lineno}")
    assert found == []


def test_no_module_that_uses_the_builders_hides_them_behind_a_local_name():
    """`events = ...` in a module that imports the builders as `events` makes its
    `events.heartbeat(...)` fail at run time (a CI run met one in observe-rocketmq)."""
    hidden = []
    for path in sorted(PRODUCERS.rglob("*.py")):
        tree = ast.parse(path.read_text())
        uses = any(isinstance(node, ast.ImportFrom) and node.module == "producers"
                   and any(alias.name == "events" and alias.asname is None
                           for alias in node.names) for node in ast.walk(tree))
        scopes = [tree, *(n for n in ast.walk(tree)
                          if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
        hidden += [f"{path.relative_to(PRODUCERS)}:{node.lineno}"
                   for scope in scopes if uses for node in _own_nodes(scope)
                   if isinstance(node, ast.Name) and node.id == "events"
                   and isinstance(node.ctx, ast.Store)]
    assert hidden == []


def _own_nodes(scope: ast.AST):
    """The nodes of a module's or function's own scope: not inside a class body (a class's
    `events` field hides nothing from the functions)."""
    for child in ast.iter_child_nodes(scope):
        if isinstance(child, ast.ClassDef):
            continue
        yield child
        yield from _own_nodes(child)
