"""A stored state the job cannot read is reset, never fatal: through the state function as Spark
calls it, a group whose blob does not decode is rebuilt from its next events and counted by
cause, and the other groups of its shard go on as they were."""

import binascii
import json
import zlib

import pandas as pd
import pytest

from streaming.core.contract import COUNTS, METRICS, REMOVED, GroupKey, GroupMetrics, ShardCounts
from streaming.core.state.codec import VERSION
from streaming.core.state.shard import decode_shard, encode_shard
from streaming.core.step import StepConfig
from streaming.spark.state_function import ROUTED_COLUMNS, make_state_function
from tests.unit.spark_key_state import SparkKeyState

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000
FUNCTION = make_state_function(StepConfig())


def heartbeat(group: str, client: str, ts: int = TS) -> bytes:
    return json.dumps({"type": "heartbeat", "ts": ts, "group": group, "client_id": client,
                       "topics": ["T"], "strategy": "AVG"}).encode()


def batch(key: SparkKeyState, rows: list[tuple[str, bytes]], watermark: int | None = None):
    """(group, value) rows of one shard through the state function; its output rows."""
    frame = pd.DataFrame([("rocketmq", group, "default", value, offset, TS, 0)
                          for offset, (group, value) in enumerate(rows)],
                         columns=list(ROUTED_COLUMNS))
    state = key.group_state(watermark, timed_out=False)
    out = [row for frame in FUNCTION((0,), iter([frame]), state)
           for row in frame.itertuples(index=False, name=None)]
    key.keep(state)
    return out


def members(out, group: str) -> int:
    (payload,) = [row[5] for row in out if row[3] == METRICS and row[1] == group]
    return GroupMetrics.from_json(payload).members


def resets(out) -> dict:
    (payload,) = [row[5] for row in out if row[3] == COUNTS]
    return dict(ShardCounts.from_json(payload).resets)


def replaced_blob(key: SparkKeyState, group: str, blob: bytes) -> None:
    replaced_text(key, group, binascii.b2a_base64(blob, newline=False))


def replaced_text(key: SparkKeyState, group: str, armoured: bytes) -> None:
    """The group's blob as the shard stores it (base64) replaced by `armoured`."""
    entries = decode_shard(key.value[0])
    target = GroupKey("rocketmq", group)
    entries[target] = entries[target]._replace(armoured=armoured)
    key.value = (encode_shard(entries),)


@pytest.fixture
def shard() -> SparkKeyState:
    """One shard holding g1 (two members) and g2 (two members)."""
    key = SparkKeyState()
    out = batch(key, [(g, heartbeat(g, c)) for g in ("g1", "g2") for c in ("c1", "c2")])
    assert (members(out, "g1"), members(out, "g2")) == (2, 2)
    return key


@pytest.mark.parametrize(("blob", "cause"), [
    (bytes([VERSION]) + b"not zlib at all", "corrupt_group"),
    (bytes([VERSION]) + zlib.compress(b'{"s": 1}'), "corrupt_group"),
    (bytes([VERSION + 1]) + b"a newer build's state", "unknown_version"),
])
def test_an_unreadable_group_is_rebuilt_from_its_next_events_and_counted(shard, blob, cause):
    replaced_blob(shard, "g1", blob)
    out = batch(shard, [("g1", heartbeat("g1", "c3", TS + 1_000)),
                        ("g2", heartbeat("g2", "c3", TS + 1_000))])
    assert resets(out) == {cause: 1}
    assert members(out, "g1") == 1        # only what came after the reset
    assert members(out, "g2") == 3        # its shard neighbour kept all it had
    # Rebuilt: the next batch reads g1's new state like any other.
    out = batch(shard, [("g1", heartbeat("g1", "c1", TS + 2_000))])
    assert resets(out) == {} and members(out, "g1") == 2


def test_a_blob_whose_stored_text_is_not_base64_resets_only_its_group(shard):
    replaced_text(shard, "g1", b"not*base64")
    out = batch(shard, [("g1", heartbeat("g1", "c3", TS + 1_000)),
                        ("g2", heartbeat("g2", "c3", TS + 1_000))])
    assert resets(out) == {"corrupt_group": 1}
    assert (members(out, "g1"), members(out, "g2")) == (1, 3)


def test_an_unreadable_group_with_no_events_goes_and_is_counted(shard):
    """Due for its timeout with nothing to rebuild it from: removed (the alert says why)."""
    replaced_blob(shard, "g1", b"\x00")
    out = batch(shard, [], watermark=TS + 10 * 60_000)
    assert resets(out) == {"unknown_version": 1}
    assert ("g1", REMOVED) in {(row[1], row[3]) for row in out}


def test_a_shard_that_breaks_off_keeps_the_groups_before_the_break(shard):
    shard.value = (shard.value[0][:-5],)          # g2's entry, the last, is cut short
    out = batch(shard, [("g1", heartbeat("g1", "c3", TS + 1_000)),
                        ("g2", heartbeat("g2", "c3", TS + 1_000))])
    assert resets(out) == {"corrupt_shard": 1}
    assert (members(out, "g1"), members(out, "g2")) == (3, 1)
