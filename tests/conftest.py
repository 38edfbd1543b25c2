"""Shared fixtures for integration tests. All lazy: a unit-only run starts nothing.

- kafka_bootstrap -> "host:port" of one broker for the whole session, chosen once:
  KAFKA_BOOTSTRAP_SERVERS if set (an explicit choice wins), else the broker that
  REBALANCE_MONITOR_TEST_BROKER names: "apache" (the default: Apache Kafka from the jar cache,
  streaming/kafka_broker.py), "docker" (testcontainers' KafkaContainer) or "embedded" (tansu).
  kafka_broker_kind says which.
- kafka_sasl -> SaslListener(bootstrap, username, password) of the Apache broker's
  SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); skips on other brokers.
- kafka_tls -> TlsListener(bootstrap, ca_location) of its SSL listener, whose certificate a
  private CA signed (made with openssl at start); skips on other brokers.
- make_topic(partitions=1) -> a fresh topic name, created with that many partitions.
- unique_topic -> make_topic(); partitions through indirect parametrization:
      @pytest.mark.parametrize("unique_topic", [3], indirect=True)
- produce(topic, values, key=None, partition=None, flush_every=None) -> count produced.
  flush_every=n flushes after every n records, so the log holds several record batches.
- spark -> a local[2] SparkSession (RocksDB state store, UI off, "rebalance_kafka" registered,
  Spark's Kafka source loaded from the jar cache).
- tests/environment.py's TEST_SOURCE: the job's source in the integration tests,
  REBALANCE_MONITOR_TEST_SOURCE or "kafka" (Spark's own); "embedded" runs them on the
  project's reader.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import uuid
from typing import NamedTuple

import pytest

log = logging.getLogger("tests.fixtures")

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
BROKERS = ("apache", "docker", "embedded")


class SaslListener(NamedTuple):
    bootstrap: str
    username: str
    password: str


class TlsListener(NamedTuple):
    bootstrap: str
    ca_location: str


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:  # noqa: BLE001 - no client, no socket, no engine: all mean "no Docker"
        return False


@pytest.fixture(autouse=True)
def _root_logging_as_it_was():
    """A test that runs a command through `cli.main` sets the root logger's handler to the
    stderr pytest captures; put it back, or later log lines (py4j's at exit) meet a closed
    stream."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def _kafka_broker(tmp_path_factory):
    """(kind, bootstrap, broker object or None) for the session; stops what it started."""
    explicit = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if explicit:
        log.warning("tests use the broker at KAFKA_BOOTSTRAP_SERVERS=%s", explicit)
        yield "env", explicit, None
        return
    kind = os.environ.get("REBALANCE_MONITOR_TEST_BROKER", "apache")
    if kind not in BROKERS:
        pytest.exit(f"REBALANCE_MONITOR_TEST_BROKER must be one of {BROKERS}, got {kind!r}", 2)
    with _start_broker(kind, tmp_path_factory.mktemp("kafka")) as (bootstrap, broker):
        log.warning("tests use the %s broker at %s", kind, bootstrap)
        yield kind, bootstrap, broker


@contextlib.contextmanager
def _start_broker(kind: str, workdir):
    if kind == "apache":
        from streaming.kafka_broker import ApacheKafkaBroker

        with ApacheKafkaBroker(workdir) as broker:
            yield broker.bootstrap_servers, broker
    elif kind == "docker":
        if not _docker_answers():
            pytest.exit("REBALANCE_MONITOR_TEST_BROKER=docker, but no Docker engine answers", 2)
        try:
            from testcontainers.community.kafka import KafkaContainer
        except ImportError:  # testcontainers < 4.10
            from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as container:
            yield container.get_bootstrap_server(), None
    else:
        from streaming.embedded_broker import EmbeddedBroker

        with EmbeddedBroker() as broker:
            yield broker.bootstrap_servers, broker


@pytest.fixture(scope="session")
def kafka_bootstrap(_kafka_broker) -> str:
    return _kafka_broker[1]


@pytest.fixture(scope="session")
def kafka_broker_kind(_kafka_broker) -> str:
    """"apache", "embedded" (tansu), "docker" (testcontainers) or "env"."""
    return _kafka_broker[0]


@pytest.fixture(scope="session")
def kafka_sasl(_kafka_broker) -> SaslListener:
    kind, _, broker = _kafka_broker
    if kind != "apache":
        pytest.skip(f"the SASL listener is the Apache Kafka fixture's; this session's is {kind}")
    from streaming.kafka_broker import DEFAULT_SASL_USERS

    (username, password), = DEFAULT_SASL_USERS.items()
    return SaslListener(broker.sasl_bootstrap_servers, username, password)


@pytest.fixture(scope="session")
def kafka_tls(_kafka_broker) -> TlsListener:
    kind, _, broker = _kafka_broker
    if kind != "apache":
        pytest.skip(f"the SSL listener is the Apache Kafka fixture's; this session's is {kind}")
    if broker.ssl_bootstrap_servers is None:
        pytest.fail("the Apache Kafka fixture has no SSL listener: openssl is not installed")
    return TlsListener(broker.ssl_bootstrap_servers, str(broker.ca_location))


@pytest.fixture
def make_topic(kafka_bootstrap, request):
    from streaming.common.topics import create_topic

    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:80]

    def make(partitions: int = 1) -> str:
        name = f"test.{stem}.{uuid.uuid4().hex[:8]}"
        create_topic(kafka_bootstrap, name, partitions)
        return name

    return make


@pytest.fixture
def unique_topic(make_topic, request) -> str:
    return make_topic(getattr(request, "param", 1))


@pytest.fixture(scope="session")
def kafka_producer(kafka_bootstrap):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    yield producer
    producer.flush(30)


@pytest.fixture
def produce(kafka_producer):
    def produce(topic, values, key=None, partition=None, flush_every=None) -> int:
        count = 0
        for value in values:
            extra = {} if partition is None else {"partition": partition}
            kafka_producer.produce(topic, value=value, key=key, **extra)
            count += 1
            if flush_every and count % flush_every == 0:
                _flush(kafka_producer)
        _flush(kafka_producer)
        return count

    return produce


def _flush(producer) -> None:
    remaining = producer.flush(30)
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered within 30s")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    from streaming.jars import spark_kafka_conf
    from streaming.spark.source_embedded import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    scratch = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rebalance-monitor-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.local.dir", str(scratch / "local"))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.pyspark.python", sys.executable)
        .config(map=spark_kafka_conf())
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
