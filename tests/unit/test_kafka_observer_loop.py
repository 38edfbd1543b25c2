"""observe-kafka's loop with a scripted cluster and a fake producer: no fault ends it, each is
counted by cause and logged once per change of state, and the events still go out."""

from __future__ import annotations

import json
import logging

import pytest
from confluent_kafka import KafkaError
from kafka.errors import KafkaTimeoutError, RequestTimedOutError

from producers.kafka import cli as observe_kafka
from producers.kafka.observer import KafkaGroupObserver
from producers.kafka.protocol import (
    ConsumerGroupDescription,
    ConsumerGroupMember,
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsTasks,
    Subtopology,
    UnsupportedGroupApi,
)
from streaming.common.delivery import DeliveryStats, Outbox
from tests.unit.fake_clients import FakeAdmin, FakeMetadata, LockedFakeProducer, Script

pytestmark = pytest.mark.unit

CLUSTER = "observed:9092"
TS = 1_700_000_000_000


def described(group, members=(), error=None):
    return {"group_id": group, "group_state": "Stable", "protocol_type": "consumer",
            "protocol_data": "range", "members": list(members), "error": error}


def member(mid, topics, assigned):
    return {"member_id": mid, "client_host": "/10.0.0.1", "group_instance_id": None,
            "member_metadata": {"topics": topics},
            "member_assignment": {"assigned_partitions": [
                {"topic": t, "partitions": ps} for t, ps in assigned.items()]}}


LISTED = [{"group_id": "orders", "protocol_type": "consumer"},
          {"group_id": "secret", "protocol_type": "consumer"}]
DESCRIBED = {"orders": described("orders", [member("m1", ["A"], {"A": [0, 1]})]),
             "secret": described("secret", error="[Error 30] GroupAuthorizationFailedError: "
                                                 "not allowed")}


def observer_with(admin: FakeAdmin, bootstrap: Script, metadata=None) -> KafkaGroupObserver:
    def admin_factory(bootstrap_servers, timeout_s):
        bootstrap()
        return admin

    return KafkaGroupObserver(
        CLUSTER, timeout_s=1, admin_factory=admin_factory,
        metadata_factory=lambda *_: metadata or FakeMetadata(Script({"A": 2})))


def args(**overrides) -> observe_kafka.ObserveKafkaOptions:
    return observe_kafka.ObserveKafkaOptions(
        **{"bootstrap_servers": CLUSTER, "topic": "events", "interval_seconds": 0, **overrides})


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_outages_and_refused_groups_are_counted_and_the_events_still_go_out(caplog):
    caplog.set_level(logging.INFO)
    # Poll 1: the cluster does not answer the bootstrap; 2, 3: list_groups times out;
    # 4, 5: answers (one group may not be described); 6: Ctrl-C.
    bootstrap = Script(KafkaTimeoutError("Unable to bootstrap from observed:9092"), None)
    timed_out = RequestTimedOutError("Request timed out after 1000 ms")
    admin = FakeAdmin(Script(timed_out, timed_out, LISTED, LISTED, KeyboardInterrupt()),
                      Script(DESCRIBED))
    observer = observer_with(admin, bootstrap)
    producer = LockedFakeProducer()
    outbox = Outbox(producer, DeliveryStats()).start()

    assert observe_kafka.run(args(), observer, outbox) == 0

    health = observer.health
    assert dict(health.failures) == {"KafkaTimeoutError": 1, "RequestTimedOutError": 2}
    calls, _ = health.calls.snapshot()
    assert calls == {("bootstrap", "KafkaTimeoutError"): 1, ("bootstrap", "ok"): 1,
                     ("list_groups", "RequestTimedOutError"): 2, ("list_groups", "ok"): 2,
                     ("describe_groups", "ok"): 2, ("list_topics", "ok"): 2,
                     ("list_group_offsets", "ok"): 2}
    assert dict(health.group_errors) == {"GroupAuthorizationFailedError": 2}
    assert (health.groups, health.members, health.events) == (2, 1, 4)
    assert health.last_success_seconds > 0
    sent = [(m.key(), json.loads(m.value())["type"]) for m in producer.delivered]
    # The member unchanged: the second poll names it in the group's alive.
    assert sent == [(b"orders", "route"), (b"orders", "heartbeat"),
                    (b"orders", "route"), (b"orders", "alive")]
    assert admin.closed
    assert warnings(caplog) == [
        f"bootstrap to {CLUSTER} failing: KafkaTimeoutError (Unable to bootstrap from "
        "observed:9092)",
        f"bootstrap to {CLUSTER} works again (was failing: KafkaTimeoutError, 1 time(s))",
        f"list_groups to {CLUSTER} failing: RequestTimedOutError (Request timed out after "
        "1000 ms)",
        f"list_groups to {CLUSTER} works again (was failing: RequestTimedOutError, 2 time(s))",
        "group secret failing: GroupAuthorizationFailedError (not allowed; skipped until it "
        "answers)",
    ]   # each failed poll was its request's failure, said once, by the request


@pytest.mark.parametrize("restate_seconds, second", [(600.0, "alive"), (0.0, "heartbeat")])
def test_an_unchanged_member_goes_in_its_groups_alive_unless_restated_every_poll(
        restate_seconds, second):
    admin = FakeAdmin(Script(LISTED, LISTED, KeyboardInterrupt()), Script(DESCRIBED))
    producer = LockedFakeProducer()
    outbox = Outbox(producer, DeliveryStats()).start()
    observe_kafka.run(args(restate_seconds=restate_seconds), observer_with(admin, Script(None)),
                      outbox)
    sent = [json.loads(m.value()) for m in producer.delivered]
    assert [e["type"] for e in sent] == ["route", "heartbeat", "route", second]
    if second == "alive":
        assert sent[3]["members"] == [[sent[1]["client_id"], sent[1]["address"]]
                                      if "address" in sent[1] else [sent[1]["client_id"]]]
        assert sent[3]["system"] == "kafka"


def test_a_group_that_cannot_be_described_keeps_its_members():
    # A transient describe error must not unregister the group's members.
    admin = FakeAdmin(Script([LISTED[0]]), Script(
        DESCRIBED, {"orders": described("orders", error="[Error 15] "
                                                        "CoordinatorNotAvailableError: ")},
        DESCRIBED))
    observer = observer_with(admin, Script(None))
    types = [[e["type"] for r in observer.poll(TS) for e in r.events] for _ in range(3)]
    assert types == [["heartbeat", "route"], [], ["heartbeat", "route"]]
    assert observer.previous == {"orders": ("m1",)}


def test_an_unreadable_description_skips_that_group_only():
    broken = described("broken", [{"member_id": "x", "member_metadata": {"topics": 5}}])
    admin = FakeAdmin(Script([LISTED[0], {"group_id": "broken", "protocol_type": "consumer"}]),
                      Script({"orders": DESCRIBED["orders"], "broken": broken}))
    observer = observer_with(admin, Script(None))
    results = observer.poll(TS)
    assert [r.events[0]["group"] for r in results] == ["orders"]
    assert dict(observer.health.group_errors) == {"TypeError": 1}


def test_a_topic_that_refuses_the_events_does_not_stop_the_loop():
    admin = FakeAdmin(Script([LISTED[0]], [LISTED[0]], KeyboardInterrupt()), Script(DESCRIBED))
    observer = observer_with(admin, Script(None))
    producer = LockedFakeProducer(lambda message: KafkaError.TOPIC_AUTHORIZATION_FAILED)
    outbox = Outbox(producer, DeliveryStats()).start()
    assert observe_kafka.run(args(), observer, outbox) == 0
    assert observer.health.events == 4  # both polls ran
    assert outbox.stats.snapshot().undelivered == {
        ("events", "topic_authorization_failed"): 4}


def test_once_exits_1_when_the_poll_fails_or_an_event_is_not_delivered():
    failing = observer_with(FakeAdmin(Script(KafkaTimeoutError()), Script({})), Script(None))
    assert observe_kafka.run(args(once=True), failing, None) == 1
    refused = LockedFakeProducer(lambda message: KafkaError.TOPIC_AUTHORIZATION_FAILED)
    observer = observer_with(FakeAdmin(Script([LISTED[0]]), Script(DESCRIBED)), Script(None))
    assert observe_kafka.run(args(once=True), observer,
                             Outbox(refused, DeliveryStats()).start()) == 1
    observer = observer_with(FakeAdmin(Script([LISTED[0]]), Script(DESCRIBED)), Script(None))
    assert observe_kafka.run(args(once=True), observer,
                             Outbox(LockedFakeProducer(), DeliveryStats()).start()) == 0


def test_warnings_and_summaries_are_printed_when_they_change(capsys):
    no_members = {"orders": described("orders")}
    admin = FakeAdmin(Script([LISTED[0]], [LISTED[0]], [LISTED[0]], KeyboardInterrupt()),
                      Script(no_members, no_members, DESCRIBED))
    observer = observer_with(admin, Script(None))
    observe_kafka.run(args(stdout=True), observer, None)
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "WARNING: group orders: the broker's DescribeGroups returned no members; reporting the "
        "group's topics and partition counts only",  # poll 2: unchanged, not repeated
        "observe-kafka: group orders: 1 members, topics A(2)",
    ]


def kip848(group, member_ids, error_code=0):
    members = tuple(ConsumerGroupMember(m, None, None, "app", "/10.0.0.9", 4, ("A",),
                                        (("A", i),), (("A", i),), "consumer")
                    for i, m in enumerate(member_ids))
    return ConsumerGroupDescription(group, error_code, None if not error_code else "not found",
                                    "Stable" if not error_code else "Dead", 4, 4, "uniform",
                                    members)


def test_a_kip_848_group_is_asked_with_its_own_api_and_its_members_leave_when_it_is_gone():
    listed = [{"group_id": "fast", "protocol_type": "consumer", "group_type": "consumer"}]
    admin = FakeAdmin(Script(listed, []), Script({}),
                      describe_consumer_groups=Script({"fast": kip848("fast", ["m1", "m2"])},
                                                      {"fast": kip848("fast", [], 69)}))
    observer = observer_with(admin, Script(None))
    first = observer.poll(TS)
    assert [(e["type"], e.get("client_id"), e.get("group_type")) for e in first[0].events] == [
        ("heartbeat", "m1", "consumer"), ("heartbeat", "m2", "consumer"), ("route", None, None)]
    gone = observer.poll(TS + 1)          # no longer listed, and the broker no longer knows it
    assert [(e["type"], e.get("client_id")) for e in gone[0].events] == [
        ("unregister", "m1"), ("unregister", "m2")]
    assert observer.previous == {} and observer.types == {}
    assert observer.health.calls.snapshot()[0][("describe_consumer_groups", "ok")] == 2


def test_a_broker_without_the_kip_848_api_fails_those_groups_not_the_poll():
    listed = [{"group_id": "fast", "protocol_type": "consumer", "group_type": "consumer"},
              {"group_id": "orders", "protocol_type": "consumer", "group_type": "classic"}]
    admin = FakeAdmin(Script(listed), Script({"orders": DESCRIBED["orders"]}),
                      describe_consumer_groups=Script(UnsupportedGroupApi("no API 69")))
    observer = observer_with(admin, Script(None))
    results = observer.poll(TS)
    assert [r.group for r in results] == ["orders"]
    assert dict(observer.health.group_errors) == {"UnsupportedGroupApi": 1}


def test_a_group_whose_coordinator_is_not_ready_is_skipped_and_the_others_are_reported():
    from kafka.errors import CoordinatorNotAvailableError

    listed = [{"group_id": g, "protocol_type": "consumer", "group_type": "consumer"}
              for g in ("fast", "moving")]

    def one_by_one(names):
        if names == ["moving"]:
            raise CoordinatorNotAvailableError("coordinator loading")
        return {name: kip848(name, [f"{name}-m1"]) for name in names}

    admin = FakeAdmin(Script(listed), Script({}), describe_consumer_groups=Script(
        CoordinatorNotAvailableError("coordinator loading"), one_by_one))
    observer = observer_with(admin, Script(None))
    results = observer.poll(TS)
    assert [r.group for r in results] == ["fast"]
    assert dict(observer.health.group_errors) == {"CoordinatorNotAvailableError": 1}
    assert dict(observer.health.failures) == {}


def test_what_the_cluster_cannot_describe_is_logged_when_it_changes_not_each_poll(caplog):
    caplog.set_level(logging.INFO)
    admin = FakeAdmin(Script(LISTED), Script(DESCRIBED))
    answers = iter([(), ("share",), ("share",), ("share",), ("consumer", "share"), ()])
    admin.unsupported_group_types = lambda: next(answers)
    observer = observer_with(admin, Script(None))
    seen = []
    for _ in range(6):
        observer.poll(TS)
        seen.append(observer.unwatchable)
    assert seen == [(), ("share",), ("share",), ("share",), ("consumer", "share"), ()]
    said = [m for m in warnings(caplog) if "does not support" in m]
    assert said == [f"the cluster at {CLUSTER} does not support describing share groups (its "
                    "broker lacks the API): such groups cannot be watched there; classic "
                    "groups are",
                    f"the cluster at {CLUSTER} does not support describing consumer or share "
                    "groups (its broker lacks the API): such groups cannot be watched there; "
                    "classic groups are"]


def test_a_streams_group_is_described_as_one_and_its_threads_run_its_tasks():
    listed = [{"group_id": "app", "protocol_type": "streams", "group_type": "streams"}]
    thread = StreamsGroupMember("t1", None, None, "app-p1-StreamThread-1-consumer", "/10.0.0.5",
                                3, 0, "p1", StreamsTasks(active=(("0", 0), ("0", 1))),
                                StreamsTasks(active=(("0", 0), ("0", 1))))
    app = StreamsGroupDescription("app", 0, None, "Stable", 3, 3, "sticky", 0,
                                  (Subtopology("0", ("A",), ()),), (thread,))
    gone = StreamsGroupDescription("app", 69, "Group app not found.", "Dead", 0, 0, "sticky",
                                   None, None, ())
    admin = FakeAdmin(Script(listed, []), Script({}),
                      describe_streams_groups=Script({"app": app}, {"app": gone}))
    observer = observer_with(admin, Script(None))
    (first,) = observer.poll(TS)
    (heartbeat, route) = first.events
    assert (heartbeat["group_type"], heartbeat["client_id"], heartbeat["owned"]) == (
        "streams", "t1", [["subtopology 0", 0], ["subtopology 0", 1]])
    assert (route["topic"], route["partitions"]) == ("subtopology 0", 2)
    (second,) = observer.poll(TS + 1_000)          # the app is gone: its thread leaves
    assert [(e["type"], e["client_id"]) for e in second.events] == [("unregister", "t1")]


def test_a_streams_groups_wanted_standbys_are_its_config_and_unknown_when_it_cannot_be_read():
    from producers.kafka.observer import STANDBY_REPLICAS

    listed = [{"group_id": "app", "protocol_type": "streams", "group_type": "streams"}]
    thread = StreamsGroupMember("t1", None, None, "app-p1-StreamThread-1-consumer", "/10.0.0.5",
                                3, 0, "p1", StreamsTasks(active=(("0", 0),)),
                                StreamsTasks(active=(("0", 0),)))
    app = StreamsGroupDescription("app", 0, None, "Stable", 3, 3, "sticky", 0,
                                  (Subtopology("0", ("A",), (), ("app-counts-changelog",)),),
                                  (thread,))
    admin = FakeAdmin(Script(listed), Script({}), describe_streams_groups=Script({"app": app}))
    configs = Script({"app": {STANDBY_REPLICAS: 1}}, RuntimeError("broker unreachable"))
    observer = KafkaGroupObserver(CLUSTER, timeout_s=1, admin_factory=lambda *_: admin,
                                  metadata_factory=lambda *_: FakeMetadata(Script({"A": 1}),
                                                                           configs))
    (first,) = observer.poll(TS)
    assert first.events[0]["standby_replicas"] == {"subtopology 0": 1}
    (second,) = observer.poll(TS + 1_000)      # not read: nothing is judged missing
    assert "standby_replicas" not in second.events[0]
    calls, _ = observer.health.calls.snapshot()
    assert {outcome: n for (request, outcome), n in calls.items()
            if request == "describe_configs"} == {"ok": 1, "RuntimeError": 1}
