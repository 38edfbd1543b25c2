"""One documented set of --kafka-option settings (librdkafka's names) takes every command
through the real Apache Kafka's SASL_PLAINTEXT listener: the producers with librdkafka,
observe-kafka's admin clients, and the job, whose Spark source gets them translated into the
Java client's sasl.jaas.config. Each command is given only the SASL listener's address, so one
that could not authenticate would see nothing. The same holds for TLS with a private CA:
librdkafka's ssl.ca.location becomes the Java client's PEM truststore."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from streaming.common.kafka_options import parse_kafka_options
from streaming.common.topics import create_topic
from streaming.spark.source import SourceConfig
from tests.integration.job_process import SPARK_SUBMIT_ARGS, JobProcess
from tests.support import read_topic

pytestmark = pytest.mark.integration

COMMAND = str(Path(sys.executable).parent / "rebalance-monitor")
COLLIDED = {"system": "rocketmq", "group": "collide-group", "topic": "TopicX"}


def sasl_options(sasl, mechanism: str = "PLAIN", password: str | None = None) -> list[str]:
    return ["security.protocol=SASL_PLAINTEXT", f"sasl.mechanism={mechanism}",
            f"sasl.username={sasl.username}", f"sasl.password={password or sasl.password}"]


def flags(options: list[str]) -> list[str]:
    return [arg for option in options for arg in ("--kafka-option", option)]


def run_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([COMMAND, *args], capture_output=True, text=True, timeout=180)


def test_the_job_and_the_producers_connect_through_sasl_plain(kafka_sasl, kafka_bootstrap,
                                                             make_topic, tmp_path):
    options = sasl_options(kafka_sasl)
    topic = make_topic(partitions=2)
    simulated = run_command("simulate", "--bootstrap-servers", kafka_sasl.bootstrap,
                            "--topic", topic, "--scenario", "client-id-collision",
                            *flags(options))
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    acknowledged = len(read_topic(kafka_bootstrap, topic))
    assert acknowledged > 0

    job = JobProcess(kafka_sasl.bootstrap, topic, tmp_path / "checkpoint", tmp_path,
                     findings_topic=f"{topic}.findings", dead_letter_topic=f"{topic}.dlq",
                     env={"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS}, extra_args=tuple(flags(options)))
    with job:
        job.wait_for(lambda m: m.value("rebalance_double_assigned_queues", **COLLIDED) == 2
                     and m.value("rebalance_monitor_source_records_total") == acknowledged,
                     timeout=180)
    # Findings go out through the job's librdkafka producer, on the same options.
    findings = read_topic(kafka_bootstrap, f"{topic}.findings")
    assert any(b"double_assignment" in value for _key, value, _headers in findings)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_observe_kafka_describes_a_group_and_publishes_through_sasl(kafka_sasl, kafka_bootstrap,
                                                                  make_topic, protocol):
    options = sasl_options(kafka_sasl)
    observed, events = make_topic(partitions=3), make_topic(partitions=1)
    group = f"{observed}.group"
    settings = parse_kafka_options(options).for_librdkafka()
    consumer = Consumer({**settings, "bootstrap.servers": kafka_sasl.bootstrap,
                         "group.id": group, "auto.offset.reset": "earliest",
                         "group.protocol": protocol})
    try:
        consumer.subscribe([observed])
        while not consumer.assignment():
            consumer.poll(0.5)
        observed_once = run_command("observe-kafka", "--bootstrap-servers", kafka_sasl.bootstrap,
                                    "--topic", events, "--once", *flags(options))
    finally:
        consumer.close()
    assert observed_once.returncode == 0, observed_once.stderr[-2000:]
    published = [value for _key, value, _headers in read_topic(kafka_bootstrap, events)]
    beats = [json.loads(value) for value in published if b'"type":"heartbeat"' in value]
    [beat] = [b for b in beats if b["group"] == group]
    assert beat.get("group_type", "classic") == protocol and len(beat["owned"]) == 3


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sparks_kafka_source_reads_through_scram(spark, kafka_sasl, kafka_bootstrap, produce,
                                                 make_topic, mechanism):
    topic = make_topic(partitions=2)
    produced = produce(topic, [b'{"n": %d}' % n for n in range(25)])
    config = SourceConfig(kafka_sasl.bootstrap, topic,
                          kafka_options=parse_kafka_options(sasl_options(kafka_sasl, mechanism)))
    assert batch_reader(spark, config).load().count() == produced


def test_a_wrong_password_fails_the_java_client_instead_of_reading_nothing(
        spark, kafka_sasl, make_topic):
    topic = make_topic(partitions=1)
    config = SourceConfig(kafka_sasl.bootstrap, topic, kafka_options=parse_kafka_options(
        sasl_options(kafka_sasl, password="wrong")))
    with pytest.raises(Exception, match="(?i)authentication failed"):
        batch_reader(spark, config).load().count()


def test_create_topic_uses_the_client_settings(kafka_sasl, kafka_bootstrap, make_topic):
    name = make_topic(partitions=1) + ".sasl"
    create_topic(kafka_sasl.bootstrap, name, partitions=3,
                 client_settings=parse_kafka_options(sasl_options(kafka_sasl)).for_librdkafka())
    assert len(read_topic(kafka_bootstrap, name)) == 0


def test_tls_with_a_private_ca_works_for_librdkafka_and_sparks_source(spark, kafka_tls,
                                                                      make_topic):
    topic = make_topic(partitions=2)
    options = parse_kafka_options(["security.protocol=SSL",
                                   f"ssl.ca.location={kafka_tls.ca_location}"])
    producer = Producer({**options.for_librdkafka(), "bootstrap.servers": kafka_tls.bootstrap})
    for n in range(20):
        producer.produce(topic, b'{"n": %d}' % n)
    assert producer.flush(30) == 0
    config = SourceConfig(kafka_tls.bootstrap, topic, kafka_options=options)
    assert batch_reader(spark, config).load().count() == 20


def test_without_the_private_ca_sparks_source_refuses_the_broker(spark, kafka_tls, make_topic):
    topic = make_topic(partitions=1)
    config = SourceConfig(kafka_tls.bootstrap, topic,
                          kafka_options=parse_kafka_options(["security.protocol=SSL"]))
    with pytest.raises(Exception, match="(?i)ssl|certificat|handshake|PKIX"):
        batch_reader(spark, config).load().count()


def batch_reader(spark, config: SourceConfig):
    """A batch read of the topic with the job's own reader options (Java client names)."""
    reader = spark.read.format("kafka")
    for key, value in config.spark_options("kafka").items():
        if key != "maxOffsetsPerTrigger":
            reader = reader.option(key, value)
    return reader
