"""A real Go RocketMQ push consumer (rocketmq-client-go v2.1.2, tests/integration/go_consumer)
in a group beside real Java consumers, on RocketMQ 4.9.8 and 5.x.

The real clients are the ground truth: what each one really pulls (its process queue table)
must be what `streaming.core.allocation.allocate` computes for it, "AVG" / "CONSISTENT_HASH"
for a Java client and "GO_AVG" / "GO_CONSISTENT_HASH" for the Go one, from the client ids the
clients print. Mixing Java's and Go's consistent hash in one group gives some queues two owners
and others none: the instance names of that scenario were picked (with the port, offline) so
that it does.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

import pytest

from streaming.core.allocation import allocate, sort_client_ids, sort_queues
from streaming.core.allocation.rocketmq_go import sort_client_ids_go, sort_queues_go
from tests.integration.rocketmq_cluster import GoConsumer, RealConsumer
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BROKER = "broker-a"
QUEUES = 8
SETTLE_TIMEOUT = 90.0
# Longer than one rebalance period of either client (20 s each), so every member has
# re-allocated at least once on its own timer while we watch.
STEADY_SECONDS = 25.0


def _all_queues(topic: str) -> list[tuple[str, str, int]]:
    return [(topic, BROKER, queue_id) for queue_id in range(QUEUES)]


def _expected(consumers: Sequence[RealConsumer], topic: str, java: str, go: str,
              go_params: dict) -> dict[str, frozenset[tuple[str, int]]]:
    """Instance name -> what the port allocates to that client, as (broker, queue id)."""
    client_ids = [c.client_id for c in consumers]
    expected = {}
    for consumer in consumers:
        if isinstance(consumer, GoConsumer):
            # doBalance's sort.Strings / sort.SliceStable (equal to Java's order for ASCII).
            share = allocate(go, go_params, consumer.client_id,
                             sort_queues_go(_all_queues(topic)), sort_client_ids_go(client_ids))
        else:
            share = allocate(java, {}, consumer.client_id, sort_queues(_all_queues(topic)),
                             sort_client_ids(client_ids))
        expected[consumer.instance_name] = frozenset((broker, q) for _, broker, q in share)
    return expected


def _holdings(consumers: Sequence[RealConsumer], topic: str) -> dict[str, frozenset]:
    return {c.instance_name: c.holds(topic) for c in consumers}


def _describe(consumers: Sequence[RealConsumer], topic: str, expected: dict | None = None) -> str:
    lines = []
    for c in consumers:
        line = f"  {c.instance_name} ({c.client_id}): holds {sorted(c.holds(topic))}"
        if expected is not None:
            line += f", port says {sorted(expected[c.instance_name])}"
        lines.append(line)
    return "\n".join(lines)


def _shared(consumers: Sequence[RealConsumer], topic: str) -> tuple[list, list]:
    """(doubles: queues two or more clients pull, orphans: queues nobody pulls), sorted."""
    counts = Counter(q for held in _holdings(consumers, topic).values() for q in held)
    doubles = sorted(q for q, n in counts.items() if n > 1)
    orphans = sorted((BROKER, q) for q in range(QUEUES) if (BROKER, q) not in counts)
    return doubles, orphans


def _report(consumers: Sequence[RealConsumer], topic: str, expected: dict) -> str:
    doubles, orphans = _shared(consumers, topic)
    return (f"doubles (held by 2+ clients): {doubles}; orphans (held by none): {orphans}\n"
            f"{_describe(consumers, topic, expected)}")


def _wait_settled(consumers: Sequence[RealConsumer], topic: str, expected: dict,
                  timeout: float = SETTLE_TIMEOUT) -> None:
    """Until every client holds what the port allocates it; fails early with every member's
    output if one exits, and with every member's holdings if it takes longer."""
    def done(_: RealConsumer) -> bool:
        return (_holdings(consumers, topic) == expected
                or not all(c.running for c in consumers))

    try:
        consumers[0].wait_for(done, timeout, "every client holding what the port allocates it")
    except AssertionError as error:
        raise AssertionError(f"{error}\n{_report(consumers, topic, expected)}") from None
    for c in consumers:
        assert c.running, f"{c.instance_name} exited before settling:\n{c.output_tail()}"


def _holds_lines(consumer: RealConsumer, topic: str) -> int:
    """How many HOLDS lines for topic it printed: one per change of what it pulls."""
    return sum(1 for line in consumer.output_tail(10**9).splitlines()
               if f"] HOLDS topic={topic} [" in line)


def _assert_steady(consumers: Sequence[RealConsumer], topic: str,
                   expected: dict[str, frozenset]) -> None:
    """Watch the settled group through a full rebalance period of both clients: nobody's
    holdings change, not even for a moment (no new HOLDS line)."""
    printed = {c.instance_name: _holds_lines(c, topic) for c in consumers}
    until = time.monotonic() + STEADY_SECONDS

    def still(_: RealConsumer) -> bool:
        now = _holdings(consumers, topic)
        assert now == expected, (f"holdings moved after the group had settled:\n"
                                 f"{_report(consumers, topic, expected)}")
        return time.monotonic() >= until

    consumers[0].wait_for(still, STEADY_SECONDS + 30, "a steady rebalance period")
    for c in consumers:
        assert c.running, f"{c.instance_name} exited:\n{c.output_tail()}"
        assert _holds_lines(c, topic) == printed[c.instance_name], (
            f"{c.instance_name} changed its holdings and back while steady:\n{c.output_tail()}")


def _connections(cluster, group: str) -> dict[str, str]:
    """Client id -> language, as the broker lists the group's connections."""
    output = cluster.mqadmin("consumerConnection", "-g", group, "-n", cluster.namesrv)
    rows = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 4 and "@" in parts[0] and not parts[0].startswith("#"):
            rows[parts[0]] = parts[2]
    return rows


def test_go_consumer_alone_holds_every_queue_and_consumes(rocketmq_cluster, go_consumer):
    topic, group = "go-alone", "go-alone-group"
    rocketmq_cluster.create_topic(topic, queues=QUEUES)
    consumer = go_consumer(rocketmq_cluster.namesrv, group, topic, "go-alone-1")
    client_id = consumer.wait_started()
    assert client_id.endswith("@go-alone-1"), client_id
    assert consumer.strategy == "AVG"

    consumer.wait_holds(topic, QUEUES)
    assert consumer.holds(topic) == frozenset((BROKER, q) for q in range(QUEUES))

    sent = rocketmq_cluster.produce(topic, 24)
    bodies = {m.body for m in sent}
    consumer.wait_for(lambda c: bodies <= {m.body for m in c.consumed}, 60,
                      f"consuming all {len(sent)} messages")
    where = {(m.body, m.topic, m.broker, m.queue_id) for m in consumer.consumed}
    for message in sent:
        assert (message.body, topic, BROKER, message.queue_id) in where, (message, where)

    connections = _connections(rocketmq_cluster, group)
    assert connections == {client_id: "GO"}, connections


def _settled_avg_group(rocketmq_cluster, real_consumer, go_consumer, topic: str, group: str,
                       prefix: str) -> tuple[list[RealConsumer], dict]:
    """Two Java clients and one Go client on AVG, settled: (the clients, what each holds)."""
    namesrv = rocketmq_cluster.namesrv
    rocketmq_cluster.create_topic(topic, queues=QUEUES)
    consumers = [real_consumer(namesrv, group, topic, f"{prefix}-java-1", strategy="AVG"),
                 real_consumer(namesrv, group, topic, f"{prefix}-java-2", strategy="AVG"),
                 go_consumer(namesrv, group, topic, f"{prefix}-go-1", strategy="AVG")]
    for c in consumers:
        c.wait_started()
    assert len({c.client_id for c in consumers}) == 3
    expected = _expected(consumers, topic, "AVG", "GO_AVG", {})
    _wait_settled(consumers, topic, expected)
    return consumers, expected


def test_java_and_go_consumers_with_averagely(rocketmq_cluster, real_consumer, go_consumer):
    topic = "go-avg"
    consumers, expected = _settled_avg_group(rocketmq_cluster, real_consumer, go_consumer,
                                             topic, "go-avg-group", "avg")

    counts = Counter(q for held in _holdings(consumers, topic).values() for q in held)
    assert counts == Counter({(BROKER, q): 1 for q in range(QUEUES)}), (
        f"not every queue held exactly once:\n{_report(consumers, topic, expected)}")
    _assert_steady(consumers, topic, expected)


# Picked offline with the port: on topic go-ch with these names (and client IP 127.0.0.1),
# Java's MD5 ring and Go's CRC-32 ring disagree so that queues 2 and 3 get two owners and
# queues 1 and 7 none.
CH_TOPIC = "go-ch"
CH_JAVA = ("ch-java-2", "ch-java-12")
CH_GO = "ch-go-2"
CH_CLIENT_IP = "127.0.0.1"
VIRTUAL_NODES = 10   # Java's AllocateMessageQueueConsistentHash default, and the Go one's here


def test_java_and_go_consumers_with_consistent_hash(rocketmq_cluster, real_consumer,
                                                    go_consumer):
    topic, group = CH_TOPIC, "go-ch-group"
    namesrv = rocketmq_cluster.namesrv
    rocketmq_cluster.create_topic(topic, queues=QUEUES)
    consumers = [*(real_consumer(namesrv, group, topic, name, client_ip=CH_CLIENT_IP,
                                 strategy="CONSISTENT_HASH") for name in CH_JAVA),
                 go_consumer(namesrv, group, topic, CH_GO, client_ip=CH_CLIENT_IP,
                             strategy="CONSISTENT_HASH", virtual_nodes=VIRTUAL_NODES)]
    for c in consumers:
        # The names below were chosen for these ids: the client IP must have been applied.
        assert c.wait_started() == f"{CH_CLIENT_IP}@{c.instance_name}", c.output_tail()

    expected = _expected(consumers, topic, "CONSISTENT_HASH", "GO_CONSISTENT_HASH",
                         {"virtual_nodes": VIRTUAL_NODES})
    _wait_settled(consumers, topic, expected)

    doubles, orphans = _shared(consumers, topic)
    report = _report(consumers, topic, expected)
    print(report)
    assert doubles or orphans, f"Java's and Go's rings agreed on every queue:\n{report}"
    _assert_steady(consumers, topic, expected)

    # The broker lists the Go client under the id it printed (its CLIENT_IP applied).
    connections = _connections(rocketmq_cluster, group)
    assert connections == {c.client_id: "GO" if isinstance(c, GoConsumer) else "JAVA"
                           for c in consumers}, connections


# How the observer learns the Go client's strategy: named by the operator, inferred from what
# it holds, or not at all (the Go code's 10 virtual nodes given as 5, so no strategy the
# observer tries gives what the client holds): (observe-rocketmq's options, the member's basis).
GO_STRATEGY = {
    "named": (("--sdk-strategy", "GO=CONSISTENT_HASH", "--go-virtual-nodes", str(VIRTUAL_NODES)),
              "named"),
    "inferred": (("--go-virtual-nodes", str(VIRTUAL_NODES)), "inferred"),
    "unknown": (("--go-virtual-nodes", "5"), "assumed"),
}


@pytest.mark.parametrize("how", list(GO_STRATEGY))
def test_the_monitor_re_runs_each_client_with_its_own_sdk_and_reports_the_real_conflicts(
        how, rocketmq_cluster, real_consumer, go_consumer, spark, kafka_bootstrap, make_topic,
        tmp_path):
    """The Go client's strategy named by the operator (--sdk-strategy GO=CONSISTENT_HASH), or
    inferred by observe-rocketmq from what it holds: every client's holdings equal the
    monitor's re-run of it (no allocation mismatch), and the queues the monitor reports
    doubled and orphaned are the ones the real clients double and orphan. Not known (no
    strategy gives what it holds): the member is shown `assumed` with a strategy_unknown
    finding, nothing is raised on the guess (no mismatch, no strategy inconsistency), and the
    doubles and orphans the clients' own holdings show are still the real ones."""
    from tests.integration.rocketmq_watch import group_value, watching

    topic, group = CH_TOPIC, f"go-ch-{how}"
    namesrv = rocketmq_cluster.namesrv
    rocketmq_cluster.create_topic(topic, queues=QUEUES)       # again: updateTopic is idempotent
    consumers = [*(real_consumer(namesrv, group, topic, name, client_ip=CH_CLIENT_IP,
                                 strategy="CONSISTENT_HASH") for name in CH_JAVA),
                 go_consumer(namesrv, group, topic, CH_GO, client_ip=CH_CLIENT_IP,
                             strategy="CONSISTENT_HASH", virtual_nodes=VIRTUAL_NODES)]
    for c in consumers:
        c.wait_started()
    expected = _expected(consumers, topic, "CONSISTENT_HASH", "GO_CONSISTENT_HASH",
                         {"virtual_nodes": VIRTUAL_NODES})
    _wait_settled(consumers, topic, expected)
    doubles, orphans = _shared(consumers, topic)
    assert doubles or orphans, _report(consumers, topic, expected)

    options, basis = GO_STRATEGY[how]
    go_id = next(c.client_id for c in consumers if isinstance(c, GoConsumer))
    with watching(namesrv, group, spark, kafka_bootstrap, make_topic, tmp_path / "watch",
                  *options) as (monitor, bridge):
        scrape = monitor.wait_for(
            lambda m: group_value(m, "rebalance_group_members", group) == 3
            and group_value(m, "rebalance_allocation_mismatch_clients", group) == 0
            and group_value(m, "rebalance_strategy_unknown_clients", group)
            == (basis == "assumed")
            and group_value(m, "rebalance_double_assigned_queues", group, topic=topic)
            == len(doubles))
        assert group_value(scrape, "rebalance_orphaned_queues", group, topic=topic) == len(
            orphans), _report(consumers, topic, expected)
        # Java's ring against Go's; unknown while the Go client's strategy is a guess.
        assert group_value(scrape, "rebalance_strategy_inconsistent", group) == (
            basis != "assumed")
        detail = monitor.group("rocketmq", group)["detail"]
        bases = {m["client_id"]: m["strategy_basis"] for m in detail["members"]}
        assert bases == {c.client_id: basis if c.client_id == go_id else "reported"
                         for c in consumers}, bases
        shown = {(q["queue_id"], q["double_assigned"], q["orphaned"]) for q in detail["queues"]
                 if q["topic"] == topic}
        assert shown == {(q, (BROKER, q) in doubles, (BROKER, q) in orphans)
                         for q in range(QUEUES)}, _report(consumers, topic, expected)
        said = {"named": "re-run as GO_CONSISTENT_HASH, named by --sdk-strategy",
                "inferred": "what it holds is CONSISTENT_HASH's alone: re-run as "
                            "GO_CONSISTENT_HASH",
                "unknown": "what it holds is given by none of AVG, AVG_BY_CIRCLE, "
                           "CONSISTENT_HASH; assumed GO_AVG (no finding rests on it)"}[how]
        assert f"client {go_id} reports no strategy" in bridge.log()
        assert said in bridge.log(), bridge.log()[-3000:]
    assert _shared(consumers, topic) == (doubles, orphans)   # nobody moved meanwhile


def test_a_go_client_two_strategies_explain_is_shown_unknown_and_nothing_rests_on_it(
        rocketmq_cluster, real_consumer, go_consumer, spark, kafka_bootstrap, make_topic,
        tmp_path):
    """One Java and one Go client on AVG over two queues: AVG and AVG_BY_CIRCLE give each
    client the same queue, so what the Go client holds cannot tell which it runs. The monitor
    says so (strategy_unknown, with the strategies that fit) and does not pretend: no
    mismatch, no strategy inconsistency, and the conflicts shown are the clients' own (none)."""
    from tests.integration.rocketmq_watch import group_value, watching

    topic, group = "go-ambiguous", "go-ambiguous-group"
    namesrv = rocketmq_cluster.namesrv
    rocketmq_cluster.create_topic(topic, queues=2)
    # The Java client's id sorts first: it takes the group's one retry queue under both.
    consumers = [real_consumer(namesrv, group, topic, "amb-a-java", strategy="AVG"),
                 go_consumer(namesrv, group, topic, "amb-b-go", strategy="AVG")]
    for consumer in consumers:
        consumer.wait_started()
    every = sorted((BROKER, q) for q in range(2))
    # Each its own queue: "each queue held once" alone is also met while one client holds both,
    # before the other is in its view.
    shares = [[queue] for queue in every]
    wait_until(lambda: [sorted(c.holds(topic)) for c in consumers] == shares,
               SETTLE_TIMEOUT, "each client holding its own queue",
               details=lambda: _describe(consumers, topic))
    go_id = consumers[1].client_id

    with watching(namesrv, group, spark, kafka_bootstrap, make_topic,
                  tmp_path / "watch") as (monitor, bridge):
        # The clients' answers as the bridge asks them: CI once saw the Java client's first
        # answer hold nothing while its HOLDS said broker-a:0 (it is asked again at each poll
        # while the group settles). A guess that raised a conflict would stay.
        try:
            scrape = monitor.wait_for(
                lambda m: group_value(m, "rebalance_group_members", group) == 2
                and group_value(m, "rebalance_strategy_unknown_clients", group) == 1
                and [group_value(m, name, group, topic=topic) for name in (
                    "rebalance_double_assigned_queues", "rebalance_orphaned_queues")] == [0, 0])
        except AssertionError as failed:
            detail = monitor.group("rocketmq", group)["detail"]
            history = {c.instance_name: c.holds_history(topic) for c in consumers}
            raise AssertionError(f"{failed}\nreal {history}\nmembers {detail['members']}\n"
                                 f"findings {detail['findings']}\n{bridge.log()[-3000:]}") from None
        detail = monitor.group("rocketmq", group)["detail"]
        assert group_value(scrape, "rebalance_allocation_mismatch_clients", group) == 0
        assert group_value(scrape, "rebalance_strategy_inconsistent", group) == 0
        (unknown,) = [f for f in detail["findings"] if f["kind"] == "strategy_unknown"]
        assert unknown["clients"] == [go_id]
        candidates = unknown["detail"]["candidates"]
        assert {"AVG", "AVG_BY_CIRCLE"} <= set(candidates), candidates
        said = (f"client {go_id} reports no strategy and what it holds is given by "
                f"{', '.join(candidates)}; assumed GO_AVG (no finding rests on it)")
        assert said in bridge.log(), bridge.log()[-3000:]
    assert [sorted(c.holds(topic)) for c in consumers] == shares


def test_a_go_client_on_avg_is_inferred_as_avg_and_the_group_has_no_conflict(
        rocketmq_cluster, real_consumer, go_consumer, spark, kafka_bootstrap, make_topic,
        tmp_path):
    """Two Java clients and one Go client on AVG, no --sdk-strategy: the Go client's strategy
    is inferred from what it holds, and the monitor agrees with every client: no mismatch, no
    inconsistency (GO_AVG and AVG are one strategy), no double, no orphan."""
    from tests.integration.rocketmq_watch import group_value, watching

    topic, group = "go-avg-inferred", "go-avg-inferred-group"
    consumers, expected = _settled_avg_group(rocketmq_cluster, real_consumer, go_consumer,
                                             topic, group, "inf")
    namesrv = rocketmq_cluster.namesrv
    go_id = next(c.client_id for c in consumers if isinstance(c, GoConsumer))

    with watching(namesrv, group, spark, kafka_bootstrap, make_topic,
                  tmp_path / "watch") as (monitor, bridge):
        scrape = monitor.wait_for(
            lambda m: group_value(m, "rebalance_group_members", group) == 3
            and group_value(m, "rebalance_strategy_unknown_clients", group) == 0
            and group_value(m, "rebalance_allocation_mismatch_clients", group) == 0
            and group_value(m, "rebalance_holdings_pending_clients", group) == 0)
        assert [group_value(scrape, name, group, topic=topic) for name in (
            "rebalance_double_assigned_queues", "rebalance_orphaned_queues")] == [0, 0]
        assert group_value(scrape, "rebalance_strategy_inconsistent", group) == 0
        line = f"client {go_id} reports no strategy; what it holds is AVG's alone: re-run as GO_AVG"
        assert line in bridge.log(), bridge.log()[-3000:]
    assert _holdings(consumers, topic) == expected
