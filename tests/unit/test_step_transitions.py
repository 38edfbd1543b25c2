"""step() publishes every finding transition in event time, whatever the batches: a finding that
begins and ends inside one batch is published, and an `ended` record's `at` is when it ended."""

from collections import Counter

import pytest

from producers.simulator.scenarios import SCENARIOS
from streaming.core.state.events import parse_event
from streaming.core.step import StepConfig, step
from tests.unit.finding_intervals import expected_intervals, identity_of, intervals_of
from tests.unit.state_helpers import T0, Run, hb, parsed, route

pytestmark = pytest.mark.unit

WINDOW = StepConfig(reorder_window_ms=10_000)


def _one_batch_per_group(raws) -> list[dict]:
    """Every event of each group in a single step (a backlog caught up in one micro-batch)."""
    per_group: dict[str, list] = {}
    for offset, raw in enumerate(raws):
        for event in parse_event(raw):
            per_group.setdefault(event.group, []).append((event, offset))
    return [change for items in per_group.values() for change in step(None, items).findings]


def test_one_batch_holding_a_whole_scenario_still_publishes_its_findings():
    """One step over all of lost-notification's events: its double assignment lived from 45 s
    to 60 s, and is published with exactly those times."""
    scenario = SCENARIOS["lost-notification"](seed=1, with_view=True)
    events = [(e, offset) for offset, raw in enumerate(scenario.run()) for e in parse_event(raw)]
    changes = step(None, events).findings
    published = Counter((r.status, identity_of(r), r.since) for r in changes)
    expected = Counter()
    for (identity, begins, ends) in expected_intervals(scenario.ground_truth()):
        expected[("started", identity, begins)] += 1
        expected[("ended", identity, begins)] += ends is not None
    assert published == +expected


@pytest.mark.parametrize("name", sorted(set(SCENARIOS) - {"steady"}))
@pytest.mark.parametrize("with_view", [True, False])
def test_every_scenario_in_one_batch_publishes_its_ground_truth(name, with_view):
    scenario = SCENARIOS[name](seed=1, with_view=with_view)
    changes = _one_batch_per_group(list(scenario.run()))
    assert intervals_of(changes) == expected_intervals(scenario.ground_truth())
    ends = sum(f.ends_ms is not None for f in scenario.ground_truth())
    assert Counter(r.status for r in changes) == Counter(
        started=len(scenario.ground_truth()), ended=ends)


def _double_assignment_batches():
    """c1 and c2 on 4 queues; c2's view misses c1 from 1 s to 3 s: queues 0 and 1 doubled."""
    view = {"clients": ["c2"]}
    return [route("T", brokers={"a": 4}), hb("c1", ["T"]), hb("c2", ["T"]),
            hb("c2", ["T"], ts=T0 + 1_000, view=view), hb("c1", ["T"], ts=T0 + 2_000),
            hb("c2", ["T"], ts=T0 + 3_000), hb("c1", ["T"], ts=T0 + 4_000)]


def _doubled(changes) -> list[tuple]:
    return [(r.status, tuple(r.queue), r.since, r.at) for r in changes
            if r.kind == "double_assignment"]


DOUBLED = [("started", ("a", 0), T0 + 1_000, T0 + 1_000),
           ("started", ("a", 1), T0 + 1_000, T0 + 1_000),
           ("ended", ("a", 0), T0 + 1_000, T0 + 3_000),
           ("ended", ("a", 1), T0 + 1_000, T0 + 3_000)]


def test_a_finding_inside_one_batch_is_published_with_its_own_times():
    run = Run()
    out = run.batch(_double_assignment_batches())
    assert _doubled(out.findings) == DOUBLED
    assert out.metrics.double_assigned == {"T": 0}


def test_ended_at_is_when_it_ended_not_when_the_batch_ran():
    run = Run()
    raws = _double_assignment_batches()
    run.batch(raws[:4])
    out = run.batch(raws[4:])                # ended at 3 s; this step's clock is at 4 s
    assert _doubled(out.findings) == DOUBLED[2:]
    assert _doubled(run.findings) == DOUBLED


def test_a_batch_replaying_its_window_publishes_nothing_twice():
    """Every step replays the events within the reorder window; what was published stays."""
    run = Run(WINDOW)
    for raw in _double_assignment_batches():
        run.batch([raw])
    assert _doubled(run.findings) == DOUBLED
    assert run.batch([]).findings == []


def test_a_late_event_in_the_window_corrects_what_was_published():
    """c2's view at 1 s arrives after the step at 2 s published no conflict: it was open from
    1 s and is still open at the cursor, so the correction starts it there (since = 1 s, at =
    the last published time). Nothing already published is repeated."""
    raws = _double_assignment_batches()
    run = Run(WINDOW)
    run.batch(raws[:3])
    run.batch([hb("c1", ["T"], ts=T0 + 2_000)])
    out = run.batch([raws[3]])               # ts 1 s, offset after the 2 s event
    assert _doubled(out.findings) == [("started", ("a", 0), T0 + 1_000, T0 + 2_000),
                                     ("started", ("a", 1), T0 + 1_000, T0 + 2_000)]
    out = run.batch([hb("c2", ["T"], ts=T0 + 3_000)])
    assert _doubled(out.findings) == DOUBLED[2:]


def test_a_finding_begun_and_ended_behind_the_published_point_stays_unpublished():
    """A late event inside the window can only change history already published through the
    open set at the published point: a conflict wholly before it is not published afterwards."""
    raws = _double_assignment_batches()
    run = Run(WINDOW)
    run.batch(raws[:3])
    run.batch([hb("c2", ["T"], ts=T0 + 3_000)])
    out = run.batch([raws[3]])               # c2's bad view at 1 s, already over at 3 s
    assert out.findings == []


def test_one_millisecond_is_netted_within_a_batch():
    """The route first, then the members, all at T0: no orphan for the instant before they
    joined (a batch boundary inside that millisecond would publish it for 0 ms)."""
    items = parsed([route("T", brokers={"a": 2}), hb("c1", ["T"]), hb("c2", ["T"])])
    assert step(None, items).findings == []


def _joins(clients: int, spacing_ms: int) -> list[dict]:
    return [route("T", brokers={"b": 16})] + [hb(f"c{i:03d}", ["T"], ts=T0 + i * spacing_ms)
                                             for i in range(clients)]


def test_the_joins_of_one_millisecond_are_one_rerun_and_one_rebalance(monkeypatch):
    """An observer stamps a poll's heartbeats with one time: 100 processes found in one poll
    re-run the group once (the cost of a join wave grows with its members, not their square)
    and count as one rebalance (RebalanceStorm is not raised by one poll)."""
    import streaming.core.step as step_module

    calls = []
    real_rerun = step_module.rerun
    monkeypatch.setattr(step_module, "rerun", lambda *a: calls.append(a) or real_rerun(*a))
    at_once = step(None, parsed(_joins(100, spacing_ms=0)), config=WINDOW)
    assert (len(calls), at_once.metrics.rebalances_total) == (1, 1)
    assert at_once.metrics.members == 100 and sum(at_once.metrics.client_queues.values()) == 16

    calls.clear()
    spread = step(None, parsed(_joins(100, spacing_ms=1)), config=WINDOW)
    # A re-run per instant; the claims change only while the members are fewer than the queues.
    assert (len(calls), spread.metrics.rebalances_total) == (100, 16)
    assert spread.metrics.client_queues == at_once.metrics.client_queues


def test_an_instant_cut_by_a_batch_is_taken_whole():
    """A batch that ends inside a millisecond: the next batch's events of that millisecond are
    replayed with the window's, as one instant, so the group ends as if uncut."""
    raws = _joins(10, spacing_ms=0)
    whole = step(None, parsed(raws), config=WINDOW)
    first = step(None, parsed(raws[:4]), config=WINDOW)
    rest = step(first.blob, parsed(raws[4:], first_offset=4), config=WINDOW)
    assert rest.metrics == whole.metrics
    assert rest.metrics.rebalances_total == 1
