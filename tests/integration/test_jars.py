"""The Java jars the project fetches: Spark's Kafka source at exactly pyspark's version, loaded
from the cache by the test session, and the Apache Kafka broker the tests run on."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import jars

pytestmark = pytest.mark.integration


def test_the_kafka_connector_is_fetched_at_exactly_pysparks_version():
    found = jars.spark_kafka_jars()
    assert found, f"not fetched: {jars.spark_kafka_dir()} (make jars)"
    (connector,) = [jar for jar in found if jar.name.startswith("spark-sql-kafka-0-10_2.13-")]
    (token_provider,) = [jar for jar in found
                         if jar.name.startswith("spark-token-provider-kafka-0-10_2.13-")]
    assert jars.jar_version(connector, "spark-sql-kafka-0-10_2.13") == jars.pyspark_version()
    assert (jars.jar_version(token_provider, "spark-token-provider-kafka-0-10_2.13")
            == jars.pyspark_version())


def test_the_session_loads_the_kafka_source_from_that_jar(spark):
    provider = spark._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.kafka010.KafkaSourceProvider", True,
        spark._jvm.java.lang.Thread.currentThread().getContextClassLoader())
    location = Path(provider.getProtectionDomain().getCodeSource().getLocation().getPath())
    assert location.name == f"spark-sql-kafka-0-10_2.13-{jars.pyspark_version()}.jar"
    assert location.parent == jars.spark_kafka_dir()


def test_the_tests_broker_is_the_pinned_apache_kafka(kafka_broker_kind, kafka_bootstrap):
    if kafka_broker_kind != "apache":
        pytest.skip(f"this session's broker is {kafka_broker_kind}")
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    assert admin.list_topics(timeout=10).brokers
    broker_jars = {jar.name for jar in jars.kafka_broker_jars()}
    assert f"kafka_2.13-{jars.KAFKA_VERSION}.jar" in broker_jars
    assert {"log4j-core", "log4j-slf4j-impl"} <= {name.rsplit("-", 1)[0] for name in broker_jars}
