"""Where the project's Java jars live: a cache outside git that scripts/fetch_jars.py fills from
Maven Central with the pinned poms in scripts/jars/.

    kafka_broker_jars()      -> the Apache Kafka broker's classpath (tests, the demo); with
                                KAFKA_3_VERSION, the 3.x broker the tests also watch
    spark_kafka_jars()       -> Spark's Kafka source for exactly the installed pyspark version
    rocketmq5_jars(version)  -> Apache RocketMQ 5 (servers, admin tool, client: the tests' 5.x kit),
                                each of ROCKETMQ5_VERSIONS
    rocketmq_grpc_client_jars() -> RocketMQ's gRPC client (the tests' consumers through a proxy)
    kafka_streams_jars()     -> Kafka Streams at KAFKA_VERSION (the tests' Streams applications)

Both return None while the jars are not fetched. The cache is $REBALANCE_MONITOR_JARS, else
~/.cache/rebalance-monitor/jars; each set sits in a folder of its own, named with its version,
and counts only once its COMPLETE marker is written (a fetch cut short is fetched again).
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

KAFKA_VERSION = "4.3.1"
# The 3.x line many operators still run: classic groups only (tests/integration/test_kafka_3.py).
KAFKA_3_VERSION = "3.9.1"
# The 5.x releases the tests run: 5.3.3, and 5.5.0 with Lite mode (RIP-83).
ROCKETMQ5_VERSIONS = ("5.3.3", "5.5.0")
# rocketmq-clients' Java client: gRPC consumers through a proxy; LitePushConsumer since 5.1.0.
ROCKETMQ_GRPC_CLIENT_VERSION = "5.2.0"
CACHE_VARIABLE = "REBALANCE_MONITOR_JARS"
COMPLETE = "COMPLETE"
# What spark-sql-kafka needs beyond the jars pyspark ships (lz4, snappy, zstd and slf4j are
# there already, at the versions Spark was built with).
SPARK_KAFKA_ARTIFACTS = ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13",
                         "kafka-clients", "commons-pool2")


def cache_root() -> Path:
    configured = os.environ.get(CACHE_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "rebalance-monitor" / "jars"


def pyspark_version() -> str:
    return version("pyspark")


def kafka_broker_dir(kafka_version: str = KAFKA_VERSION) -> Path:
    return cache_root() / f"kafka-{kafka_version}"


def spark_kafka_dir(spark_version: str | None = None) -> Path:
    return cache_root() / f"spark-sql-kafka-{spark_version or pyspark_version()}"


def rocketmq5_dir(rocketmq_version: str) -> Path:
    return cache_root() / f"rocketmq-{rocketmq_version}"


def rocketmq_grpc_client_dir() -> Path:
    return cache_root() / f"rocketmq-client-java-{ROCKETMQ_GRPC_CLIENT_VERSION}"


def kafka_streams_dir() -> Path:
    return cache_root() / f"kafka-streams-{KAFKA_VERSION}"


def _complete_jars(folder: Path) -> list[Path] | None:
    if not (folder / COMPLETE).is_file():
        return None
    return sorted(folder.glob("*.jar"))


def kafka_broker_jars(kafka_version: str = KAFKA_VERSION) -> list[Path] | None:
    return _complete_jars(kafka_broker_dir(kafka_version))


def rocketmq5_jars(rocketmq_version: str) -> list[Path] | None:
    return _complete_jars(rocketmq5_dir(rocketmq_version))


def rocketmq_grpc_client_jars() -> list[Path] | None:
    return _complete_jars(rocketmq_grpc_client_dir())


def kafka_streams_jars() -> list[Path] | None:
    return _complete_jars(kafka_streams_dir())


def spark_kafka_jars(spark_version: str | None = None) -> list[Path] | None:
    return _complete_jars(spark_kafka_dir(spark_version))


def jar_version(jar: Path, artifact: str) -> str:
    """The version in a Maven jar's file name: jar_version(Path("a-1.2.jar"), "a") == "1.2"."""
    stem = jar.name.removesuffix(".jar")
    if not stem.startswith(artifact + "-"):
        raise ValueError(f"{jar.name} is not a jar of {artifact}")
    return stem.removeprefix(artifact + "-")


def spark_kafka_conf() -> dict[str, str]:
    """spark.jars for a session this process builds: Spark's Kafka source from the cache, or
    nothing when it is not fetched (spark-submit --packages can still bring it)."""
    found = spark_kafka_jars()
    return {"spark.jars": ",".join(str(jar) for jar in found)} if found else {}
