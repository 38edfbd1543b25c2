"""A group whose rows all restate its view by their stems is kept, or stepped with their
events rebuilt from the view, without parsing them (state_function._known_stems,
_from_stems): batch for batch, the same rows, counts and stored shards as the
state function that parses every row (`known_stems=False`)."""

import dataclasses
import json

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core.contract import COUNTS, DEAD_LETTER, METRICS, GroupKey
from streaming.core.state.events import EventParser, stem_and_ts
from streaming.core.state.refresh import kept_cap, stem_digest
from streaming.core.state.shard import decode_shard
from streaming.spark import state_function
from streaming.spark.state_function import (
    ROUTED_COLUMNS,
    RefreshCache,
    make_state_function,
)
from tests.unit.fleet_strategies import ARRIVAL_MS, fleet_batches
from tests.unit.spark_key_state import SparkKeyState
from tests.unit.state_helpers import T0
from tests.unit.step_strategies import CONFIG

pytestmark = pytest.mark.unit

# Sessions long enough for a steady group to keep its refreshes over several batches.
KEEPING = dataclasses.replace(CONFIG, exact=False, session_timeout_ms=60_000)
KEY = GroupKey("rocketmq", "steady")


def _run(batches, known_stems: bool, monkeypatch, cold: bool = False,
         thin_kept: bool = True) -> tuple[list, list]:
    """Each batch through a state function of one shard, on worker caches of its own: the
    rows it emits and the shard's stored value after each batch. `cold`: each batch on a
    worker that has seen none before (a restart, or the other worker), which knows what the
    stored digests say (RefreshCache's recall); `known_stems` off learns every stem by
    parsing (no recall: the twin). `thin_kept` off: a group at its cap steps."""
    function = make_state_function(KEEPING, known_stems=known_stems, thin_kept=thin_kept)
    state, rows, values = SparkKeyState(), [], []
    for number, (records, watermark) in enumerate(batches):
        if cold or number == 0:
            monkeypatch.setattr(state_function, "_PARSER", EventParser())
            monkeypatch.setattr(state_function, "_REFRESHES", RefreshCache(recall=known_stems))
        arrived = [(*key, raw, offset, arrival[0] if arrival else ARRIVAL_MS, 0)
                   for offset, (key, raw, *arrival) in enumerate(records)]
        group_state = state.group_state(watermark, timed_out=not arrived)
        frames = [pd.DataFrame(arrived, columns=list(ROUTED_COLUMNS))] if arrived else []
        rows.append([(*row[:5], bytes(row[5])) for frame in function((0,), iter(frames), group_state)
                     for row in frame.itertuples(index=False, name=None)])
        state.keep(group_state)
        values.append((state.value, state.timeout))
    return rows, values


@st.composite
def steady_batches(draw):
    """Groups that join, then restate themselves (heartbeats and routes again at later
    times) with now and then a change, a late or duplicate event, a time the judge refuses
    or a gap past the session timeout, cut into batches at random, each with a watermark."""
    groups = draw(st.lists(st.sampled_from(["g", "h", "k"]), min_size=1, max_size=3,
                           unique=True))
    clients = {g: [f"c{n}" for n in range(draw(st.integers(1, 3)))] for g in groups}
    nominal = T0
    records = [(GroupKey("rocketmq", g), _route(nominal, g)) for g in groups]
    records += [(GroupKey("rocketmq", g), _heartbeat(nominal, c, g))
                for g in groups for c in clients[g]]
    times = [nominal] * len(records)
    for _ in range(draw(st.integers(1, 80))):
        nominal += draw(st.sampled_from([0, 300, 1_000, 2_500] * 4 + [70_000]))
        group = draw(st.sampled_from(groups))
        ts = nominal + draw(st.sampled_from([0] * 12 + [-5_000, ARRIVAL_MS]))
        if draw(st.integers(0, 5)) == 0:
            raw = _route(ts, group, queues=draw(st.sampled_from([2] * 5 + [3])))
        else:
            raw = _heartbeat(ts, draw(st.sampled_from(clients[group])), group,
                             topics=draw(st.sampled_from([["T"]] * 19 + [["T", "U"]])))
        copies = draw(st.sampled_from([1, 1, 1, 2]))
        records += [(GroupKey("rocketmq", group), raw)] * copies
        times += [nominal] * copies
    cuts = sorted(draw(st.sets(st.integers(1, len(records)), max_size=15)))
    bounds = [0, *cuts, len(records)]
    batches, watermark = [], None
    for start, end in zip(bounds, bounds[1:], strict=False):
        if draw(st.booleans()) and end > start:
            watermark = max(watermark or T0,
                            times[end - 1] - draw(st.sampled_from([10_000, 1_000])))
        batches.append((records[start:end], watermark))
    return batches


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches=st.one_of(steady_batches(), fleet_batches()))
def test_known_stems_give_what_parsing_every_row_gives(batches, monkeypatch):
    assert _run(batches, True, monkeypatch) == _run(batches, False, monkeypatch)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(batches=st.one_of(steady_batches(), fleet_batches()))
def test_a_worker_new_to_every_batch_gives_what_parsing_every_row_gives(batches, monkeypatch):
    """What the stored digests say of the stems, on a worker that knows nothing else of them,
    gives the same rows as the twin; the stored values too, but for the digests (which stems
    a worker met first may differ, see Refreshes.digests)."""
    cold_rows, cold_values = _run(batches, True, monkeypatch, cold=True)
    rows, values = _run(batches, False, monkeypatch, cold=True)
    assert cold_rows == rows
    assert [_without_digests(v) for v in cold_values] == [_without_digests(v) for v in values]
    assert _run(batches, True, monkeypatch)[0] == rows


def _without_digests(stored: tuple) -> tuple:
    value, timeout = stored
    entries = decode_shard(value[0]) if value is not None else {}
    return {key: entry._replace(stems=b"") for key, entry in entries.items()}, timeout


def _route(ts: int, group: str, queues: int = 2) -> bytes:
    return json.dumps({"type": "route", "ts": ts, "group": group, "topic": "T",
                       "brokers": {"b": queues}}).encode()


def _heartbeat(ts: int, client: str = "c1", group: str = KEY.group,
               topics: list[str] | None = None) -> bytes:
    return json.dumps({"type": "heartbeat", "ts": ts, "group": group, "client_id": client,
                       "topics": topics or ["T"], "strategy": "AVG", "broker": "b"}).encode()


def _steady_batches(*last: tuple) -> list:
    """A group's join, two batches of its heartbeat again (the view learns the stem), then
    `last` (records: the raw event and, if not ARRIVAL_MS, its Kafka timestamp)."""
    return [([(KEY, _heartbeat(T0))], None), ([(KEY, _heartbeat(T0 + 100))], None),
            ([(KEY, _heartbeat(T0 + 200))], None), ([(KEY, *record) for record in last], None)]


def test_a_steady_groups_restating_rows_are_not_parsed(monkeypatch):
    parsed = []
    parse = state_function._worker_parse
    monkeypatch.setattr(state_function, "_worker_parse",
                        lambda raw: parsed.append(raw) or parse(raw))
    rows, _ = _run(_steady_batches((_heartbeat(T0 + 300),), (_heartbeat(T0 + 400),)), True,
                   monkeypatch)
    assert not [row for row in rows[-1] if row[3] == METRICS]       # kept, not stepped
    assert _heartbeat(T0 + 300) not in parsed and _heartbeat(T0 + 400) not in parsed
    assert [json.loads(row[5])["events"] for row in rows[-1] if row[3] == COUNTS] == [
        {"heartbeat": 2}]


def test_a_worker_new_to_a_steady_group_knows_its_rows_by_the_stored_digests(monkeypatch):
    """A worker that has not seen the group (a restart) parses none of its restating rows: the
    shard entry names the digests of the stems its view knows. The twin parses them."""
    parsed = []
    parse = state_function._worker_parse
    monkeypatch.setattr(state_function, "_worker_parse",
                        lambda raw: parsed.append(raw) or parse(raw))
    batches = _steady_batches((_heartbeat(T0 + 300),), (_heartbeat(T0 + 400),))
    rows, values = _run(batches, True, monkeypatch, cold=True)
    assert not [row for row in rows[-1] if row[3] == METRICS]       # kept, not stepped
    assert _heartbeat(T0 + 300) not in parsed and _heartbeat(T0 + 400) not in parsed
    assert _run(batches, False, monkeypatch, cold=True)[0] == rows
    assert _heartbeat(T0 + 400) in parsed


def test_digests_of_another_view_or_cut_short_are_not_recalled(monkeypatch):
    """The digests are a cache: bytes that do not unpack, or name a source the view has not,
    leave the worker to parse (no reset, nothing counted), with the same rows."""
    batches = _steady_batches((_heartbeat(T0 + 300),), (_heartbeat(T0 + 400),))
    expected, _ = _run(batches, True, monkeypatch, cold=True)
    stem, _ = stem_and_ts(_heartbeat(T0))
    for stems in (b"\x01abc", b"\x7f" + stem_digest(stem)):     # source 127: not the view's
        monkeypatch.setattr(state_function, "_stored_entries", _stems_overwritten(stems))
        assert _run(batches, True, monkeypatch, cold=True)[0] == expected


def _stems_overwritten(stems: bytes):
    stored = state_function._stored_entries

    def read(state, counts):
        return {key: entry._replace(stems=stems) for key, entry in stored(state, counts).items()}
    return read


def test_a_steady_groups_rows_after_a_step_are_still_known_by_their_stems(monkeypatch):
    """A step that leaves a member's facts as they were (here a route's queues change) keeps
    what the group knew of that member's stems: its next heartbeat is not parsed."""
    parsed = []
    parse = state_function._worker_parse
    monkeypatch.setattr(state_function, "_worker_parse",
                        lambda raw: parsed.append(raw) or parse(raw))
    batches = [([(KEY, _route(T0, KEY.group)), (KEY, _heartbeat(T0))], None),
               ([(KEY, _heartbeat(T0 + 100))], None),
               ([(KEY, _route(T0 + 200, KEY.group, queues=3))], None),
               ([(KEY, _heartbeat(T0 + 300))], None)]
    rows, _ = _run(batches, True, monkeypatch)
    assert [row[3] for row in rows[2] if row[3] == METRICS] == [METRICS]     # the step
    assert _heartbeat(T0 + 100) in parsed and _heartbeat(T0 + 300) not in parsed
    assert not [row for row in rows[3] if row[3] == METRICS]                 # kept


@pytest.mark.parametrize("record, reason", [
    ((_heartbeat(T0 + 400), T0 + 400 - 400_000), "future_timestamp"),   # 400 s ahead of Kafka
    ((_heartbeat(1),), "bad_timestamp"),
])
def test_a_known_stem_at_a_time_the_judge_refuses_is_a_dead_letter(record, reason, monkeypatch):
    for known_stems in (True, False):
        rows, _ = _run(_steady_batches((_heartbeat(T0 + 300),), record), known_stems,
                       monkeypatch)
        assert [(row[3], row[4]) for row in rows[-1] if row[3] == DEAD_LETTER] == [
            (DEAD_LETTER, reason)]


def test_a_group_at_its_cap_steps_with_its_rows_rebuilt_not_parsed(monkeypatch):
    """Rows that would pass the group's cap of kept refreshes make it step (unthinned): the state function
    steps with each row's event rebuilt from the view by its stem, not parsed, as the twin
    does with the parsed rows."""
    cap = kept_cap(KEY.group, 1)
    ts = iter(range(T0 + 300, T0 + 300 + 100 * (cap + 2), 100))
    filling = [(_heartbeat(next(ts)),) for _ in range(cap - 2)]
    passing = [(_heartbeat(next(ts)),) for _ in range(3)]
    batches = [*_steady_batches(*filling), ([(KEY, *record) for record in passing], None)]
    parsed = []
    parse = state_function._worker_parse
    monkeypatch.setattr(state_function, "_worker_parse",
                        lambda raw: parsed.append(raw) or parse(raw))
    rows, values = _run(batches, True, monkeypatch, thin_kept=False)
    assert [row[3] for row in rows[-2] if row[3] == METRICS] == []        # kept: 2 + cap - 2
    assert [row[3] for row in rows[-1] if row[3] == METRICS] == [METRICS]  # 3 more: it steps
    assert not set(parsed) & {raw for raw, in passing}
    assert [json.loads(row[5])["events"] for row in rows[-1] if row[3] == COUNTS] == [
        {"heartbeat": 3}]
    assert (rows, values) == _run(batches, False, monkeypatch, thin_kept=False)


def _alive(ts: int, clients: list[str]) -> bytes:
    return json.dumps({"type": "alive", "ts": ts, "group": KEY.group, "broker": "b",
                       "members": [[client] for client in clients]}).encode()


def test_rows_known_by_their_stems_are_counted_by_their_own_type(monkeypatch):
    """Heartbeats, routes and `alive` events kept by their stems are counted as the types they
    parse to (Refreshes.type_of tells it from the source, without rebuilding the event)."""
    records = [(KEY, raw) for raw in (_route(T0, KEY.group), _heartbeat(T0), _heartbeat(T0, "c2"))]
    later = [_route(T0 + 300, KEY.group), _heartbeat(T0 + 300), _alive(T0 + 300, ["c1", "c2"])]
    again = [raw.replace(str(T0 + 300).encode(), str(T0 + 600).encode()) for raw in later]
    batches = [(records, None), ([(KEY, raw) for raw in later], None),
               ([(KEY, raw) for raw in again], None)]
    parsed = []
    parse = state_function._worker_parse
    monkeypatch.setattr(state_function, "_worker_parse",
                        lambda raw: parsed.append(raw) or parse(raw))
    rows, _ = _run(batches, True, monkeypatch)
    assert not set(again) & set(parsed)                           # known by their stems
    assert [json.loads(row[5])["events"] for row in rows[-1] if row[3] == COUNTS] == [
        {"route": 1, "heartbeat": 1, "alive": 1}]
