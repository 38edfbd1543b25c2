"""Keeping a group's refreshes for its next step (streaming.core.advance) changes only when the
group steps, never what it publishes, and never delays a detection.

- In event-time order, the records published equal those of a step every batch, and the final
  findings and metrics are the same. Reordered within the window, the final findings and
  metrics are the same.
- A batch that is kept would, stepped at once, have published no record and left every metric
  but the event time as it was.
- What a step says its blob's view takes as a refresh equals what the blob decodes to, so a
  worker that did not write the blob rebuilds the same events from the same references."""

import doctest
import importlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core.advance import advance
from streaming.core.state.events import with_ts
from streaming.core.state.refresh import MAX_KEPT, MEMBERS_PER_CAP, kept_cap, unpack_kept
from streaming.core.state.shard import is_due
from streaming.core.step import StepConfig, refreshes_of, step, stepped
from tests.unit.keeping import every_batch, final, keeping, record_texts
from tests.unit.state_helpers import T0, hb, parsed, route
from tests.unit.step_strategies import CONFIG, CONFIGS, steady_group

pytestmark = [pytest.mark.unit, pytest.mark.slow]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_in_order_keeping_refreshes_publishes_what_a_step_every_batch_does(config, data):
    batches = data.draw(steady_group(reordered=False, instant_ms=config.instant_ms))
    reference, kept = every_batch(batches, config), keeping(batches, config)
    assert record_texts(kept.records) == record_texts(reference.records)
    assert final(kept.out) == final(reference.out)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=steady_group())
def test_reordered_keeping_refreshes_ends_with_the_same_findings_and_metrics(config, batches):
    assert final(keeping(batches, config).out) == final(every_batch(batches, config).out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steady_group())
def test_a_kept_batch_would_have_published_nothing_and_changed_no_metric(batches):
    last_metrics = {}

    def stepped_at_once(before, after, watermark):
        waiting = refreshes_of(before.blob, CONFIG).events(unpack_kept(after.kept))
        now = step(before.blob, waiting, watermark_ms=watermark, config=CONFIG)
        assert now.findings == []
        shown = last_metrics["out"].metrics
        assert now.metrics == type(shown)(**{**shown.__dict__,
                                             "event_time_ms": now.metrics.event_time_ms})

    entry = None
    for events, watermark in batches:
        before = entry
        advanced = advance(entry, events, watermark, CONFIG)
        entry = advanced.entry
        if advanced.output is None:
            stepped_at_once(before, entry, watermark)
        else:
            last_metrics["out"] = advanced.output


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steady_group())
def test_the_step_and_its_blob_take_the_same_refreshes(batches):
    blob = None
    for events, watermark in batches:
        out, given_ = stepped(blob, events, watermark_ms=watermark, config=CONFIG)
        if out.blob is None:
            assert given_ is None
            blob = None
            continue
        decoded = refreshes_of(out.blob, CONFIG)
        assert (given_.now, given_.last_pending, given_.deadline, given_.accepts) == (
            decoded.now, decoded.last_pending, decoded.deadline, decoded.accepts)
        assert given_.sources == decoded.sources
        assert [given_._template(i) for i in range(len(given_.sources))] == [
            decoded._template(i) for i in range(len(decoded.sources))]
        blob = out.blob


HEARTBEAT_MS, BATCH_MS = 30_000, 2_000


def _stem(event) -> bytes:
    """A stem as EventParser.parse_stemmed's has it: one per event but for its time."""
    return repr(with_ts(event, 0)).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steady_group())
def test_events_known_by_their_stem_are_kept_as_the_field_by_field_comparison_keeps_them(
        batches):
    """The job's worker holds one Refreshes per blob across batches and gives each event's stem:
    an event whose stem restated a source is not compared again, but its time still decides.
    Batch by batch it keeps, and steps, what a Refreshes decoded afresh without stems does."""
    held: dict[bytes, object] = {}

    def remembered(entry):
        return held.setdefault(entry.armoured, refreshes_of(entry.blob, CONFIG))

    stemmed, compared = None, None
    for events, watermark in batches:
        by_stem = advance(stemmed, events, watermark, CONFIG, remembered,
                          [_stem(event) for event, _ in events])
        by_fields = advance(compared, events, watermark, CONFIG)
        assert by_stem[:2] == by_fields[:2] and by_stem.reset == by_fields.reset
        if by_stem.refreshes is not None:       # as the worker keeps a step's, for its blob
            held[by_stem.entry.armoured] = by_stem.refreshes
        stemmed, compared = by_stem.entry, by_fields.entry


def test_a_steady_group_steps_only_when_a_session_expires_or_its_view_changes():
    """Three clients heartbeat their facts every 30 s through two brokers, cut into 2 s batches
    with a watermark 10 s behind; c2 stops after 165 s, and at 301 s c3 heartbeats another
    view. After c2 joins the group steps only twice: when the watermark passes c2's
    session (c2 is gone in that step), and for c3's view, found in its own batch. The kept
    refreshes renew the others' sessions, so the watermark never wakes the group for them."""
    config = StepConfig(exact=False)       # the deferral under test; exact defers nothing
    raws = [route("T", ts=T0, brokers={"a": 4, "b": 4})]
    phases = {"c1": 0, "c2": 15_000, "c3": 200}     # c2's session ends between two batches
    for at in range(0, 300_000, HEARTBEAT_MS):
        for client, phase in phases.items():
            if client == "c2" and at > 150_000:
                continue
            raws += [hb(client, ["T"], ts=T0 + at + phase + 10 * b, broker=broker)
                     for b, broker in enumerate(("a", "b"))]
    c2_expired = T0 + 150_000 + 15_000 + config.session_timeout_ms + 1   # its entry at a
    seen_other_view = T0 + 300_000 + 1_000
    raws.append(hb("c3", ["T"], ts=seen_other_view, broker="a", view={"clients": ["c3"]}))
    items = parsed(raws)
    steps, wakes = _in_batches(items, seen_other_view, config)
    first_woken = next(at for at in range(0, 400_000, BATCH_MS) if at - 10_000 > c2_expired - T0)
    assert wakes == [first_woken]
    c2_joined = phases["c2"] - phases["c2"] % BATCH_MS
    assert [at for at, _ in steps] == [0, c2_joined, first_woken, seen_other_view - T0 - 1_000]
    _, _, (_, expired), (_, changed) = steps
    assert expired.metrics.members == 2
    assert {r.kind for r in changed.findings} >= {"double_assignment", "view_divergent"}
    exact_steps, _ = _in_batches(items, seen_other_view, StepConfig(exact=True))
    assert [r.to_json() for _, out in steps for r in out.findings] == [
        r.to_json() for _, out in exact_steps for r in out.findings]


def _in_batches(items, end: int, config: StepConfig):
    """advance() per 2 s batch with a watermark 10 s behind, the group called as Spark calls
    it: the steps (batch start, output) and the batches it was woken in without events."""
    entry, steps, wakes = None, [], []
    for start in range(T0, end + BATCH_MS, BATCH_MS):
        events = [item for item in items if start <= item[0].ts < start + BATCH_MS]
        watermark = start - 10_000
        if not events:
            if entry is None or not is_due(entry, watermark):
                continue
            wakes.append(start - T0)
        advanced = advance(entry, events, watermark, config)
        entry = advanced.entry
        if advanced.output is not None:
            steps.append((start - T0, advanced.output))
    return steps, wakes


def test_a_group_keeps_at_most_its_cap_of_refreshes_and_caps_differ_between_groups():
    """One client heartbeats every second, each batch alone, with no watermark: the group
    steps each time its cap of refreshes wait, and its cap is its own (three quarters of
    MAX_KEPT to MAX_KEPT by its name), so groups that started together do not step together.
    Unthinned: thinning would keep one heartbeat of each 120 and never step
    (tests/unit/test_kept_thinning.py)."""
    config = StepConfig(exact=False)
    caps = {kept_cap(f"group-{n}") for n in range(50)}
    assert min(caps) >= MAX_KEPT * 3 // 4 and max(caps) <= MAX_KEPT and len(caps) > 10
    items = parsed([hb("c1", ["T"], ts=T0 + 1_000 * n) for n in range(3 * MAX_KEPT)])
    entry, stepped_at = None, []
    for n, item in enumerate(items):
        advanced = advance(entry, [item], None, config, thin_kept=False)
        if advanced.output is not None:
            stepped_at.append(n)
        entry = advanced.entry
    cap = kept_cap(items[0][0].group)
    assert stepped_at == list(range(0, len(items), cap + 1))


@pytest.mark.parametrize("members", [1, MEMBERS_PER_CAP - 1, MEMBERS_PER_CAP, 3 * MEMBERS_PER_CAP])
def test_a_larger_group_keeps_a_cap_per_members_per_cap_of_its_members(members):
    """A step's cost grows with the group, so a group keeps one cap of refreshes per
    MEMBERS_PER_CAP members (at least one): it steps after that many restating heartbeats, and
    publishes what stepping every batch publishes. Unthinned, as above."""
    config = StepConfig(exact=False)
    clients = [f"c{n:03d}" for n in range(members)]
    joins = parsed([hb(client, ["T"], ts=T0) for client in clients])
    cap = kept_cap(joins[0][0].group, members)
    assert cap == kept_cap(joins[0][0].group) * max(1, members // MEMBERS_PER_CAP)
    beats = [hb(clients[n % members], ["T"], ts=T0 + 1_000 + n) for n in range(cap + 1)]
    items = [(event, offset + len(joins)) for event, offset in parsed(beats)]
    entry = advance(None, joins, None, config).entry
    kept_until = []
    for item in items:
        advanced = advance(entry, [item], None, config, thin_kept=False)
        kept_until.append(advanced.output is None)
        entry = advanced.entry
    assert kept_until == [True] * cap + [False]
    exact_final = step(None, [*joins, *items], config=StepConfig(exact=True))
    assert advanced.output.metrics == exact_final.metrics


@pytest.mark.parametrize("module", ["streaming.core.state.refresh", "streaming.core.advance",
                                    "streaming.core.state.shard"])
def test_docstring_examples_hold(module):
    outcome = doctest.testmod(importlib.import_module(module))
    assert outcome.attempted > 0
    assert outcome.failed == 0
