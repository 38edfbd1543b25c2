"""Classic groups on an Apache Kafka 3.9 broker (the 3.x line many operators still run), watched
as on 4.3: a real 3.9.1 KRaft node from Maven Central, real Java consumers of two assignors,
`observe-kafka` as a real process, the real job in the session's SparkSession.

Ground truth is what each Java consumer prints that it holds. What a 3.9 broker cannot answer
(it has no share or streams groups) is said once by the observer, never once per poll.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from streaming.common.topics import create_topic
from streaming.jars import KAFKA_3_VERSION, kafka_broker_jars
from streaming.kafka_broker import ApacheKafkaBroker
from tests.integration.kafka_consumers import (
    JavaConsumer,
    ProbeUnavailable,
    compile_probe,
    observed_rerun,
    stop_all,
    wait_for_partitions,
)
from tests.integration.monitor_harness import RunningMonitor
from tests.integration.producer_process import ProducerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYSTEM = "kafka"
POLLS_WATCHED = 6


def fresh(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def broker_3(tmp_path_factory) -> Iterator[ApacheKafkaBroker]:
    if not kafka_broker_jars(KAFKA_3_VERSION):
        pytest.fail(f"no Apache Kafka {KAFKA_3_VERSION} jars: make jars fetches them")
    try:
        compile_probe()
    except ProbeUnavailable as missing:
        pytest.fail(f"the Java consumer probe cannot be built: {missing}")
    with ApacheKafkaBroker(tmp_path_factory.mktemp("kafka-3"), version=KAFKA_3_VERSION,
                           tls=False) as broker:
        yield broker


def test_classic_groups_on_kafka_3_are_watched_as_on_4_and_what_it_cannot_ask_is_said_once(
        broker_3, spark, tmp_path):
    bootstrap = broker_3.bootstrap_servers
    events = fresh("kafka3.events")
    create_topic(bootstrap, events, 2)
    groups = {assignor: (fresh(f"classic3-{assignor}"), fresh(f"g3-{assignor}"))
              for assignor in ("range", "roundrobin")}
    members: dict[str, list[JavaConsumer]] = {}
    try:
        for assignor, (topic, group) in groups.items():
            create_topic(bootstrap, topic, 5)
            members[group] = [JavaConsumer(bootstrap, group, [topic], assignor=assignor,
                                           log_dir=tmp_path).start() for _ in range(2)]
        with RunningMonitor(spark, bootstrap, events, tmp_path / "job") as monitor, \
                ProducerProcess(["observe-kafka", "--bootstrap-servers", bootstrap,
                                 "--topic", events, "--interval-seconds", "0.5"],
                                tmp_path / "observer") as observer:
            for assignor, (topic, group) in groups.items():
                wait_for_partitions(members[group], topic, 5, same_generation=True)
                truth = {m.member_id: {(topic, p) for p in m.partitions(topic)}
                         for m in members[group]}
                assert observed_rerun(bootstrap, group) == truth
                scrape = monitor.wait_for(lambda s, group=group, truth=truth: {
                    dict(labels)["client"]: value for labels, value in s.series(
                        "rebalance_client_queues", system=SYSTEM, group=group).items()
                } == {m: len(p) for m, p in truth.items()})
                for name, labels in (("rebalance_allocation_mismatch_clients", {}),
                                     ("rebalance_double_assigned_queues", {"topic": topic}),
                                     ("rebalance_orphaned_queues", {"topic": topic})):
                    assert scrape.value(name, system=SYSTEM, group=group, **labels) == 0, name
                assert scrape.value("rebalance_group_info", system=SYSTEM, group=group,
                                    group_type="classic", assignor=assignor) == 1
            # More polls: what the broker cannot answer is said once, not once a poll, and no
            # poll fails for it. (A poll may fail while a just-started broker loads its group
            # coordinator, CoordinatorLoadInProgress: counted, and not the subject here.)
            def polls(m) -> float:
                return m.value("rebalance_observer_calls_total", request="list_groups",
                               outcome="ok") or 0

            before = observer.wait_for(lambda m: True)
            failed_before = before.value("rebalance_observer_poll_failures_total") or 0
            scrape = observer.wait_for(lambda m: polls(m) >= polls(before) + POLLS_WATCHED,
                                       timeout=60, what=f"{POLLS_WATCHED} more polls")
            # 3.9 has ShareGroupDescribe and StreamsGroupDescribe in neither form: said once.
            for group_type in ("share", "streams"):
                assert scrape.value("rebalance_observer_unwatchable_group_types",
                                    group_type=group_type) == 1, group_type
            assert scrape.value("rebalance_observer_unwatchable_group_types",
                                group_type="consumer") is None    # 3.9 has API 69
            assert (scrape.value("rebalance_observer_poll_failures_total") or 0) == failed_before
            log = observer.log()
            unsupported = [line for line in log.splitlines() if "does not support" in line]
            assert len(unsupported) == 1, log[-3000:]
            assert "Traceback" not in log, log[-3000:]
    finally:
        started = [m for group in members.values() for m in group]
        for consumer in started:
            consumer.kill()
        stop_all(started)
