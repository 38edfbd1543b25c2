"""Faults a long-running job meets, against the real job process, a real broker and real Spark:

- the events broker stops answering for a minute (SIGSTOP, then SIGCONT);
- the dead-letter topic refuses records, or they are over its size limit;
- the whole job is SIGKILLed, again and again, while it consumes a backlog full of poison.

Each ends the same way: the job is still running, and its /metrics equal those of a run that met
no fault. The embedded broker of these tests is their own (pausing the session's would stall
every other test).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from streaming.common.delivery import ORIGINAL_BYTES_HEADER, ORIGINAL_SHA256_HEADER
from streaming.common.topics import create_topic
from streaming.embedded_broker import EmbeddedBroker
from streaming.kafka_broker import ApacheKafkaBroker
from streaming.spark.sinks import REASON_HEADER
from tests.integration.job_process import (
    SPARK_SUBMIT_ARGS,
    JobProcess,
    batch_in_flight,
    committed_batches,
    comparable_series,
    events_total,
    settled,
)
from tests.integration.scenario_workload import (
    WATERMARK_DELAY_MS,
    expected_counts,
    scenario_records,
)
from tests.support import COUNTED_WRITES, Scrape, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_S = 60


def make_topics(bootstrap: str, stem: str) -> tuple[str, str, str]:
    topic = f"test.{stem}.{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, topic + ".findings", 1)
    create_topic(bootstrap, topic + ".dlq", 1)
    return topic, topic + ".findings", topic + ".dlq"


def produce(bootstrap: str, topic: str, records, flush_timeout: float = 30.0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **COUNTED_WRITES,
                         "message.max.bytes": 2_000_000})
    for key, value, ts in records:
        producer.produce(topic, value, key, timestamp=ts)
    assert producer.flush(flush_timeout) == 0, "the test's own records were not delivered"


def job_process(bootstrap, topic, checkpoint: Path, **kwargs) -> JobProcess:
    return JobProcess(bootstrap, topic, checkpoint, checkpoint.parent,
                      findings_topic=topic + ".findings", dead_letter_topic=topic + ".dlq",
                      env={"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS}, **kwargs)


def counted(scrape) -> dict[tuple[str, str], float]:
    return {(name, dict(labels).popitem()[1]): value
            for (name, labels), value in comparable_series(scrape).items()
            if name in ("rebalance_monitor_events_total", "rebalance_monitor_invalid_events_total")}


def expected(records) -> dict[tuple[str, str], float]:
    events, invalid = expected_counts([value for _, value, _ in records])
    return {**{("rebalance_monitor_events_total", t): n for t, n in events.items()},
            **{("rebalance_monitor_invalid_events_total", r): n for r, n in invalid.items()}}


def uninterrupted(bootstrap: str, topic: str, final_watermark_ms: int, workdir: Path,
                  **kwargs) -> dict:
    """/metrics of a run over the same topic that meets no fault."""
    checkpoint = workdir / "reference" / "checkpoint"
    checkpoint.parent.mkdir(parents=True)
    with job_process(bootstrap, topic, checkpoint, **kwargs) as process:
        process.wait_for(lambda _: settled(checkpoint, final_watermark_ms), timeout=180)
        return comparable_series(process.first_scrape())


@pytest.fixture
def own_broker(kafka_broker_kind, tmp_path):
    """A broker of the test's own, to pause: the session's kind (Apache Kafka by default)."""
    if kafka_broker_kind == "embedded":
        with EmbeddedBroker() as broker:
            yield broker
        return
    if kafka_broker_kind != "apache":
        pytest.skip(f"pausing needs a broker process of this machine, not {kafka_broker_kind}")
    with ApacheKafkaBroker(tmp_path / "own-kafka", heap="256m") as broker:
        yield broker


def test_a_minute_long_broker_outage_pauses_the_job_which_then_resumes_exactly(own_broker, tmp_path):
    bootstrap = own_broker.bootstrap_servers
    topic, _, _ = make_topics(bootstrap, "outage")
    records, _ = scenario_records()
    before, during = records[: len(records) // 2], records[len(records) // 2:]
    final_watermark_ms = records[-1][2] - WATERMARK_DELAY_MS
    produce(bootstrap, topic, before)
    checkpoint = tmp_path / "paused" / "checkpoint"
    checkpoint.parent.mkdir()
    with job_process(bootstrap, topic, checkpoint) as process:
        process.wait_for(lambda m: counted(m) == expected(before)
                         and m.value("rebalance_monitor_source_up") == 1, timeout=180)
        os.kill(own_broker.pid, signal.SIGSTOP)
        paused_at = time.monotonic()
        try:
            # Producers go on writing during the outage; their client holds the records.
            writer = threading.Thread(target=produce, args=(bootstrap, topic, during, 300))
            writer.start()
            outage = process.wait_for(lambda m: m.value("rebalance_monitor_source_up") == 0,
                                      timeout=OUTAGE_S)
            time.sleep(max(0.0, paused_at + OUTAGE_S - time.monotonic()))  # the outage itself
            assert process.process.poll() is None, process.log_tail()
        finally:
            os.kill(own_broker.pid, signal.SIGCONT)
        writer.join(timeout=300)
        # Spark reports a batch's records to the job after the batch commits, so the sum can
        # trail the checkpoint by one scrape; a lost record leaves it short and times out.
        after = process.wait_for(lambda m: settled(checkpoint, final_watermark_ms)
                                 and m.value("rebalance_monitor_source_up") == 1
                                 and m.value("rebalance_monitor_source_records_total")
                                 >= len(records), timeout=240)
        assert process.process.poll() is None
        log_text = process.log_path.read_text(errors="replace")

    assert sum(outage.series("rebalance_monitor_source_errors_total").values()) > 0
    # The source waited the outage out: the query never failed (no restart was needed).
    assert after.series("rebalance_monitor_query_restarts_total") == {}, log_text[-3000:]
    # The broker holds each record once, and the job read each once and counted it once.
    assert len(read_topic(bootstrap, topic)) == len(records)
    assert after.value("rebalance_monitor_source_records_total") == len(records)
    assert counted(after) == expected(records)
    assert comparable_series(after) == uninterrupted(bootstrap, topic, final_watermark_ms,
                                                     tmp_path)
    # Logged once per change of state, not once per retry.
    assert log_text.count("events broker failing: ") <= 6, log_text[-3000:]


# --- dead letters the dead-letter topic cannot take -------------------------------------------

OVERSIZED_BYTES = 1_100_000  # valid to the broker, over the producer's 1,000,000-byte records
# tansu validates a topic's records against <topic>.json in its schema registry and refuses
# (INVALID_RECORD) those that do not match, as a broker with a schema policy does. No dead
# letter has the field this schema requires.
REFUSING_SCHEMA = {"type": "object", "properties": {
    "value": {"type": "object", "required": ["never-present"]}}}


def poison(records) -> list[tuple[bytes | None, bytes, int]]:
    """Invalid records at the newest event time (so the watermark is that of the valid ones):
    some oversized, some small, of several reasons."""
    last_ts = records[-1][2]
    oversized = [(b"skew-group", b'{"type": "heartbeat", "pad": "' + bytes([97 + i]) * OVERSIZED_BYTES
                  + b'"}', last_ts) for i in range(3)]
    small = [(None, b"not json %d" % i, last_ts) for i in range(5)]
    small += [(b"skew-group", json.dumps({"v": 1, "type": "bogus", "ts": last_ts, "group": "g",
                                          "n": i}).encode(), last_ts) for i in range(5)]
    return oversized + small


def fleet_series(series: dict) -> dict:
    """What the valid events decide: everything but the invalid-event and produce counters."""
    return {key: value for key, value in series.items()
            if key[0] not in ("rebalance_monitor_invalid_events_total",
                              "rebalance_monitor_truncated_records_total",
                              "rebalance_monitor_undelivered_records_total")}


# Only the embedded broker refuses records by schema, and only the embedded reader reads it whole
# (its high watermark misses the last batch's tail): these tests are about the dead-letter
# producer, which is the same whatever the source.
SCHEMA_BROKER_SOURCE = "embedded"


@pytest.fixture(scope="module")
def schema_broker(tmp_path_factory):
    """Our own broker, whose topics named refusing.*.dlq refuse every record."""
    registry = tmp_path_factory.mktemp("schemas") / "registry"
    registry.mkdir()
    with EmbeddedBroker(schema_registry=registry) as broker:
        broker.registry = registry
        yield broker


@pytest.fixture(scope="module")
def valid_run(schema_broker, tmp_path_factory):
    """The scenarios' valid records alone, run to the end: (records, series)."""
    bootstrap = schema_broker.bootstrap_servers
    topic, _, _ = make_topics(bootstrap, "valid")
    records, _ = scenario_records()
    produce(bootstrap, topic, records)
    final = records[-1][2] - WATERMARK_DELAY_MS
    return records, uninterrupted(bootstrap, topic, final, tmp_path_factory.mktemp("valid"),
                                  source=SCHEMA_BROKER_SOURCE)


def run_with_poison(bootstrap: str, topic: str, records, workdir: Path,
                    also: Callable[[Scrape, int], bool] = lambda scrape, bad: True):
    """The records and poison through a job until it has settled and `also(scrape, number of
    poison records)` holds (a delivery outcome is counted when the broker answers, which may
    come after the batch that sent it)."""
    bad = poison(records)
    produce(bootstrap, topic, records + bad)
    checkpoint = workdir / "checkpoint"
    with job_process(bootstrap, topic, checkpoint, source=SCHEMA_BROKER_SOURCE) as process:
        end = process.wait_for(lambda m: settled(checkpoint, records[-1][2] - WATERMARK_DELAY_MS)
                               and also(m, len(bad)), timeout=180)
        end = process.first_scrape()  # the settled state, scraped once more
        assert process.process.poll() is None
    return bad, end


def test_dead_letters_over_the_size_limit_are_cut_to_fit_and_the_job_goes_on(
        schema_broker, valid_run, tmp_path):
    records, valid_series = valid_run
    bootstrap = schema_broker.bootstrap_servers
    topic, _, dlq = make_topics(bootstrap, "oversized")
    bad, end = run_with_poison(bootstrap, topic, records, tmp_path)

    assert fleet_series(comparable_series(end)) == fleet_series(valid_series)
    assert end.value("rebalance_monitor_truncated_records_total", topic=dlq) == 3
    assert end.series("rebalance_monitor_undelivered_records_total") == {}
    letters = read_topic(bootstrap, dlq)
    assert len(letters) == len(bad)
    cut = {dict(headers)[ORIGINAL_SHA256_HEADER].decode(): (value, dict(headers))
           for _, value, headers in letters if ORIGINAL_SHA256_HEADER in dict(headers)}
    for _, original, _ in bad[:3]:
        value, headers = cut[hashlib.sha256(original).hexdigest()]
        assert original.startswith(value) and len(value) < 1_000_000
        assert headers[ORIGINAL_BYTES_HEADER] == str(len(original)).encode()
        assert headers[REASON_HEADER] == b"oversized"


def test_a_dead_letter_topic_that_refuses_every_record_does_not_stop_the_job(
        schema_broker, valid_run, tmp_path):
    records, valid_series = valid_run
    bootstrap = schema_broker.bootstrap_servers
    topic = f"refusing.{uuid.uuid4().hex[:8]}"
    (schema_broker.registry / f"{topic}.dlq.json").write_text(json.dumps(REFUSING_SCHEMA))
    for name, partitions in ((topic, 2), (topic + ".findings", 1), (topic + ".dlq", 1)):
        create_topic(bootstrap, name, partitions)
    bad, end = run_with_poison(bootstrap, topic, records, tmp_path, also=lambda m, bad: m.total(
        "rebalance_monitor_undelivered_records_total") >= bad)

    assert fleet_series(comparable_series(end)) == fleet_series(valid_series)
    assert end.series("rebalance_monitor_undelivered_records_total") == {
        (("cause", "invalid_record"), ("topic", topic + ".dlq")): len(bad)}
    assert read_topic(bootstrap, topic + ".dlq") == []


# --- SIGKILL, again and again, while a backlog full of poison is consumed ---------------------

MALFORMED = 3000
KILL_AT = (0.25, 0.5, 0.75)  # of the backlog's events counted when each kill lands


def poisoned_backlog() -> list[tuple[bytes | None, bytes, int]]:
    """The scenarios' records with MALFORMED invalid records spread among them, each at its
    neighbour's event time (a distinct value each, so the dead-letter topic can be checked
    record by record)."""
    records, _ = scenario_records()
    reasons = [lambda i, ts: b"not json %d" % i,
               lambda i, ts: json.dumps({"v": 1, "type": "heartbeat", "ts": ts, "n": i}).encode(),
               lambda i, ts: json.dumps({"v": 1, "type": "bogus", "ts": ts, "group": "skew-group",
                                         "n": i}).encode()]
    backlog = []
    per_record = MALFORMED // len(records) + 1
    for index, (key, value, ts) in enumerate(records):
        backlog.append((key, value, ts))
        for j in range(per_record):
            n = index * per_record + j
            if n < MALFORMED:
                backlog.append((key, reasons[n % 3](n, ts), ts))
    return backlog


def test_sigkill_at_several_points_of_a_poisoned_backlog_then_restart_equals_one_run(
        kafka_bootstrap, tmp_path):
    topic, _, _ = make_topics(kafka_bootstrap, "poisoned")
    backlog = poisoned_backlog()
    produce(kafka_bootstrap, topic, backlog)
    malformed = {value for _, value, _ in backlog} - {value for _, value, _ in scenario_records()[0]}
    assert len(malformed) == MALFORMED
    final = backlog[-1][2] - WATERMARK_DELAY_MS
    total = len(backlog)
    expected_series = uninterrupted(kafka_bootstrap, topic, final, tmp_path / "one-run")

    checkpoint = tmp_path / "killed" / "checkpoint"
    checkpoint.parent.mkdir()
    for share in KILL_AT:
        with job_process(kafka_bootstrap, topic, checkpoint, max_offsets_per_trigger=300) as run:
            run.wait_for(lambda m, share=share: batch_in_flight(checkpoint)
                         and committed_batches(checkpoint) > 0
                         and counted_records(m) >= total * share, timeout=180, poll=0.05)
            assert run.kill(signal.SIGKILL) == -signal.SIGKILL
    with job_process(kafka_bootstrap, topic, checkpoint, max_offsets_per_trigger=300) as run:
        run.wait_for(lambda _: settled(checkpoint, final), timeout=240)
        series = comparable_series(run.first_scrape())

    assert series == expected_series
    letters = {value for _, value, _ in read_topic(kafka_bootstrap, topic + ".dlq")}
    assert letters == malformed  # every malformed record at least once, nothing else


def counted_records(scrape) -> float:
    return events_total(scrape) + sum(
        scrape.series("rebalance_monitor_invalid_events_total").values())
