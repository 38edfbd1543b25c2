"""The job's /metrics (group families kept rendered, then the registry) equals, byte for byte,
what prometheus_client gives for a registry with RebalanceCollector, after any sequence of
changes, and for any `name[]` a scrape asks for."""

import socket
import urllib.request
from io import BytesIO

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from streaming.common.listener import bind_family
from streaming.core.contract import GroupKey
from streaming.exporter import (
    ClientSeriesPolicy,
    GroupFamiliesText,
    JobHealthCollector,
    MetricsServer,
    MetricsServerConfig,
    RebalanceCollector,
    SnapshotStore,
)
from streaming.exporter.exposition import _Families, _sample_lines
from streaming.exporter.server import metrics_app
from tests.unit.state_helpers import group_metrics

pytestmark = pytest.mark.unit

CLOCK = 50.0
AGE = "rebalance_conflict_age_seconds"
HANDOFF_AGE = "rebalance_kafka_handoff_age_seconds"
NAMES = ["rebalance_group_members", "rebalance_double_assigned_queues", "rebalance_rebalances",
         "rebalance_rebalances_total", AGE, "rebalance_client_queues", "rebalance_monitor_groups",
         "rebalance_monitor_events_total", HANDOFF_AGE, "rebalance_group_info",
         "rebalance_kafka_target_unassigned_partitions", "no_such_family"]
# Label values a real group, topic or client id may hold, escapes included.
label_text = st.sampled_from(["g", "order-service", 'quo"te', "back\\slash", "new\nline", "ünï",
                              "%RETRY%g", ""])
counts = st.dictionaries(label_text, st.integers(0, 5), max_size=3)
metrics = st.builds(
    group_metrics, label_text, st.sampled_from(["kafka", "rocketmq"]),
    event_time_ms=st.integers(0, 40_000), members=st.integers(0, 9), queues=counts,
    double_assigned=counts, orphaned=counts,
    conflict_since_ms=st.none() | st.integers(0, 40_000),
    skew_ratio=st.sampled_from([1.0, 1.5, 2.0 / 3.0, 1e-7]), idle_clients=st.integers(0, 3),
    rebalances_total=st.integers(0, 3), client_queues=counts,
    group_type=st.sampled_from(["", "classic", "consumer", "share"]), assignor=label_text,
    handoff_since_ms=st.none() | st.integers(0, 40_000), reconciling_members=st.integers(0, 2),
    group_epoch=st.none() | st.integers(0, 9), target_unassigned=counts)
operations = st.lists(st.one_of(
    st.tuples(st.just("put"), metrics),
    st.tuples(st.just("remove"), st.builds(GroupKey, st.sampled_from(["kafka", "rocketmq"]),
                                           label_text)),
    st.tuples(st.just("clock"), st.integers(0, 60_000))), max_size=25)
policies = st.builds(ClientSeriesPolicy, st.booleans(), st.integers(1, 3))


def job_side(policy, block_groups=64):
    text = GroupFamiliesText(policy, block_groups)
    store = SnapshotStore(text)
    registry = CollectorRegistry()
    registry.register(JobHealthCollector(store, clock=lambda: CLOCK))
    app = metrics_app(registry, lambda names: text.chunks(store.health(), names))
    return store, app


def reference(store, policy):
    registry = CollectorRegistry()
    registry.register(RebalanceCollector(store, policy, clock=lambda: CLOCK))
    return registry


def scrape(app, query=""):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": query,
               "wsgi.input": BytesIO()}
    status = []
    body = b"".join(app(environ, lambda s, headers: status.append((s, dict(headers)))))
    assert status[0][0] == "200 OK"
    return body


def apply(store, operation):
    kind, value = operation
    if kind == "put":
        store.replace_group(value)
    elif kind == "remove":
        store.remove_group(value)
    else:
        store.update_health(max_event_time_ms=value)


@settings(max_examples=300, deadline=None)
@given(policies, operations, st.lists(st.sampled_from(NAMES), max_size=3), st.sampled_from([1, 2, 64]))
def test_the_served_text_equals_prometheus_clients_after_any_changes(policy, ops, names,
                                                                     block_groups):
    store, app = job_side(policy, block_groups)
    for operation in ops:
        apply(store, operation)
        assert scrape(app) == generate_latest(reference(store, policy))
    query = "&".join(f"name[]={name}" for name in names)
    expected = generate_latest(reference(store, policy).restricted_registry(names)) if names \
        else generate_latest(reference(store, policy))
    assert scrape(app, query) == expected


label_names = st.lists(st.sampled_from(["group", "topic", "a.b", "ünï", "le", "_x"]),
                       unique=True, max_size=3)
values = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5).map(float)


@settings(max_examples=300, deadline=None)
@given(st.booleans(), label_names, st.data())
def test_a_familys_lines_are_generate_latests_without_its_help_and_type(counter, names, data):
    kind = CounterMetricFamily if counter else GaugeMetricFamily
    family = kind("rebalance_x", "doc", labels=names)
    for _ in range(data.draw(st.integers(0, 4))):
        family.add_metric(data.draw(st.lists(label_text, min_size=len(names),
                                             max_size=len(names))), data.draw(values))
    expected = generate_latest(_Families([family])).decode().split("\n", 2)[2]
    assert _sample_lines(family, {}) == expected


def test_a_sample_generate_latest_would_move_is_refused():
    family = CounterMetricFamily("rebalance_x", "doc", labels=["group"])
    family.add_metric(["g"], 1.0, created=5.0)
    with pytest.raises(ValueError, match="rebalance_x_created"):
        _sample_lines(family)


def test_an_open_handoffs_age_follows_the_jobs_clock_at_each_scrape():
    text = GroupFamiliesText(ClientSeriesPolicy())
    store = SnapshotStore(text)
    store.replace_group(group_metrics("g", "kafka", group_type="consumer",
                                      handoff_since_ms=4_000, event_time_ms=5_000))
    labels = '{cluster="default",group="g",system="kafka"}'
    store.update_health(max_event_time_ms=16_000)
    assert f"rebalance_kafka_handoff_age_seconds{labels} 12.0" in text.render(store.health())
    store.update_health(max_event_time_ms=20_000)
    assert f"rebalance_kafka_handoff_age_seconds{labels} 16.0" in text.render(store.health())


def test_a_group_is_rendered_again_only_when_what_it_shows_changed():
    text = GroupFamiliesText(ClientSeriesPolicy())
    store = SnapshotStore(text)
    store.replace_group(group_metrics("g", members=3, event_time_ms=1_000))
    first = text.render(store.health())
    store.replace_group(group_metrics("g", members=3, event_time_ms=2_000))
    assert text.render(store.health()) is not first
    assert text.render(store.health()) == first
    store.replace_group(group_metrics("g", members=4, event_time_ms=3_000))
    assert 'rebalance_group_members{cluster="default",group="g",system="rocketmq"} 4.0' in text.render(store.health())


def test_an_open_conflicts_age_follows_the_jobs_clock_at_each_scrape():
    text = GroupFamiliesText(ClientSeriesPolicy())
    store = SnapshotStore(text)
    store.replace_group(group_metrics("g", conflict_since_ms=4_000, event_time_ms=5_000))
    store.update_health(max_event_time_ms=16_000)
    assert 'rebalance_conflict_age_seconds{cluster="default",group="g",system="rocketmq"} 12.0' in text.render(store.health())
    store.update_health(max_event_time_ms=20_000)
    assert 'rebalance_conflict_age_seconds{cluster="default",group="g",system="rocketmq"} 16.0' in text.render(store.health())


def test_the_server_answers_a_real_http_scrape_with_the_same_bytes():
    policy = ClientSeriesPolicy()
    text = GroupFamiliesText(policy)
    store = SnapshotStore(text)
    registry = CollectorRegistry()
    registry.register(JobHealthCollector(store, clock=lambda: CLOCK))
    server = MetricsServer(MetricsServerConfig("127.0.0.1", 0), registry,
                           lambda names: text.chunks(store.health(), names))
    store.replace_group(group_metrics("g", members=2, double_assigned={"t": 1}, queues={"t": 4},
                                      conflict_since_ms=1_000, client_queues={"c1": 4}))
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics") as response:
            body, content_type = response.read(), response.headers["Content-Type"]
        one = f"http://127.0.0.1:{server.port}/metrics?name[]=rebalance_double_assigned_queues"
        with urllib.request.urlopen(one) as response:
            family = response.read().decode()
    finally:
        server.stop()
    assert body == generate_latest(reference(store, policy))
    assert content_type.startswith("text/plain; version=0.0.4")
    assert family.splitlines() == [
        "# HELP rebalance_double_assigned_queues Queues claimed by two or more live clients "
        "(double consumption).",
        "# TYPE rebalance_double_assigned_queues gauge",
        'rebalance_double_assigned_queues{cluster="default",group="g",system="rocketmq",topic="t"} 1.0']



@pytest.mark.parametrize(("host", "family", "bound"), [
    ("127.0.0.1", socket.AF_INET, "127.0.0.1"), ("0.0.0.0", socket.AF_INET, "0.0.0.0"),
    ("::1", socket.AF_INET6, "::1"), ("::", socket.AF_INET6, "::")])
def test_the_server_binds_the_family_of_its_host(host, family, bound):
    assert bind_family(host, 9108) == (family, bound)


def test_the_full_text_is_kept_until_a_group_or_the_jobs_event_time_changes():
    text = GroupFamiliesText(ClientSeriesPolicy())
    store = SnapshotStore(text)
    store.replace_group(group_metrics("g", members=3, conflict_since_ms=1_000))
    store.update_health(max_event_time_ms=5_000)
    kept = text.chunks(store.health())
    assert text.chunks(store.health()) is kept
    store.update_health(max_event_time_ms=9_000)           # an open conflict's age moved
    aged = text.chunks(store.health())
    assert aged is not kept and b"} 8.0" in b"".join(aged)
    store.replace_group(group_metrics("h", members=1))
    assert b'group="h"' in text.exposition(store.health())
    assert text.exposition(store.health(), ["rebalance_group_members"]).startswith(
        b"# HELP rebalance_group_members")


def test_a_changed_group_joins_only_its_own_block_of_each_family_again():
    policy = ClientSeriesPolicy()
    text = GroupFamiliesText(policy, block_groups=2)
    store = SnapshotStore(text)
    for n in range(10):
        store.replace_group(group_metrics(f"g{n}", members=2, client_queues={"c1": 4}))
    before = text.chunks(store.health())
    store.replace_group(group_metrics("g4", members=3, client_queues={"c1": 4}))
    after = text.chunks(store.health())
    kept = {id(part) for part in before}
    joined_again = [part for part in after if id(part) not in kept]
    assert joined_again and all(b'group="g4"' in part for part in joined_again)
    assert all(b'group="g5"' in part for part in joined_again)       # g4's block: g4 and g5
    assert len(joined_again) < len(after) // 4
    registry = CollectorRegistry()
    registry.register(JobHealthCollector(store, clock=lambda: CLOCK))
    app = metrics_app(registry, lambda names: text.chunks(store.health(), names))
    assert scrape(app) == generate_latest(reference(store, policy))
