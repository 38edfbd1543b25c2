"""A restart's groups from their blobs (streaming.exporter.restore): the deferred detail against
its twin rendered at once (config.exact), group for group, and the deferred detail's place in
GroupDetails when a newer detail comes."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming.core.contract import GroupDetail, GroupKey
from streaming.core.step import step
from streaming.exporter.collector import SnapshotStore
from streaming.exporter.details import Deferred, DetailSummary, GroupDetails
from streaming.exporter.restore import restore_group
from tests.unit.state_helpers import T0, hb, parsed, route
from tests.unit.step_strategies import CONFIG, batches_of, scenario

pytestmark = pytest.mark.unit


def restored(blobs: dict[GroupKey, bytes], exact: bool) -> SnapshotStore:
    store = SnapshotStore()
    for key, blob in blobs.items():
        restore_group(store, key, blob, replace(CONFIG, exact=exact))
    return store


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), st.lists(st.sampled_from([None, 0, -400, 2_000]), min_size=7, max_size=7))
def test_a_deferred_detail_reads_as_the_one_rendered_at_once(case, watermark_shifts):
    blobs, blob, system = {}, None, "rocketmq"
    for batch, watermark in batches_of(case, watermark_shifts):
        blob = step(blob, batch, watermark_ms=watermark, config=CONFIG).blob
        system = batch[0][0].system if batch else system     # a batch without events: the group's
        if blob is not None:
            blobs[GroupKey(system, "g", f"cluster-{len(blobs)}")] = blob
    deferred, rendered = restored(blobs, exact=False), restored(blobs, exact=True)
    for key in blobs:
        assert deferred.group(key) == rendered.group(key)
        assert deferred.details.summary(key) == rendered.details.summary(key)
        detail = rendered.details.get(key)
        assert detail.key == key
        assert deferred.details.get(key) == detail
        assert deferred.details.get(key) == detail      # read again: rendered once, kept


def test_a_restored_group_with_open_findings_is_summarised_by_them():
    """c2 sees only itself and takes all four queues: two of them doubled."""
    blob = step(None, parsed([route("T", brokers={"b": 4}), hb("c1", ["T"], broker="b"),
                              hb("c2", ["T"], view={"clients": ["c2"]}, broker="b")])).blob
    key = GroupKey("rocketmq", "g", "east")
    store = restored({key: blob}, exact=False)
    summary = store.details.summary(key)
    assert dict(summary.kinds)["double_assignment"] == 2
    assert summary.since_ms == T0
    assert store.group(key).cluster == "east"


def newer(key: GroupKey) -> GroupDetail:
    return GroupDetail(key.system, key.group, (), (), (), cluster=key.cluster)


def test_a_newer_detail_replaces_a_deferred_one_rendered_or_not():
    key = GroupKey("rocketmq", "g", "east")
    details, renders = GroupDetails(), []
    stale = replace(newer(key), group="stale-render")

    def render() -> bytes:
        renders.append(1)
        return stale.to_json()

    details.put_deferred(key, DetailSummary((), None), Deferred(render))
    details.put(newer(key).to_json())
    assert details.get(key) == newer(key) and renders == []

    def render_while_a_step_lands() -> bytes:
        details.put(newer(key).to_json())
        return stale.to_json()

    details.put_deferred(key, DetailSummary((), None), Deferred(render_while_a_step_lands))
    assert details.get(key) == stale              # what it rendered, this once
    assert details.get(key) == newer(key)         # the newer detail stays
