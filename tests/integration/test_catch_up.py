"""Catching up a backlog loses nothing: every record the broker acknowledged is applied to a
group's state or dead-lettered with its reason, whatever the partitions' relative progress.

The backlog is written before any job starts, on three partitions of unequal density: a hot group
of 100 clients fills partition 0, 20 groups of 3 clients share partition 1, 10 groups and the
malformed records share partition 2. A capped batch takes about the same number of records from
every partition, so the sparse partitions run ahead in event time and the watermark follows them:
the hot group's records reach the stateful operator behind the watermark. The job is SIGKILLed
mid-catch-up and restarted on its checkpoint. Ground truth is what the broker acknowledged to the
producer (delivery reports), never another run of the job.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streaming.common.topics import create_topic
from streaming.spark.sinks import REASON_HEADER
from tests.integration.job_process import (
    SPARK_SUBMIT_ARGS,
    JobProcess,
    batch_in_flight,
    committed_batches,
    settled,
)
from tests.support import COUNTED_WRITES, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BASE_MS = 1_700_000_000_000
ROUNDS, ROUND_MS = 30, 10_000
WATERMARK_DELAY_MS = 30_000  # the job's default --watermark-delay
MAX_OFFSETS_PER_TRIGGER = 600
HOT_CLIENTS = 100
# partition -> its groups (name, clients); the malformed records go to partition 2.
LAYOUT = {0: [("hot", HOT_CLIENTS)],
          1: [(f"p1-g{i}", 3) for i in range(20)],
          2: [(f"p2-g{i}", 3) for i in range(10)]}
TOPIC = "Orders"


def heartbeat(group: str, client: int, ts: int) -> dict:
    return {"v": 1, "type": "heartbeat", "ts": ts, "group": group, "client_id": f"c{client}",
            "topics": [TOPIC], "strategy": "AVG"}


def route(groups: list[str], ts: int) -> dict:
    return {"v": 1, "type": "route", "ts": ts, "groups": groups, "topic": TOPIC,
            "brokers": {"broker-a": 8, "broker-b": 8}}


def malformed(round_: int, i: int) -> bytes:
    return [b"not json %d/%d" % (round_, i),
            json.dumps({"v": 1, "type": "heartbeat", "ts": BASE_MS + round_ * ROUND_MS,
                        "group": "p2-g0", "topics": [TOPIC]}).encode(),      # no client_id
            json.dumps({"v": 1, "type": "bogus", "ts": BASE_MS + round_ * ROUND_MS,
                        "group": f"p2-g{i}", "n": round_}).encode()][i % 3]


def backlog(extra: list[tuple[int, bytes, int]] = ()) -> list[tuple[int, bytes | None, bytes, int]]:
    """(partition, key, value, kafka timestamp) in the order they are produced: each partition in
    event-time order, as a fleet writes them. One route per partition names all its groups (the
    router fans it out); `extra` records go first on their partition."""
    records = [(p, None, value, ts) for p, value, ts in extra]
    for p, groups in LAYOUT.items():
        records.append((p, None, json.dumps(route([g for g, _ in groups], BASE_MS)).encode(),
                        BASE_MS))
    for r in range(ROUNDS):
        ts = BASE_MS + r * ROUND_MS
        for p, groups in LAYOUT.items():
            for group, clients in groups:
                records += [(p, group.encode(), json.dumps(heartbeat(group, c, ts)).encode(), ts)
                            for c in range(clients)]
        records += [(2, None, malformed(r, i), ts) for i in range(5)]
    return records


@dataclass(frozen=True)
class Acknowledged:
    """What the broker acknowledged, by what the record is."""

    topic: str
    valid: Counter                 # event type -> records
    malformed: Counter             # value -> times
    final_watermark_ms: int
    ends: dict[str, int]           # partition -> the offset after its last acknowledged record


def produce_backlog(bootstrap: str, records) -> Acknowledged:
    topic = f"test.catchup.{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 3)
    acked: list[bytes] = []
    ends: dict[str, int] = {}

    def on_delivery(error, message) -> None:
        if error is None:
            acked.append(message.value())
            partition = str(message.partition())
            ends[partition] = max(ends.get(partition, 0), message.offset() + 1)

    producer = Producer({"bootstrap.servers": bootstrap, **COUNTED_WRITES})
    for partition, key, value, ts in records:
        producer.produce(topic, value, key, partition=partition, timestamp=ts,
                         on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    valid, bad = Counter(), Counter()
    for value in acked:
        event = _valid_event(value)
        if event is None:
            bad[value] += 1
        else:
            valid[event["type"]] += 1
    assert len(acked) == len(records)
    last_ts = max(ts for *_, ts in records)
    return Acknowledged(topic, valid, bad, last_ts - WATERMARK_DELAY_MS, ends)


def _valid_event(value: bytes) -> dict | None:
    """The records this test writes as valid are exactly the ones with a client or a route."""
    try:
        event = json.loads(value)
    except ValueError:
        return None
    ok = (event.get("type") == "heartbeat" and "client_id" in event
          and event["ts"] < BASE_MS + 3600_000) or event.get("type") == "route"
    return event if ok else None


def job(bootstrap: str, acked: Acknowledged, checkpoint: Path) -> JobProcess:
    return JobProcess(bootstrap, acked.topic, checkpoint, checkpoint.parent,
                      findings_topic=f"{acked.topic}.findings",
                      dead_letter_topic=f"{acked.topic}.dlq",
                      max_offsets_per_trigger=MAX_OFFSETS_PER_TRIGGER,
                      env={"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS})


def catch_up_with_a_kill(bootstrap: str, acked: Acknowledged, checkpoint: Path,
                        stop: signal.Signals = signal.SIGKILL):
    """`stop` to the job's process group once some batches are committed and one is in flight,
    then run to the end. SIGTERM must stop it cleanly: exit status 0, no traceback, and the
    query not failed under its batch (the JVM, which ignores SIGTERM, does not stop Spark by
    itself; that had failed the query with a NullPointerException). Spark cancels the batch in
    flight, and may log an ERROR from the part it interrupted (the job's worker daemon says a
    cancelled task's closed socket in one line, where pyspark's printed a traceback); the next
    run replays the batch."""
    total = sum(acked.valid.values())
    with job(bootstrap, acked, checkpoint) as first_run:
        first_run.wait_for(lambda m: committed_batches(checkpoint) > 1 and batch_in_flight(checkpoint)
                           and _counted(m, "rebalance_monitor_events_total") < total * 0.7,
                           timeout=180, poll=0.05)
        status = first_run.kill(stop)
        if stop == signal.SIGKILL:
            assert status == -signal.SIGKILL
        else:
            log = first_run.log_path.read_text(errors="replace")
            assert status == 0, first_run.log_tail()
            assert not tracebacks(log), log
            for failure in ("NullPointerException", "terminated with error"):
                assert failure not in log, first_run.log_tail()
    with job(bootstrap, acked, checkpoint) as second_run:
        second_run.wait_for(lambda _: read_to_the_end(checkpoint, acked), timeout=240)
        end = second_run.first_scrape()
    dead = [(value, dict(headers)[REASON_HEADER].decode())
            for _, value, headers in read_topic(bootstrap, f"{acked.topic}.dlq")]
    return end, dead


def tracebacks(log: str) -> list[str]:
    """Each Python traceback in the log, up to its exception's line."""
    found = []
    for block in log.split("Traceback (most recent call last):\n")[1:]:
        lines = block.splitlines()
        end = next((i for i, line in enumerate(lines) if not line.startswith(" ")), len(lines))
        found.append("\n".join(lines[:end + 1]))
    return found


def read_to_the_end(checkpoint: Path, acked: Acknowledged) -> bool:
    """The newest committed batch ends at every partition's last acknowledged record and ran
    with the final watermark. (The watermark alone reaches its final value while the dense
    partition is still behind.)"""
    if not settled(checkpoint, acked.final_watermark_ms):
        return False
    newest = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    cluster_offsets = (checkpoint / "offsets" / str(newest)).read_text().splitlines()[2]
    return json.loads(cluster_offsets)[acked.topic] == acked.ends


def _counted(scrape, name: str) -> float:
    return sum(scrape.series(name).values())


def assert_nothing_lost(end, dead, acked: Acknowledged, invalid_reasons: Counter) -> None:
    # Every valid record applied once, by type, against what the broker acknowledged.
    assert {dict(k)["type"]: v for k, v in end.series("rebalance_monitor_events_total").items()} \
        == dict(acked.valid)
    # Every malformed record counted once and in the dead-letter topic (at least once).
    assert _counted(end, "rebalance_monitor_invalid_events_total") == sum(acked.malformed.values())
    assert {dict(k)["reason"]: v for k, v in
            end.series("rebalance_monitor_invalid_events_total").items()} == dict(invalid_reasons)
    assert set(acked.malformed) <= {value for value, _ in dead}
    # The engine dropped nothing, and every batch's records were accounted for.
    assert end.value("rebalance_monitor_rows_dropped_by_watermark_total") == 0
    assert end.value("rebalance_monitor_unaccounted_records_total") == 0
    # What Spark's source reported reading; the progress of a batch that committed just before
    # the kill is never reported (Spark's progress comes after the commit).
    assert 0 < end.value("rebalance_monitor_source_records_total") <= sum(acked.ends.values())
    # And the groups are what the producer wrote: every client alive at the end.
    for groups in LAYOUT.values():
        for group, clients in groups:
            assert end.value("rebalance_group_members", group=group) == clients, group


MALFORMED_REASONS = Counter({"not_json": ROUNDS * 2, "missing_field": ROUNDS * 2,
                             "unknown_type": ROUNDS})


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_capped_catch_up_of_unequal_partitions_with_a_kill_loses_no_event(
        kafka_bootstrap, tmp_path, stop):
    acked = produce_backlog(kafka_bootstrap, backlog())
    end, dead = catch_up_with_a_kill(kafka_bootstrap, acked, tmp_path / "checkpoint", stop)
    assert_nothing_lost(end, dead, acked, MALFORMED_REASONS)


def test_one_event_a_day_ahead_blinds_nothing(kafka_bootstrap, tmp_path):
    """An event stamped 23 h ahead of its Kafka timestamp is dead-lettered (a producer's clock
    is wrong); it neither moves the watermark nor hides a single normal event."""
    future = json.dumps(heartbeat("p1-g0", 0, BASE_MS + 23 * 3600_000)).encode()
    acked = produce_backlog(kafka_bootstrap, backlog(extra=[(1, future, BASE_MS)]))
    end, dead = catch_up_with_a_kill(kafka_bootstrap, acked, tmp_path / "checkpoint")
    assert (future, "future_timestamp") in dead
    assert_nothing_lost(end, dead, acked, MALFORMED_REASONS + Counter({"future_timestamp": 1}))
