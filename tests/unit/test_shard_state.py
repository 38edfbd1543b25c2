"""The state keyed by shards of groups gives, batch for batch, what state keyed by each group gave.

The reference below is Spark's own per-key semantics for applyInPandasWithState with an
event-time timeout (FlatMapGroupsWithStateExec): a key with rows in the batch is called with
them; a key without rows whose timeout lies before the watermark is called timed out; each group
advanced its own entry (streaming.core.advance: its blob, its timeout, its kept refreshes). A
key whose rows were all dead letters counts as one without rows, so that no group keeps a timeout
the watermark passed. The state function runs with pyspark's real GroupState, carried from batch
to batch as Spark carries it."""

import binascii
import dataclasses
import json
import struct

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core.advance import advance
from streaming.core.contract import METRICS, GroupKey, ShardCounts
from streaming.core.state.events import parse_event
from streaming.core.state.refresh import Kept, pack_kept
from streaming.core.state.shard import (
    NO_TIMEOUT,
    ShardEntry,
    ShardFormatError,
    decode_shard,
    encode_shard,
)
from streaming.core.step import step
from streaming.spark.parse import UNROUTABLE_KEY
from streaming.spark.state_function import (
    COUNTS,
    DEAD_LETTER,
    ROUTED_COLUMNS,
    RefreshCache,
    make_state_function,
)
from tests.unit.fleet_strategies import ARRIVAL_MS, KEYS, UNROUTABLE, fleet_batches
from tests.unit.spark_key_state import SparkKeyState
from tests.unit.state_helpers import T0
from tests.unit.step_strategies import CONFIG

pytestmark = pytest.mark.unit


KEPT = st.builds(Kept, st.integers(0, 2**32 - 1), st.integers(-2**63, 2**63 - 1),
                 st.integers(-2**63, 2**63 - 1))


ENTRIES = st.builds(lambda entry, stems: entry._replace(stems=stems),
                    st.builds(ShardEntry.of, st.binary(), st.integers(-1, 2**62),
                              st.lists(KEPT, max_size=4).map(pack_kept)),
                    st.binary(max_size=40))


@given(st.dictionaries(
    st.builds(GroupKey, st.sampled_from(["kafka", "rocketmq", UNROUTABLE_KEY]), st.text()),
    ENTRIES))
def test_a_shard_decodes_to_the_entries_it_was_encoded_from(entries):
    assert decode_shard(encode_shard(entries)) == entries


@given(st.dictionaries(st.builds(GroupKey, st.sampled_from(["kafka", "rocketmq"]), st.text()),
                       ENTRIES))
def test_a_shards_value_is_ascii(entries):
    """Spark pickles the state it hands to Python as a latin-1 string encoded as UTF-8: a copy
    for ASCII, a loop over the bytes for the rest (streaming.core.state.shard, format 4)."""
    assert encode_shard(entries).isascii()


def test_a_group_name_over_64_kib_is_kept():
    """Names are bounded only by --max-event-bytes (1 MiB by default)."""
    entries = {GroupKey("kafka", "g" * 70_000): ShardEntry.of(b"blob", 1)}
    assert decode_shard(encode_shard(entries)) == entries


def test_a_shard_of_format_1_is_read_with_nothing_kept():
    """Format 1 (before kept refreshes): per entry the four lengths and timeout, then system,
    group and blob. A checkpoint written by the version before goes on."""
    v1 = b"\x01" + b"".join(
        struct.pack(">IIIq", len(system), len(group), len(blob), timeout) + system + group + blob
        for system, group, blob, timeout in ((b"kafka", b"g", b"blob-1", 5),
                                             (b"rocketmq", b"h", b"blob-2", -1)))
    assert decode_shard(v1) == {GroupKey("kafka", "g"): ShardEntry.of(b"blob-1", 5),
                                GroupKey("rocketmq", "h"): ShardEntry.of(b"blob-2", -1)}


def test_a_shard_of_format_4_is_read():
    """Format 4: the entries of format 3 with varint kept refreshes, all in one base64 text. A
    checkpoint written by the version before goes on."""
    kept = pack_kept([Kept(3, 7_000, 41)])
    raw = b"".join(
        struct.pack(">IIIq", len(system), len(group), len(blob), timeout) + system + group + blob
        + struct.pack(">I", len(kept)) + kept + struct.pack(">I", len(cluster)) + cluster
        for system, group, blob, timeout, cluster in ((b"kafka", b"g", b"blob-1", 5, b"eu"),
                                                      (b"rocketmq", b"h", b"blob-2", -1, b"")))
    v4 = b"\x04" + binascii.b2a_base64(raw, newline=False)
    assert decode_shard(v4) == {GroupKey("kafka", "g", "eu"): ShardEntry.of(b"blob-1", 5, kept),
                                GroupKey("rocketmq", "h", ""): ShardEntry.of(b"blob-2", -1, kept)}


def test_a_shard_of_format_5_is_read_with_no_digests():
    """Format 5: no digests of stems among an entry's fields. A checkpoint written by the
    version before goes on; its workers learn the stems by parsing, as before."""
    kept = pack_kept([Kept(3, 7_000, 41)])
    fields = struct.pack(">IIIIq", 5, 1, 2, len(kept), 5) + b"kafkageu" + kept
    v5 = b"\x05" + binascii.b2a_base64(fields, newline=False) + b" YmxvYg==\n"
    assert decode_shard(v5) == {GroupKey("kafka", "g", "eu"): ShardEntry.of(b"blob", 5, kept)}


def test_a_group_that_does_not_step_is_written_back_as_the_text_it_was_read_as():
    value = encode_shard({GroupKey("kafka", "g"): ShardEntry.of(b"blob-1", 5),
                          GroupKey("kafka", "h"): ShardEntry.of(b"blob-2", 5)})
    entries = decode_shard(value)
    assert encode_shard(entries) == value
    assert value.count(binascii.b2a_base64(b"blob-1", newline=False)) == 1


FIELDS_OF_G = binascii.b2a_base64(struct.pack(">IIIIq", 5, 1, 0, 0, 5) + b"kafkag",
                                  newline=False)
FIELDS_OF_G_6 = binascii.b2a_base64(struct.pack(">IIIIIq", 5, 1, 0, 0, 9, 5) + b"kafkag" +
                                    bytes(9), newline=False)


@pytest.mark.parametrize("value", [b"", b"\x07", b"\x02\x00", b"\x01" + b"\x00" * 20 + b"\xff",
                                   b"\x01" + bytes(11) + b"\x05" + bytes(8) + b"ab",
                                   b"\x02" + bytes(11) + b"\x01" + bytes(8) + b"a" + b"\x00\x00\x00\x28"
                                   + bytes(20),
                                   b"\x02" + bytes(11) + b"\x01" + bytes(8) + b"a" + b"\x00\x00\x00\x13"
                                   + bytes(19),
                                   b"\x04" + b"AAAA!AAA", b"\x04" + b"AAAAAQ",
                                   b"\x04" + binascii.b2a_base64(bytes(20), newline=False),
                                   b"\x05" + FIELDS_OF_G + b" YmxvYg==",       # cut: no line end
                                   b"\x05" + FIELDS_OF_G + b"\n",              # no blob
                                   b"\x05" + b"!!!!" + b" YmxvYg==\n",          # fields not base64
                                   b"\x05" + FIELDS_OF_G[:-4] + b" YmxvYg==\n",
                                   b"\x05" + binascii.b2a_base64(bytes(25), newline=False)
                                   + b" YmxvYg==\n",
                                   b"\x06" + FIELDS_OF_G + b" YmxvYg==\n",  # format 5's fields
                                   b"\x06" + FIELDS_OF_G_6[:-4] + b" YmxvYg==\n"])
def test_bytes_of_another_format_or_cut_short_are_refused(value):
    with pytest.raises(ShardFormatError):
        decode_shard(value)


def _shard_run(batches, shard_of) -> list[list[tuple]]:
    """Each batch through the state function, one call per shard as Spark makes them."""
    function, stored, out = make_state_function(CONFIG), {}, []
    for records, watermark in batches:
        by_shard: dict[int, list] = {}
        for offset, (key, raw) in enumerate(records):
            by_shard.setdefault(shard_of(key), []).append((*key, raw, offset, ARRIVAL_MS, 0))
        rows = []
        for shard in sorted({*by_shard, *stored}):
            kept = stored.setdefault(shard, SparkKeyState())
            arrived = by_shard.get(shard)
            due = kept.timeout != NO_TIMEOUT and kept.timeout < (watermark or 0)
            if arrived is None and not due:
                continue
            state = kept.group_state(watermark, timed_out=arrived is None)
            frames = [] if arrived is None else [
                pd.DataFrame(arrived, columns=list(ROUTED_COLUMNS))]
            for frame in function((shard,), iter(frames), state):
                rows += list(frame.itertuples(index=False, name=None))
            kept.keep(state)
        out.append(rows)
    return out, {shard: decode_shard(kept.value[0]) for shard, kept in stored.items()
                 if kept.value is not None}


def _per_group_run(batches):
    """The reference: the core's advance per group key, called as Spark called each group's
    key (the group's own state being its entry: blob, timeout and kept refreshes)."""
    entries, out = {}, []
    for records, watermark in batches:
        arrived: dict[GroupKey, list] = {}
        for offset, (key, raw) in enumerate(records):
            arrived.setdefault(key, []).append((raw, offset))
        rows, valid, events_of = [], 0, {}
        for key, raw_rows in arrived.items():
            events = []
            for raw, offset in raw_rows:
                parsed = parse_event(raw) if key != UNROUTABLE else None
                if isinstance(parsed, list) and parsed[0].system == key.system:
                    events += [(e, offset) for e in parsed if e.group == key.group]
                else:
                    rows.append((*key, DEAD_LETTER, raw))
            valid += len(events)
            if events:
                events_of[key] = events
        # A key whose rows were all dead letters counts as one without rows.
        due = [k for k, e in entries.items() if k not in events_of and e.timeout_ms < (watermark or 0)]
        for key in [*events_of, *due]:
            advanced = advance(entries.get(key), events_of.get(key, []), watermark, CONFIG)
            output = advanced.output
            if advanced.entry is None:
                entries.pop(key, None)
            else:
                entries[key] = advanced.entry
            if output is None:
                continue
            rows += [(*key, "finding", r.to_json()) for r in output.findings]
            if output.metrics is not None:
                rows.append((*key, "metrics", output.metrics.to_json()))
            elif output.blob is None:
                rows.append((*key, "removed", b""))
            if output.detail is not None:
                rows.append((*key, "detail", output.detail.to_json()))
        out.append((rows, valid))
    return out, entries


def _comparable(rows) -> list[tuple]:
    """Rows without the counts (compared on their own) and without reasons, per group in order."""
    kept = [(system, group, cluster, kind, bytes(payload))
            for system, group, cluster, kind, _, payload in rows if kind != COUNTS]
    return sorted(kept, key=lambda row: row[:3])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet_batches(), st.sampled_from([1, 2, 3]))
def test_shards_of_groups_equal_one_state_per_group(batches, shards):
    def shard_of(key: GroupKey) -> int:
        return KEYS.index(key) % shards if key in KEYS else 0

    sharded, entries = _shard_run(batches, shard_of)
    per_group, blobs = _per_group_run(batches)
    for got, (want, valid) in zip(sharded, per_group, strict=True):
        assert _comparable(got) == sorted(want, key=lambda row: row[:3])
        counts = [ShardCounts.from_json(payload) for *_, kind, _, payload in got if kind == COUNTS]
        assert sum(sum(c.events.values()) for c in counts) == valid
        assert sum(sum(c.invalid.values()) for c in counts) == sum(
            1 for row in want if row[3] == DEAD_LETTER)
    # The stems' digests are the workers' cache, which the core alone does not write.
    assert {k: e._replace(stems=b"") for shard in entries.values()
            for k, e in shard.items()} == blobs


def heartbeat(group: str, client: str, ts: int) -> tuple:
    event = {"type": "heartbeat", "ts": ts, "group": group, "client_id": client,
             "topics": ["T"], "strategy": "AVG"}
    return GroupKey("rocketmq", group), json.dumps(event).encode()


def test_a_quiet_group_in_a_busy_shard_expires_when_its_own_key_would_have():
    """The shard has rows every batch (another group's), so Spark never times it out: the
    state function must step the quiet group itself once the watermark passes its timeout."""
    batches = [([heartbeat("quiet", "c1", T0), heartbeat("busy", "c2", T0)], None)]
    batches += [([heartbeat("busy", "c2", T0 + n * 500)], T0 + n * 500 - 100)
                for n in range(1, 8)]
    sharded, entries = _shard_run(batches, lambda key: 0)
    removed = [row[:4] for rows in sharded for row in rows if row[3] == "removed"]
    assert removed == [("rocketmq", "quiet", "default", "removed")]
    assert list(entries[0]) == [GroupKey("rocketmq", "busy")]
    per_group, _ = _per_group_run(batches)
    assert [_comparable(rows) for rows in sharded] == [
        sorted(rows, key=lambda row: row[:3]) for rows, _ in per_group]


def test_a_group_with_only_dead_letters_past_its_timeout_expires():
    """Its rows arrived but none is an event: it is stepped as due, and the shard's timeout is
    never set behind the watermark (pyspark raises INVALID_TIMEOUT_TIMESTAMP for that)."""
    broken = (GroupKey("rocketmq", "quiet"),
              json.dumps({"type": "heartbeat", "ts": T0, "group": "quiet",
                          "system": "rocketmq"}).encode())
    batches = [([heartbeat("quiet", "c1", T0)], None), ([broken], T0 + 60_000)]
    sharded, entries = _shard_run(batches, lambda key: 0)
    assert [row[3] for row in sharded[1]] == [DEAD_LETTER, "removed", COUNTS]
    assert entries == {}


def test_the_refresh_cache_holds_one_entry_per_group_used_only_for_its_own_blob():
    a, b, c = (ShardEntry.of(step(None, [(parse_event(heartbeat("g", client, T0)[1])[0], 0)],
                                  config=CONFIG).blob, NO_TIMEOUT)
               for client in ("c1", "c2", "c3"))
    g, h, k = (GroupKey("rocketmq", name) for name in ("g", "h", "k"))
    cache = RefreshCache(max_groups=2)
    first = cache.lookup(g, a, CONFIG)
    assert cache.lookup(g, a, CONFIG) is first
    replaced = cache.lookup(g, b, CONFIG)             # the group's blob changed: built again
    assert replaced is not first and replaced.sources != first.sources
    assert len(cache) == 1
    cache.lookup(h, a, CONFIG)
    cache.lookup(g, b, CONFIG)                        # g is now the most recent
    cache.lookup(k, c, CONFIG)
    assert len(cache) == 2 and cache.lookup(g, b, CONFIG) is replaced
    cache.remember(g, None, None)                     # the group is gone
    assert len(cache) == 1


WORKER_TASKS = """
import gc
from streaming.spark.state_function import _tune_worker_gc

_tune_worker_gc()                                  # the worker's first task
held = [{"group": [n]} for n in range(100_000)]    # what its caches keep after it
before = len(gc.get_objects())
_tune_worker_gc()                                  # the next task
after = len(gc.get_objects())
cycle = []
cycle.append(cycle)
del cycle
print(before, after, gc.collect())
"""


def test_each_task_takes_what_the_worker_holds_out_of_the_collection_after_it():
    """Spark's daemon runs a full collection after every task of a reused worker; what the
    caches hold must not be scanned by it, while a new cycle is still collected. In a child
    process: freezing is process-wide."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", WORKER_TASKS], capture_output=True, text=True,
                          check=True)
    before, after, collected = map(int, done.stdout.split())
    assert before > 200_000
    assert after < 10_000
    assert collected >= 1


def test_each_task_of_the_pickled_function_reaches_the_workers_own_caches(monkeypatch):
    """Spark pickles the state function (cloudpickle, by value: it is a closure) and a worker
    unpickles it for every task. What the function holds is pickled with it, so a cache it held
    would reach every task as the driver's empty copy; at 10,000 groups that cost about a third
    of the workers' time (each group's blob decoded again at every batch, each event parsed
    again). Two tasks of one shard, each from its own unpickling, as a reused worker runs them:
    this process's caches (fresh ones here) hold the group's refreshes and its event."""
    from pyspark import cloudpickle

    from streaming.core.state.events import EventParser
    from streaming.spark import state_function

    monkeypatch.setattr(state_function, "_PARSER", EventParser())
    monkeypatch.setattr(state_function, "_REFRESHES", RefreshCache())
    shipped = cloudpickle.dumps(make_state_function(dataclasses.replace(CONFIG, exact=False)))
    key = GroupKey("rocketmq", "pickled-for-each-task")
    _, raw = heartbeat(key.group, "c1", T0)
    state = SparkKeyState()
    for watermark in (None, T0 - 100):
        task = cloudpickle.loads(shipped)
        frame = pd.DataFrame([(*key, raw, 0, ARRIVAL_MS, 0)], columns=list(ROUTED_COLUMNS))
        group_state = state.group_state(watermark, timed_out=False)
        list(task((0,), iter([frame]), group_state))
        state.keep(group_state)
        cached = state_function._REFRESHES._by_group.get(key)
        assert cached is not None and cached[0] == decode_shard(state.value[0])[key].armoured
        assert len(state_function._PARSER) == 1


def test_a_group_that_keeps_its_refreshes_is_not_decoded_when_the_worker_knows_its_blob(
        monkeypatch):
    """Its blob is compared as the text the shard stores and written back as that text: a
    steady fleet decodes the blobs of the groups that step, not of every group."""
    from streaming.spark import state_function

    monkeypatch.setattr(state_function, "_REFRESHES", RefreshCache())
    function = make_state_function(dataclasses.replace(CONFIG, exact=False))
    key = GroupKey("rocketmq", "steady")
    state = SparkKeyState()
    decoded = []
    blob_of = ShardEntry.blob

    def run(ts: int) -> list:
        _, raw = heartbeat(key.group, "c1", ts)
        frame = pd.DataFrame([(*key, raw, 0, ARRIVAL_MS, 0)], columns=list(ROUTED_COLUMNS))
        group_state = state.group_state(None, timed_out=False)
        out = [row for frame in function((0,), iter([frame]), group_state)
               for row in frame.itertuples(index=False, name=None)]
        state.keep(group_state)
        return out

    run(T0)
    monkeypatch.setattr(ShardEntry, "blob", property(lambda entry: decoded.append(entry)
                                                     or blob_of.fget(entry)))
    stored = decode_shard(state.value[0])[key].armoured
    assert not [row for row in run(T0 + 1_000) if row[3] == METRICS]    # kept, not stepped
    assert decoded == [] and decode_shard(state.value[0])[key].armoured == stored
