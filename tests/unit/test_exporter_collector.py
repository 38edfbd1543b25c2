import pytest
from prometheus_client import CollectorRegistry

from streaming.core.contract import GroupKey
from streaming.exporter import ClientSeriesPolicy, RebalanceCollector, SnapshotStore
from tests.unit.state_helpers import group_metrics

pytestmark = pytest.mark.unit


def snapshot(group="g", system="rocketmq", **overrides):
    values = dict(
        event_time_ms=10_000, members=4,
        queues={"TopicX": 2, "TopicY": 2}, double_assigned={"TopicX": 1, "TopicY": 0},
        orphaned={"TopicX": 0, "TopicY": 1}, conflict_since_ms=4_000, skew_ratio=2.0,
        idle_clients=2, subscription_inconsistent=0, strategy_inconsistent=1,
        client_id_collisions=0, view_divergent_clients=1, broker_view_divergent=0,
        allocation_mismatch_clients=0, rebalances_total=3, queue_moves_total=5,
        late_events_total=7, client_queues={"c1": 2, "c2": 2, "c3": 0, "c4": 0},
    )
    return group_metrics(group, system, **{**values, **overrides})


def registry_for(store, **kwargs):
    registry = CollectorRegistry()
    registry.register(RebalanceCollector(store, clock=lambda: 20.0, **kwargs))
    return registry


def test_group_series_carry_snapshot_values():
    store = SnapshotStore()
    store.replace_group(snapshot())
    reg = registry_for(store)
    labels = {"system": "rocketmq", "group": "g", "cluster": "default"}
    assert reg.get_sample_value("rebalance_group_members", labels) == 4
    assert reg.get_sample_value("rebalance_skew_ratio", labels) == 2.0
    assert reg.get_sample_value("rebalance_idle_clients", labels) == 2
    assert reg.get_sample_value("rebalance_strategy_inconsistent", labels) == 1
    assert reg.get_sample_value("rebalance_rebalances_total", labels) == 3
    assert reg.get_sample_value("rebalance_queue_moves_total", labels) == 5
    assert reg.get_sample_value("rebalance_late_events_total", labels) == 7
    assert reg.get_sample_value("rebalance_double_assigned_queues", {**labels, "topic": "TopicX"}) == 1
    assert reg.get_sample_value("rebalance_orphaned_queues", {**labels, "topic": "TopicY"}) == 1
    assert reg.get_sample_value("rebalance_group_queues", {**labels, "topic": "TopicY"}) == 2
    assert reg.get_sample_value("rebalance_client_queues", {**labels, "client": "c3"}) == 0
    assert reg.get_sample_value("rebalance_monitor_groups") == 1


def test_conflict_age_uses_the_jobs_event_time_clock():
    store = SnapshotStore()
    store.replace_group(snapshot())
    store.update_health(max_event_time_ms=16_000)
    reg = registry_for(store)
    assert reg.get_sample_value("rebalance_conflict_age_seconds", {"system": "rocketmq", "group": "g", "cluster": "default"}) == 12.0
    store.replace_group(snapshot(conflict_since_ms=None))
    assert reg.get_sample_value("rebalance_conflict_age_seconds", {"system": "rocketmq", "group": "g", "cluster": "default"}) == 0.0


def test_removed_group_leaves_no_series():
    store = SnapshotStore()
    store.replace_group(snapshot("a"))
    store.replace_group(snapshot("b"))
    store.remove_group(GroupKey("rocketmq", "a"))
    reg = registry_for(store)
    assert reg.get_sample_value("rebalance_group_members", {"system": "rocketmq", "group": "a", "cluster": "default"}) is None
    assert reg.get_sample_value("rebalance_client_queues", {"system": "rocketmq", "group": "a", "cluster": "default", "client": "c1"}) is None
    assert reg.get_sample_value("rebalance_group_members", {"system": "rocketmq", "group": "b", "cluster": "default"}) == 4
    assert reg.get_sample_value("rebalance_monitor_groups") == 1


def test_groups_of_the_same_name_in_two_systems_are_two_sets_of_series():
    store = SnapshotStore()
    store.replace_group(snapshot("order-service", "kafka", members=2))
    store.replace_group(snapshot("order-service", "rocketmq", members=5))
    reg = registry_for(store)
    members = {system: reg.get_sample_value("rebalance_group_members",
                                            {"system": system, "group": "order-service", "cluster": "default"})
               for system in ("kafka", "rocketmq")}
    assert members == {"kafka": 2, "rocketmq": 5}
    store.remove_group(GroupKey("kafka", "order-service"))
    assert reg.get_sample_value("rebalance_group_members",
                                {"system": "rocketmq", "group": "order-service", "cluster": "default"}) == 5
    assert reg.get_sample_value("rebalance_monitor_groups") == 1


def test_client_series_can_be_capped_or_switched_off():
    store = SnapshotStore()
    store.replace_group(snapshot())
    capped = registry_for(store, clients=ClientSeriesPolicy(max_per_group=2))
    labels = {"system": "rocketmq", "group": "g", "cluster": "default"}
    present = [c for c in ("c1", "c2", "c3", "c4")
               if capped.get_sample_value("rebalance_client_queues", {**labels, "client": c}) is not None]
    assert present == ["c1", "c2"]
    off = registry_for(store, clients=ClientSeriesPolicy(enabled=False))
    assert off.get_sample_value("rebalance_client_queues", {**labels, "client": "c1"}) is None


def test_health_series():
    store = SnapshotStore()
    store.update_health(events_total={"heartbeat": 7}, invalid_events_total={"not_json": 2},
                        batch_duration_seconds=0.5, last_batch_timestamp_seconds=15.0,
                        max_event_time_ms=12_000)
    reg = registry_for(store)
    assert reg.get_sample_value("rebalance_monitor_events_total", {"type": "heartbeat"}) == 7
    assert reg.get_sample_value("rebalance_monitor_invalid_events_total", {"reason": "not_json"}) == 2
    assert reg.get_sample_value("rebalance_monitor_batch_duration_seconds") == 0.5
    assert reg.get_sample_value("rebalance_monitor_last_batch_timestamp_seconds") == 15.0
    assert reg.get_sample_value("rebalance_monitor_input_lag_seconds") == 8.0


def test_a_scrape_can_ask_for_one_family():
    store = SnapshotStore()
    store.replace_group(snapshot())
    restricted = registry_for(store).restricted_registry(["rebalance_double_assigned_queues"])
    families = [family.name for family in restricted.collect()]
    assert families == ["rebalance_double_assigned_queues"]
    samples = next(iter(restricted.collect())).samples
    assert {(s.labels["topic"], s.value) for s in samples} == {("TopicX", 1.0), ("TopicY", 0.0)}
