"""The bridge's poll, against FakeAdmin (a scripted stand-in for RocketMQAdmin: a cluster whose
answers each test sets). The real cluster is in tests/integration/test_observe_rocketmq.py."""

import json

import pytest

from producers.health import CallStats
from producers.rocketmq.admin import (
    AdminError,
    Connection,
    ConsumerConnections,
    NoRunningInfo,
    RunningInfo,
    SubscriptionGroup,
    TopicRoute,
)
from producers.rocketmq.bridge import (
    AssumedStrategies,
    Holdings,
    Listing,
    members_of,
    unsettled_groups,
)
from producers.rocketmq.frames import CONSUMER_NOT_ONLINE, TOPIC_NOT_EXIST
from producers.rocketmq.observer import ObserverOptions, RocketMQObserver
from producers.rocketmq.remoting import RemotingTimeout
from streaming.core.state.events import Invalid, parse_event

pytestmark = pytest.mark.unit

AVG = "org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely@1b2c"


class FakeAdmin:
    """brokers: {name: address}; members: {(broker, group): [(client_id, client_addr)]};
    holds: {client_id: owned}; down: broker names that time out."""

    def __init__(self):
        self.brokers = {"broker-a": "a:10911", "broker-b": "b:10911"}
        self.members = {}
        self.topics = ("%RETRY%g", "T")
        self.holds = {}
        self.strategy = {}
        self.down = set()
        self.routes = {"T": {"broker-a": 4, "broker-b": 4}, "%RETRY%g": {"broker-a": 1}}
        self.running_info_calls = []
        self.consume_type = "CONSUME_PASSIVELY"
        self.language = {}                       # client_id -> LanguageCode (default JAVA)
        self.client_rebalance = {}               # client_id -> "false" (5.x server rebalance)
        self.popping = {}                        # client_id -> its mqPopTable queues
        self.proxy_addresses = {"p:8080"}
        self.unreachable = {}                    # client_id -> the dead channel its broker names
        self.proxied = {}                        # (proxy address, group) -> gRPC clients
        self.proxy_model = "CLUSTERING"          # LITE_SELECTIVE: a 5.5 proxy's lite group
        self.lite = {}                           # (parent topic, group, client_id) -> lite topics
        self.lite_calls = []
        self.assigns = {}                        # (broker, topic, client_id) -> its answer
        self.assignment_calls = []
        self.no_running_info = set()             # client_ids that answer without a queue table

    def _broker(self, address):
        name = next(n for n, a in self.brokers.items() if a == address)
        if name in self.down:
            raise RemotingTimeout(address)
        return name

    def cluster_info(self):
        return dict(self.brokers)

    def subscription_groups(self, address):
        self._broker(address)
        return {"g": SubscriptionGroup("g"), "TOOLS_CONSUMER": SubscriptionGroup("TOOLS_CONSUMER")}

    def consumer_connections(self, address, group):
        listed = (self.proxied.get((address, group)) if address in self.proxy_addresses
                  else self.members.get((self._broker(address), group)))
        if not listed:
            raise AdminError(CONSUMER_NOT_ONLINE, "not online")
        return ConsumerConnections(tuple(Connection(c, a, self.language.get(c, "JAVA"), 409)
                                         for c, a in listed),
                                   self.topics, self.proxy_model if address in
                                   self.proxy_addresses else "CLUSTERING", self.consume_type)

    def lite_topics(self, address, parent_topic, group, client_id):
        self.lite_calls.append((self._broker(address), parent_topic, client_id))
        return self.lite[(parent_topic, group, client_id)]

    def running_info(self, address, group, client_id):
        self._broker(address)
        self.running_info_calls.append(client_id)
        if client_id in self.unreachable:
            raise AdminError(1, f"invoke consumer <{group}> <{client_id}> Exception: org.apache."
                                f"rocketmq.remoting.exception.RemotingSendRequestException: send "
                                f"request to <{self.unreachable[client_id]}> failed, org.apache")
        if client_id in self.no_running_info:
            raise NoRunningInfo(f"running info of {client_id} without its queue table")
        owned = tuple(self.holds.get(client_id, ()))
        props = {"allocateMessageQueueStrategy": self.strategy.get(client_id, AVG),
                 "clientRebalance": self.client_rebalance.get(client_id, "")}
        popping = tuple(self.popping.get(client_id, ()))
        return RunningInfo(owned, self.topics, {k: v for k, v in props.items() if v},
                           tuple(sorted({t for t, _, _ in popping})), popping)

    def topic_route(self, topic):
        if topic not in self.routes:
            raise AdminError(TOPIC_NOT_EXIST, "no route")
        return TopicRoute(topic, self.routes[topic])

    def pop_groups(self, address):
        self._broker(address)
        return set()

    def query_assignment(self, address, topic, group, client_id, strategy):
        broker = self._broker(address)
        self.assignment_calls.append((broker, topic, client_id, strategy))
        return self.assigns.get((broker, topic, client_id))


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def observer(admin, **options):
    clock = Clock()
    return RocketMQObserver(admin, ObserverOptions(**options), CallStats(), clock=clock,
                            wall_ms=lambda: 1_700_000_000_000 + int(clock.now * 1000)), clock


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def test_a_process_listed_by_two_brokers_is_one_member_with_one_address():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("10.0.0.1@1", "10.0.0.1:5001")],
                     ("broker-b", "g"): [("10.0.0.1@1", "10.0.0.1:6001")]}
    admin.holds = {"10.0.0.1@1": [("T", "broker-a", 0)]}
    events, _ = observer(admin)[0].poll(), None
    beats = of_type(events, "heartbeat")
    assert {(e["broker"], e["address"]) for e in beats} == {("broker-a", "10.0.0.1#0"),
                                                            ("broker-b", "10.0.0.1#0")}
    assert all(e["owned"] == [["T", "broker-a", 0]] and e["strategy"] == "AVG" for e in beats)
    assert [parse_event(json.dumps(e)) for e in events if isinstance(
        parse_event(json.dumps(e)), Invalid)] == []  # the job takes every one
    assert {e["group"] for e in events if "group" in e} == {"g"}  # TOOLS_CONSUMER left out


def test_two_processes_sharing_a_client_id_on_one_host_are_two_members():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("10.99.0.1@same", "127.0.0.1:7002"),
                                         ("10.99.0.1@same", "127.0.0.1:7001")]}
    admin.holds = {"10.99.0.1@same": [("T", "broker-a", 0)]}
    beats = of_type(observer(admin)[0].poll(), "heartbeat")
    by_address = {e["address"]: e for e in beats}
    assert set(by_address) == {"127.0.0.1#0", "127.0.0.1#1"}
    assert by_address["127.0.0.1#0"]["owned"] == [["T", "broker-a", 0]]
    assert "owned" not in by_address["127.0.0.1#1"] and by_address["127.0.0.1#1"]["owned_unknown"]


def test_unchanged_members_and_routes_are_sent_again_only_as_keepalives():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    watcher, clock = observer(admin, keepalive_s=30)
    assert len(watcher.poll()) == 3          # a heartbeat and two routes
    clock.now += 10
    assert watcher.poll() == []
    admin.holds = {"c1": [("T", "broker-a", 1)]}  # asked again while the group settles:
    clock.now += 10                               # what it holds changed, sent at once
    (beat,) = watcher.poll()
    assert beat["owned"] == [["T", "broker-a", 1]]
    clock.now += 25                               # each its own keep-alive, 30 s after it was
    assert {e["type"] for e in watcher.poll()} == {"route"}     # last sent: the routes first,
    clock.now += 6
    assert watcher.poll() == [{"v": 1, "type": "alive", "ts": 1_700_001_051_000, "group": "g",
                               "members": [["c1", "h#0"]], "broker": "broker-a",
                               "system": "rocketmq"}]   # then the member, in its group's alive


@pytest.mark.parametrize("restate_s, kinds", [(90.0, ["alive", "alive", "heartbeat"]),
                                              (0.0, ["heartbeat"] * 3)])
def test_an_unchanged_member_is_sent_in_full_every_restate_s(restate_s, kinds):
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    watcher, clock = observer(admin, keepalive_s=30, restate_s=restate_s)
    watcher.poll()
    seen = []
    for _ in range(3):
        clock.now += 30
        seen += [e["type"] for e in watcher.poll() if e["type"] != "route"]
    assert seen == kinds


def test_a_member_gone_from_every_broker_is_unregistered_but_not_while_its_broker_is_silent():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1"), ("c2", "h:2")]}
    watcher, clock = observer(admin)
    watcher.poll()
    admin.down = {"broker-a"}
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    clock.now += 5
    assert of_type(watcher.poll(), "unregister") == []  # broker-a silent: c2 unknown, not gone
    assert watcher.stats.snapshot()[0][("consumer_connections", "timeout")] == 1
    admin.down = set()
    clock.now += 5
    (gone,) = of_type(watcher.poll(), "unregister")
    assert (gone["client_id"], gone["address"]) == ("c2", "h#0")


def test_a_silent_broker_keeps_the_groups_it_named_last_so_their_listings_are_still_asked():
    admin = FakeAdmin()
    admin.brokers = {"broker-a": "a:10911"}
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    watcher, clock = observer(admin)
    watcher.poll()
    admin.down = {"broker-a"}
    clock.now += 5
    assert of_type(watcher.poll(), "unregister") == []
    calls = watcher.stats.snapshot()[0]
    assert calls[("subscription_groups", "timeout")] == 1
    assert calls[("consumer_connections", "timeout")] == 1  # asked: the failure shows where


def _one_client_holding_every_queue():
    """(admin, observer, clock, its first heartbeat): c1 alone in g, holding every queue."""
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    admin.holds = {"c1": [("%RETRY%g", "broker-a", 0)] + [
        ("T", broker, q) for broker in ("broker-a", "broker-b") for q in range(4)]}
    watcher, clock = observer(admin, settle_s=0.0, keepalive_s=1000)
    (first,) = of_type(watcher.poll(), "heartbeat")
    return admin, watcher, clock, first


def test_after_a_route_change_the_topics_clients_are_asked_again_at_the_next_poll():
    admin, watcher, clock, first = _one_client_holding_every_queue()
    clock.now += 10
    assert watcher.poll() == [] and len(admin.running_info_calls) == 1   # settled: not asked
    admin.routes = {**admin.routes, "T": {"broker-a": 8, "broker-b": 4}}  # scale-out
    clock.now += 10
    (route,) = [e for e in watcher.poll() if e["type"] == "route" and e["topic"] == "T"]
    assert len(admin.running_info_calls) == 1      # the change is seen after this poll's asks
    clock.now += 10
    (beat,) = of_type(watcher.poll(), "heartbeat")  # asked again: same holdings, sent at once
    assert len(admin.running_info_calls) == 2
    assert beat["owned"] == first["owned"] and beat["owned_ts"] > route["ts"] > first["owned_ts"]
    admin.holds["c1"] += [("T", "broker-a", q) for q in range(4, 8)]   # the client moves
    clock.now += 10
    (moved,) = of_type(watcher.poll(), "heartbeat")   # asked while clients settle
    assert len(admin.running_info_calls) == 3 and len(moved["owned"]) == len(beat["owned"]) + 4
    clock.now += 90
    watcher.poll()
    assert len(admin.running_info_calls) == 3           # settled again: not asked


def test_unchanged_holdings_asked_after_a_second_route_change_are_sent_again():
    """A client asked in the poll that sees a second route change (it is asked every poll while
    routes settle) and holding the same queues: its heartbeat goes out again, stamped after the
    change, or the job would wait for its holdings until the restate (CI saw 300 s)."""
    admin, watcher, clock, _ = _one_client_holding_every_queue()
    for brokers in ({"broker-a": 8, "broker-b": 4}, {"broker-a": 8, "broker-b": 8}):
        admin.routes = {**admin.routes, "T": brokers}
        clock.now += 10
        events = watcher.poll()
        (route,) = [e for e in events if e["type"] == "route" and e["topic"] == "T"]
        clock.now += 10
        events += watcher.poll()
        beats = of_type(events, "heartbeat")
        assert beats and beats[-1]["owned_ts"] >= route["ts"], (brokers, beats)
    assert len(admin.running_info_calls) == 4


def test_holdings_caught_in_the_middle_of_a_rebalance_are_asked_again_after_the_next_one():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1"), ("c2", "h:2")]}
    every = [("T", broker, q) for broker in ("broker-a", "broker-b") for q in range(4)]
    admin.holds = {"c1": [("%RETRY%g", "broker-a", 0)] + every[:4], "c2": every[4:7]}
    watcher, clock = observer(admin, settle_s=0.0, keepalive_s=1000)
    watcher.poll()
    assert len(admin.running_info_calls) == 2
    clock.now += 10
    watcher.poll()                   # ("T", "broker-b", 3) held by nobody, but asked 10 s ago
    assert len(admin.running_info_calls) == 2
    admin.holds["c2"] = every[4:]    # c2's next rebalance takes it
    clock.now += 10
    beats = of_type(watcher.poll(), "heartbeat")   # a rebalance after: both asked again
    assert sorted(admin.running_info_calls) == ["c1", "c1", "c2", "c2"]
    assert [(b["client_id"], len(b["owned"])) for b in beats] == [("c2", 4)]
    for _ in range(10):              # each queue held once: asked at the refresh only
        clock.now += 10
        watcher.poll()
    assert len(admin.running_info_calls) == 4
    admin.holds["c1"] = admin.holds["c1"] + every[4:5]   # a double, real or caught mid-way
    clock.now += 30
    watcher.poll()                   # the refresh finds it
    clock.now += 10
    watcher.poll()
    assert len(admin.running_info_calls) == 6
    clock.now += 10
    watcher.poll()                   # and asks again a rebalance after, while it lasts
    assert len(admin.running_info_calls) == 8


def _group(model="CLUSTERING", consume_type="CONSUME_PASSIVELY"):
    return members_of([Listing("g", "broker-a", c, f"h:{i}", ("T",), model, consume_type)
                       for i, c in enumerate(("c1", "c2"))])


HALF = tuple(("T", "broker-a", q) for q in range(2))
ROUTES = {"T": {"broker-a": 4}}


@pytest.mark.parametrize("members, holdings, unsettled", [
    (_group(), {"c1": Holdings(HALF, ("T",)), "c2": Holdings(HALF, ("T",))}, True),  # doubles
    (_group(), {"c1": Holdings(HALF, ("T",)), "c2": Holdings((), ("T",))}, True),    # orphans
    (_group(), {"c1": Holdings(HALF, ("T",)),
                "c2": Holdings(tuple(("T", "broker-a", q) for q in (2, 3)), ("T",))}, False),
    (_group(), {"c1": Holdings(HALF, ("T",))}, False),                 # c2 not asked yet
    (_group("BROADCASTING"), {"c1": Holdings(HALF, ("T",)), "c2": Holdings(HALF, ("T",))}, False),
    (_group(consume_type="CONSUME_POP"), {"c1": Holdings((), ("T",)),
                                          "c2": Holdings((), ("T",))}, False),
    (_group(), {"c1": Holdings(HALF, ("T",)),     # the broker allocates: still exclusive
                "c2": Holdings((), ("T",), client_rebalance=False)}, True),
], ids=["double", "orphan", "each-once", "not-asked", "broadcast", "pop", "server-side"])
def test_a_group_is_unsettled_while_its_reported_holdings_miss_or_double_a_queue(
        members, holdings, unsettled):
    known = {("g", client): held for client, held in holdings.items()}
    assert (unsettled_groups(members, known, ROUTES) == {"g"}) is unsettled


def test_holdings_a_client_stops_giving_are_kept_until_the_refresh_then_no_longer_claimed():
    admin, watcher, clock, first = _one_client_holding_every_queue()
    admin.no_running_info = {"c1"}
    clock.now += 120
    for _ in range(2):         # the refresh fails: kept (no change sent), asked at each poll
        assert of_type(watcher.poll(), "heartbeat") == []
        clock.now += 10
    assert watcher.stats.snapshot()[0][("running_info", "no_running_info")] == 2
    (unknown,) = of_type(watcher.poll(), "heartbeat")   # a rebalance past it: not claimed
    assert "owned" not in unknown and "owned_ts" not in unknown
    clock.now += 10
    watcher.poll()
    assert watcher.stats.snapshot()[0][("running_info", "no_running_info")] == 3
    clock.now += 10                                  # asked again a rebalance after
    watcher.poll()
    assert watcher.stats.snapshot()[0][("running_info", "no_running_info")] == 4
    admin.no_running_info = set()
    clock.now += 20
    (back,) = of_type(watcher.poll(), "heartbeat")
    assert back["owned"] == first["owned"]


def test_running_info_calls_are_bounded_per_poll_and_go_to_the_never_asked_first():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [(f"c{i}", f"h:{i}") for i in range(5)]}
    watcher, clock = observer(admin, running_info_budget=2, settle_s=0.0)
    watcher.poll()
    assert len(admin.running_info_calls) == 2
    clock.now += 1
    watcher.poll()
    clock.now += 1
    watcher.poll()
    assert sorted(admin.running_info_calls) == [f"c{i}" for i in range(5)]
    clock.now += 1
    watcher.poll()  # everyone asked, nothing changed, nothing stale: no call
    assert len(admin.running_info_calls) == 5
    clock.now += 120
    watcher.poll()  # stale: asked again, still within the budget
    assert len(admin.running_info_calls) == 7


def test_a_client_that_reports_no_strategy_gets_the_default_and_says_it_was_assumed():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("cpp-client", "h:1")]}
    admin.strategy = {"cpp-client": ""}
    admin.language = {"cpp-client": "CPP"}
    assumed = AssumedStrategies(default="AVG_BY_CIRCLE")
    (beat,) = of_type(observer(admin, strategies=assumed)[0].poll(), "heartbeat")
    assert (beat["strategy"], beat["strategy_assumed"], beat["sdk"]) == (
        "AVG_BY_CIRCLE", True, "cpp")


@pytest.mark.parametrize("assumed, strategy, params, mark", [
    (AssumedStrategies(), "GO_AVG", None, "strategy_assumed"),
    (AssumedStrategies(by_language={"GO": "CONSISTENT_HASH"}, virtual_nodes=7),
     "GO_CONSISTENT_HASH", {"virtual_nodes": 7}, "strategy_named"),
    (AssumedStrategies(by_language={"GO": "MACHINE_ROOM"}), "GO_MACHINE_ROOM", None,
     "strategy_named"),
    (AssumedStrategies(by_language={"CPP": "CONSISTENT_HASH"}), "GO_AVG", None,
     "strategy_assumed"),
])
def test_a_go_client_is_re_run_with_the_go_clients_own_algorithm(assumed, strategy, params,
                                                                 mark):
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("go-client", "h:1"), ("java-client", "h:2")]}
    admin.strategy = {"go-client": ""}
    admin.language = {"go-client": "GO"}
    beats = {e["client_id"]: e for e in of_type(observer(admin, strategies=assumed)[0].poll(),
                                                  "heartbeat")}
    go, java = beats["go-client"], beats["java-client"]
    assert (go["strategy"], go.get("strategy_params"), go["sdk"]) == (strategy, params, "go")
    assert go[mark] is True
    assert {"strategy_assumed", "strategy_named"} - {mark} - set(go) == {
        "strategy_assumed", "strategy_named"} - {mark}
    assert (java["strategy"], java["sdk"]) == ("AVG", "java") and "strategy_assumed" not in java
    assert not any(isinstance(parse_event(json.dumps(beat)), Invalid) for beat in (go, java))


def test_pop_consumers_are_shared_and_never_a_conflict():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    admin.consume_type = "CONSUME_POP"
    (beat,) = of_type(observer(admin)[0].poll(), "heartbeat")
    assert beat["shared"] is True and beat["shared_reason"] == "pop"


def test_a_pop_reader_of_a_whole_broker_reads_each_of_its_queues_and_is_shared():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    admin.popping = {"c1": [("T", "broker-a", -1), ("T", "broker-b", 2)]}
    (beat,) = of_type(observer(admin)[0].poll(), "heartbeat")
    assert beat["shared"] is True and beat["shared_reason"] == "pop"
    assert beat["owned"] == [["T", "broker-a", q] for q in range(4)] + [["T", "broker-b", 2]]
    assert not isinstance(parse_event(json.dumps(beat)), Invalid)


def test_grpc_clients_a_proxy_lists_are_shared_readers_whose_holdings_are_not_asked():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("java-1", "h:1")]}
    admin.proxied = {("p:8080", "g"): [("vm@1@0@x", "h:7")]}
    watcher, _ = observer(admin, proxies=("p:8080",))
    beats = {e["client_id"]: e for e in of_type(watcher.poll(), "heartbeat")}
    grpc = beats["vm@1@0@x"]
    assert (grpc["shared"], grpc["shared_reason"], grpc["owned_unknown"]) == (
        True, "grpc_proxy", True)
    assert "broker" not in grpc and "owned" not in grpc and beats["java-1"]["broker"] == "broker-a"
    assert admin.running_info_calls == ["java-1"]
    assert not isinstance(parse_event(json.dumps(grpc)), Invalid)


def test_lite_consumers_a_proxy_lists_are_shared_readers_in_a_valid_event():
    """RocketMQ 5.5: a proxy lists a LitePushConsumer's group with message model LITE_SELECTIVE,
    which the contract has no word for: the member is a shared reader (`lite`), CLUSTERING."""
    admin = FakeAdmin()
    admin.topics = ("P",)
    admin.routes["P"] = {"broker-a": 4, "broker-b": 4}
    admin.proxied = {("p:8080", "g"): [("vm@1@0@x", "h:7"), ("vm@2@0@y", "h:8")]}
    admin.proxy_model = "LITE_SELECTIVE"
    admin.lite = {("P", "g", "vm@1@0@x"): ("a", "b"), ("P", "g", "vm@2@0@y"): ("b",)}
    watcher, clock = observer(admin, proxies=("p:8080",))
    beats = of_type(watcher.poll(), "heartbeat")
    assert [(b["client_id"], b["shared"], b["shared_reason"], b["message_model"], b["topics"],
             b["lite_topics"]) for b in beats] == [
        ("vm@1@0@x", True, "lite", "CLUSTERING", ["P"], ["a", "b"]),
        ("vm@2@0@y", True, "lite", "CLUSTERING", ["P"], ["b"])]
    assert not any(isinstance(parse_event(json.dumps(b)), Invalid) for b in beats)
    assert admin.running_info_calls == []
    # Asked of one master of the parent topic; kept until the refresh is due.
    assert admin.lite_calls == [("broker-a", "P", "vm@1@0@x"), ("broker-a", "P", "vm@2@0@y")]
    clock.now += 1
    watcher.poll()
    assert len(admin.lite_calls) == 2


def test_a_connection_the_broker_cannot_reach_is_left_out_until_it_is_no_longer_listed():
    """RocketMQ 5.x after a broker pause: the broker lists a client's dead connection beside its
    new one, and fails to forward running info to it. Not a second process of that client."""
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "10.0.0.1:2"), ("c1", "10.0.0.1:9")]}
    admin.unreachable = {"c1": "/10.0.0.1:9"}
    watcher, clock = observer(admin)
    assert len(of_type(watcher.poll(), "heartbeat")) == 2        # not known to be dead yet
    admin.unreachable = {}
    clock.now += 1
    events = watcher.poll()
    assert [(e["type"], e["address"]) for e in events if e["type"] == "unregister"] == [
        ("unregister", "10.0.0.1#1")]
    assert watcher.members_seen == 1
    admin.members = {("broker-a", "g"): [("c1", "10.0.0.1:2")]}   # expired by the broker
    clock.now += 1
    watcher.poll()
    admin.members = {("broker-a", "g"): [("c1", "10.0.0.1:2"), ("c1", "10.0.0.1:9")]}
    clock.now += 1
    watcher.poll()
    assert watcher.members_seen == 2                    # forgotten once unlisted: a new one counts


def test_after_a_broker_stalled_a_clients_old_connection_beside_its_new_one_is_not_a_process():
    """RocketMQ 5.x after a pause: the client reconnected, the broker lists both connections
    until its 120 s channel expiry. Only the connection opened after the broker came back
    counts; past the expiry a connection still listed counts again."""
    admin = FakeAdmin()
    admin.brokers = {"broker-a": "a:10911"}
    admin.members = {("broker-a", "g"): [("c1", "10.0.0.1:2")]}
    watcher, clock = observer(admin)
    watcher.poll()
    admin.down = {"broker-a"}
    clock.now += 5
    watcher.poll()
    admin.down = set()
    clock.now += 5
    watcher.poll()                                                  # the broker is back
    admin.members = {("broker-a", "g"): [("c1", "10.0.0.1:2"), ("c1", "10.0.0.1:9")]}
    clock.now += 5
    watcher.poll()
    assert watcher.members_seen == 1
    clock.now += 130
    watcher.poll()
    assert watcher.members_seen == 2


def test_two_processes_sharing_a_client_id_are_two_members_when_no_broker_stalled():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "10.0.0.1:2")]}
    watcher, clock = observer(admin)
    watcher.poll()
    admin.members = {("broker-a", "g"): [("c1", "10.0.0.1:2"), ("c1", "10.0.0.1:9")]}
    clock.now += 5
    watcher.poll()
    assert watcher.members_seen == 2


def test_a_client_the_broker_allocates_for_is_checked_like_any_other():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    admin.client_rebalance = {"c1": "false"}
    (beat,) = of_type(observer(admin)[0].poll(), "heartbeat")
    assert "shared" not in beat and beat["assigned_by"] == "broker"


def test_each_broker_is_asked_what_it_assigns_a_client_the_broker_allocates_for():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1"), ("c2", "h:2")],
                     ("broker-b", "g"): [("c1", "h:3")]}
    admin.client_rebalance = {"c1": "false", "c2": "false"}
    admin.assigns = {("broker-a", "T", "c1"): (("broker-a", 0), ("broker-b", 0)),
                     ("broker-b", "T", "c1"): (("broker-a", 0), ("broker-a", 1)),
                     ("broker-a", "T", "c2"): (("broker-a", 1),)}
    admin.down = {"broker-b"}       # c2 is asked while broker-b answers nothing
    watcher, clock = observer(admin)
    beats = {e["client_id"]: e for e in of_type(watcher.poll(), "heartbeat")}
    assert beats["c2"]["broker_assignments"] == {
        "broker-a": {"%RETRY%g": None, "T": [["broker-a", 1]]}}   # broker-b: unknown, left out
    assert {strategy for *_, strategy in admin.assignment_calls} == {"AVG"}
    admin.down = set()
    clock.now += 1000                # past the running-info refresh: asked again
    beats = {e["client_id"]: e for e in of_type(watcher.poll(), "heartbeat")}
    assert beats["c1"]["broker_assignments"]["broker-b"]["T"] == [["broker-a", 0],
                                                                   ["broker-a", 1]]
    assert parse_event(json.dumps(beats["c1"]))[0].broker_assignments[1][0] == "broker-b"
    calls = watcher.stats.snapshot()[0]
    assert calls[("query_assignment", "timeout")] == 4        # broker-b: 2 clients x 2 topics
    assert calls[("query_assignment", "ok")] == 4 + 8         # broker-a, then both brokers


def test_a_client_that_allocates_for_itself_is_never_asked_about():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    (beat,) = of_type(observer(admin)[0].poll(), "heartbeat")
    assert "broker_assignments" not in beat and admin.assignment_calls == []


def test_a_topic_without_a_route_has_no_queues_and_a_failed_route_call_sends_nothing():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")]}
    admin.routes = {"T": {"broker-a": 4}}   # %RETRY%g has no route
    routes = {e["topic"]: e for e in of_type(observer(admin)[0].poll(), "route")}
    assert routes["%RETRY%g"]["queues"] == [] and routes["T"]["brokers"] == {"broker-a": 4}


def test_a_malformed_answer_is_counted_and_the_poll_goes_on():
    admin = FakeAdmin()
    admin.members = {("broker-a", "g"): [("c1", "h:1")], ("broker-b", "g"): [("c1", "h:2")]}

    def broken(address, group):
        from producers.rocketmq.admin import MalformedBody
        if address == "b:10911":
            raise MalformedBody("a connection without clientId")
        return FakeAdmin.consumer_connections(admin, address, group)

    admin.consumer_connections = broken
    watcher, _ = observer(admin)
    beats = of_type(watcher.poll(), "heartbeat")
    assert [e["broker"] for e in beats] == ["broker-a"]
    assert watcher.stats.snapshot()[0][("consumer_connections", "malformed_body")] == 1
