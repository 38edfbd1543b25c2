"""Kafka Streams groups (KIP-1071) from StreamsGroupDescribe's answer to the findings: a
described group through translate_streams_group, each event through parse_event, then the core
as the job runs it. A task is a queue of its subtopology's task space; the broker assigns them,
so there is no re-run, and an active task held by two members is a double assignment."""

from __future__ import annotations

import pytest

from producers.kafka.protocol import (
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsTasks,
    Subtopology,
)
from producers.kafka.translate import task_space, translate_streams_group
from streaming.core.state.events import parse_event
from tests.unit.state_helpers import Run, kinds

pytestmark = pytest.mark.unit

TS = 1_700_000_000_000
# A stateful app: subtopology 0 reads "orders" (4 partitions) and writes a repartition topic,
# subtopology 1 reads it (4 partitions, as the broker configured it).
TOPOLOGY = (Subtopology("0", ("orders",), ()),
            Subtopology("1", ("app-agg-repartition",), (("app-agg-repartition", 4),),
                        ("app-agg-changelog",)))
PARTITIONS = {"orders": 4, "app-agg-repartition": 4}
S0, S1 = task_space("0"), task_space("1")


def tasks(*active, standby=()):
    return StreamsTasks(active=tuple(sorted(active)), standby=tuple(sorted(standby)))


def thread(member_id, current, target=None, epoch=5, process="p-1"):
    return StreamsGroupMember(member_id, None, None, f"app-{process}-StreamThread-1-consumer",
                              "/10.0.0.5", epoch, 0, process, current,
                              current if target is None else target)


def streams_group(members, state="Stable", epochs=(5, 5), topology=TOPOLOGY):
    return StreamsGroupDescription("app", 0, None, state, epochs[0], epochs[1], "sticky",
                                   None if topology is None else 0, topology, tuple(members))


SETTLED = [thread("m1", tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1))),
           thread("m2", tasks(("0", 2), ("0", 3), ("1", 2), ("1", 3)), process="p-2")]


def run_of(*described) -> Run:
    run = Run()
    for ts, description in enumerate(described):
        run.batch(translate_streams_group(description, PARTITIONS, TS + ts * 1_000).events)
    return run


def test_each_thread_heartbeats_its_active_tasks_and_each_subtopology_is_a_route():
    out = translate_streams_group(streams_group(SETTLED), PARTITIONS, TS,
                                  previous_members=["gone"])
    m1, m2, unregister, route0, route1 = [e for raw in out.events for e in parse_event(raw)]
    assert (m1.client_id, m1.topics, m1.strategy, m1.address) == (
        "m1", (S0, S1), "sticky", "10.0.0.5")
    assert m1.owned == ((S0, "", 0), (S0, "", 1), (S1, "", 0), (S1, "", 1))
    assert m1.protocol.target == m1.owned
    assert (m1.protocol.group_type, m1.protocol.member_epoch, m1.protocol.group_epoch,
            m1.protocol.assignment_epoch) == ("streams", 5, 5, 5)
    assert (unregister.type, unregister.client_id) == ("unregister", "gone")
    assert [(r.topic, len(r.queues)) for r in (route0, route1)] == [(S0, 4), (S1, 4)]
    assert out.warnings == []


def test_a_subtopology_has_as_many_tasks_as_its_largest_source_topic():
    wide = (Subtopology("0", ("orders", "customers"), ()),)
    out = translate_streams_group(streams_group([thread("m1", tasks(("0", 0)))], topology=wide),
                                  {"orders": 4, "customers": 6}, TS)
    _, route = [e for raw in out.events for e in parse_event(raw)]
    assert (route.topic, len(route.queues)) == (S0, 6)


def test_a_repartition_topic_the_broker_describes_with_0_partitions_counts_as_the_cluster_has_it():
    # Kafka 4.3.1 describes 0 partitions for an internal topic it did not create itself, while
    # it assigns that subtopology's tasks: the cluster's count is the real one; without it the
    # count is unknown (no route), never 0 tasks.
    made_before = (TOPOLOGY[0], Subtopology("1", (), (("app-agg-repartition", 0),)))
    described = streams_group(SETTLED, topology=made_before)
    out = translate_streams_group(described, PARTITIONS, TS)
    routes = [e for raw in out.events for e in parse_event(raw) if e.type == "route"]
    assert [(r.topic, len(r.queues)) for r in routes] == [(S0, 4), (S1, 4)]
    unknown = translate_streams_group(described, {"orders": 4}, TS)
    assert [e["topic"] for e in unknown.events if e["type"] == "route"] == [S0]
    assert kinds(run_of(described)) == {}


def test_a_settled_app_has_no_finding_and_shows_its_type():
    run = run_of(streams_group(SETTLED))
    assert kinds(run) == {}
    assert (run.metrics.group_type, run.metrics.assignor) == ("streams", "sticky")
    assert run.metrics.target_unassigned == {S0: 0, S1: 0}


def test_an_active_task_two_threads_run_is_a_double_assignment():
    # m1 has not let go of task 1_2, which the broker's target gave m2 (a blocked revocation).
    stuck = [thread("m1", tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1), ("1", 2)),
                    tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1)), epoch=5),
             thread("m2", tasks(("0", 2), ("0", 3), ("1", 2), ("1", 3)), epoch=6, process="p-2")]
    run = run_of(streams_group(SETTLED), streams_group(stuck, "Reconciling", (6, 6)))
    found = kinds(run)
    assert found["double_assignment"] == [(S1, ("", 2), ("m1", "m2"))]
    assert found["handoff_pending"] == [(None, (), ("m1",))]
    assert run.metrics.max_epoch_lag == 1


def test_a_task_no_thread_runs_or_is_given_is_orphaned():
    gap = [thread("m1", tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1))),
           thread("m2", tasks(("0", 2), ("0", 3), ("1", 2)), process="p-2")]
    found = kinds(run_of(streams_group(gap)))
    assert found["orphaned_queue"] == [(S1, ("", 3), ())]
    assert found["target_unassigned"] == [(S1, ("", 3), ())]


def test_standby_tasks_are_no_double_assignment():
    # m2 keeps a standby of each of m1's stateful tasks: a copy of state, not a second reader.
    backed = [thread("m1", tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1))),
              thread("m2", tasks(("0", 2), ("0", 3), ("1", 2), ("1", 3),
                                 standby=(("1", 0), ("1", 1))), process="p-2")]
    assert kinds(run_of(streams_group(backed))) == {}


def test_a_group_without_a_configured_topology_says_so_and_routes_nothing():
    waiting = [thread("m1", tasks(), epoch=0)]
    out = translate_streams_group(streams_group(waiting, "NotReady", (1, 0), topology=None),
                                  PARTITIONS, TS)
    assert [e["type"] for e in out.events] == ["heartbeat"]
    assert out.warnings == ["group app: the broker has no configured topology for it (state "
                            "NotReady: source or internal topics missing, or not initialized); "
                            "its task counts are unknown"]


def test_a_not_ready_group_is_a_finding_while_it_lasts_not_a_quiet_group_with_nothing_to_do():
    waiting = [thread("m1", tasks(), epoch=0), thread("m2", tasks(), epoch=0, process="p-2")]
    run = run_of(streams_group(waiting, "NotReady", (1, 0), topology=None))
    assert kinds(run) == {"streams_not_ready": [(None, (), ())]}
    assert run.metrics.streams_not_ready == 1
    (started,) = run.findings
    assert (started.status, started.detail) == ("started", {"state": "NotReady"})
    # The missing topic is created: the broker configures the topology and assigns the tasks.
    run.batch(translate_streams_group(streams_group(SETTLED), PARTITIONS, TS + 60_000).events)
    assert kinds(run) == {} and run.metrics.streams_not_ready == 0
    assert [r.status for r in run.findings] == ["started", "ended"]


def test_the_group_state_survives_the_state_blob_and_a_row_without_it_reads_as_before():
    from streaming.core.state.codec import _protocol_in, _protocol_out, decode, encode
    from streaming.core.state.group import GroupState, apply_event
    from streaming.core.state.stored import Stored

    state = GroupState("app", "kafka", 45_000)
    described = streams_group([thread("m1", tasks(), epoch=0)], "NotReady", (1, 0), topology=None)
    for raw in translate_streams_group(described, PARTITIONS, TS).events:
        for event in parse_event(raw):
            apply_event(state, event)
    (member,) = decode(encode(Stored(state, [], 0, {}, TS))).settled.members.values()
    assert member.protocol.group_state == "NotReady"
    written_before = _protocol_out(member.protocol)[:5]    # a build before group_state
    assert _protocol_in(written_before).group_state is None


def test_each_thread_reports_its_process_and_its_standby_and_warm_up_copies():
    copies = StreamsTasks(active=(("0", 0),), standby=(("1", 2),), warmup=(("1", 3),))
    out = translate_streams_group(streams_group([thread("m1", copies, process="p-9")]),
                                  PARTITIONS, TS)
    (beat,) = [e for e in parse_event(out.events[0])]
    assert beat.owned == ((S0, "", 0),)
    assert (beat.protocol.standby, beat.protocol.warmup, beat.protocol.process_id) == (
        ((S1, "", 2),), ((S1, "", 3),), "p-9")


def _two_threads_of_one_process(standby):
    return [thread("m1", tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1))),
            thread("m2", tasks(("0", 2), ("0", 3), ("1", 2), ("1", 3), standby=standby))]


def test_a_copy_on_the_process_of_its_active_task_is_standby_with_active():
    # m2 runs in m1's process (p-1) and keeps a standby of m1's task 1_0.
    run = run_of(streams_group(_two_threads_of_one_process(standby=(("1", 0),))))
    assert kinds(run) == {"standby_with_active": [(S1, ("", 0), ("m2",))]}
    (record,) = run.findings
    assert record.detail == {"copy": "standby", "process_id": "p-1"}
    assert run.metrics.standby_with_active == {S0: 0, S1: 1}


def test_the_copy_given_up_ends_the_finding():
    run = run_of(streams_group(_two_threads_of_one_process(standby=(("1", 0),))),
                 streams_group(_two_threads_of_one_process(standby=())))
    assert kinds(run) == {} and run.metrics.standby_with_active == {S0: 0, S1: 0}
    assert [r.status for r in run.findings] == ["started", "ended"]


def test_standby_warm_up_and_process_survive_the_state_blob():
    from streaming.core.state.codec import _protocol_in, _protocol_out

    copies = StreamsTasks(active=(("0", 0),), standby=(("1", 2),), warmup=(("1", 3),))
    (beat,) = parse_event(translate_streams_group(
        streams_group([thread("m1", copies)]), PARTITIONS, TS).events[0])
    assert _protocol_in(_protocol_out(beat.protocol)) == beat.protocol
    assert _protocol_in(_protocol_out(beat.protocol)[:6]).standby is None   # an older row


def test_the_group_page_lists_each_tasks_standby_and_warm_up_holders():
    from streaming.core.contract import GroupDetail, QueueOwners
    from streaming.exporter.pages import _queues

    detail = GroupDetail("kafka", "app", (
        QueueOwners(S1, "", 0, True, reported=(("m1", ""),), target=(("m1", ""),),
                    standby=(("m2", ""),)),
        QueueOwners(S1, "", 1, True, reported=(("m2", ""),), warmup=(("m3", ""),))), (), ())
    page = _queues(detail)
    assert "<th>Standby copies</th>" in page and "<th>Warm-up copies</th>" in page
    assert '<td class="standby"><ul class="owners"><li class="owner">m2</li></ul></td>' in page
    assert '<td class="warmup"><ul class="owners"><li class="owner">m3</li></ul></td>' in page


def test_a_page_column_for_every_holder_the_detail_carries():
    from streaming.core.contract import OWNER_KINDS
    from streaming.exporter.pages import BROKER_COLUMNS

    assert ("reported", "rerun", *(kind for kind, _ in BROKER_COLUMNS)) == OWNER_KINDS


def run_wanting(described, replicas=1) -> Run:
    run = Run()
    run.batch(translate_streams_group(described, PARTITIONS, TS, standby_replicas=replicas).events)
    return run


def test_the_standby_copies_a_group_wants_are_its_replicas_for_each_stateful_subtopology():
    out = translate_streams_group(streams_group(SETTLED), PARTITIONS, TS, standby_replicas=2)
    beat = next(e for e in parse_event(out.events[0]))
    assert beat.protocol.standby_replicas == ((S0, 0), (S1, 2))
    unknown = translate_streams_group(streams_group(SETTLED), PARTITIONS, TS)
    assert "standby_replicas" not in unknown.events[0]


def test_a_stateful_task_copied_on_too_few_processes_is_standby_missing():
    # Two processes, one standby wanted: m2 copies m1's 1_0 and 1_1; nobody copies m2's 1_2
    # and 1_3. Subtopology 0 has no state and wants none.
    half = [thread("m1", tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1))),
            thread("m2", tasks(("0", 2), ("0", 3), ("1", 2), ("1", 3),
                               standby=(("1", 0), ("1", 1))), process="p-2")]
    run = run_wanting(streams_group(half))
    assert kinds(run) == {"standby_missing": [(S1, ("", 2), ()), (S1, ("", 3), ())]}
    assert {r.detail["kept"] for r in run.findings} == {0}
    assert run.metrics.standby_missing == {S0: 0, S1: 2}


def test_a_copy_on_the_active_owners_own_process_does_not_count():
    same = [thread("m1", tasks(("1", 0), ("1", 1), ("1", 2), ("1", 3), ("0", 0), ("0", 1),
                               ("0", 2), ("0", 3))),
            thread("m2", tasks(standby=(("1", 0), ("1", 1), ("1", 2), ("1", 3))))]
    found = kinds(run_wanting(streams_group(same)))
    assert len(found["standby_missing"]) == 4 and len(found["standby_with_active"]) == 4


def test_every_copy_kept_or_none_wanted_or_wants_unknown_is_no_finding():
    backed = [thread("m1", tasks(("0", 0), ("0", 1), ("1", 0), ("1", 1),
                                 standby=(("1", 2), ("1", 3)))),
              thread("m2", tasks(("0", 2), ("0", 3), ("1", 2), ("1", 3),
                                 standby=(("1", 0), ("1", 1))), process="p-2")]
    kept = run_wanting(streams_group(backed))
    assert kinds(kept) == {} and kept.metrics.standby_missing == {S0: 0, S1: 0}
    assert kinds(run_wanting(streams_group(SETTLED), replicas=0)) == {}
    unknown = run_of(streams_group(SETTLED))
    # Blind is not fine: without the group's config no task space has a series at all.
    assert kinds(unknown) == {} and unknown.metrics.standby_missing == {}
    assert unknown.metrics.standby_with_active == {S0: 0, S1: 0}


def test_the_wanted_copies_survive_the_state_blob():
    from streaming.core.state.codec import _protocol_in, _protocol_out

    (beat, *_) = parse_event(translate_streams_group(streams_group(SETTLED), PARTITIONS, TS,
                                                     standby_replicas=1).events[0])
    assert _protocol_in(_protocol_out(beat.protocol)) == beat.protocol
