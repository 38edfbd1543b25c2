"""Any split of an event sequence into batches, with encode/decode between batches, gives the
same findings and snapshot as one uninterrupted run: expiry, out-of-order (within the reorder
window), duplicates, unregisters, route changes and group restarts included.

The published record stream: for events that arrive in event-time order, any split into batches
that does not cut one millisecond of event time in two gives the same records as one step per
millisecond and as one single step. With events reordered inside the window, records once
published stand and later ones correct them, so the stream is checked for consistency instead:
never a finding started twice or ended while not open, and replaying it gives what is open."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core import findings as fnd
from streaming.core.state.codec import decode, render_state
from streaming.core.step import StepConfig, step
from tests.unit.state_helpers import T0, hb, parsed, route, without_view
from tests.unit.step_strategies import CONFIG, CONFIGS, batches_of, scenario

pytestmark = [pytest.mark.unit, pytest.mark.slow]


def _result(out):
    if out.blob is None:
        return None, out.metrics
    return decode(out.blob).open_findings, out.metrics


def _run(items, cuts, final_watermark, watermarks, config=CONFIG):
    blob, bounds = None, [0, *cuts, len(items)]
    out = None
    for index, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        last = index == len(bounds) - 2
        watermark = final_watermark if last else watermarks(end)
        out = step(blob, items[start:end], watermark_ms=watermark, config=config)
        blob = out.blob
    return out


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenario(), intermediate_watermarks=st.booleans())
def test_any_batch_split_gives_the_same_findings_and_snapshot(config, case,
                                                              intermediate_watermarks):
    raws, cuts, final_watermark = case
    items = parsed(raws)
    whole = step(None, items, watermark_ms=final_watermark, config=config)

    def watermarks(end):
        # The most a watermark may say: no later event is older than it.
        later = [event.ts for event, _ in items[end:]]
        return min(later) if intermediate_watermarks and later else None

    split = _run(items, cuts, final_watermark, watermarks, config)
    assert _result(split) == _result(whole)


def test_restart_mid_window_keeps_the_reordered_event_in_place():
    """An event 200 ms late, arriving after a restart, is replayed in its place."""
    raws = [{"type": "route", "ts": T0, "group": "g", "topic": "T", "brokers": {"a": 4}},
            {"type": "heartbeat", "ts": T0 + 300, "group": "g", "client_id": "c2",
             "topics": ["T"], "strategy": "AVG"},
            {"type": "heartbeat", "ts": T0 + 100, "group": "g", "client_id": "c1",
             "topics": ["T"], "strategy": "AVG"}]
    items = parsed(raws)
    whole = step(None, items, config=CONFIG)
    first = step(None, items[:2], config=CONFIG)
    split = step(first.blob, items[2:], config=CONFIG)
    assert _result(split) == _result(whole)
    assert whole.metrics.rebalances_total == 2
    assert whole.metrics.late_events_total == 0


def _records(changes) -> list[bytes]:
    """The records as the findings topic gets them, every field compared."""
    return [record.to_json() for record in changes]


def _published_records(items, cuts, final_watermark, watermarks, config) -> list[bytes]:
    blob, changes, bounds = None, [], [0, *cuts, len(items)]
    for index, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        last = index == len(bounds) - 2
        out = step(blob, items[start:end], watermark_ms=final_watermark if last
                   else watermarks(end), config=config)
        blob = out.blob
        changes += out.findings
    return _records(changes)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenario(reordered=False), with_watermarks=st.booleans())
def test_in_order_events_publish_the_same_records_whatever_the_batches(config, case,
                                                                       with_watermarks):
    raws, cuts, final_watermark = case
    items = parsed(raws)
    per = config.instant_ms
    instants = [i for i in range(1, len(items))
                if items[i][0].ts // per > items[i - 1][0].ts // per]
    cuts = [c for c in cuts if c in instants]

    def watermarks(end):
        # Just below the next event: a watermark at its time would settle that instant early.
        return items[end][0].ts - 1 if with_watermarks else None

    whole = _records(step(None, items, watermark_ms=final_watermark, config=config).findings)
    per_instant = _published_records(items, instants, final_watermark, watermarks, config)
    assert per_instant == whole
    assert _published_records(items, cuts, final_watermark, watermarks, config) == whole


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_reordered_events_publish_a_consistent_stream(case):
    """Late events within the window may correct what was published; never a duplicate."""
    raws, cuts, final_watermark = case
    items = parsed(raws)
    blob, bounds, open_ = None, [0, *cuts, len(items)], {}
    for index, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        last = index == len(bounds) - 2
        out = step(blob, items[start:end], watermark_ms=final_watermark if last else None,
                   config=CONFIG)
        blob = out.blob
        for rec in out.findings:
            key = (rec.kind, rec.topic, None if rec.queue is None else tuple(rec.queue),
                   tuple(rec.clients), rec.address, tuple(rec.brokers))
            if rec.status == "started":
                assert key not in open_, rec
                assert rec.since <= rec.at, rec
                open_[key] = rec.since
            else:
                assert open_.pop(key, None) == rec.since, rec
                assert rec.since <= rec.at, rec
    assert open_ == ({} if blob is None else decode(blob).open_findings)


def test_a_watermark_past_two_deadlines_re_runs_after_each():
    """c1 expires at 1 001 ms, c2 at 1 501 ms: each expiry re-runs with the members of its
    moment, whether the watermark passes both deadlines in one step or one at a time."""
    items = parsed([{"type": "route", "ts": T0, "group": "g", "topic": "T", "brokers": {"a": 4}},
                    *({"type": "heartbeat", "ts": T0 + lag, "group": "g", "client_id": c,
                       "topics": ["T"], "strategy": "AVG"}
                      for c, lag in (("c1", 0), ("c2", 500), ("c3", 900)))])
    at_once = step(None, items, watermark_ms=T0 + 1_600, config=CONFIG)
    first = step(None, items, watermark_ms=T0 + 1_200, config=CONFIG)
    one_by_one = step(first.blob, [], watermark_ms=T0 + 1_600, config=CONFIG)
    assert (at_once.metrics.rebalances_total, at_once.metrics.queue_moves_total) == (5, 8)
    assert (one_by_one.metrics.rebalances_total, one_by_one.metrics.queue_moves_total) == (5, 8)


def _stored_text(blob: bytes | None):
    if blob is None:
        return None
    stored = decode(blob)
    return (render_state(stored.settled), stored.pending, stored.horizon, stored.open_findings,
            stored.now, stored.now_offset,
            None if stored.view is None else render_state(stored.view))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"instant_{c.instant_ms}ms")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenario(),
       watermark_shifts=st.lists(st.sampled_from([None, 0, -400, 300, 2_000]), min_size=7,
                                 max_size=7))
def test_continuing_from_the_stored_view_equals_the_full_replay(config, case, watermark_shifts):
    """A step takes the short way (no window replay) only when that cannot change anything:
    each batch gives the same output and blob from the stored view as from the window replay,
    whatever the watermark says, even one ahead of events still to come."""
    blob = None
    for batch, watermark in batches_of(case, watermark_shifts):
        fast = step(blob, batch, watermark_ms=watermark, config=config)
        full = step(without_view(blob), batch, watermark_ms=watermark, config=config)
        assert (fast.findings, fast.metrics) == (full.findings, full.metrics)
        assert _stored_text(fast.blob) == _stored_text(full.blob)
        blob = fast.blob


def test_an_event_behind_the_watermark_driven_now_is_not_put_onto_the_view():
    """A watermark ahead of the clock moved `now` (and expiry) past a member's deadline without
    moving the window's edge; an in-order event older than that `now` refreshes the member. Only
    the replay applies it before the expiry, as an uninterrupted run would."""
    batches = [  # (events, watermark); session timeout 1,000 ms, reorder window 300 ms
        ([hb("c1", ["T1"], ts=T0 - 700), hb("c2", ["T1"], ts=T0 - 700)], None),
        ([route("T1", ts=T0 + 200, brokers={"a": 4}), hb("c2", ["T1"], ts=T0 + 200)], T0 + 100),
        ([hb("c2", ["T1"], ts=T0 + 210)], T0 + 350),     # now T0+350: c1's deadline T0+301 passed
        ([hb("c1", ["T1"], ts=T0 + 300)], None),         # after the window, before that now
    ]
    blob, offset = None, 0
    for raws, watermark in batches:
        items = parsed(raws, first_offset=offset)
        offset += len(raws)
        fast = step(blob, items, watermark_ms=watermark, config=CONFIG)
        full = step(without_view(blob), items, watermark_ms=watermark, config=CONFIG)
        assert (fast.findings, fast.metrics) == (full.findings, full.metrics)
        assert _stored_text(fast.blob) == _stored_text(full.blob)
        blob = fast.blob
    assert decode(blob).view is not None     # the last step could have taken the short way


def test_a_changed_session_timeout_replays_instead_of_using_the_stored_view():
    """The view was built with the old timeout; after a restart with another, the window is
    replayed with the new one, as the settled state is."""
    first = step(None, parsed([hb("c1", ["T1"], ts=T0), hb("c2", ["T1"], ts=T0 + 100)]),
                 config=CONFIG)
    shorter = StepConfig(session_timeout_ms=50, kafka_session_timeout_ms=50, reorder_window_ms=300)
    items = parsed([hb("c2", ["T1"], ts=T0 + 200)], first_offset=2)
    fast = step(first.blob, items, config=shorter)
    full = step(without_view(first.blob), items, config=shorter)
    assert (fast.findings, fast.metrics) == (full.findings, full.metrics)
    assert fast.metrics.members == 1      # c1 expired under the new timeout


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_findings_after_a_broker_only_change_equal_a_full_compute(case):
    """step() recomputes only the broker_view_divergent findings when an event or expiry changed
    nothing but a broker's member list: each such shortcut equals a full compute."""
    raws, cuts, final_watermark = case
    def checked_shortcut(state, previous):
        result = shortcut(state, previous)
        full = fnd.compute(state)
        assert result == full
        assert [f.detail for f in result.findings] == [f.detail for f in full.findings]
        return result

    shortcut, fnd.with_new_broker_lists = fnd.with_new_broker_lists, checked_shortcut
    try:
        _run(parsed(raws), cuts, final_watermark, lambda end: None)
    finally:
        fnd.with_new_broker_lists = shortcut
