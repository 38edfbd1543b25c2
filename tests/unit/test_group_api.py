"""The group API and pages (streaming/exporter/api.py, pages.py) over a SnapshotStore filled as the
sink fills it: routing, the JSON, the HTML, and never an all-clear for what is not known."""

import json

import pytest
from prometheus_client import CollectorRegistry

from streaming.core.contract import GroupKey
from streaming.exporter import SnapshotStore
from streaming.exporter.api import call, group_api
from streaming.exporter.server import metrics_app
from tests.unit.page_helpers import Rows, collision, fine, put_stepped
from tests.unit.state_helpers import group_metrics, hb, route

pytestmark = pytest.mark.unit

DOUBLED = GroupKey("rocketmq", "orders/eu", "prod")


@pytest.fixture
def store() -> SnapshotStore:
    store = SnapshotStore()
    put_stepped(store, fine(), GroupKey("rocketmq", "a-fine"))
    put_stepped(store, collision(), DOUBLED)
    skewed = [route("T", brokers={"b": 3}), route("U", brokers={"b": 3}),
              *(hb(c, ["T", "U"]) for c in ("c1", "c2", "c3", "c4"))]
    put_stepped(store, skewed, GroupKey("rocketmq", "skewed"))
    store.replace_group(group_metrics("no-detail-yet", members=3))       # its detail not in yet
    put_stepped(store, fine(), GroupKey("kafka", "silent", "east"))
    store.update_health(stale_groups=[GroupKey("kafka", "silent", "east")])
    return store


def test_the_list_puts_groups_in_trouble_first_and_never_shows_the_unknown_as_fine(store):
    answer = call(group_api(store), "/api/v1/groups")
    assert (answer.status, answer.content_type) == ("200 OK", "application/json")
    groups = answer.json()["groups"]
    assert [(g["group"], g["status"]) for g in groups] == [
        ("orders/eu", "trouble"), ("skewed", "trouble"), ("no-detail-yet", "unknown"),
        ("silent", "stale"), ("a-fine", "ok")]
    assert groups[0]["findings"] == {"client_id_collision": 1, "double_assignment": 2,
                                     "orphaned_queue": 1}
    assert groups[0]["page"] == "/groups/rocketmq/prod/orders%2Feu"
    assert groups[0]["url"] == "/api/v1/groups/rocketmq/prod/orders%2Feu"
    assert groups[3]["stale"] is True


def test_a_groups_detail_has_every_queue_with_both_owners_and_every_member(store):
    answer = call(group_api(store), "/api/v1/groups/rocketmq/prod/orders%2Feu")
    assert answer.status == "200 OK"
    group = answer.json()
    assert (group["group"], group["cluster"], group["status"]) == ("orders/eu", "prod", "trouble")
    queues = {q["queue_id"]: q for q in group["detail"]["queues"]}
    both = [{"client_id": "c1", "address": "10.0.0.1:1"},
            {"client_id": "c1", "address": "10.0.0.2:1"}]
    assert [(q["double_assigned"], q["orphaned"], q["rerun"]) for q in queues.values()] == [
        (True, False, both), (True, False, both), (False, True, []),
        (False, False, [{"client_id": "c2", "address": "10.0.0.3:1"}])]
    assert [(m["client_id"], m["address"], m["strategy"], m["view"]["clients"])
            for m in group["detail"]["members"]] == [
        ("c1", "10.0.0.1:1", "AVG", None), ("c1", "10.0.0.2:1", "AVG", None),
        ("c2", "10.0.0.3:1", "AVG", None)]
    kinds = sorted(f["kind"] for f in group["detail"]["findings"])
    assert kinds == ["client_id_collision", "double_assignment", "double_assignment",
                     "orphaned_queue"]
    assert all(isinstance(f["since_ms"], int) for f in group["detail"]["findings"])


def test_the_page_marks_the_double_assigned_queues_and_lists_both_owners(store):
    answer = call(group_api(store), "/groups/rocketmq/prod/orders%2Feu")
    assert (answer.status, answer.content_type) == ("200 OK", "text/html; charset=utf-8")
    rows = Rows(answer.body.decode()).rows
    doubled = [cells for css, cells in rows if css == "queue double"]
    assert [cells[:3] for cells in doubled] == [["T", "b:0", "double-assigned"],
                                               ["T", "b:1", "double-assigned"]]
    assert all("c1 (10.0.0.1:1)" in cells[4] and "c1 (10.0.0.2:1)" in cells[4]
               for cells in doubled)
    assert [cells[:3] for css, cells in rows if css == "queue orphaned"] == [
        ["T", "b:2", "orphaned"]]
    assert len([css for css, _ in rows if css == "member"]) == 3
    assert {cells[0] for css, cells in rows if css.startswith("finding")} == {
        "client_id_collision", "double_assignment", "orphaned_queue"}


def test_a_group_whose_detail_has_not_arrived_says_so(store):
    app = group_api(store)
    group = call(app, "/api/v1/groups/rocketmq/default/no-detail-yet").json()
    assert (group["status"], group["detail"]) == ("unknown", None)
    assert "not arrived" in group["note"]
    page = call(app, "/groups/rocketmq/default/no-detail-yet").body.decode()
    assert "has not arrived yet" in page and "not an all-clear" in page


def test_a_stale_groups_page_says_its_cluster_is_silent(store):
    page = call(group_api(store), "/groups/kafka/east/silent").body.decode()
    assert "cluster is silent" in page


def test_the_list_page_shows_what_is_not_fine_and_links_each_group(store):
    app = group_api(store)
    page = call(app, "/groups").body.decode()
    assert 'href="/groups/rocketmq/prod/orders%2Feu"' in page
    assert "a-fine" not in page and "Show all 5 groups" in page
    assert "a-fine" in call(app, "/groups", query="all=1").body.decode()


def test_names_are_escaped_and_any_name_is_addressable():
    store = SnapshotStore()
    key = GroupKey("kafka", "<script>alert(1)</script>/ü", "c/x")
    put_stepped(store, fine(), key)
    app = group_api(store)
    page = call(app, "/groups/kafka/c%2Fx/%3Cscript%3Ealert(1)%3C%2Fscript%3E%2F%C3%BC")
    assert page.status == "200 OK"
    assert "<script>" not in page.body.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;/ü" in page.body.decode()
    listed = call(app, "/api/v1/groups").json()["groups"][0]
    assert call(app, listed["url"]).json()["group"] == key.group


def test_an_unknown_group_or_endpoint_is_a_404(store):
    app = group_api(store)
    for path in ("/api/v1/groups/rocketmq/default/nope", "/api/v1/groups/rocketmq",
                 "/api/v2/anything"):
        answer = call(app, path)
        assert (answer.status, answer.content_type) == ("404 Not Found", "application/json"), path
        assert "error" in answer.json()
    assert call(app, "/groups/rocketmq/default/nope").status == "404 Not Found"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_it_is_read_only(store, method):
    answer = call(group_api(store), "/api/v1/groups", method=method)
    assert answer.status == "405 Method Not Allowed"
    assert dict(answer.headers)["Allow"] == "GET, HEAD"


def test_head_answers_without_a_body(store):
    answer = call(group_api(store), "/api/v1/groups", method="HEAD")
    assert (answer.status, answer.body) == ("200 OK", b"")
    assert int(dict(answer.headers)["Content-Length"]) > 0


def test_the_server_routes_the_api_and_keeps_metrics_where_they_were(store):
    app = metrics_app(CollectorRegistry(), lambda names: (b"# rendered\n",), group_api(store))
    assert call(app, "/metrics").body.startswith(b"# rendered")
    assert json.loads(call(app, "/api/v1/groups").body)["groups"]
    assert call(app, "/groups").content_type.startswith("text/html")


def test_removing_a_group_removes_its_detail(store):
    store.remove_group(DOUBLED)
    assert store.details.get(DOUBLED) is None
    assert call(group_api(store), "/api/v1/groups/rocketmq/prod/orders%2Feu").status == (
        "404 Not Found")




def test_an_alerts_link_with_a_space_written_as_plus_finds_the_group():
    from streaming.core.contract import GroupKey
    from streaming.exporter.api import resolve

    spaced, plus = GroupKey("rocketmq", "GID SRV", "prod"), GroupKey("kafka", "a+b", "prod")
    known = {spaced, plus}.__contains__
    assert resolve("rocketmq/prod/GID+SRV", known) == spaced       # Prometheus' urlquery
    assert resolve("rocketmq/prod/GID SRV", known) == spaced       # the page's own %20
    assert resolve("kafka/prod/a+b", known) == plus                # a real "+" wins
    assert resolve("rocketmq/prod/GID+OTHER", known) is None


def test_a_member_whose_strategy_is_not_its_own_word_says_how_it_is_known():
    store = SnapshotStore()
    events = [route("T", brokers={"b": 4}), hb("java", ["T"], owned=[["T", "b", 2], ["T", "b", 3]]),
              hb("go-1", ["T"], strategy="GO_AVG", strategy_inferred="AVG"),
              hb("go-2", ["T"], strategy="GO_AVG", strategy_assumed=True,
                 strategy_candidates=[])]
    key = GroupKey("rocketmq", "mixed", "prod")
    put_stepped(store, events, key)
    group = call(group_api(store), "/api/v1/groups/rocketmq/prod/mixed").json()
    assert {m["client_id"]: m["strategy_basis"] for m in group["detail"]["members"]} == {
        "java": "reported", "go-1": "inferred", "go-2": "assumed"}
    unknown = [f for f in group["detail"]["findings"] if f["kind"] == "strategy_unknown"]
    assert [(f["clients"], f["detail"]) for f in unknown] == [
        (["go-2"], {"assumed": "GO_AVG", "candidates": []})]
    rows = Rows(call(group_api(store), "/groups/rocketmq/prod/mixed").body.decode()).rows
    strategies = {cells[0]: cells[2] for css, cells in rows if css == "member"}
    assert strategies == {"java": "AVG", "go-1": "GO_AVG (inferred from its holdings)",
                          "go-2": "GO_AVG (unknown: assumed, no finding rests on it)"}
