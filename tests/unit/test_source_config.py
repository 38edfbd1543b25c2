"""SourceConfig validation and the options both Kafka sources receive; the data-loss check."""

from __future__ import annotations

import pickle

import pytest

from streaming.common.kafka_options import parse_kafka_options
from streaming.spark.kafka_client import read_range
from streaming.spark.offset_ranges import DataLossError, OffsetRange
from streaming.spark.source import SourceConfig, describe

pytestmark = pytest.mark.unit


def test_spark_options_are_the_builtin_kafka_names():
    config = SourceConfig("b1:9092,b2:9092", "rebalance.events", source="embedded",
                          starting_offsets="latest", max_offsets_per_trigger=5000,
                          fail_on_data_loss=False,
                          kafka_options=parse_kafka_options({"kafka.security.protocol": "SASL_SSL",
                                                             "sasl.mechanism": "PLAIN"}))
    assert config.spark_options() == {
        "kafka.bootstrap.servers": "b1:9092,b2:9092", "subscribe": "rebalance.events",
        "startingOffsets": "latest", "failOnDataLoss": "false", "maxOffsetsPerTrigger": "5000",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"}
    assert pickle.loads(pickle.dumps(config)) == config


def test_defaults():
    config = SourceConfig("b:9092", "t")
    assert (config.source, config.starting_offsets, config.max_offsets_per_trigger,
            config.fail_on_data_loss, config.kafka_options.for_librdkafka()) == (
        "auto", "earliest", None, True, {})
    assert "maxOffsetsPerTrigger" not in config.spark_options()


@pytest.mark.parametrize("kwargs, message", [
    ({"source": "pulsar"}, "source must be one of"),
    ({"starting_offsets": "newest"}, "startingOffsets"),
])
def test_bad_settings_are_rejected_with_a_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SourceConfig("b:9092", "t", **kwargs)
    with pytest.raises(ValueError, match="required"):
        SourceConfig("", "t")


def test_the_batch_cap_is_checked_once_where_it_is_read_from_text():
    """`run --max-offsets-per-trigger` and the reader's maxOffsetsPerTrigger share one rule
    (parse_positive_int); SourceConfig carries the value as it is given."""
    from streaming.spark.source_embedded import ReaderOptions

    options = SourceConfig("b:9092", "t", max_offsets_per_trigger=0).spark_options()
    with pytest.raises(ValueError, match="maxOffsetsPerTrigger must be a positive integer"):
        ReaderOptions.from_options(options)
    options["maxOffsetsPerTrigger"] = "5000"
    assert ReaderOptions.from_options(options).max_offsets_per_trigger == 5000


def test_the_job_gives_the_source_its_fields_of_the_same_names():
    from streaming.spark.config import JobConfig
    from streaming.spark.job import source_config

    job = JobConfig("b:9092", topic="t", source="embedded", starting_offsets="latest",
                    max_offsets_per_trigger=10, fail_on_data_loss=False,
                    kafka_options=parse_kafka_options(["security.protocol=SSL"]))
    assert source_config(job) == SourceConfig(
        "b:9092", "t", source="embedded", starting_offsets="latest", max_offsets_per_trigger=10,
        fail_on_data_loss=False, kafka_options=parse_kafka_options(["security.protocol=SSL"]))


def test_describe_hides_secrets():
    config = SourceConfig("b:9092", "t", kafka_options=parse_kafka_options({
        "sasl.username": "u", "sasl.password": "s3cret",
        "java.sasl.jaas.config": "x password=\"p\""}))
    assert "s3cret" not in describe(config) and '"p\\"' not in describe(config)


def test_each_source_gets_the_options_in_its_clients_names():
    config = SourceConfig("b:9092", "t", kafka_options=parse_kafka_options({
        "security.protocol": "sasl_plaintext", "sasl.username": "u", "sasl.password": "p"}))
    java = config.spark_options("kafka")
    assert java["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="p";')
    assert java["kafka.security.protocol"] == "SASL_PLAINTEXT" and "kafka.sasl.username" not in java
    embedded = config.spark_options("embedded")
    assert (embedded["kafka.sasl.username"], embedded["kafka.sasl.mechanism"]) == ("u", "PLAIN")
    assert "kafka.sasl.jaas.config" not in embedded


def test_an_option_only_the_java_client_reads_is_refused_with_the_librdkafka_name():
    with pytest.raises(ValueError, match="sasl.username and sasl.password"):
        parse_kafka_options({"sasl.jaas.config": "x"})


class FakeConsumerWithTruncatedLog:
    """Stands in for a broker whose log start moved past the range (DeleteRecords/retention):
    the embedded broker cannot delete records, so this path cannot run against it here."""

    def __init__(self, low: int) -> None:
        self.low = low
        self.closed = False

    def get_watermark_offsets(self, _partition, timeout):
        return self.low, self.low

    def assign(self, _partitions):
        raise AssertionError("nothing is left to read: the reader must not assign")

    def unassign(self):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def pool(monkeypatch):
    """The reader's idle consumers, empty for the test."""
    idle: dict = {}
    monkeypatch.setattr("streaming.spark.kafka_client._IDLE", idle)
    return idle


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_range_below_the_log_start_fails_or_is_skipped(monkeypatch, pool, fail_on_data_loss):
    fake = FakeConsumerWithTruncatedLog(low=40)
    monkeypatch.setattr("streaming.spark.kafka_client.new_consumer", lambda settings: fake)
    chunks = read_range({}, OffsetRange("t", 0, 10, 30), fail_on_data_loss=fail_on_data_loss)
    if fail_on_data_loss:
        with pytest.raises(DataLossError, match=r"t\[0\]: offsets 10..29 are gone"):
            list(chunks)
        assert fake.closed                      # a failed client is not pooled
    else:
        assert list(chunks) == []
        assert pool == {(): [fake]} and not fake.closed   # kept for the next micro-batch


def test_a_new_partition_starts_at_its_log_start_without_data_loss(monkeypatch, pool):
    fake = FakeConsumerWithTruncatedLog(low=40)
    monkeypatch.setattr("streaming.spark.kafka_client.new_consumer", lambda settings: fake)
    new_range = OffsetRange("t", 1, 0, 30, new_partition=True)
    assert list(read_range({}, new_range, fail_on_data_loss=True)) == []
