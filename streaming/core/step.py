"""step(): the one call the Spark state function makes per group and micro-batch.

    >>> from streaming.core.state.events import parse_event
    >>> raw = [{"type": "route", "ts": 1_700_000_000_000, "group": "g", "topic": "T",
    ...         "brokers": {"b": 3}}] + [
    ...        {"type": "heartbeat", "ts": 1_700_000_000_000, "group": "g", "client_id": c,
    ...         "topics": ["T"], "strategy": "AVG"} for c in ("c1", "c2")]
    >>> out = step(None, [(parse_event(r)[0], i) for i, r in enumerate(raw)])
    >>> out.metrics.client_queues, out.metrics.skew_ratio, out.findings
    ({'c1': 2, 'c2': 1}, 1.0, [])
    >>> gone = step(out.blob, [], watermark_ms=1_700_000_000_000 + 10 * 60_000)
    >>> gone.blob is None, gone.metrics
    (True, None)

Determinism: events are applied one at a time in (ts, offset) order, and the allocation is re-run
after every event (or session expiry) that changes its inputs, so the history counters and every
finding's `since` do not depend on how events are cut into batches. Events that arrive late
but within `reorder_window_ms` of the group's clock (or above the watermark) are put back in their
place: the blob keeps the settled state before the window, the window's events, and the view (the
state after them). A step whose events all come after the view continues from it; one with an
event inside the window replays the window from the settled state. The window's lower edge moves
in steps of at least `reorder_window_ms`, so most steps leave the settled state as it is; when
it moves past the stored window, the settled state is cut from the view at the new edge. Events
behind the edge are merged into the settled state there, where a newer fact of the same member
or topic always wins (counted as `late_events_total`).

Publishing: every re-run logs the findings that started or ended there, at the event time of the
event (or session expiry) that caused it. A step publishes every transition after the point the
previous step published up to (its `now` and the offset of its last event at that time), in
event-time order: a finding that begins and ends inside one batch gets both records, `since` =
when it began, the `ended` record's `at` = when it ended. One millisecond of event time is one
instant: its transitions are netted, so a finding that held only between two events of the same
millisecond (a route applied before the heartbeats beside it) is none. The window is replayed on
every step and re-logs what was already published; only what lies after the published point goes
out, so nothing is published twice. A published record is final: when an event lands behind the
published point (inside the window, or late and merged at the settled edge) and changes history,
the step publishes the difference between the open findings as published and as the new history
has them at the published point, stamped with that point, then the transitions after it (a
finding that a late event makes begin and end behind the published point is never published).

So for events that arrive in event-time order the records do not depend on the batching, as long
as no batch boundary (nor a watermark equal to the next event's time) cuts one millisecond in two:
a finding of that millisecond that a later event of the same millisecond ends is then published
with `at` = `since`. Events reordered inside the window end with the same open findings, through
corrections.

    >>> view = {"clients": ["c2"]}      # c2 misses c1 from 1 s to 2 s: queues 0 and 1 doubled
    >>> raw = raw[:3] + [{**raw[2], "ts": raw[2]["ts"] + t, **extra}
    ...                  for t, extra in ((1_000, {"view": view}), (2_000, {}))]
    >>> out = step(None, [(parse_event(r)[0], i) for i, r in enumerate(raw)])
    >>> doubled = [r for r in out.findings if r.kind == "double_assignment"]
    >>> [(r.status, r.queue[1], r.since % 10_000, r.at % 10_000) for r in doubled]   # doctest: +NORMALIZE_WHITESPACE
    [('started', 0, 1000, 1000), ('started', 1, 1000, 1000),
     ('ended', 0, 1000, 2000), ('ended', 1, 1000, 2000)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

from streaming.core import findings as fnd
from streaming.core.contract import GroupKey, GroupMetrics, StepOutput
from streaming.core.state.codec import Stored, StoredBody, decode, decode_body, encode, render_state
from streaming.core.state.events import Event
from streaming.core.state.group import (
    Change,
    GroupState,
    apply_event,
    expire_next,
    forget_tombstones,
    next_deadline,
)
from streaming.core.state.rerun import claims_of, rerun


@dataclass(frozen=True)
class StepConfig:
    session_timeout_ms: int = 120_000
    kafka_session_timeout_ms: int = 45_000
    reorder_window_ms: int = 10_000

    def timeout_for(self, system: str) -> int:
        return self.kafka_session_timeout_ms if system == "kafka" else self.session_timeout_ms


def step(blob: bytes | None, events: Sequence[tuple[Event, int]], *,
         watermark_ms: int | None = None, config: StepConfig = StepConfig()) -> StepOutput:
    """Decode (None = new group), apply, find, publish the transitions since the last step,
    encode."""
    if blob is None:
        if not events:
            return StepOutput(None, None, [], None)
        first, _ = min(events, key=_order)
        state = GroupState(first.group, first.system, config.timeout_for(first.system))
        stored, following = Stored(state, [], -(2**62), {}, -(2**62)), None
    else:
        body = decode_body(blob)
        following = _following(body, events, watermark_ms, config)
        if following is not None and following.horizon == body.horizon:
            return _step_within_window(body, following)
        if following is not None and following.events[0][0].ts < following.horizon:
            return _step_past_window(body, following)
        stored = body.stored(with_view=following is not None)
    stored.settled.session_timeout_ms = config.timeout_for(stored.settled.system)
    cursor = (stored.now, stored.now_offset)
    if following is None:
        view, (settled, pending, horizon) = _advance(stored, events, watermark_ms, config, cursor)
    else:
        view, (settled, pending, horizon) = _advance_in_order(stored, following, cursor)
    return _conclude(view, stored.published, cursor, Stored(settled, pending, horizon, {}, 0))


def _conclude(view: GroupState, published: dict, cursor: tuple[int, int],
              kept: Stored) -> StepOutput:
    """Findings of the view, the transitions to publish after `cursor`, the new blob (`kept`
    gives its settled state and window)."""
    current = findings_of(view)
    now = view.now
    open_now = {f.identity: view.since.get(f.identity, now) for f in current.findings}
    by_identity = {f.identity: f for f in current.findings}
    key = GroupKey(view.system, view.group)
    changes = fnd.publish(published, view.log, open_now, by_identity, key, cursor[0])
    if not view.members and now > view.clock + view.session_timeout_ms:
        changes += fnd.diff(open_now, {}, {}, key, now)
        return StepOutput(None, None, changes, None)
    reached = max(cursor, (now, -1), *((e.ts, o) for e, o in kept.pending[-1:]))
    kept.published, (kept.now, kept.now_offset) = open_now, reached
    # With no event inside the window, the view is the settled state plus expiry: the next step
    # gets it as cheaply by replaying nothing, so it is not stored twice.
    kept.view = view if kept.pending or kept.pending_raw else None
    # Spark wakes the group at its next expiry (of a member, a broker's entry, or the group
    # itself), so a group that goes quiet still expires, and its series go, in event time.
    return StepOutput(encode(kept), fnd.metrics(view, current), changes, next_deadline(view))


def metrics_of(blob: bytes) -> GroupMetrics:
    """The group's metrics from its blob alone (rebuilds /metrics after a restart)."""
    stored = decode(blob)
    view = stored.settled
    view.claims_cache = claims_of(view)
    _replay(view, stored.pending, stored.now)
    return fnd.metrics(view, findings_of(view))


def _order(item: tuple[Event, int]) -> tuple[int, int]:
    return (item[0].ts, item[1])


def _advance(stored: Stored, events, watermark_ms, config, cursor):
    """Merge too-late events into the settled state, replay the window (logging the finding
    transitions after `cursor`), cut the new settled state at the new horizon.
    Returns (view state, (settled, pending, horizon))."""
    state = stored.settled
    late = sorted((item for item in events if item[0].ts < stored.horizon), key=_order)
    if state.claims_cache is None:
        state.claims_cache = claims_of(state)
    for event, offset in late:
        state.late_events += 1
        _react(state, apply_event(state, event), state.now, offset)
    state.log, state.log_after = [], cursor
    window = sorted([*stored.pending, *(i for i in events if i[0].ts >= stored.horizon)],
                    key=_order)
    clock = max([state.clock, *(e.ts for e, _ in window)])
    now = max(clock, watermark_ms or 0, state.now, stored.now)
    horizon = _next_horizon(stored.horizon, clock, watermark_ms, config.reorder_window_ms)
    pending = _settle(state, window, horizon)
    settled = render_state(state)        # rendered now: the replay below goes on mutating it
    view = _replay(state, pending, now)
    return view, (settled, pending, horizon)


class Following(NamedTuple):
    """A step whose events all come after the stored view: its events in (ts, offset) order,
    the group's clock, the window's new lower edge and the time up to which the step expires
    sessions."""

    events: list
    clock: int
    horizon: int
    now: int


def _following(body: StoredBody, events, watermark_ms, config) -> Following | None:
    """Following when every event sorts after the stored window and at or after its `now` (and
    the view was kept with the same session timeout): then replaying the window would repeat,
    step for step, what the stored view already is (expiry runs deadline by deadline, so where
    earlier steps paused does not matter). None otherwise."""
    if not events or body.view_session_timeout_ms() != config.timeout_for(body.system()):
        return None
    new = sorted(events, key=_order)
    last = body.last_pending()           # the window is stored in (ts, offset) order
    if new[0][0].ts < body.now or (last is not None and _order(new[0]) <= last):
        return None
    settled_clock, settled_now = body.settled_clock_and_now()
    clock = max(settled_clock, last[0] if last is not None else settled_clock, new[-1][0].ts)
    horizon = _next_horizon(body.horizon, clock, watermark_ms, config.reorder_window_ms)
    return Following(new, clock, horizon, max(clock, watermark_ms or 0, settled_now, body.now))


def _step_within_window(body: StoredBody, following: Following) -> StepOutput:
    """The window's lower edge stays: the new events go onto the view, the settled state and the
    stored window are kept as they are (not even converted)."""
    cursor = (body.now, body.now_offset)
    view = _onto_view(body.view(), following, cursor)
    kept = Stored(body.settled_text(), following.events, following.horizon, {}, 0,
                  pending_raw=body.pending_raw())
    return _conclude(view, body.published(), cursor, kept)


def _step_past_window(body: StoredBody, following: Following) -> StepOutput:
    """The window's new lower edge lies past the stored window and inside the new events: the
    view goes on through the new events, and the settled state is cut from it at the edge
    (the stored window's replay would repeat, re-run for re-run, what the view already is)."""
    cursor = (body.now, body.now_offset)
    view = _recording(body.view(), cursor)
    pending = _settle(view, following.events, following.horizon)
    settled = render_state(view)
    _replay(view, pending, following.now)
    return _conclude(view, body.published(), cursor,
                     Stored(settled, pending, following.horizon, {}, 0))


def _advance_in_order(stored: Stored, following: Following, cursor):
    """`_advance` without the window replay: only stored events leave the window, onto the
    settled state; the new ones go onto the stored view."""
    state = stored.settled
    state.claims_cache = claims_of(state)
    pending = _settle(state, stored.pending, following.horizon)
    view = _onto_view(stored.view, following, cursor)
    return view, (render_state(state), [*pending, *following.events], following.horizon)


def _onto_view(view: GroupState, following: Following, cursor) -> GroupState:
    """Apply events that all come after the view, logging the transitions after `cursor`."""
    _recording(view, cursor)
    forget_tombstones(view, following.horizon)
    return _replay(view, following.events, following.now)


def _recording(state: GroupState, cursor: tuple[int, int]) -> GroupState:
    """A decoded state made ready to go on: its claims, and a log of the transitions after
    `cursor`."""
    state.claims_cache = claims_of(state)
    state.log, state.log_after = [], cursor
    return state


def _settle(state: GroupState, items, horizon: int) -> list:
    """Apply the items (in order) before the window's lower edge and expire up to it: the state
    becomes the settled state at `horizon`. Returns the items from the edge on."""
    cut = next((i for i, (e, _) in enumerate(items) if e.ts >= horizon), len(items))
    _replay(state, items[:cut], horizon - 1)
    forget_tombstones(state, horizon)
    return items[cut:]


def _next_horizon(current: int, clock: int, watermark_ms: int | None, window_ms: int) -> int:
    """The window's lower edge: `window_ms` behind the clock (or at the watermark, if later),
    moved only in steps of at least `window_ms`, so that most steps keep the settled state."""
    wanted = max(clock - window_ms, watermark_ms if watermark_ms is not None else -(2**62))
    return wanted if wanted >= current + window_ms else current


def _replay(state: GroupState, items, until: int) -> GroupState:
    """Apply items in order, expiring sessions as event time passes, then expire up to until."""
    for event, offset in items:
        ts = event.ts
        if state.deadline_bound <= ts:
            _expire(state, ts)
        elif state.now < ts:
            state.now = ts       # what _expire does when nothing is due, without the call
        if not state.members and ts > state.clock + state.session_timeout_ms:
            _restart(state, event, offset)
        change = apply_event(state, event)
        if change.alloc or change.brokers:
            _react(state, change, ts, offset)
    _expire(state, until)
    return state


def _restart(state: GroupState, event: Event, offset: int) -> None:
    """The group was gone (no member, no event for a session timeout): whether or not a batch
    boundary fell in the gap, it starts afresh here, so batching cannot change its counters."""
    fresh = GroupState(state.group, event.system, state.session_timeout_ms)
    fresh.since, fresh.now, fresh.claims_cache = {}, event.ts, {}
    fresh.log, fresh.log_after = state.log, state.log_after
    _log(state, state.since, {}, [], event.ts, offset)
    state.__dict__.update(fresh.__dict__)


def _expire(state: GroupState, until: int) -> None:
    while (expired := expire_next(state, until)) is not None:
        _react(state, expired[1], expired[0])
    state.now = max(state.now, until)


def _react(state: GroupState, change: Change, at: int, offset: int = -1) -> None:
    """After a change at event time `at` (by the event at `offset`; -1 = a session expiry):
    re-run if needed, count churn, track `since`, log the findings that started or ended."""
    state.now = max(state.now, at)
    if not change.any:
        return
    if change.alloc:
        before = state.claims_cache
        rerun(state, change.members)
        after = claims_of(state)
        if _nonempty(before) != _nonempty(after):
            state.rebalances += 1
            state.queue_moves += _moves(before, after)
        state.claims_cache = after
    since = state.since
    if change.alloc or state.findings_cache is None:
        state.findings_cache = fnd.compute(state)
    else:
        state.findings_cache = fnd.with_new_broker_lists(state, state.findings_cache)
    state.since = {f.identity: since.get(f.identity, at) for f in state.findings_cache.findings}
    _log(state, since, state.since, state.findings_cache.findings, at, offset)


def _log(state: GroupState, before: dict, after: dict, found: list, at: int, offset: int) -> None:
    if state.log is not None and (at, offset) > state.log_after:
        state.log += fnd.transitions(before, after, found, at, offset)


def findings_of(state: GroupState) -> fnd.GroupFindings:
    if state.findings_cache is None:
        state.findings_cache = fnd.compute(state)
    return state.findings_cache


def _nonempty(claims) -> dict:
    return {k: v for k, v in claims.items() if any(v.values())}


def _moves(before, after) -> int:
    """Queues that went to a member that did not hold them, from a member that did."""
    gained: list[tuple] = []
    for key, by_topic in after.items():
        old = before.get(key, {})
        for topic, queues in by_topic.items():
            had = old.get(topic, ())
            if queues != had:
                had_set = set(had)
                gained += [(topic, q) for q in queues if q not in had_set]
    if not gained:
        return 0
    topics = {topic for topic, _ in gained}
    held = set()
    for by_topic in before.values():
        for topic, queues in by_topic.items():
            if topic in topics:
                held.update(zip(repeat(topic), queues))
    return sum(1 for pair in gained if pair in held)
