"""A group at its cap of kept refreshes thins them before it steps (Refreshes.thinned), and
that changes when it steps, never what it publishes: against its twin that steps at the cap
(`advance(..., thin_kept=False)`) and against a step every batch.

- In event-time order, the records published equal those of a step every batch, and the final
  findings and metrics are the same; reordered within the window, the final findings and
  metrics are the same (as for keeping refreshes at all: tests/unit/test_refresh_deferral.py).
- A record that goes never lets a session expire where it did not: an event that comes
  between the kept refreshes, later, finds the members the twin finds.
- Only records further behind the newest than an event can still come in place go: a late
  change of a member meets the refresh after it that a step every batch meets.
- A steady group thins instead of stepping; one whose heartbeats the sessions need every one
  of steps at its cap as before.

The properties run with a cap of a few refreshes (MAX_KEPT patched), so that a beating
group's scenarios thin often (about two in three do); steady_group's mixed ones reach the cap
but seldom thin (their records lie within reach of the newest), and check that stepping at it
is unchanged."""

from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core.advance import advance
from streaming.core.state import refresh
from streaming.core.state.refresh import MAX_KEPT, kept_cap
from streaming.core.step import StepConfig
from tests.unit.keeping import every_batch, final, keeping, record_texts
from tests.unit.state_helpers import T0, hb, parsed, route
from tests.unit.step_strategies import CONFIGS, steady_group

pytestmark = [pytest.mark.unit, pytest.mark.slow]

SMALL_MAX_KEPT = 8
# Refreshes are kept only off the exact path (which the suite's second pass takes by default).
KEEPINGS = tuple(replace(config, exact=False) for config in CONFIGS)
# A window a tenth of the sessions, near the defaults' share (10 s of 120 s): records more than
# 201 ms behind the newest may go, so a group heartbeating every few hundred ms thins often.
KEEPING = replace(KEEPINGS[0], reorder_window_ms=100)


@st.composite
def beating_group(draw, reordered: bool):
    """Three clients and a route at T0, then mostly their restating heartbeats (sessions of
    1,000 ms, a heartbeat each 50 to 700 ms), among them changes: a client joins, heartbeats
    new facts, unregisters, or the route changes. Reordered: an event may be up to 90 ms
    (within KEEPING's window) older than the one before. Cut into batches of a few events,
    each with a watermark at most its next batch's oldest event (or none)."""
    raws = [route("T1", T0, brokers={"b1": 4}), *(hb(c, ["T1"], T0) for c in ("c1", "c2", "c3"))]
    nominal = T0
    for _ in range(draw(st.integers(10, 120))):
        nominal += draw(st.sampled_from([5, 10, 30, 60, 300]))
        ts = nominal - (draw(st.sampled_from([0] * 8 + [40, 90])) if reordered else 0)
        client = draw(st.sampled_from(["c1", "c2", "c3", "c4"]))
        kind = draw(st.integers(0, 39))        # the simplest example restates
        if kind < 37:
            raws.append(hb(client if client != "c4" else "c1", ["T1"], ts))
        elif kind == 37:
            raws.append({"type": "unregister", "ts": ts, "group": "g", "client_id": client})
        elif kind == 38:
            raws.append(hb(client, ["T1", "T2"], ts))
        else:
            raws.append(route("T1", ts, brokers={"b1": draw(st.sampled_from([4, 6]))}))
    items = parsed(raws)
    bounds = [0, 4]                    # the joins, then batches of a few events
    while bounds[-1] < len(items):
        bounds.append(min(len(items), bounds[-1] + draw(st.sampled_from([1, 1, 2, 3, 6]))))
    batches = []
    for start, end in pairwise(bounds):
        later = [event.ts for event, _ in items[end:]]
        behind = draw(st.sampled_from([None, 1, 200, 900]))
        batches.append((items[start:end], None if behind is None or not later
                        else min(later) - behind))
    return batches


def _thinned_as_unthinned(batches, config, in_order: bool) -> None:
    """Thinned at a small cap, against its unthinned twin and a step every batch: the same end,
    and in order the same records."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(refresh, "MAX_KEPT", SMALL_MAX_KEPT)
        thinned = keeping(batches, config, thin_kept=True)
        twin = keeping(batches, config, thin_kept=False)
    reference = every_batch(batches, config)
    assert final(twin.out) == final(reference.out)
    assert final(thinned.out) == final(reference.out)
    if in_order:
        assert (record_texts(thinned.records) == record_texts(twin.records)
                == record_texts(reference.records))


@pytest.mark.parametrize("config", KEEPINGS, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_in_order_thinning_publishes_what_a_step_every_batch_does(config, data):
    batches = data.draw(steady_group(reordered=False, instant_ms=config.instant_ms))
    _thinned_as_unthinned(batches, config, in_order=True)


@pytest.mark.parametrize("config", KEEPINGS, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=steady_group())
def test_reordered_thinning_ends_with_the_same_findings_and_metrics(config, batches):
    _thinned_as_unthinned(batches, config, in_order=False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=beating_group(reordered=False))
def test_a_beating_group_thins_in_order_and_publishes_what_a_step_every_batch_does(batches):
    _thinned_as_unthinned(batches, KEEPING, in_order=True)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=beating_group(reordered=True))
def test_a_beating_group_reordered_thins_and_ends_as_a_step_every_batch_does(batches):
    _thinned_as_unthinned(batches, KEEPING, in_order=False)


def _kept_beats_then_a_join_between_them():
    """c1 and c2 join at T0 and then heartbeat every 200 ms up to T0 + 1,800 (sessions of
    1,000 ms), one batch each, all kept; c3 joins at T0 + 1,750 in a batch after them all."""
    joins = [route("T1", T0, brokers={"b1": 4}), hb("c1", ["T1"], T0), hb("c2", ["T1"], T0)]
    beats = [hb(client, ["T1"], T0 + 200 * n) for n in range(1, 10) for client in ("c1", "c2")]
    items = parsed([*joins, *beats, hb("c3", ["T1"], T0 + 1_750)])
    batches = [(items[:3], None)] + [([item], None) for item in items[3:]]
    return batches


def test_a_thinned_record_lets_no_session_expire_before_an_event_that_comes_between():
    """Keeping only each source's refreshes within reach of the newest (T0 + 1,600 and 1,800)
    would expire c1 and c2 at T0 + 1,001 when c3's join at T0 + 1,750 is stepped among them,
    and the group would rebalance twice for nothing; the records that stay renew them in
    time."""
    batches = _kept_beats_then_a_join_between_them()
    _thinned_as_unthinned(batches, KEEPING, in_order=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(refresh, "MAX_KEPT", SMALL_MAX_KEPT)
        thinned = keeping(batches, KEEPING, thin_kept=True)
        twin = keeping(batches, KEEPING, thin_kept=False)
    assert thinned.thinned > 0
    assert record_texts(thinned.records) == record_texts(twin.records)
    assert thinned.out.metrics.members == 3


def _double_claims_then_a_late_release(late_ms: int):
    """c1 and c2 both claim queue 0 from T0 (a double assignment) and restate it every 20 ms up
    to T0 + 800, one batch each; then c1, `late_ms` behind, says it holds queue 1 only."""
    c1, c2 = ({"broker": "b1", "owned": [["T1", "b1", q] for q in held]}
              for held in ((0, 1), (0, 2, 3)))
    joins = [route("T1", T0, brokers={"b1": 4}), hb("c1", ["T1"], T0, **c1),
             hb("c2", ["T1"], T0, **c2)]
    beats = [hb(client, ["T1"], T0 + 20 * n, **facts)
             for n in range(1, 41) for client, facts in (("c1", c1), ("c2", c2))]
    release = hb("c1", ["T1"], T0 + 800 - late_ms, broker="b1", owned=[["T1", "b1", 1]])
    items = parsed([*joins, *beats, release])
    return [(items[:3], None)] + [([item], None) for item in items[3:]]


@pytest.mark.parametrize(("late_ms", "restarted"), [(5, 800), (45, 760), (95, 720)])
def test_a_late_change_meets_the_refresh_after_it_that_a_step_every_batch_meets(late_ms,
                                                                                 restarted):
    """c1's release ends the double assignment, and its next restating heartbeat starts it
    again: there, not at a later one that stayed. (Thinning c1's refreshes to those its session
    needs started it again at T0 + 780 whenever the release came before T0 + 760; now every
    record lies within reach of the newest when the group reaches its cap, and it steps.)"""
    batches = _double_claims_then_a_late_release(late_ms)
    _thinned_as_unthinned(batches, KEEPING, in_order=False)
    assert every_batch(batches, KEEPING).out.metrics.conflict_since_ms == T0 + restarted


def _one_client_beating_every(gap_ms: int, count: int):
    items = parsed([hb("c1", ["T"], ts=T0 + gap_ms * n) for n in range(count)])
    return [([item], None) for item in items]


def test_a_steady_group_thins_its_kept_refreshes_instead_of_stepping():
    """One client heartbeats every second for three caps (sessions of 120 s): it steps once, to
    join; thinned, it keeps about one heartbeat each 120 s and never holds its cap."""
    config = StepConfig(exact=False)
    entry, steps, most = None, 0, 0
    for events, watermark in _one_client_beating_every(1_000, 3 * MAX_KEPT):
        advanced = advance(entry, events, watermark, config)
        steps += advanced.output is not None
        entry = advanced.entry
        most = max(most, entry.kept_count)
    assert steps == 1
    assert most <= kept_cap("g")


def test_a_group_whose_sessions_need_every_refresh_steps_at_its_cap():
    """A heartbeat every 100 s with sessions of 120 s: each one renews the sessions in time for
    the next only by itself, so none goes, and the group steps at its cap as unthinned."""
    config = StepConfig(exact=False)
    batches = _one_client_beating_every(100_000, 2 * MAX_KEPT)
    stepped = {}
    for thin_kept in (True, False):
        entry, at = None, []
        for n, (events, watermark) in enumerate(batches):
            advanced = advance(entry, events, watermark, config, thin_kept=thin_kept)
            if advanced.output is not None:
                at.append(n)
            entry = advanced.entry
        stepped[thin_kept] = at
    cap = kept_cap("g")
    assert stepped[True] == stepped[False] == list(range(0, len(batches), cap + 1))
