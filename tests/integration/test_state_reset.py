"""A group whose stored state cannot be read, in a real checkpoint, is reset, not fatal: the job
goes on, counts the reset by cause, rebuilds the group from its next events, and keeps its
shard neighbour as it was.

The corruption is written the way a bad disk or a rollback would leave it, through Spark's own
state store into the job's real checkpoint (RocksDB, on Spark's Kafka source and a real Kafka):
one run of the job's query with a fault injector around the real state function
(`corrupting`), which stores the shard with g1's blob replaced by bytes no build decodes. The
other runs are the plain job.
"""

from __future__ import annotations

import binascii

import pytest

import streaming.spark.job as job_module
from streaming.core.contract import GroupKey
from streaming.core.state.shard import decode_shard, encode_shard
from streaming.core.switches import exact_by_default
from streaming.spark.state_function import make_state_function
from tests.integration.monitor_harness import RunningMonitor, produce_events

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T0 = 1_700_000_000_000
UNREADABLE = b"\x02 not zlib: a blob of the current version that does not decode"
UNREADABLE_TEXT = binascii.b2a_base64(UNREADABLE, newline=False)   # as the shard stores it


def heartbeat(group: str, client: str, ts: int) -> dict:
    return {"type": "heartbeat", "ts": ts, "group": group, "client_id": client,
            "topics": ["T"], "strategy": "AVG"}


def corrupting(target: GroupKey):
    """A fault injector (a fake, for the test only): make_state_function whose stored shard
    value has `target`'s blob replaced by UNREADABLE."""
    def make(*args, **kwargs):
        inner = make_state_function(*args, **kwargs)

        def apply_shard(key, batches, state):
            yield from inner(key, batches, state)
            if state.exists:
                entries = decode_shard(state.get[0])
                if target in entries:
                    entries[target] = entries[target]._replace(armoured=UNREADABLE_TEXT)
                    state.update((encode_shard(entries),))

        return apply_shard
    return make


def members(scrape, group: str) -> float | None:
    return scrape.value("rebalance_group_members", group=group)


def test_an_unreadable_group_state_is_reset_and_the_job_goes_on(
        spark, kafka_bootstrap, make_topic, tmp_path, monkeypatch):
    topic = make_topic(partitions=1)
    # One shard holds both groups (the exact run keeps one group per shard).
    overrides = {} if exact_by_default() else {"state_shards": 1}

    # 1. Both groups with two members each, from the plain job.
    produce_events(kafka_bootstrap, topic, [heartbeat(g, c, T0) for g in ("g1", "g2")
                                            for c in ("c1", "c2")])
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path, **overrides) as monitor:
        monitor.wait_for(lambda m: members(m, "g1") == 2 and members(m, "g2") == 2)
        monitor.catch_up()                  # committed: the next run restores it

    # 2. A batch of both, stored by the injector with g1's blob unreadable.
    monkeypatch.setattr(job_module, "make_state_function",
                        corrupting(GroupKey("rocketmq", "g1")))
    produce_events(kafka_bootstrap, topic, [heartbeat("g1", "c1", T0 + 1_000),
                                            heartbeat("g2", "c3", T0 + 1_000)])
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path, **overrides) as monitor:
        monitor.wait_for(lambda m: members(m, "g2") == 3)
        monitor.catch_up()
    monkeypatch.undo()

    # 3. The plain job on that checkpoint: g1 is not shown (unreadable), then rebuilt from its
    #    next heartbeat and counted; g2 keeps the three members it had; no query restart.
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path, **overrides) as monitor:
        first = monitor.scrape()
        assert members(first, "g1") is None and members(first, "g2") == 3
        # The injector's run may itself have read g1's unreadable blob in a later batch (and
        # counted that reset); this run counts its own.
        before = first.value("rebalance_monitor_state_resets_total", cause="corrupt_group")
        produce_events(kafka_bootstrap, topic, [heartbeat("g1", "c3", T0 + 2_000),
                                                heartbeat("g2", "c4", T0 + 2_000)])
        after = monitor.wait_for(lambda m: members(m, "g1") is not None
                                 and members(m, "g2") == 4)
        assert members(after, "g1") == 1
        assert after.value("rebalance_monitor_state_resets_total",
                           cause="corrupt_group") == before + 1
        assert after.value("rebalance_monitor_state_resets_total", cause="unknown_version") == 0
        assert sum(after.series("rebalance_monitor_query_restarts_total").values()) == 0
