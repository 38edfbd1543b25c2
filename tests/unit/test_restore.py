"""A restart shows each stored group as the job last published it: the rows the workers build
from the stored shards (streaming.spark.restore), filed on the driver, give /metrics and the
group pages what the state function's last step sent for each group, and an unreadable shard
or group is counted and logged once, never fatal. (A real restart through Spark's state store
reader: tests/integration/test_restart.py.)"""

import json
import logging
import zlib

import pandas as pd
import pytest

from streaming.core.contract import DETAIL, METRICS, GroupDetail, GroupKey, GroupMetrics
from streaming.core.state.codec import VERSION
from streaming.core.state.shard import ShardEntry, decode_shard, encode_shard
from streaming.core.step import StepConfig
from streaming.exporter import SnapshotStore
from streaming.spark.restore import UNREADABLE, file_snapshots, snapshot_rows
from streaming.spark.state_function import ROUTED_COLUMNS, make_state_function
from tests.unit.spark_key_state import SparkKeyState

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000
FUNCTION = make_state_function(StepConfig())


def heartbeat(group: str, client: str, ts: int, topics=("T",)) -> bytes:
    return json.dumps({"type": "heartbeat", "ts": ts, "group": group, "client_id": client,
                       "topics": list(topics), "strategy": "AVG"}).encode()


def published(key: SparkKeyState, rows: list[tuple[str, str, bytes]]) -> dict:
    """(group, cluster, value) rows of one shard through the state function; the last
    METRICS and DETAIL payload it sent for each group."""
    frame = pd.DataFrame([("rocketmq", group, cluster, value, offset, TS, 0)
                          for offset, (group, cluster, value) in enumerate(rows)],
                         columns=list(ROUTED_COLUMNS))
    state = key.group_state(None, timed_out=False)
    sent = {(row[1], row[2], row[3]): row[5]
            for out in FUNCTION((0,), iter([frame]), state)
            for row in out.itertuples(index=False, name=None) if row[3] in (METRICS, DETAIL)}
    key.keep(state)
    return sent


@pytest.fixture
def shard() -> tuple[SparkKeyState, dict]:
    """One shard: g1 in cluster east (two members, one of them subscribed apart: a finding),
    g2 in the default cluster; what the job last published for them."""
    key = SparkKeyState()
    sent = published(key, [("g1", "east", heartbeat("g1", "c1", TS)),
                           ("g1", "east", heartbeat("g1", "c2", TS, ("T", "U"))),
                           ("g2", "default", heartbeat("g2", "c1", TS))])
    sent.update(published(key, [("g2", "default", heartbeat("g2", "c2", TS + 40_000))]))
    return key, sent


def restored(blobs) -> tuple[SnapshotStore, int]:
    store = SnapshotStore()
    return store, file_snapshots(snapshot_rows(blobs, StepConfig()), store)


def test_each_group_is_restored_as_the_job_last_published_it(shard):
    key, sent = shard
    store, count = restored([key.value[0]])
    assert count == 2
    for group, cluster in (("g1", "east"), ("g2", "default")):
        metrics = store.group(GroupKey("rocketmq", group, cluster))
        assert metrics == GroupMetrics.from_json(sent[group, cluster, METRICS])
        detail = store.details.get(GroupKey("rocketmq", group, cluster))
        assert detail == GroupDetail.from_json(sent[group, cluster, DETAIL])
    assert store.group(GroupKey("rocketmq", "g2")).members == 2
    assert store.details.get(GroupKey("rocketmq", "g1", "east")).findings


def test_an_unreadable_group_or_shard_is_counted_and_logged_once(shard, caplog):
    key, _ = shard
    entries = decode_shard(key.value[0])
    g2 = GroupKey("rocketmq", "g2")
    garbage = ShardEntry.of(bytes([VERSION]) + zlib.compress(b'{"s": 1}'), 0)
    with_bad_group = encode_shard({**entries, g2: garbage})
    rows = list(snapshot_rows([with_bad_group, key.value[0][:-5], None], StepConfig()))
    assert [kind for kind, _ in rows].count(UNREADABLE) == 2   # g2's blob; the cut shard
    with caplog.at_level(logging.ERROR, logger="streaming.spark.restore"):
        store = SnapshotStore()
        assert file_snapshots(rows, store) == 2               # g1 twice, g2 from neither
    assert [r.getMessage() for r in caplog.records] == [
        "2 stored group states or shards could not be read: not shown until their groups' "
        "next events rebuild them"]
    assert store.group(g2) is None and store.group(GroupKey("rocketmq", "g1", "east"))
