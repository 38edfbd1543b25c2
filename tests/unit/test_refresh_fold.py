"""A group that steps with kept refreshes puts those that come before every new event onto its
view at once (streaming.core.step: `stepped`'s `refreshes`, `apply_restating`). The twin steps
them one by one among the batch's events (`advance(..., fold_refreshes=False)`): batch after
batch, the two give the same entry (blob, kept refreshes, timeout) and the same output."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core.advance import advance
from streaming.core.state.group import GroupState, apply_event, apply_restating
from streaming.core.state.refresh import kept_cap
from streaming.core.step import stepped
from tests.unit.state_helpers import T0, hb, parsed, route
from tests.unit.step_strategies import CONFIGS, steady_group

pytestmark = [pytest.mark.unit, pytest.mark.slow]

# Refreshes are kept only off the exact path (which the suite's second pass takes by default).
KEEPING = tuple(replace(config, exact=False) for config in CONFIGS)


def _both(batches, config, thin_kept=True):
    """Each batch through advance with the fold and without; the steps the fold took part in.
    `thin_kept` off: a group at its cap steps (the cap's own steps, which thinning avoids)."""
    folded = unfolded = None
    folds = 0
    for events, watermark in batches:
        had_kept = folded is not None and bool(folded.kept)
        one = advance(folded, events, watermark, config, thin_kept=thin_kept)
        two = advance(unfolded, events, watermark, config, fold_refreshes=False,
                      thin_kept=thin_kept)
        assert one.entry == two.entry
        assert one.output == two.output
        assert one.reset == two.reset
        folds += had_kept and one.output is not None
        folded, unfolded = one.entry, two.entry
    return folds


@pytest.mark.parametrize("config", KEEPING, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_folded_refreshes_step_as_they_do_one_by_one(config, data):
    reordered = data.draw(st.booleans())
    batches = data.draw(steady_group(reordered=reordered, instant_ms=config.instant_ms))
    _both(batches, config)


def _fleet(steps: int, gap_ms: int, cut_every: int, change_at: int | None = None):
    """Two clients and a route restating themselves every `gap_ms`, cut into batches of
    `cut_every` events; at `change_at` one client changes its topics."""
    raws, ts = [], T0
    for n in range(steps):
        ts += gap_ms
        topics = ["T2"] if change_at is not None and n >= change_at else ["T1"]
        raws += [hb("c1", ["T1"], ts, broker="b1"), hb("c2", topics, ts + 1),
                 route("T1", ts + 2, brokers={"b1": 4})]
    items = parsed(raws)
    return [(items[at:at + cut_every], items[at][0].ts - 1)
            for at in range(0, len(items), cut_every)]


@pytest.mark.parametrize("change_at", [None, 40, 150])
def test_a_group_that_reaches_its_cap_or_changes_steps_the_same_with_the_fold(change_at):
    """Many kept refreshes: the cap (between 192 and 256 for two clients) is reached, and a
    change steps a group that kept some; each such step folded them."""
    batches = _fleet(300, 200, 7, change_at)
    assert 192 <= kept_cap("g", 2) <= 256
    folds = _both(batches, KEEPING[0], thin_kept=False)
    assert folds >= 2


def test_restating_events_move_the_times_apply_event_moves_and_nothing_else():
    def joined():
        state = GroupState("g", "rocketmq", 1_000)
        for event, _ in parsed([hb("c1", ["T1"], T0, broker="b1"),
                                route("T1", T0, brokers={"b1": 4})]):
            apply_event(state, event)
        return state

    events = [event for event, _ in parsed([
        hb("c1", ["T1"], T0 + 5, broker="b1"), route("T1", T0 + 6, brokers={"b1": 4}),
        hb("c1", ["T1"], T0 + 9)])]
    one, two = joined(), joined()
    apply_restating(one, events)
    for event in events:
        assert not apply_event(two, event).any
    assert one == two
    member = one.members[("c1", "")]
    assert (one.clock, member.last_seen, member.brokers, one.routes["T1"][0]) == (
        T0 + 9, T0 + 9, {"b1": T0 + 5}, T0 + 6)


def test_refreshes_given_without_a_blob_are_stepped_as_events():
    items = parsed([hb("c1", ["T1"], T0), route("T1", T0, brokers={"b1": 4})])
    assert stepped(None, [], refreshes=items).output == stepped(None, items).output
