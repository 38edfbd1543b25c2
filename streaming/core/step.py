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
after every instant (the events of one millisecond, all applied) or session expiry that changed its
inputs, so the history counters and every finding's `since` do not depend on how events are cut
into batches. A batch that ends inside a millisecond does not cut the instant: the next step
replays the window with the rest of it (`_following`). Events that arrive late
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
instant: its events are applied together and re-run once, and what still reacts more than once
in it (a session expiry at an event's time, late events merged one by one) has its transitions
netted, so a finding that held only inside one millisecond is none. The window is replayed on
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

The group's detail (streaming.core.detail) goes out with a step only when something it shows may
have changed. What it shows changes only in `_react` (a change that asks for a re-run or moves
a broker's member list) or a restart, so a step with no such change after the published point,
and no event at or behind it, emits none: the detail emitted last is still the group's
(tests/unit/test_group_detail.py).

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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import NamedTuple

from streaming.core import findings as fnd
from streaming.core import publication as pub
from streaming.core.contract import (
    FindingIdentity,
    GroupDetail,
    GroupKey,
    GroupMetrics,
    JsonValue,
    Queue2,
    StepOutput,
)
from streaming.core.detail import group_detail
from streaming.core.group_metrics import group_metrics
from streaming.core.state.codec import StoredBody, decode_body, encode, render_state
from streaming.core.state.events import Event
from streaming.core.state.group import (
    Change,
    GroupState,
    apply_event,
    apply_restating,
    expire_next,
    forget_tombstones,
    next_deadline,
)
from streaming.core.state.refresh import Refreshes
from streaming.core.state.rerun import Claims, claims_of, rerun
from streaming.core.state.stored import Stored
from streaming.core.switches import exact_by_default
from streaming.core.times import LONG_AGO, START, Cursor

# The times a step deals in (ts, clock, state.now, the step's now, the watermark, the horizon,
# the published cursor) are each described once, in streaming.core.times.


@dataclass(frozen=True)
class StepConfig:
    """The core's settings. `exact`: every step takes the full definition, with no shortcut
    and no deferral, and sends the group's detail every time (`advance` keeps no refresh;
    the job caches nothing of it either): the twin that each fast path must equal.
    `instant_ms`: the events of one instant (event time floored to a multiple of it) are
    applied together and re-run once."""

    session_timeout_ms: int = 120_000
    kafka_session_timeout_ms: int = 45_000
    reorder_window_ms: int = 10_000
    exact: bool = field(default_factory=exact_by_default)
    instant_ms: int = 1

    def timeout_for(self, system: str) -> int:
        return self.kafka_session_timeout_ms if system == "kafka" else self.session_timeout_ms

    @property
    def reorder_reach_ms(self) -> int:
        """How far behind a group's newest time an event can still fall into a step's window:
        after a step every batch that met time t, the window's lower edge is past
        t - reorder_reach_ms (`_next_horizon` moves it in steps of a window, on an instant)."""
        return 2 * self.reorder_window_ms + self.instant_ms


class Replay:
    """A group's state as a step carries it through events and expiries, with what the step
    keeps beside it and never stores: the claims and findings of the last re-run (so that each
    change is compared with them), and the finding transitions after the published point
    (`log`; None when the replay is not publishing: already published, or a restore), and
    whether anything the group's detail shows changed after the published point (`changed`)."""

    __slots__ = ("state", "claims", "findings", "log", "published", "changed", "exact",
                 "instant_ms")

    def __init__(self, state: GroupState, published: Cursor | None = None,
                 exact: bool = False, instant_ms: int = 1) -> None:
        self.state = state
        self.exact = exact               # StepConfig.exact: no shortcut in _react, every detail
        self.instant_ms = instant_ms     # StepConfig.instant_ms
        self.claims = claims_of(state)
        self.findings: fnd.GroupFindings | None = None
        self.log: list[pub.Transition] | None = None if published is None else []
        self.published = published if published is not None else START
        self.changed = False

    def current_findings(self) -> fnd.GroupFindings:
        if self.findings is None:
            self.findings = fnd.compute(self.state)
        return self.findings


class Window(NamedTuple):
    """What a step cuts for the new blob before it concludes: the settled state (rendered), the
    events still inside the reorder window (`pending_raw`: those kept in their stored JSON form,
    before `pending`) and the window's lower edge."""

    settled: str
    pending: list[tuple[Event, int]]
    horizon: int
    pending_raw: Sequence[JsonValue] = ()


class Stepped(NamedTuple):
    """A step's output, and what the new blob's view takes as a refresh (streaming.core.state.
    refresh; None when the group is gone): the job keeps it beside the blob, so that the next
    batch's refreshes are judged without decoding the blob."""

    output: StepOutput
    refreshes: Refreshes | None


def step(blob: bytes | None, events: Sequence[tuple[Event, int]], *,
         watermark_ms: int | None = None, config: StepConfig = StepConfig()) -> StepOutput:
    """`stepped(...)`'s output."""
    return stepped(blob, events, watermark_ms=watermark_ms, config=config).output


def stepped(blob: bytes | None, events: Sequence[tuple[Event, int]], *,
            watermark_ms: int | None = None, config: StepConfig = StepConfig(),
            refreshes: Sequence[tuple[Event, int]] = ()) -> Stepped:
    """Decode (None = new group), apply, find, publish the transitions since the last step,
    encode. The full replay of the reorder window (`_replay_window`) is the definition; when
    the events all come after the stored view (`_following`), one of three shorter ways gives
    the same output and blob, by where the window's new lower edge falls: where it was
    (`_onto_view_edge_kept`), inside the new events (`_onto_view_edge_in_new_events`), or
    past some stored events only (`_onto_view_edge_past_window`). The differential property
    tests (tests/unit/test_step_properties.py) check each against the full replay.

    `refreshes`: events that the blob's view takes as refreshes, in the order they were kept
    (streaming.core.state.refresh), stepped as if they were in `events`. Those that come
    before every other event go onto the view at once (`apply_restating`), not one by one:
    they restate it, and no session expires before any of them (tests/unit/
    test_refresh_fold.py checks the step against the one given them in `events`)."""
    events = [*refreshes, *events] if refreshes else events
    if blob is None:
        if not events:
            return Stepped(StepOutput(None, None, [], None), None)
        first, _ = min(events, key=_order)
        state = GroupState(first.group, first.system, config.timeout_for(first.system))
        return _replay_window(Stored(state, [], LONG_AGO, {}, LONG_AGO), events, watermark_ms,
                              config, new_group=True)
    body = decode_body(blob)
    following = None if config.exact else _following(body, events, watermark_ms, config,
                                                     refreshes)
    if following is None:
        return _replay_window(body.stored(with_view=False), events, watermark_ms, config)
    if following.horizon == body.horizon:
        return _onto_view_edge_kept(body, following, config)
    if following.events[0][0].ts < following.horizon:
        return _onto_view_edge_in_new_events(body, following, config)
    return _onto_view_edge_past_window(body.stored(with_view=True), following, config)


def refreshes_of(blob: bytes, config: StepConfig = StepConfig()) -> Refreshes:
    """What the blob's view takes as a refresh (the step that wrote the blob gave the same as
    `Stepped.refreshes`). A view kept with another session timeout takes none: a step
    replays its window instead (`_following`)."""
    body = decode_body(blob)
    view = body.view()
    if view is None:
        view = _window_replayed(body, config).state
    accepts = view.session_timeout_ms == config.timeout_for(view.system)
    return Refreshes(view, body.now, body.last_pending(), config.reorder_reach_ms, accepts)


def metrics_of(blob: bytes, config: StepConfig | None = None) -> GroupMetrics:
    """The group's metrics from its blob alone."""
    view = _restored_view(blob, config or StepConfig())
    return group_metrics(view.state, view.current_findings())


def snapshot_of(blob: bytes, config: StepConfig | None = None) -> tuple[GroupMetrics, GroupDetail]:
    """The group's metrics and detail from its blob alone (a restart rebuilds /metrics and the
    group pages with them)."""
    view = _restored_view(blob, config or StepConfig())
    return group_metrics(view.state, view.current_findings()), _detail(view)


def restored_of(blob: bytes, config: StepConfig | None = None,
                ) -> tuple[GroupMetrics, dict[FindingIdentity, int]]:
    """`snapshot_of` without the detail: the metrics, and each finding open in the detail with
    its start (OpenFinding.since). A restart renders a group's detail when it is asked for."""
    view = _restored_view(blob, config or StepConfig())
    return group_metrics(view.state, view.current_findings()), _open_since(view)


def _restored_view(blob: bytes, config: StepConfig) -> Replay:
    """The blob's view as stored, when it stores one: the replay of its window up to its `now`,
    which the exact twin replays (tests/unit/test_group_detail.py compares the two)."""
    body = decode_body(blob)
    view = None if config.exact else body.view()
    return _replay_of(view, config) if view is not None else _window_replayed(body, config)


def _window_replayed(body: StoredBody, config: StepConfig) -> Replay:
    """The blob's settled state with its window replayed up to its `now`: its view."""
    stored = body.stored(with_view=False)
    return _replay(_replay_of(stored.settled, config), stored.pending, stored.now)


def _replay_window(stored: Stored[GroupState], events: Sequence[tuple[Event, int]],
                   watermark_ms: int | None, config: StepConfig,
                   new_group: bool = False) -> Stepped:
    """The full replay, which every other way equals: merge too-late events into the settled
    state, replay the window with the new events (publishing the transitions after the
    published point), cut the new settled state at the new horizon. The detail changed when
    the group is new, the session timeout is another, a late event was merged (the settled
    replay publishes nothing), an event landed at or behind the published point (history
    changed), or a re-run after it changed something."""
    timeout = config.timeout_for(stored.settled.system)
    retimed = stored.settled.session_timeout_ms != timeout
    stored.settled.session_timeout_ms = timeout
    published = Cursor(stored.now, stored.now_offset)
    settled = _replay_of(stored.settled, config)
    for event, offset in sorted((item for item in events if item[0].ts < stored.horizon),
                                key=_order):
        settled.state.late_events += 1
        _react(settled, apply_event(settled.state, event), settled.state.now, offset)
    window = sorted([*stored.pending, *(i for i in events if i[0].ts >= stored.horizon)],
                    key=_order)
    state = settled.state
    clock = max([state.clock, *(e.ts for e, _ in window)])
    now = _step_now(clock, watermark_ms, state.now, stored.now)
    horizon = _next_horizon(stored.horizon, clock, watermark_ms, config)
    behind = (new_group or retimed or settled.changed
              or any(_order(item) <= published for item in events))
    view = _publishing(settled, published)
    view.changed = behind
    pending = _settle(view, window, horizon)
    settled_text = render_state(view.state)  # rendered now: the replay below goes on with it
    _replay(view, pending, now)
    return _conclude(view, stored.open_findings, published, Window(settled_text, pending, horizon),
                     config)


class Following(NamedTuple):
    """A step whose events all come after the stored view: its events in (ts, offset) order,
    the window's new lower edge, the time the step runs to and how many of the first events
    are refreshes of the view (`stepped`'s `refreshes`)."""

    events: list[tuple[Event, int]]
    horizon: int
    now: int
    restating: int = 0


def _following(body: StoredBody, events: Sequence[tuple[Event, int]], watermark_ms: int | None,
               config: StepConfig,
               refreshes: Sequence[tuple[Event, int]] = ()) -> Following | None:
    """Following when every event sorts after the stored window and at or after its `now` (and
    the view was kept with the same session timeout): then replaying the window would repeat,
    step for step, what the stored view already is (expiry runs deadline by deadline, so where
    earlier steps paused does not matter). None otherwise, and when the first event shares
    the instant of the window's last: the replay takes them as one instant."""
    if not events or body.view_session_timeout_ms() != config.timeout_for(body.system()):
        return None
    new = sorted(events, key=_order)
    last = body.last_pending()           # the window is stored in (ts, offset) order
    if new[0][0].ts < body.now or (
            last is not None and new[0][0].ts // config.instant_ms <= last[0] // config.instant_ms):
        return None
    settled_clock, settled_now = body.settled_clock_and_now()
    clock = max(settled_clock, last[0] if last is not None else settled_clock, new[-1][0].ts)
    horizon = _next_horizon(body.horizon, clock, watermark_ms, config)
    return Following(new, horizon, _step_now(clock, watermark_ms, settled_now, body.now),
                     _leading(new, refreshes))


def _leading(ordered: list[tuple[Event, int]], refreshes: Sequence[tuple[Event, int]]) -> int:
    """How many of the ordered items, from the first, are among `refreshes` (the very items,
    not equal ones)."""
    if not refreshes:
        return 0
    marked = {id(item) for item in refreshes}
    count = 0
    for item in ordered:
        if id(item) not in marked:
            break
        count += 1
    return count


def _onto_view_edge_kept(body: StoredBody, following: Following, config: StepConfig) -> Stepped:
    """The window's lower edge stays, so the settled state and the stored window stay as they
    are (not even converted) and the new events go onto the view. Equal to the full replay
    because the view is the replay of that same window up to its `now`, and the new events all
    come after both (`_following`)."""
    published = Cursor(body.now, body.now_offset)
    view = _onto_view(body.view(), following, published, config)  # type: ignore[arg-type]  # _following: a view
    kept = Window(body.settled_text(), following.events, following.horizon, body.pending_raw())
    return _conclude(view, body.open_findings(), published, kept, config)


def _onto_view_edge_in_new_events(body: StoredBody, following: Following,
                                  config: StepConfig) -> Stepped:
    """The window's new lower edge lies past the stored window and inside the new events: the
    view goes on through the new events, and the settled state is cut from it at the edge.
    Equal to the full replay because that replay would apply the whole stored window before the
    edge too, re-run for re-run what the view already is."""
    published = Cursor(body.now, body.now_offset)
    view = _publishing(_replay_of(body.view(), config), published)  # type: ignore[arg-type]  # _following: a view
    pending = _settle(view, following.events, following.horizon, following.restating)
    settled_text = render_state(view.state)
    settled = len(following.events) - len(pending)
    _replay(view, pending, following.now, max(0, following.restating - settled))
    return _conclude(view, body.open_findings(), published,
                     Window(settled_text, pending, following.horizon), config)


def _onto_view_edge_past_window(stored: Stored[GroupState], following: Following,
                                config: StepConfig) -> Stepped:
    """The window's new lower edge lies past some stored events but not into the new ones: only
    stored events leave the window, onto the settled state (they were published through the
    view already, so without publishing); the new events go onto the stored view. Equal to the
    full replay because the settled state and the view each see the same events in the same
    order as that replay's two parts."""
    stored.settled.session_timeout_ms = config.timeout_for(stored.settled.system)
    published = Cursor(stored.now, stored.now_offset)
    settled = _replay_of(stored.settled, config)
    pending = _settle(settled, stored.pending, following.horizon)
    view = _onto_view(stored.view, following, published, config)  # type: ignore[arg-type]  # _following: a view
    kept = Window(render_state(settled.state), [*pending, *following.events], following.horizon)
    return _conclude(view, stored.open_findings, published, kept, config)


def _onto_view(view_state: GroupState, following: Following, published: Cursor,
               config: StepConfig) -> Replay:
    """Apply events that all come after the view, publishing the transitions after
    `published`."""
    view = _publishing(_replay_of(view_state, config), published)
    forget_tombstones(view.state, following.horizon)
    return _replay(view, following.events, following.now, following.restating)


def _replay_of(state: GroupState, config: StepConfig) -> Replay:
    return Replay(state, exact=config.exact, instant_ms=config.instant_ms)


def _publishing(replay: Replay, published: Cursor) -> Replay:
    """From here on, log the finding transitions after `published`."""
    replay.log, replay.published = [], published
    return replay


def _conclude(view: Replay, open_findings: Mapping[FindingIdentity, int],
              published_at: Cursor, window: Window, config: StepConfig) -> Stepped:
    """Findings of the view, the transitions to publish after `published_at`, the new blob
    (`window` gives its settled state and window), and the group's detail if it changed."""
    state = view.state
    current = view.current_findings()
    now = state.now
    open_now = {f.identity: state.since.get(f.identity, now) for f in current.findings}
    by_identity = {f.identity: f for f in current.findings}
    key = GroupKey(state.system, state.group)
    # Every view concluded here is publishing (_publishing): its log is a list.
    changes = pub.publish(open_findings, view.log, open_now, by_identity, key, published_at[0])  # type: ignore[arg-type]
    if not state.members and now > state.clock + state.session_timeout_ms:
        changes += pub.diff(open_now, {}, {}, key, now)
        return Stepped(StepOutput(None, None, changes, None), None)
    reached = max(published_at, (now, -1), *((e.ts, o) for e, o in window.pending[-1:]))
    # With no event inside the window, the view is the settled state plus expiry: the next step
    # gets it as cheaply by replaying nothing, so it is not stored twice.
    kept = Stored(window.settled, window.pending, window.horizon, open_now, reached[0],
                  reached[1], state if window.pending or window.pending_raw else None,
                  list(window.pending_raw))
    refreshes = Refreshes(state, kept.now, _last_pending(kept), config.reorder_reach_ms)
    # Spark wakes the group at its next expiry (of a member, a broker's entry, or the group
    # itself), so a group that goes quiet still expires, and its series go, in event time.
    output = StepOutput(encode(kept), group_metrics(state, current), changes,
                        next_deadline(state),
                        _detail(view, open_now) if view.changed or view.exact else None)
    return Stepped(output, refreshes)


def _detail(view: Replay, open_now: Mapping[FindingIdentity, int] | None = None) -> GroupDetail:
    current = view.current_findings()
    return group_detail(view.state, _open_since(view) if open_now is None else open_now,
                        {f.identity: f.detail for f in current.findings})


def _open_since(view: Replay) -> dict[FindingIdentity, int]:
    """Each finding open in the view, with when it opened (the view's time for one the state
    has no start for)."""
    state = view.state
    return {f.identity: state.since.get(f.identity, state.now)
            for f in view.current_findings().findings}


def _last_pending(stored: Stored[str]) -> Cursor | None:
    """(ts, offset) of the window's last event, as the blob will store it."""
    if stored.pending:
        event, offset = stored.pending[-1]
        return Cursor(event.ts, offset)
    if stored.pending_raw:
        offset, event = stored.pending_raw[-1]
        return Cursor(event["ts"], offset)
    return None


def _order(item: tuple[Event, int]) -> tuple[int, int]:
    """The event's place in the (ts, offset) order; a plain tuple: it is a sort key."""
    return (item[0].ts, item[1])


def _step_now(clock: int, watermark_ms: int | None, *reached: int) -> int:
    """The time a step runs to: the group's newest event, or the watermark if later, and never
    before a time already reached."""
    return max(clock, watermark_ms or 0, *reached)


def _settle(replay: Replay, items: list[tuple[Event, int]], horizon: int,
            restating: int = 0) -> list[tuple[Event, int]]:
    """Apply the items (in order) before the window's lower edge and expire up to it: the state
    becomes the settled state at `horizon`. Returns the items from the edge on. `restating`:
    as for `_replay`."""
    cut = next((i for i, (e, _) in enumerate(items) if e.ts >= horizon), len(items))
    _replay(replay, items[:cut], horizon - 1, min(restating, cut))
    forget_tombstones(replay.state, horizon)
    return items[cut:]


def _next_horizon(current: int, clock: int, watermark_ms: int | None, config: StepConfig) -> int:
    """The window's lower edge: the reorder window behind the clock (or at the watermark, if
    later), moved only in steps of at least the window, so that most steps keep the settled
    state; on an instant's first millisecond, so that no instant is cut by it."""
    window_ms = config.reorder_window_ms
    wanted = max(clock - window_ms, watermark_ms if watermark_ms is not None else LONG_AGO)
    wanted -= wanted % config.instant_ms
    return wanted if wanted >= current + window_ms else current


def _replay(replay: Replay, items: Sequence[tuple[Event, int]], until: int,
            restating: int = 0) -> Replay:
    """Apply items in order, expiring sessions as event time passes, then expire up to until.
    The events of one instant are applied together, then the group reacts once, at the last
    of them that changed something (a poll's 100 joins are one re-run, not 100). A session
    expiry inside an instant ends it: the group reacts to what came before, then expires.
    The first `restating` items are refreshes of the state as the replay starts (`stepped`):
    one by one they would change nothing, expire nothing and start no instant, only move
    times, so they are applied at once (`state.now`, which they would move too, is read only
    at the end, which moves it past them)."""
    if restating:
        apply_restating(replay.state, (event for event, _ in items[:restating]))
        items = items[restating:]
    instant: _Instant | None = None
    per = replay.instant_ms
    for event, offset in items:
        ts = event.ts
        state = replay.state
        if instant is not None and instant.at // per != ts // per:
            _react_to(replay, instant)
            instant = None
        if state.deadline_bound <= ts:
            # The bound is lazy (it depends on where earlier steps paused): only a session that
            # really expires ends the instant.
            if instant is not None and state.members and next_deadline(state) <= ts:
                _react_to(replay, instant)
                instant = None
            _expire(replay, ts)
        elif state.now < ts:
            state.now = ts       # what _expire does when nothing is due, without the call
        if not state.members and ts > state.clock + state.session_timeout_ms:
            if instant is not None:
                _react_to(replay, instant)
                instant = None
            _restart(replay, event, offset)
        change = apply_event(replay.state, event)
        if change.alloc or change.brokers:
            instant = _Instant(ts, offset, change if instant is None
                               else _merged(instant.change, change))
    if instant is not None:
        _react_to(replay, instant)
    _expire(replay, until)
    return replay


class _Instant(NamedTuple):
    """What the events of one instant changed so far, at the time and offset of the last
    event that changed something."""

    at: int
    offset: int
    change: Change


def _react_to(replay: Replay, instant: _Instant) -> None:
    _react(replay, instant.change, instant.at, instant.offset)


def _merged(first: Change, then: Change) -> Change:
    """Two changes as one: a re-run of every member either named (None: all)."""
    members = (None if first.members is None or then.members is None
               else first.members | then.members)
    return Change(first.alloc or then.alloc, members, first.brokers or then.brokers)


def _restart(replay: Replay, event: Event, offset: int) -> None:
    """The group was gone (no member, no event for a session timeout): whether or not a batch
    boundary fell in the gap, it starts afresh here, so batching cannot change its counters."""
    old = replay.state
    _log(replay, old.since, {}, [], event.ts, offset)
    replay.changed |= (event.ts, offset) > replay.published
    fresh = GroupState(old.group, event.system, old.session_timeout_ms)
    fresh.now = event.ts
    replay.state, replay.claims, replay.findings = fresh, {}, None


def _expire(replay: Replay, until: int) -> None:
    while (expired := expire_next(replay.state, until)) is not None:
        _react(replay, expired[1], expired[0])
    replay.state.now = max(replay.state.now, until)


def _react(replay: Replay, change: Change, at: int, offset: int = -1) -> None:
    """After a change at event time `at` (by the event at `offset`; -1 = a session expiry):
    re-run if needed, count churn, track `since`, log the findings that started or ended."""
    state = replay.state
    state.now = max(state.now, at)
    if not change.any:
        return
    replay.changed |= (at, offset) > replay.published
    if change.alloc:
        before = replay.claims
        rerun(state, change.members)
        after = claims_of(state)
        if _nonempty(before) != _nonempty(after):
            state.rebalances += 1
            state.queue_moves += _moves(before, after)
        replay.claims = after
    since = state.since
    if change.alloc:
        _note_assignor(state)
    if change.alloc or replay.findings is None or replay.exact:
        replay.findings = fnd.compute(state)
    else:
        replay.findings = fnd.with_new_broker_lists(state, replay.findings)
    state.since = {f.identity: since.get(f.identity, at) for f in replay.findings.findings}
    _log(replay, since, state.since, replay.findings.findings, at, offset)


def _note_assignor(state: GroupState) -> None:
    """Count a change of the group's assignor (not its first one, nor a group left empty)."""
    assignor = fnd.group_assignor(state)
    if assignor is not None and assignor != state.assignor:
        if state.assignor is not None:
            state.assignor_changes += 1
        state.assignor = assignor


def _log(replay: Replay, before: Mapping[FindingIdentity, int],
         after: Mapping[FindingIdentity, int], found: list[fnd.Finding], at: int,
         offset: int) -> None:
    if replay.log is not None and (at, offset) > replay.published:
        replay.log += pub.transitions(before, after, found, at, offset)


def _nonempty(claims: Claims) -> Claims:
    return {k: v for k, v in claims.items() if any(v.values())}


def _moves(before: Claims, after: Claims) -> int:
    """Queues that went to a member that did not hold them, from a member that did."""
    gained: list[tuple[str, Queue2]] = []
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
    held: set[tuple[str, Queue2]] = set()
    for by_topic in before.values():
        for topic, queues in by_topic.items():
            if topic in topics:
                held.update(zip(repeat(topic), queues))
    return sum(1 for pair in gained if pair in held)
