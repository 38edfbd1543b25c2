"""Kafka consumer groups on the real Apache Kafka, watched by `observe-kafka` with no client
change: real Java consumers (tests/integration/kafka_java/ConsumerProbe.java, kafka-clients from
Maven Central) in classic groups with each client assignor and in KIP-848 groups, and real Kafka
Streams applications (kafka_java/StreamsProbe.java) in KIP-1071 streams groups; observe-kafka
as a real process writing to the events topic; the real job in the session's SparkSession; for
the alerts a real Prometheus loaded with the project's rules.

Ground truth is what each Java consumer prints that it holds (its ConsumerRebalanceListener),
or each Streams instance that it runs (metadataForLocalThreads), never the observer's reading of
the cluster.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from producers.kafka.translate import task_space
from streaming.common.topics import create_topic
from tests.integration.kafka_consumers import (
    JavaConsumer,
    ProbeUnavailable,
    compile_probe,
    observed_rerun,
    stop_all,
    wait_for_partitions,
    wait_for_probes,
)
from tests.integration.kafka_streams_apps import StreamsApp, wait_for_tasks
from tests.integration.monitor_harness import RunningMonitor
from tests.integration.producer_process import ProducerProcess
from tests.integration.prometheus_harness import (
    DASHBOARDS,
    KAFKA_ROW,
    STREAMS_ROW,
    HarnessConfig,
    PrometheusHarness,
    panel_queries,
    poll,
)
from tests.support import Scrape, read_topic, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYSTEM = "kafka"
CLUSTER = "kafka-under-test"
ALL_VALUES = ".*"       # a dashboard variable set to All (its allValue)
FAST_FOR = {"RebalanceKafkaHandoffStuck": "3s", "RebalanceDoubleAssignment": "3s",
            "RebalanceOrphanedQueues": "3s", "RebalanceKafkaStreamsNotReady": "3s"}
JAVA_SOURCES = Path(__file__).parent / "kafka_java"


def fresh(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


class Watched:
    """The job reading its events topic, observe-kafka writing the cluster's groups to it, and
    Prometheus scraping the job with the project's rules."""

    def __init__(self, bootstrap: str, events: str, monitor: RunningMonitor,
                 observer: ProducerProcess, prometheus: PrometheusHarness) -> None:
        self.bootstrap, self.events = bootstrap, events
        self.monitor, self.observer, self.prometheus = monitor, observer, prometheus

    def value(self, scrape: Scrape, name: str, group: str, **labels: str) -> float | None:
        return scrape.value(name, system=SYSTEM, group=group, **labels)

    def client_queues(self, scrape: Scrape, group: str) -> dict[str, float]:
        return {dict(labels)["client"]: value for labels, value in scrape.series(
            "rebalance_client_queues", system=SYSTEM, group=group).items()}

    def findings(self, group: str) -> list[dict]:
        records = read_topic(self.bootstrap, self.monitor.config.findings_topic)
        return [r for r in (json.loads(value) for _, value, _ in records) if r["group"] == group]


@pytest.fixture(scope="module")
def watched(spark, kafka_bootstrap, kafka_broker_kind, tmp_path_factory) -> Iterator[Watched]:
    if kafka_broker_kind not in ("apache", "env"):
        pytest.skip(f"needs real Kafka groups; this session's broker is {kafka_broker_kind}")
    try:
        compile_probe()
    except ProbeUnavailable as missing:
        pytest.fail(f"the Java consumer probe cannot be built: {missing}")
    workdir = tmp_path_factory.mktemp("kafka-groups")
    events = fresh("kafka-groups.events")
    create_topic(kafka_bootstrap, events, 2)
    with RunningMonitor(spark, kafka_bootstrap, events, workdir) as monitor, \
            ProducerProcess(["observe-kafka", "--bootstrap-servers", kafka_bootstrap,
                             "--topic", events, "--interval-seconds", "0.5", "--cluster", CLUSTER],
                            workdir) as observer, \
            PrometheusHarness(HarnessConfig(target=f"127.0.0.1:{monitor.monitor.metrics.port}",
                                            for_overrides=FAST_FOR), workdir / "prom") as prom:
        yield Watched(kafka_bootstrap, events, monitor, observer, prom)


@contextlib.contextmanager
def consumers(*started: JavaConsumer) -> Iterator[list[JavaConsumer]]:
    """Start the probes; at the end kill them (a probe told to block in its revocation callback
    would make a clean close wait for it)."""
    try:
        yield [consumer.start() for consumer in started]
    finally:
        for consumer in started:
            consumer.kill()
        stop_all(started)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_a_classic_groups_rerun_equals_what_each_real_consumer_holds(watched, assignor,
                                                                      tmp_path):
    topic, group = fresh(f"classic-{assignor}"), fresh(f"g-{assignor}")
    create_topic(watched.bootstrap, topic, 7)
    with consumers(*(JavaConsumer(watched.bootstrap, group, [topic], assignor=assignor,
                                  log_dir=tmp_path) for _ in range(3))) as members:
        wait_for_partitions(members, topic, 7, same_generation=True)
        truth = {m.member_id: {(topic, p) for p in m.partitions(topic)} for m in members}

        assert observed_rerun(watched.bootstrap, group) == truth
        scrape = watched.monitor.wait_for(
            lambda s: watched.client_queues(s, group) == {m: len(p) for m, p in truth.items()})
        assert watched.value(scrape, "rebalance_allocation_mismatch_clients", group) == 0
        assert watched.value(scrape, "rebalance_double_assigned_queues", group, topic=topic) == 0
        assert watched.value(scrape, "rebalance_orphaned_queues", group, topic=topic) == 0
        assert scrape.value("rebalance_group_info", system=SYSTEM, group=group,
                            group_type="classic", assignor=assignor) == 1


def test_a_static_members_rejoin_keeps_its_partitions_and_raises_no_conflict(watched, tmp_path):
    topic, group = fresh("static"), fresh("g-static")
    create_topic(watched.bootstrap, topic, 4)
    static = JavaConsumer(watched.bootstrap, group, [topic], assignor="range",
                          instance_id="pod-1", log_dir=tmp_path)
    other = JavaConsumer(watched.bootstrap, group, [topic], assignor="range", log_dir=tmp_path)
    with consumers(static, other) as members:
        before = wait_for_partitions(members, topic, 4)[0]
        static.kill()                        # no LeaveGroup: the broker keeps its place
        static.start()
        wait_for_probes(lambda: static.partitions(topic) == before, 60,
                        "the static member's return", members)
        truth = {m.member_id: len(m.partitions(topic)) for m in members}
        assert observed_rerun(watched.bootstrap, group) == {
            m.member_id: {(topic, p) for p in m.partitions(topic)} for m in members}
        scrape = watched.monitor.wait_for(lambda s: watched.client_queues(s, group) == truth)
        assert watched.value(scrape, "rebalance_double_assigned_queues", group, topic=topic) == 0
    assert not [f for f in watched.findings(group) if f["kind"] == "double_assignment"]


def kip848_settled(watched: Watched, group: str, members: list[JavaConsumer], topic: str):
    truth = {m.member_id: len(m.partitions(topic)) for m in members}
    return watched.monitor.wait_for(
        lambda s: watched.client_queues(s, group) == truth
        and watched.value(s, "rebalance_kafka_reconciling_members", group) == 0)


def test_a_kip_848_group_hands_off_a_killed_members_partitions_with_no_double_assignment(
        watched, tmp_path):
    topic, group = fresh("kip848"), fresh("g-kip848")
    create_topic(watched.bootstrap, topic, 12)
    # A revocation callback that takes 3 s, as a consumer committing its offsets does: the
    # hand-off after the kill lasts at least that long, so it is seen in progress.
    probes = [JavaConsumer(watched.bootstrap, group, [topic], protocol="consumer",
                           assignor="range", revoke_delay_ms=3_000, log_dir=tmp_path)
              for _ in range(3)]
    with consumers(*probes) as members:
        assert sorted(map(len, wait_for_partitions(members, topic, 12))) == [4, 4, 4]
        scrape = kip848_settled(watched, group, members, topic)
        assert scrape.value("rebalance_group_info", system=SYSTEM, group=group,
                            group_type="consumer", assignor="range") == 1
        assert watched.value(scrape, "rebalance_group_members", group) == 3
        assert watched.value(scrape, "rebalance_kafka_assignment_epoch", group) > 0
        assert watched.value(scrape, "rebalance_kafka_target_unassigned_partitions", group,
                             topic=topic) == 0
        assert watched.value(scrape, "rebalance_kafka_target_skew_ratio", group) == 1.0
        # The group dashboard's KIP-848 row, each panel's query run by the real Prometheus.
        group_dashboard = next(p for p in DASHBOARDS if p.name == "rebalance-group.json")
        variables = {"system": SYSTEM, "cluster": CLUSTER, "group": group,
                     "job": ALL_VALUES, "instance": ALL_VALUES}
        for title, expr in panel_queries(group_dashboard, variables,
                                         rows=lambda row: row == KAFKA_ROW):
            assert watched.prometheus.wait_for_data(expr, timeout=60), title

        doubles = []

        def record(scrape: Scrape) -> Scrape:
            doubles.append(watched.value(scrape, "rebalance_double_assigned_queues", group,
                                         topic=topic))
            return scrape

        # range gives each member a block of partitions: killing the last block's member makes
        # the survivors' new blocks (0-5, 6-11) cut through an old one (4-7), so a survivor has
        # partitions to give up; killing the middle one would leave nothing to revoke.
        last = next(m for m in members if 11 in m.partitions(topic))
        last.kill()
        survivors = [m for m in members if m is not last]
        in_progress = watched.monitor.wait_for(lambda s: record(s) and watched.value(
            s, "rebalance_kafka_reconciling_members", group) > 0, timeout=60)
        assert watched.value(in_progress, "rebalance_group_members", group) == 2
        assert sorted(map(len, wait_for_partitions(survivors, topic, 12))) == [6, 6]
        done = watched.monitor.wait_for(lambda s: record(s) and watched.client_queues(s, group)
                                        == {m.member_id: 6 for m in survivors}
                                        and watched.value(
                                            s, "rebalance_kafka_reconciling_members", group) == 0)
        assert watched.value(done, "rebalance_kafka_handoff_age_seconds", group) == 0
        assert set(doubles) == {0}, doubles
    history = watched.findings(group)
    assert not [f for f in history if f["kind"] == "double_assignment"], history
    handoffs = [f for f in history if f["kind"] == "handoff_pending"]
    assert {f["status"] for f in handoffs} == {"started", "ended"}, handoffs


def test_a_member_stuck_in_its_revocation_fires_the_stuck_hand_off_alert(watched, tmp_path):
    topic, group = fresh("stuck"), fresh("g-stuck")
    # Both first members block for 10 minutes when told to give partitions up; the broker fences
    # a member only after its rebalance timeout (max.poll.interval.ms, 5 minutes). They join
    # before the topic exists, so that they start at 2 and 2 with nothing to revoke.
    first = [JavaConsumer(watched.bootstrap, group, [topic], protocol="consumer",
                          assignor="range", revoke_delay_ms=600_000, log_dir=tmp_path)
             for _ in range(2)]
    with consumers(*first) as members:
        wait_for_probes(lambda: all(m.member_id for m in members), 60, "both members joined",
                        members)
        create_topic(watched.bootstrap, topic, 4)
        wait_for_partitions(members, topic, 4)
        kip848_settled(watched, group, members, topic)
        late = JavaConsumer(watched.bootstrap, group, [topic], protocol="consumer",
                            assignor="range", log_dir=tmp_path)
        with consumers(late):
            stuck = wait_for_probes(lambda: [m for m in members if m.revoking], 60,
                                    "a member blocked in onPartitionsRevoked", [*members, late])
            stuck_ids = {m.member_id for m in stuck}
            scrape = watched.monitor.wait_for(lambda s: watched.value(
                s, "rebalance_kafka_handoff_age_seconds", group) > 0)
            assert watched.value(scrape, "rebalance_kafka_reconciling_members", group) >= 2
            assert watched.value(scrape, "rebalance_kafka_max_epoch_lag", group) >= 1
            firing = watched.prometheus.wait_for_alert("RebalanceKafkaHandoffStuck", "firing",
                                                       timeout=90)
            assert any(a["labels"]["group"] == group for a in firing), firing
            # The real consumers agree: the blocked ones still hold their partitions, the
            # newcomer has not got all of its share.
            assert all(m.revoking for m in stuck) and late.partitions(topic) == set()
            started = {tuple(f["clients"]): f for f in watched.findings(group)
                       if f["kind"] == "handoff_pending" and f["status"] == "started"}
            for member_id in stuck_ids:
                detail = started[(member_id,)]["detail"]
                assert detail["to_revoke"] >= 1 and detail["epoch_lag"] >= 1, detail


def test_a_5s_assignment_interval_delays_targets_without_a_stuck_hand_off_alert_and_a_blocked_revocation_still_alerts(  # noqa: E501
        watched, tmp_path):
    """KIP-1263 (Kafka 4.3): the broker computes a group's next target at most once per
    assignment interval, so the group epoch runs ahead of the assignment epoch meanwhile. The
    monitor counts a hand-off from the target it must reach, so the wait raises no hand-off;
    RebalanceKafkaHandoffStuck, whose `for` the harness cuts to 3 s, fires on a revocation that
    blocks and on nothing else."""
    topic, group = fresh("interval"), fresh("g-interval")
    create_topic(watched.bootstrap, topic, 6)
    set_group_configs(watched.bootstrap, group, {"consumer.assignment.interval.ms": "5000"})
    selector = f'system="{SYSTEM}", group="{group}"'

    def probe(**kwargs) -> JavaConsumer:
        return JavaConsumer(watched.bootstrap, group, [topic], protocol="consumer",
                            assignor="range", log_dir=tmp_path, **kwargs)

    def ever(expr: str) -> list:
        return watched.prometheus.query(f"max_over_time(({expr})[15m:1s]) > 0")

    with consumers(probe()) as (base,):
        wait_for_partitions([base], topic, 6)
        for _ in range(10):    # each a join, then a leave inside the interval of its target
            with consumers(probe()) as (newcomer,):
                wait_for_partitions([base, newcomer], topic, 6)
                newcomer.close()
            wait_for_partitions([base], topic, 6)
        kip848_settled(watched, group, [base], topic)
        # The targets waited: Prometheus saw the group epoch ahead of the assignment epoch.
        assert ever(f"max(rebalance_kafka_group_epoch{{{selector}}}) - "
                    f"max(rebalance_kafka_assignment_epoch{{{selector}}})"), "no target waited"
        firing = f'ALERTS{{alertname="RebalanceKafkaHandoffStuck", alertstate="firing", {selector}}}'
        assert not ever(firing), ever(f"max(rebalance_kafka_handoff_age_seconds{{{selector}}})")

        blocker = probe(revoke_delay_ms=600_000)
        with consumers(blocker):
            wait_for_partitions([base, blocker], topic, 6)
            with consumers(probe()) as (third,):    # blocker must give a partition up: it blocks
                wait_for_probes(lambda: blocker.revoking, 60, "the blocker in its revocation",
                                [base, blocker, third])
                alerts = watched.prometheus.wait_for_alert("RebalanceKafkaHandoffStuck",
                                                           "firing", timeout=90)
                assert any(a["labels"]["group"] == group for a in alerts), alerts


def test_a_manual_assign_beside_the_group_is_a_double_assignment_that_fires_the_alert(
        watched, tmp_path):
    from confluent_kafka import Consumer, TopicPartition

    from producers.kafka.reporter import RebalanceReporter

    topic, group = fresh("manual"), fresh("g-manual")
    create_topic(watched.bootstrap, topic, 4)
    with consumers(*(JavaConsumer(watched.bootstrap, group, [topic], assignor="range",
                                  log_dir=tmp_path) for _ in range(2))) as members:
        wait_for_partitions(members, topic, 4)
        owner = next(m for m in members if 0 in m.partitions(topic))
        # Its reporter names the cluster as observe-kafka does: one group, seen from both.
        # A consumer of the same group id that assign()s partition 0 by hand: the broker never
        # sees it as a member, so only its reporter can tell the monitor.
        manual = Consumer({"bootstrap.servers": watched.bootstrap, "group.id": group,
                           "enable.auto.commit": False})
        reporter = RebalanceReporter({"bootstrap.servers": watched.bootstrap}, watched.events,
                                     group, "range", client_id="manual-consumer",
                                     cluster=CLUSTER)
        by_hand = [TopicPartition(topic, 0)]
        manual.assign(by_hand)
        reporter.assigned(manual, by_hand)
        reporter.start()
        try:
            scrape = watched.monitor.wait_for(lambda s: watched.value(
                s, "rebalance_double_assigned_queues", group, topic=topic) == 1)
            assert watched.client_queues(scrape, group)["manual-consumer"] == 1
            firing = watched.prometheus.wait_for_alert("RebalanceDoubleAssignment", "firing",
                                                       timeout=90)
            assert any(a["labels"]["group"] == group and a["labels"]["topic"] == topic
                       for a in firing), firing
            # The double as it stands names the manual consumer and the real owner. (An earlier
            # one may name another member: the observer's poll can still show the group's
            # first assignment when the reporter's claim arrives, and each is published.)
            expected = sorted(["manual-consumer", owner.member_id])

            def latest_double() -> dict | None:
                doubles = [f for f in watched.findings(group)
                           if f["kind"] == "double_assignment" and f["status"] == "started"]
                last = doubles[-1] if doubles else None
                return last if last and sorted(last["clients"]) == expected else None

            double = wait_until(latest_double, 60, "the double naming the manual consumer and "
                                "the owner", details=lambda: str(watched.findings(group)))
            assert double["queue"] == ["", 0]
        finally:
            manual.close()
            reporter.close()


def test_the_observer_keeps_running_through_a_broker_pause_and_says_so(tmp_path):
    from streaming.kafka_broker import ApacheKafkaBroker
    from tests.integration.producer_process import paused

    with ApacheKafkaBroker(tmp_path / "own", heap="256m", tls=False) as broker:
        bootstrap = broker.bootstrap_servers
        topic, group, events = fresh("paused"), fresh("g-paused"), fresh("paused.events")
        create_topic(bootstrap, topic, 2)
        create_topic(bootstrap, events, 1)
        with consumers(JavaConsumer(bootstrap, group, [topic], protocol="consumer",
                                    log_dir=tmp_path)) as [member], \
                ProducerProcess(["observe-kafka", "--bootstrap-servers", bootstrap,
                                 "--topic", events, "--interval-seconds", "1", "--timeout-seconds", "2"],
                                tmp_path) as observer:
            wait_for_partitions([member], topic, 2)
            observer.wait_for(lambda m: m.value("rebalance_observer_members") == 1,
                              what="the KIP-848 member seen")
            with paused(broker):
                observer.wait_for(lambda m: m.total("rebalance_observer_poll_failures_total") >= 2,
                                  what="polls failing during the pause")
                assert observer.running
                resumed_after = time.time()
            after = observer.wait_for(
                lambda m: m.value("rebalance_observer_members") == 1
                and m.value("rebalance_observer_last_success_timestamp_seconds") > resumed_after,
                timeout=60, what="polls succeeding after the pause")
            assert after.total("rebalance_observer_poll_failures_total") >= 2
            assert observer.stop() == 0
        assert "Traceback" not in observer.log()


def test_a_uniform_kip_848_group_gives_a_killed_members_partitions_to_the_survivors(
        watched, tmp_path):
    topic, group = fresh("uniform"), fresh("g-uniform")
    create_topic(watched.bootstrap, topic, 12)
    probes = [JavaConsumer(watched.bootstrap, group, [topic], protocol="consumer",
                           assignor="uniform", log_dir=tmp_path) for _ in range(3)]
    with consumers(*probes) as members:
        assert sorted(map(len, wait_for_partitions(members, topic, 12))) == [4, 4, 4]
        scrape = kip848_settled(watched, group, members, topic)
        assert scrape.value("rebalance_group_info", system=SYSTEM, group=group,
                            group_type="consumer", assignor="uniform") == 1
        members[0].kill()
        survivors = members[1:]
        kept = {m.member_id: m.partitions(topic) for m in survivors}
        assert sorted(map(len, wait_for_partitions(survivors, topic, 12))) == [6, 6]
        # uniform is sticky: each survivor keeps what it had and gets half of the dead one's.
        assert all(kept[m.member_id] <= m.partitions(topic) for m in survivors)
        done = kip848_settled(watched, group, survivors, topic)
        assert watched.value(done, "rebalance_group_members", group) == 2
    assert not [f for f in watched.findings(group) if f["kind"] == "double_assignment"]


def test_a_group_migrating_from_classic_to_kip_848_member_by_member_raises_no_conflict(
        watched, tmp_path):
    topic, group = fresh("migrate"), fresh("g-migrate")
    create_topic(watched.bootstrap, topic, 6)
    classic = [JavaConsumer(watched.bootstrap, group, [topic], assignor="range",
                            log_dir=tmp_path) for _ in range(2)]
    upgraded = [JavaConsumer(watched.bootstrap, group, [topic], protocol="consumer",
                             assignor="uniform", log_dir=tmp_path) for _ in range(2)]
    with consumers(*classic) as members:
        wait_for_partitions(members, topic, 6, same_generation=True)
        watched.monitor.wait_for(lambda s: s.value(
            "rebalance_group_info", system=SYSTEM, group=group, group_type="classic") == 1)
        # A rolling restart onto group.protocol=consumer: the broker converts the group when
        # the first KIP-848 member joins, and describes the classic member inside it.
        members[0].close()
        with consumers(upgraded[0]):
            wait_for_partitions([members[1], upgraded[0]], topic, 6)
            watched.monitor.wait_for(lambda s: s.value(
                "rebalance_group_info", system=SYSTEM, group=group, group_type="consumer") == 1
                and watched.client_queues(s, group) == {
                    m.member_id: len(m.partitions(topic)) for m in (members[1], upgraded[0])})
            members[1].close()
            with consumers(upgraded[1]):
                now = [upgraded[0], upgraded[1]]
                wait_for_partitions(now, topic, 6)
                scrape = kip848_settled(watched, group, now, topic)
                assert watched.value(scrape, "rebalance_assignor_changes_total", group) >= 1
    history = watched.findings(group)
    assert not [f for f in history if f["kind"] in ("double_assignment", "allocation_mismatch")
                and f["status"] == "started"], history


@contextlib.contextmanager
def share_readers(bootstrap: str, group: str, topic: str, count: int = 2):
    """`count` real share consumers (confluent-kafka) of `topic`, polled all along (a share
    member must poll to stay in its group); yields a KafkaAdminClient for ShareGroupDescribe."""
    from confluent_kafka import ShareConsumer

    from producers.kafka.admin import kafka_python_admin

    readers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
               for _ in range(count)]
    stop = threading.Event()

    def keep_polling() -> None:
        while not stop.is_set():
            for reader in readers:
                reader.poll(0.1)

    for reader in readers:
        reader.subscribe([topic])
    poller = threading.Thread(target=keep_polling, daemon=True)
    poller.start()
    admin = kafka_python_admin(bootstrap, 10.0)
    try:
        yield admin
    finally:
        stop.set()
        poller.join(10)
        for reader in readers:
            reader.close()
        admin.close()


def described_share_group(admin, group: str, members: int, assigned: set,
                          each_assigned: bool = True):
    """Ground truth: the broker's own description of the share group (a share consumer does
    not expose its assignment), once it has `members` members whose assignments together are
    `assigned` (and, with `each_assigned`, none of them empty)."""
    from kafka.errors import KafkaError

    from producers.kafka.protocol import describe_share_groups

    def settled():
        try:
            described = describe_share_groups(admin, [group])[group]
        except KafkaError:           # the group's coordinator is still loading
            return None
        together = {tp for m in described.members for tp in m.assignment}
        done = len(described.members) == members and together == assigned
        if each_assigned and not all(m.assignment for m in described.members):
            return None
        return described if done else None

    return poll(settled, 60, what=f"{members} share members assigned {sorted(assigned)}")


def test_a_share_groups_members_share_a_partition_and_nothing_alerts(watched):
    topic, group = fresh("share"), fresh("g-share")
    create_topic(watched.bootstrap, topic, 1)
    with share_readers(watched.bootstrap, group, topic) as admin:
        described = described_share_group(admin, group, 2, {(topic, 0)})
        assert all(m.assignment == ((topic, 0),) for m in described.members)
        scrape = watched.monitor.wait_for(
            lambda s: watched.value(s, "rebalance_kafka_share_max_readers", group,
                                    topic=topic) == 2)
        assert scrape.value("rebalance_group_info", system=SYSTEM, group=group,
                            group_type="share", assignor="simple") == 1
        assert watched.value(scrape, "rebalance_double_assigned_queues", group, topic=topic) == 0
        assert watched.value(scrape, "rebalance_orphaned_queues", group, topic=topic) == 0
        assert watched.client_queues(scrape, group) == {m.member_id: 1
                                                        for m in described.members}
    assert not [f for f in watched.findings(group) if f["kind"] == "double_assignment"]


def test_a_partition_a_share_groups_assignor_gives_nobody_is_orphaned_and_alerts(
        watched, tmp_path):
    """Kafka's own share assignor gives every subscribed partition to a member, but the broker
    checks no coverage: a custom one (`group.share.assignors`) may leave a partition unread.
    A second cluster whose assignor gives partition 0 to nobody
    (tests/integration/kafka_java/SkipPartitionZeroShareAssignor.java), watched by a second
    observe-kafka into the same events topic: the broker's own description has no member on
    it, and the monitor shows it orphaned, and alerts."""
    from streaming import jars
    from streaming.kafka_broker import ApacheKafkaBroker
    from tests.integration.java_programs import compile_java

    broker_jars = jars.kafka_broker_jars(jars.KAFKA_VERSION)
    assignor = compile_java([JAVA_SOURCES / "SkipPartitionZeroShareAssignor.java"], broker_jars,
                            "share-assignor", f"kafka-{jars.KAFKA_VERSION}")
    settings = {"group.share.assignors": "SkipPartitionZeroShareAssignor"}
    with ApacheKafkaBroker(tmp_path / "kafka", tls=False, settings=settings,
                           classpath=[assignor]) as broker, \
            ProducerProcess(["observe-kafka", "--bootstrap-servers", broker.bootstrap_servers,
                             "--events-bootstrap-servers", watched.bootstrap,
                             "--topic", watched.events, "--interval-seconds", "0.5",
                             "--cluster", "kafka-custom-assignor"], tmp_path):
        topic, group = fresh("share-skip"), fresh("g-share-skip")
        create_topic(broker.bootstrap_servers, topic, 3)
        with share_readers(broker.bootstrap_servers, group, topic) as admin:
            # One member may be left with nothing (its share was partition 0 alone).
            described = described_share_group(admin, group, 2, {(topic, 1), (topic, 2)},
                                              each_assigned=False)
            scrape = watched.monitor.wait_for(lambda s: watched.value(
                s, "rebalance_orphaned_queues", group, topic=topic) == 1)
            assert scrape.value("rebalance_group_info", system=SYSTEM, group=group,
                                group_type="share", assignor="skip-partition-zero") == 1
            assert watched.client_queues(scrape, group) == {
                m.member_id: len(m.assignment) for m in described.members}
            firing = watched.prometheus.wait_for_alert("RebalanceOrphanedQueues", "firing",
                                                       timeout=90)
            assert any(a["labels"]["group"] == group for a in firing), firing

            # The others were orphaned too until the share-group state initialized them (about
            # a heartbeat, as the broker does for any new partition); partition 0 stays so.
            def open_orphans() -> set:
                last = {}
                for record in watched.findings(group):
                    if record["kind"] == "orphaned_queue":
                        last[(record["topic"], tuple(record["queue"]))] = record["status"]
                return {queue for queue, status in last.items() if status != "ended"}

            wait_until(lambda: open_orphans() == {(topic, ("", 0))}, 60,
                       "the findings topic's open orphans", details=lambda: str(open_orphans()))


# -- Kafka Streams groups (KIP-1071) ----------------------------------------------------------

Tasks = tuple[frozenset, frozenset]    # a member's (active, standby) tasks as (topic, queue)


def _by_member(pairs) -> list[Tasks]:
    return sorted(pairs, key=lambda pair: (sorted(pair[0]), sorted(pair[1])))


def shown_tasks(watched: Watched, app: str) -> list[Tasks] | None:
    """What the monitor's group API shows each member of the streams group running and keeping
    a standby of, as (topic, queue) (task s_p is queue p of task_space(s)); None before it shows
    any."""
    try:
        detail = watched.monitor.group(SYSTEM, app)["detail"]
    except ValueError:   # not listed yet
        return None
    if detail is None:
        return None
    standby: dict[str, set] = {}
    for queue in detail["queues"]:
        for owner in queue["standby"]:
            standby.setdefault(owner["client_id"], set()).add((queue["topic"], queue["queue_id"]))
    return _by_member((frozenset((topic, queue) for topic, _, queue in member["owned"] or ()),
                       frozenset(standby.get(member["client_id"], ())))
                      for member in detail["members"])


def instance_tasks(apps) -> list[Tasks]:
    """What each real instance (one thread each) says it runs and keeps a standby of."""
    return _by_member((frozenset((task_space(sub), p) for sub, p in app_.active),
                       frozenset((task_space(sub), p) for sub, p in app_.standby))
                      for app_ in apps)


def wait_for_the_monitor_to_show(watched: Watched, app: str, apps, tasks: int,
                                 standbys: int = 0) -> None:
    """Until the monitor shows each member running and keeping standbys of exactly what one
    real instance says, every task in a route, none doubled or orphaned, no copy on its active
    task's process, and the group typed streams. `standbys`: first wait until the instances
    keep that many standbys of each task of the stateful subtopology 1."""

    names = ("rebalance_group_queues", "rebalance_double_assigned_queues",
             "rebalance_orphaned_queues", "rebalance_kafka_streams_standby_with_active_tasks")

    def shown_series() -> str:
        scrape = watched.monitor.scrape()
        return "\n".join(f"{name}: {scrape.series(name, system=SYSTEM, group=app)}"
                         for name in ("rebalance_group_info", *names))

    def agrees() -> bool:
        truth = instance_tasks(apps)
        kept = Counter(t for _, standby in truth for t in standby)
        if kept != Counter({(task_space("1"), p): standbys for p in range(tasks) if standbys}):
            return False
        if shown_tasks(watched, app) != truth:
            return False
        scrape = watched.monitor.scrape()
        return (scrape.value("rebalance_group_info", system=SYSTEM, group=app,
                             group_type="streams", assignor="sticky") == 1
                and all(watched.value(scrape, name, app, topic=f"subtopology {sub}") == value
                        for sub in ("0", "1")
                        for name, value in zip(names, (tasks, 0, 0, 0), strict=True)))

    wait_until(agrees, 60, f"the monitor showing {app}'s members as the instances run them",
               interval=0.5, details=lambda: f"instances: {instance_tasks(apps)}\nmonitor: "
                                             f"{shown_tasks(watched, app)}\n{shown_series()}")


def test_a_streams_groups_tasks_are_shown_as_each_real_instance_runs_them(watched, tmp_path):
    # A standby of each stateful task (subtopology 1 counts into a store), on another instance.
    source, app = new_streams_app(watched, "streams", 4, STANDBY)
    stall = tmp_path / "stall"
    apps = [StreamsApp(watched.bootstrap, app, source, tmp_path, stall_file=stall,
                       name=f"instance-{n}") for n in range(3)]
    tasks = {"0": 4, "1": 4}    # the source's 4 partitions; the repartition topic inherits 4
    try:
        for instance in apps[:2]:
            instance.start()
        wait_for_tasks(apps[:2], tasks)
        wait_for_the_monitor_to_show(watched, app, apps[:2], 4, standbys=1)
        # The group dashboard's two Kafka rows, each panel's query run by the real Prometheus.
        group_dashboard = next(p for p in DASHBOARDS if p.name == "rebalance-group.json")
        variables = {"system": SYSTEM, "cluster": CLUSTER, "group": app,
                     "job": ALL_VALUES, "instance": ALL_VALUES}
        for title, expr in panel_queries(group_dashboard, variables,
                                         rows=lambda row: row in (KAFKA_ROW, STREAMS_ROW)):
            assert watched.prometheus.wait_for_data(expr, timeout=60), title

        apps[2].start()                      # scale out: the broker moves tasks to it
        wait_for_tasks(apps, tasks)
        wait_for_the_monitor_to_show(watched, app, apps, 4, standbys=1)

        survivors = sigkill_with_the_survivors_stalled(watched, app, apps, stall)
        wait_for_tasks(survivors, tasks)
        wait_for_the_monitor_to_show(watched, app, survivors, 4, standbys=1)
        # No scrape showed a task run twice (each finding the monitor ever raised is a record).
        assert not any(record["kind"] in ("double_assignment", "standby_with_active")
                       for record in watched.findings(app))
    finally:
        stall.unlink(missing_ok=True)
        for instance in apps:
            instance.kill()


def sigkill_with_the_survivors_stalled(watched: Watched, app: str, apps: list[StreamsApp],
                                       stall: Path) -> list[StreamsApp]:
    """SIGKILL the instance running the most counting tasks while every other one's stream
    thread is stalled (a long pause). The broker drops the killed member at its session's end
    and gives each counting task to the process keeping its standby, which must first let go of
    that standby: stalled, it cannot, so the hand-off stays open until the stall ends. Asserts
    the monitor shows it open (a member reconciling, tasks nobody runs) as the instances have
    it, then ends the stall. The survivors."""
    counting = task_space("1")
    victim = max(apps, key=lambda a: sum(sub == "1" for sub, _ in a.active))
    survivors = [a for a in apps if a is not victim]
    was_victims = {(task_space(sub), p) for sub, p in victim.active}
    stall.touch()
    for instance in survivors:
        instance.wait_for(lambda i: bool(i.stalled), timeout=30)
    victim.kill()                        # no leave: the broker drops it at its session's end

    def orphaned() -> set:
        started, ended = Counter(), Counter()
        for record in watched.findings(app):
            if record["kind"] == "orphaned_queue":
                key = (record["topic"], record["queue"][1])
                (started if record["status"] == "started" else ended)[key] += 1
        return set(started - ended)

    # A member stalled before its last epoch bump also shows as reconciling: wait for both.
    watched.monitor.wait_for(lambda s: (watched.value(
        s, "rebalance_kafka_reconciling_members", app) or 0) >= 1 and (watched.value(
            s, "rebalance_orphaned_queues", app, topic=counting) or 0) >= 1, timeout=60)
    shown = wait_until(orphaned, 30, "the orphaned tasks' findings", interval=0.5)
    # The instances agree: no survivor runs a task the monitor shows as nobody's, and each was
    # the killed instance's.
    running = {(task_space(sub), p) for instance in survivors for sub, p in instance.active}
    assert shown <= was_victims - running, (shown, was_victims, running)
    assert all(instance.stalled for instance in survivors)   # the hand-off was held, not done
    stall.unlink()
    return survivors


def test_a_streams_app_with_fewer_instances_than_its_standbys_need_is_short_of_copies_until_scaled(
        watched, tmp_path):
    source, app = new_streams_app(watched, "streams-alone", 2, STANDBY)
    apps = [StreamsApp(watched.bootstrap, app, source, tmp_path, name=f"alone-{n}")
            for n in range(2)]

    def missing(scrape) -> float | None:
        return watched.value(scrape, "rebalance_kafka_streams_standby_missing_tasks", app,
                             topic=task_space("1"))

    try:
        apps[0].start()
        wait_for_tasks(apps[:1], {"0": 2, "1": 2})
        # One process: the broker has nowhere to put a copy of the counting tasks (1_0, 1_1).
        watched.monitor.wait_for(lambda s: missing(s) == 2, timeout=60)
        assert apps[0].standby == frozenset()          # the instance agrees: it keeps none
        assert sorted((r["topic"], r["queue"][1], r["detail"]) for r in watched.findings(app)
                      if r["kind"] == "standby_missing") == [
            (task_space("1"), p, {"wanted": 1, "kept": 0}) for p in (0, 1)]

        apps[1].start()                                 # a second process: copies placed
        wait_for_tasks(apps, {"0": 2, "1": 2})
        wait_for_the_monitor_to_show(watched, app, apps, 2, standbys=1)
        # /metrics is rendered after each batch, so it may be a batch behind the group API.
        watched.monitor.wait_for(lambda s: missing(s) == 0, timeout=30)

        def statuses() -> Counter:
            return Counter(r["status"] for r in watched.findings(app)
                           if r["kind"] == "standby_missing")
        wait_until(lambda: statuses() == {"started": 2, "ended": 2}, 30,
                   "each copy's finding started once and ended once",
                   interval=0.5, details=lambda: str(statuses()))
    finally:
        for instance in apps:
            instance.kill()


def test_a_streams_thread_stuck_in_processing_holds_its_tasks_and_fires_the_stuck_hand_off_alert(
        watched, tmp_path):
    from confluent_kafka import Producer

    source, app = new_streams_app(watched, "streams-stuck", 4)
    block = tmp_path / "block"
    block.touch()
    # The first two block inside the first record they process, and with them their stream
    # thread: it cannot give tasks up until processing returns (max.poll.interval.ms, 5 min).
    first = [StreamsApp(watched.bootstrap, app, source, tmp_path, block_file=block,
                        name=f"blocked-{n}") for n in range(2)]
    late = StreamsApp(watched.bootstrap, app, source, tmp_path, name="late")
    try:
        for instance in first:
            instance.start()
        wait_for_tasks(first, {"0": 4, "1": 4})
        wait_for_the_monitor_to_show(watched, app, first, 4)
        producer = Producer({"bootstrap.servers": watched.bootstrap})
        for partition in range(4):
            producer.produce(source, value=b"x", key=b"k", partition=partition)
        assert producer.flush(30) == 0
        late.start()
        scrape = watched.monitor.wait_for(lambda s: (watched.value(
            s, "rebalance_kafka_handoff_age_seconds", app) or 0) > 0)
        assert watched.value(scrape, "rebalance_kafka_reconciling_members", app) >= 2
        firing = watched.prometheus.wait_for_alert("RebalanceKafkaHandoffStuck", "firing",
                                                   timeout=90)
        assert any(a["labels"]["group"] == app for a in firing), firing
        # The real instances agree: the blocked ones still run every task, the newcomer none.
        assert sorted(t for instance in first for t in instance.active) == sorted(
            (sub, p) for sub in ("0", "1") for p in range(4))
        assert late.active == frozenset()
        assert not any(record["kind"] == "double_assignment" for record in watched.findings(app))
    finally:
        block.unlink(missing_ok=True)
        for instance in (*first, late):
            instance.kill()


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """Group-level configs (Kafka 4.x GroupConfig), set before or after the group exists."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})   # alive until the answers are in
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


STANDBY = {"streams.num.standby.replicas": "1"}


def new_streams_app(watched: Watched, stem: str, partitions: int,
                    configs: dict[str, str] | None = None) -> tuple[str, str]:
    """A new source topic of `partitions` and a new application id to read it, with these
    group configs set."""
    source, app = fresh(f"{stem}-source"), fresh(f"{stem}-app")
    create_topic(watched.bootstrap, source, partitions)
    if configs:
        set_group_configs(watched.bootstrap, app, configs)
    return source, app


def ready_again(watched: Watched, app: str, instance: StreamsApp) -> None:
    """Until the instance runs its 2 + 2 tasks and the monitor shows them; then the group is
    ready, and its one NotReady spell is a finding that started and ended."""
    wait_for_tasks([instance], {"0": 2, "1": 2}, timeout=60)
    wait_for_the_monitor_to_show(watched, app, [instance], 2)
    assert watched.value(watched.monitor.scrape(), "rebalance_kafka_streams_not_ready", app) == 0
    assert [r["status"] for r in watched.findings(app)
            if r["kind"] == "streams_not_ready"] == ["started", "ended"]


def test_a_streams_app_whose_source_topic_is_missing_is_not_ready_until_it_exists(watched,
                                                                                   tmp_path):
    source, app = fresh("streams-missing"), fresh("streams-missing-app")
    # Kafka Streams gives up on a missing source topic after two heartbeat intervals: at this
    # group's 15 s, the instance waits 30 s for it, time for the monitor to show the wait.
    set_group_configs(watched.bootstrap, app, {"streams.heartbeat.interval.ms": "15000",
                                               "streams.session.timeout.ms": "45000"})
    instance = StreamsApp(watched.bootstrap, app, source, tmp_path, name="waiting")
    try:
        instance.start()
        # The broker configures no topology without the source topic: it assigns no task and
        # describes the group NotReady, which the monitor shows.
        watched.monitor.wait_for(lambda s: watched.value(
            s, "rebalance_kafka_streams_not_ready", app) == 1, timeout=25)
        assert instance.active == frozenset()         # the instance agrees: it runs nothing
        create_topic(watched.bootstrap, source, 2)
        ready_again(watched, app, instance)
    finally:
        instance.kill()


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})   # alive until the answers are in
    for future in admin.delete_topics(topics).values():
        future.result(30)


def test_a_streams_app_whose_internal_topics_are_deleted_is_not_ready_until_they_are_back(
        watched, tmp_path):
    source, app = new_streams_app(watched, "streams-internal", 2)
    # The store "counts" names both internal topics. Made here, as the broker would make them;
    # the broker re-creates a missing one with the application's replication factor, 2 here,
    # which this one-broker cluster cannot give: once deleted they stay missing.
    internal = {f"{app}-counts-repartition": {}, f"{app}-counts-changelog": {
        "cleanup.policy": "compact"}}
    for topic, config in internal.items():
        create_topic(watched.bootstrap, topic, 2, config=config)
    instance = StreamsApp(watched.bootstrap, app, source, tmp_path, name="state-lost",
                          replication_factor=2)
    try:
        instance.start()
        wait_for_tasks([instance], {"0": 2, "1": 2})
        wait_for_the_monitor_to_show(watched, app, [instance], 2)

        delete_topics(watched.bootstrap, list(internal))
        # The broker finds them missing at the next heartbeat: NotReady, every task revoked.
        watched.monitor.wait_for(lambda s: watched.value(
            s, "rebalance_kafka_streams_not_ready", app) == 1, timeout=60)
        firing = watched.prometheus.wait_for_alert("RebalanceKafkaStreamsNotReady", "firing",
                                                   timeout=60)
        assert any(a["labels"]["group"] == app for a in firing), firing
        # The instance agrees: up, out of RUNNING (its heartbeats are told "Internal topics are
        # missing"), though it does not let go of its tasks.
        instance.wait_for(lambda i: i.state == "REBALANCING", timeout=30)
        assert instance.running, instance.tail()

        for topic, config in internal.items():
            create_topic(watched.bootstrap, topic, 2, config=config)
        ready_again(watched, app, instance)
    finally:
        instance.kill()
