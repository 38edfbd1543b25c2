"""The embedded Kafka source against a real broker and a real SparkSession."""

from __future__ import annotations

import json
import math

import pytest
from confluent_kafka import TopicPartition

from streaming.spark import kafka_client
from streaming.spark.source import SourceConfig, builtin_kafka_available, read_event_stream
from streaming.spark.source_embedded import SOURCE_NAME, ReaderOptions
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Collected:
    """foreachBatch sink that keeps (batch_id, partition, offset, value) on the driver."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, bytes]] = []

    def __call__(self, batch_df, batch_id: int) -> None:
        for row in batch_df.select("partition", "offset", "value").collect():
            self.rows.append((batch_id, row.partition, row.offset, bytes(row.value)))

    def offsets(self) -> list[tuple[int, int]]:
        return sorted((partition, offset) for _b, partition, offset, _v in self.rows)

    def batch(self, batch_id: int) -> list[tuple[int, int, bytes]]:
        return sorted((p, o, v) for b, p, o, v in self.rows if b == batch_id)


def stream(spark, bootstrap, topic, **options):
    reader = (spark.readStream.format(SOURCE_NAME)
              .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def run_available_now(frame, checkpoint, sink: Collected, timeout_s: float = 180):
    query = (frame.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(timeout_s), "the AvailableNow query did not finish in time"
    assert query.exception() is None, query.exception()
    return [progress["numInputRows"] for progress in query.recentProgress]


def expected_offsets(counts_per_partition: dict[int, int]) -> list[tuple[int, int]]:
    return sorted((p, o) for p, count in counts_per_partition.items() for o in range(count))


@pytest.mark.parametrize("total", [1, 14, 23])
def test_produced_n_events_are_counted_n_times_across_partitions(
        spark, kafka_bootstrap, make_topic, produce, tmp_path, total):
    topic = make_topic(partitions=3)
    per_partition = {p: list(range(p, total, 3)) for p in range(3)}
    for partition, indexes in per_partition.items():  # record batches of up to 4 records
        produce(topic, [f"v{i}".encode() for i in indexes], partition=partition, flush_every=4)
    sink = Collected()
    rows_per_batch = run_available_now(
        stream(spark, kafka_bootstrap, topic, maxOffsetsPerTrigger=7), tmp_path / "cp", sink)

    assert sink.offsets() == expected_offsets({p: len(i) for p, i in per_partition.items()})
    assert sorted(v for *_, v in sink.rows) == sorted(f"v{i}".encode() for i in range(total))
    full, rest = divmod(total, 7)
    assert [n for n in rows_per_batch if n] == [7] * full + ([rest] if rest else [])
    assert len([n for n in rows_per_batch if n]) == math.ceil(total / 7)


def tail_batch_topic(make_topic, produce) -> str:
    """A partition of two record batches: 0..2, then the tail 3..12."""
    topic = make_topic(partitions=1)
    produce(topic, [b"a", b"b", b"c"], partition=0)
    produce(topic, [f"t{i}".encode() for i in range(10)], partition=0)
    return topic


def probe_tail(bootstrap: str, topic: str, around=lambda consumer: consumer):
    """(the broker's watermarks, true_ends) of the topic's partition 0, probed through
    `around(consumer)`."""
    consumer = kafka_client.new_consumer({"bootstrap.servers": bootstrap})
    try:
        marks = kafka_client.watermarks(consumer, [(topic, 0)], timeout_s=10)
        return marks, kafka_client.true_ends(around(consumer), marks)
    finally:
        consumer.close()


def test_the_tail_record_batch_is_read_despite_the_reported_watermark(
        spark, kafka_bootstrap, kafka_broker_kind, make_topic, produce, tmp_path):
    topic = tail_batch_topic(make_topic, produce)
    marks, ends = probe_tail(kafka_bootstrap, topic)
    assert ends == {(topic, 0): 13}
    if kafka_broker_kind == "embedded":  # the fault this test is about is really there
        assert marks[(topic, 0)] == (0, 4)

    sink = Collected()
    run_available_now(stream(spark, kafka_bootstrap, topic), tmp_path / "cp", sink)
    assert sink.offsets() == [(0, offset) for offset in range(13)]
    assert [v for *_, v in sorted(sink.rows, key=lambda r: r[2])][-1] == b"t9"


class ProducingAfterAnswers:
    """The real consumer, with one more record batch produced after each consume() that
    returned records: records that keep arriving while the end is probed."""

    def __init__(self, produce, topic: str) -> None:
        self.consumer, self.produce, self.topic, self.extra = None, produce, topic, 0

    def around(self, consumer) -> ProducingAfterAnswers:
        self.consumer = consumer
        return self

    def consume(self, **kwargs):
        messages = self.consumer.consume(**kwargs)
        if messages:
            self.extra += self.produce(self.topic, [b"late", b"late"], partition=0)
        return messages

    def __getattr__(self, name):
        return getattr(self.consumer, name)


def test_the_end_probe_stops_at_its_first_answer_while_records_keep_arriving(
        kafka_bootstrap, make_topic, produce):
    topic = tail_batch_topic(make_topic, produce)
    arriving = ProducingAfterAnswers(produce, topic)
    # Records that arrive after the first answer wait for the next trigger: a probe that read
    # on for them would make every trigger wait while the fleet produces.
    _marks, ends = probe_tail(kafka_bootstrap, topic, arriving.around)
    assert ends == {(topic, 0): 13}
    assert arriving.extra >= 2   # records did arrive during the probe


def test_restart_from_the_checkpoint_neither_loses_nor_duplicates(
        spark, kafka_bootstrap, make_topic, produce, tmp_path):
    topic, checkpoint = make_topic(partitions=2), tmp_path / "cp"
    produce(topic, [f"a{i}".encode() for i in range(11)], partition=0, flush_every=3)
    produce(topic, [f"b{i}".encode() for i in range(9)], partition=1, flush_every=4)
    first = Collected()
    run_available_now(stream(spark, kafka_bootstrap, topic, maxOffsetsPerTrigger=6),
                      checkpoint, first)
    assert first.offsets() == expected_offsets({0: 11, 1: 9})

    produce(topic, [f"a{i}".encode() for i in range(11, 16)], partition=0, flush_every=2)
    second = Collected()
    run_available_now(stream(spark, kafka_bootstrap, topic, maxOffsetsPerTrigger=6),
                      checkpoint, second)
    assert second.offsets() == [(0, offset) for offset in range(11, 16)]


def test_an_uncommitted_batch_is_replayed_with_exactly_the_same_rows(
        spark, kafka_bootstrap, make_topic, produce, tmp_path):
    topic, checkpoint = make_topic(partitions=2), tmp_path / "cp"
    for partition in (0, 1):
        produce(topic, [f"p{partition}-{i}".encode() for i in range(10)],
                partition=partition, flush_every=3)
    first = Collected()
    run_available_now(stream(spark, kafka_bootstrap, topic, maxOffsetsPerTrigger=8),
                      checkpoint, first)
    last_batch = max(b for b, *_ in first.rows)
    # A crash after the offsets were logged and before the batch committed:
    for name in (str(last_batch), f".{last_batch}.crc"):
        (checkpoint / "commits" / name).unlink()
    produce(topic, [b"late"], partition=0)

    replay = Collected()
    run_available_now(stream(spark, kafka_bootstrap, topic, maxOffsetsPerTrigger=8),
                      checkpoint, replay)
    assert replay.batch(last_batch) == first.batch(last_batch) != []
    replayed_then_new = [(p, o) for p, o, _v in first.batch(last_batch)] + [(0, 10)]
    assert replay.offsets() == sorted(replayed_then_new)
    committed_before = [(p, o) for b, p, o, _v in first.rows if b != last_batch]
    assert sorted(committed_before + replay.offsets()) == expected_offsets({0: 11, 1: 10})


def test_starting_offsets_latest_skips_what_was_there_before(
        spark, kafka_bootstrap, make_topic, produce, tmp_path):
    topic = make_topic(partitions=2)
    produce(topic, [b"old"] * 5, partition=0)
    produce(topic, [b"old"] * 3, partition=1)
    sink = Collected()
    query = (stream(spark, kafka_bootstrap, topic, startingOffsets="latest")
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: query.lastProgress is not None, 120, "the first trigger")
        produce(topic, [b"new0", b"new1"], partition=0)
        produce(topic, [b"new2"], partition=1)
        wait_until(lambda: len(sink.rows) >= 3, 120, "the three new records")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink.offsets() == [(0, 5), (0, 6), (1, 3)]
    assert sorted(v for *_, v in sink.rows) == [b"new0", b"new1", b"new2"]


def test_offsets_that_went_back_fail_the_query_or_are_skipped(
        spark, kafka_bootstrap, make_topic, produce, tmp_path):
    topic = make_topic(partitions=1)
    produce(topic, [b"x"] * 4, partition=0)
    beyond = json.dumps({topic: {"0": 50}})
    failing = Collected()
    query = (stream(spark, kafka_bootstrap, topic, startingOffsets=beyond)
             .writeStream.foreachBatch(failing).option("checkpointLocation", str(tmp_path / "a"))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match="went back"):
        query.awaitTermination(120)

    skipping, checkpoint = Collected(), tmp_path / "b"
    options = {"startingOffsets": beyond, "failOnDataLoss": "false"}
    run_available_now(stream(spark, kafka_bootstrap, topic, **options), checkpoint, skipping)
    assert skipping.rows == []
    produce(topic, [b"y0", b"y1"], partition=0)
    run_available_now(stream(spark, kafka_bootstrap, topic, **options), checkpoint, skipping)
    assert sorted((o, v) for _b, _p, o, v in skipping.rows) == [(4, b"y0"), (5, b"y1")]


def test_columns_match_the_builtin_kafka_source(
        spark, kafka_bootstrap, kafka_producer, make_topic, tmp_path):
    topic = make_topic(partitions=1)
    kafka_producer.produce(topic, key=b"g1", value=b"{}", partition=0, timestamp=1_700_000_000_123)
    kafka_producer.flush(30)
    frame = stream(spark, kafka_bootstrap, topic)
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int")]
    events = read_event_stream(spark, SourceConfig(kafka_bootstrap, topic, source="embedded"))
    assert events.columns == ["key", "value", "topic", "partition", "offset", "timestamp"]

    seen = []
    query = (events.selectExpr("key", "topic", "partition", "offset",
                               "CAST(unix_micros(timestamp) AS BIGINT) AS micros")
             .writeStream.foreachBatch(lambda df, _id: seen.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True)
             .start())
    assert query.awaitTermination(120)
    assert [(bytes(r.key), r.topic, r.partition, r.offset, r.micros) for r in seen] == [
        (b"g1", topic, 0, 0, 1_700_000_000_123_000)]


def test_auto_picks_the_builtin_source_only_when_its_classes_load(spark, monkeypatch):
    import streaming.spark.source as source

    monkeypatch.setattr(source, "BUILTIN_PROVIDER", "org.apache.spark.sql.SparkSession")
    assert builtin_kafka_available(spark) is True
    monkeypatch.setattr(source, "BUILTIN_PROVIDER", "org.example.NoSuchProvider")
    assert builtin_kafka_available(spark) is False
    assert source.resolve_source(spark, SourceConfig("b:9092", "t")) == "embedded"


def test_kafka_options_reach_the_client_and_bad_ones_fail_clearly(kafka_bootstrap, unique_topic):
    options = ReaderOptions.from_options({
        "kafka.bootstrap.servers": kafka_bootstrap, "subscribe": unique_topic,
        "kafka.client.id": "monitor-test", "kafka.security.protocol": "PLAINTEXT"})
    assert options.settings() == {"bootstrap.servers": kafka_bootstrap,
                                  "client.id": "monitor-test", "security.protocol": "PLAINTEXT"}
    consumer = kafka_client.new_consumer(options.settings())
    assert consumer.get_watermark_offsets(TopicPartition(unique_topic, 0), timeout=10) == (0, 0)
    consumer.close()
    with pytest.raises(ValueError, match="managed by the reader"):
        ReaderOptions.from_options({"kafka.bootstrap.servers": "b:1", "subscribe": "t",
                                    "kafka.group.id": "mine"})
    bad = ReaderOptions.from_options({"kafka.bootstrap.servers": kafka_bootstrap,
                                      "subscribe": "t", "kafka.no.such.setting": "1"})
    with pytest.raises(Exception, match="no.such.setting"):
        kafka_client.new_consumer(bad.settings())


def test_source_kafka_without_the_connector_says_what_to_do(spark, monkeypatch):
    import streaming.spark.source as source

    monkeypatch.setattr(source, "BUILTIN_PROVIDER", "org.example.NoSuchProvider")
    with pytest.raises(ValueError, match="--source embedded"):
        read_event_stream(spark, SourceConfig("b:9092", "t", source="kafka"))


def test_a_running_query_counts_every_event_produced_while_it_runs(
        spark, kafka_bootstrap, make_topic, produce, tmp_path):
    topic, sink = make_topic(partitions=3), Collected()
    query = (stream(spark, kafka_bootstrap, topic, maxOffsetsPerTrigger=10)
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(processingTime="100 milliseconds").start())
    try:
        wait_until(lambda: query.lastProgress is not None, 120, "the first trigger")
        for round_number in range(4):  # the last round leaves a partial tail batch
            for partition in range(3):
                values = [f"r{round_number}p{partition}i{i}".encode() for i in range(3)]
                produce(topic, values, partition=partition)
        produce(topic, [b"last"], partition=2)
        wait_until(lambda: len(sink.rows) >= 37, 120, "37 records")
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink.offsets() == expected_offsets({0: 12, 1: 12, 2: 13})


def test_range_reads_reuse_one_consumer_and_a_failed_read_drops_it(
        kafka_bootstrap, unique_topic, produce):
    from streaming.spark.offset_ranges import OffsetRange

    produce(unique_topic, [b"%d" % i for i in range(10)], partition=0)
    settings = kafka_client.client_settings(kafka_bootstrap, {"client.id": unique_topic})
    pool = kafka_client._IDLE.setdefault(tuple(sorted(settings.items())), [])

    def read(start, end, **kwargs):
        chunks = kafka_client.read_range(settings, OffsetRange(unique_topic, 0, start, end),
                                         **kwargs)
        return [m.value() for chunk in chunks for m in chunk]

    assert read(0, 4) == [b"0", b"1", b"2", b"3"]
    [first] = pool
    assert read(4, 10) == [b"%d" % i for i in range(4, 10)]
    assert pool == [first]                     # the next micro-batch's read took the same client
    with pytest.raises(TimeoutError):          # offsets the broker does not have
        read(10, 12, timeout_s=1.0)
    assert pool == []                          # a failed client is closed, not kept
