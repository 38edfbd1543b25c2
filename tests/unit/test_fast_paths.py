"""Cases where a fast path of the step once differed from the full definition, each kept as a
test: the step's output with its shortcuts equals the one with `StepConfig(exact=True)`, and
the value the shortcut got wrong is asserted on its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streaming.core.state.events import parse_event
from streaming.core.step import StepConfig, step
from tests.unit.state_helpers import T0, hb, route

pytestmark = pytest.mark.unit

FAST, EXACT = StepConfig(exact=False), StepConfig(exact=True)


def _events(raw: list[dict], first_offset: int = 0) -> list:
    return [(parse_event(event)[0], first_offset + i) for i, event in enumerate(raw)]


def _both_ways(batches: list[list[dict]]) -> tuple[list, list]:
    """Each batch stepped in turn, with the shortcuts and exactly: the outputs of each way."""
    outputs = {}
    for config in (FAST, EXACT):
        blob, outs, offset = None, [], 0
        for batch in batches:
            out = step(blob, _events(batch, offset), config=config)
            blob, offset = out.blob, offset + len(batch)
            outs.append(out)
        outputs[config.exact] = outs
    return outputs[False], outputs[True]


POP = dict(shared=True, owned=[["T", "b", 0], ["T", "b", 1]])


def test_pop_readers_survive_a_batch_that_only_moves_broker_lists():
    """Two POP readers of every queue; then one batch of their heartbeats through another
    broker, which changes only the brokers' member lists. The second such change in a step
    took the broker-lists shortcut, which rebuilt the findings without `share_readers`."""
    fast, exact = _both_ways([
        [route("T", brokers={"b": 2}), hb("c1", ["T"], broker="a", **POP),
         hb("c2", ["T"], broker="a", **POP)],
        [hb("c1", ["T"], ts=T0 + 1_000, broker="x", **POP),
         hb("c2", ["T"], ts=T0 + 1_000, broker="x", **POP)],
    ])
    assert [out.metrics.share_readers for out in fast] == [{"T": 2}, {"T": 2}]
    assert fast[-1].metrics == exact[-1].metrics


def test_the_exact_way_publishes_what_the_shortcuts_publish():
    """A plain group stepped event by event: every output equal both ways but the detail, which
    the exact way sends at every step and the shortcuts only when it changed."""
    batches = [[route("T", brokers={"b": 4}), hb("c1", ["T"])],
               *([hb(c, ["T"], ts=T0 + i * 1_000)] for i, c in enumerate(["c2", "c1", "c2"], 1))]
    fast, exact = _both_ways(batches)
    for quick, full in zip(fast, exact, strict=True):
        assert replace(quick, detail=None, blob=None) == replace(full, detail=None, blob=None)
        assert full.detail is not None
        assert quick.detail in (None, full.detail)
