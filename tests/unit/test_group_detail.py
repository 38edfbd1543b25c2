"""The group's detail (streaming.core.detail): what it shows, and that the step emits it only when
something it shows changed, so the latest one emitted is always the group's detail: whatever the
batches, after each step the last detail emitted equals the detail the full replay gives, and the
detail a restart rebuilds from the blob."""


from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core.contract import GroupDetail
from streaming.core.step import StepConfig, snapshot_of, step
from tests.unit.state_helpers import T0, Run, hb, parsed, queues, route, without_view
from tests.unit.step_strategies import CONFIG, batches_of, scenario

pytestmark = pytest.mark.unit


def doubled_by_a_stale_view() -> list[dict]:
    """c1 and c2 on T (4 queues of b); c2 sees only itself and takes all four, c1 takes queues
    0 and 1: both hold those."""
    return [route("T", brokers={"b": 4}), hb("c1", ["T"], broker="b"),
            hb("c2", ["T"], view={"clients": ["c2"]}, broker="b")]


def test_the_detail_lists_each_queue_with_its_owners_and_each_member_with_its_view():
    detail = step(None, parsed(doubled_by_a_stale_view())).detail
    owners = {q.queue_id: (q.reported, q.rerun, q.in_route) for q in detail.queues}
    c1, c2 = ("c1", ""), ("c2", "")
    assert owners == {0: ((), (c1, c2), True), 1: ((), (c1, c2), True),
                      2: ((), (c2,), True), 3: ((), (c2,), True)}
    by_client = {m.client_id: m for m in detail.members}
    assert by_client["c2"].view_clients == ("c2",)
    assert by_client["c1"].view_clients is None
    assert (by_client["c1"].strategy, by_client["c1"].topics, by_client["c1"].brokers) == (
        "AVG", ("T",), ("b",))
    doubles = [f for f in detail.findings if f.kind == "double_assignment"]
    assert [(f.queue, f.clients, f.since) for f in doubles] == [
        (("b", 0), ("c1", "c2"), T0), (("b", 1), ("c1", "c2"), T0)]


def test_reported_holdings_are_listed_apart_from_the_re_run():
    owned = [["T", "b", 0], ["T", "b", 1], ["T", "b", 3]]
    detail = step(None, parsed([route("T", brokers={"b": 2}), hb("c1", ["T"], owned=owned)])).detail
    assert [(q.queue_id, q.in_route, q.reported, q.rerun) for q in detail.queues] == [
        (0, True, (("c1", ""),), (("c1", ""),)), (1, True, (("c1", ""),), (("c1", ""),)),
        (3, False, (("c1", ""),), ())]
    assert detail.members[0].owned == (("T", "b", 0), ("T", "b", 1), ("T", "b", 3))


def test_the_detail_crosses_the_spark_boundary_unchanged():
    detail = step(None, parsed([*doubled_by_a_stale_view(),
                                hb("c3", ["T"], owned=[["T", "b", 2]],
                                   view={"queues": {"T": queues("b", range(3))}})])).detail
    assert GroupDetail.from_json(detail.to_json()) == detail


def test_a_step_that_changes_nothing_it_shows_emits_no_detail():
    run = Run(StepConfig(exact=False))     # the exact twin sends the detail at every step
    assert run.batch(doubled_by_a_stale_view()).detail is not None
    # The same facts again, later: nothing the detail shows changed.
    again = [hb("c1", ["T"], ts=T0 + 1_000, broker="b"),
             hb("c2", ["T"], ts=T0 + 1_000, view={"clients": ["c2"]}, broker="b")]
    assert run.batch(again).detail is None
    # c2 sees c1 again: the double assignment ends, and the detail says so.
    fixed = run.batch([hb("c2", ["T"], ts=T0 + 2_000, broker="b")]).detail
    assert [f.kind for f in fixed.findings] == []
    assert {q.queue_id: len(q.rerun) for q in fixed.queues} == {0: 1, 1: 1, 2: 1, 3: 1}


def test_an_event_behind_the_published_point_is_a_change():
    """c3's heartbeat comes late, inside the reorder window: the window is replayed with it,
    every re-run of that replay lies at or behind what was published, and the detail changed."""
    run = Run()
    run.batch([route("T", brokers={"b": 4}), hb("c1", ["T"]), hb("c2", ["T"])])
    late = run.batch([hb("c3", ["T"], ts=T0 - 100)]).detail
    assert late is not None
    assert [m.client_id for m in late.members] == ["c1", "c2", "c3"]


def test_an_expiry_is_a_change_and_a_gone_group_has_no_detail():
    config = StepConfig(session_timeout_ms=1_000, reorder_window_ms=300)
    run = Run(config)
    run.batch([route("T", brokers={"b": 2}), hb("c1", ["T"]), hb("c2", ["T"], ts=T0 + 900)])
    expired = run.batch([], watermark_ms=T0 + 1_500).detail
    assert [m.client_id for m in expired.members] == ["c2"]
    gone = run.batch([], watermark_ms=T0 + 10_000)
    assert (gone.blob, gone.detail) == (None, None)


def test_the_detail_a_restart_rebuilds_is_the_one_emitted_last():
    run = Run(StepConfig(exact=False))     # the exact twin sends the detail at every step
    emitted = run.batch(doubled_by_a_stale_view()).detail
    assert run.batch([hb("c1", ["T"], ts=T0 + 1_000, broker="b")]).detail is None
    metrics, restored = snapshot_of(run.blob)
    assert restored == emitted
    assert metrics == run.out.metrics


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), st.lists(st.sampled_from([None, 0, -400, 300, 2_000]), min_size=7, max_size=7))
def test_the_last_detail_emitted_is_always_the_groups_detail(case, watermark_shifts):
    """Batch for batch: the step from the stored view emits a detail when the full replay's
    differs from the last one emitted, and the same one; a restart rebuilds it from the blob
    (from its stored view, and by replaying its window: the same)."""
    blob, last = None, None
    for batch, watermark in batches_of(case, watermark_shifts):
        fast = step(blob, batch, watermark_ms=watermark, config=CONFIG)
        full = step(without_view(blob), batch, watermark_ms=watermark, config=CONFIG)
        if fast.detail is not None:
            last = fast.detail
        if fast.blob is None:
            assert (fast.detail, full.detail) == (None, None)
            last = None
        else:
            # The full replay's detail is its view's whether or not it emitted one.
            assert last == snapshot_of(full.blob)[1] == snapshot_of(fast.blob)[1]
            # A restart takes the stored view; the exact twin replays the window.
            restored = snapshot_of(fast.blob, replace(CONFIG, exact=False))
            assert restored == snapshot_of(fast.blob, replace(CONFIG, exact=True))
            assert full.detail is None or full.detail == last
        blob = fast.blob
