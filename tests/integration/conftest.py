"""Fixtures that need the running job (the broker and Spark fixtures are in tests/conftest.py)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from producers.simulator.clock import FastClock
from producers.simulator.scenarios import SCENARIOS
from streaming import jars
from tests.integration.monitor_harness import RunningMonitor
from tests.support import COUNTED_WRITES


def produce_scenario(bootstrap: str, topic: str, scenario, clock=None) -> int:
    """Produce a simulator scenario's encoded events (key = group) into the topic."""
    producer = Producer({"bootstrap.servers": bootstrap, **COUNTED_WRITES})
    count = 0
    for key, value in scenario.run_encoded(clock or FastClock()):
        producer.produce(topic, value, key)
        count += 1
        if count % 10_000 == 0:
            producer.flush(30)
    if producer.flush(30):
        raise RuntimeError("scenario events not delivered within 30 s")
    return count


@pytest.fixture
def running_monitor_metrics_url(spark, kafka_bootstrap, make_topic, tmp_path):
    """host:port of a live job's /metrics, fed by the simulator's client-id-collision scenario
    (a lasting double assignment)."""
    topic = make_topic(partitions=2)
    with RunningMonitor(spark, kafka_bootstrap, topic, tmp_path) as monitor:
        produce_scenario(kafka_bootstrap, topic, SCENARIOS["client-id-collision"](seed=1))
        monitor.wait_for(lambda m: any(
            v > 0 for v in m.series("rebalance_double_assigned_queues").values()))
        yield monitor.metrics_url.removeprefix("http://").removesuffix("/metrics")


# A real RocketMQ cluster (tests/integration/rocketmq_cluster.py), once per version: 4.9.8 from
# the kit ROCKETMQ_KIT names, each 5.x from Maven Central's jars with
# tests/integration/rocketmq5_kit. Each JVM is about 100 MB and 1-2 s to start: one module's
# tests share one cluster.
ROCKETMQ_VERSIONS = ("4.9.8", *jars.ROCKETMQ5_VERSIONS)


@pytest.fixture(scope="session", params=ROCKETMQ_VERSIONS,
                ids=[f"rocketmq-{version}" for version in ROCKETMQ_VERSIONS])
def rocketmq_kit(request):
    from tests.integration.rocketmq_cluster import RocketMQKit

    kit, reason = (RocketMQKit.from_env() if request.param == "4.9.8"
                   else RocketMQKit.from_maven(request.param))
    if kit is None:
        pytest.skip(reason)
    return kit


@pytest.fixture(scope="module")
def rocketmq_cluster(rocketmq_kit, tmp_path_factory):
    """One NameServer and one broker "broker-a" for the module: give each test its own topics
    and groups (a new group reads from the first offset, so it would see old messages)."""
    from tests.integration.rocketmq_cluster import RocketMQCluster

    with RocketMQCluster(rocketmq_kit, tmp_path_factory.mktemp("rocketmq")) as cluster:
        yield cluster


@pytest.fixture
def rocketmq_cluster_factory(rocketmq_kit, tmp_path):
    """rocketmq_cluster_factory(["broker-a", "broker-b"]) -> a started cluster of the test's
    own (to pause a broker, or for several brokers); all stopped at teardown."""
    from tests.integration.rocketmq_cluster import RocketMQCluster

    clusters = []

    def start(brokers=("broker-a",), **options):
        cluster = RocketMQCluster(rocketmq_kit, tmp_path / f"rocketmq-{len(clusters)}", brokers,
                                  **options)
        clusters.append(cluster)
        return cluster.start()

    yield start
    for cluster in reversed(clusters):
        cluster.stop(timeout=0)   # SIGKILL: a broker's own shutdown took 10 s a test


@pytest.fixture
def real_consumer(rocketmq_kit, tmp_path):
    """real_consumer(namesrv, group, topics, instance_name, client_ip=None, run_seconds=600,
    strategy="AVG") -> a started RealConsumer (bin/consumer); every one is killed at teardown."""
    from tests.integration.rocketmq_cluster import RealConsumer

    consumers = []

    def start(namesrv, group, topics, instance_name, **options):
        run_dir = tmp_path / f"consumer-{len(consumers)}-{instance_name}"
        consumer = RealConsumer(rocketmq_kit, namesrv, group, topics, instance_name, run_dir,
                                **options)
        consumers.append(consumer)
        return consumer.start()

    yield start
    for consumer in consumers:
        consumer.stop(timeout=0)


@pytest.fixture
def go_consumer(tmp_path):
    """go_consumer(namesrv, group, topics, instance_name, client_ip=None, run_seconds=600,
    strategy="AVG", virtual_nodes=10) -> a started GoConsumer (a real rocketmq-client-go push
    consumer, built once per source); every one is killed at teardown. Raises, not
    skips, when Go cannot build it."""
    from tests.integration.rocketmq_cluster import GoConsumer, build_go_consumer

    program = build_go_consumer()
    consumers = []

    def start(namesrv, group, topics, instance_name, **options):
        run_dir = tmp_path / f"go-consumer-{len(consumers)}-{instance_name}"
        consumer = GoConsumer(namesrv, group, topics, instance_name, run_dir, program=program,
                              **options)
        consumers.append(consumer)
        return consumer.start()

    yield start
    for consumer in consumers:
        consumer.stop(timeout=0)
