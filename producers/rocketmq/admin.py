"""The admin requests the bridge makes, each a typed call over RemotingClient with a typed answer.
Request codes, header fields and body classes as in apache/rocketmq (RequestCode,
protocol/header/*, protocol/body/*, MQClientAPIImpl, DefaultMQAdminExtImpl).

    admin = RocketMQAdmin(RemotingClient(), namesrvs=["127.0.0.1:9876"])
    cluster = admin.cluster_info()                      # {broker name: master address}
    groups = admin.subscription_groups(address)         # {group: SubscriptionGroup}
    members = admin.consumer_connections(address, group)
    info = admin.running_info(address, group, client_id)
    route = admin.topic_route(topic)
    queues = admin.query_assignment(address, topic, group, client_id, "AVG")

A non-zero response code raises AdminError(code, remark); transport failures raise the
remoting module's errors. Bodies are parsed with the fastjson dialect parser.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from producers.rocketmq import fastjson
from producers.rocketmq.frames import SUCCESS
from producers.rocketmq.remoting import RemotingClient, RemotingError

GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
GET_CONSUMER_CONNECTION_LIST = 203
GET_CONSUMER_RUNNING_INFO = 307
QUERY_ASSIGNMENT = 400              # 5.x (clientRebalance=false)
GET_ALL_MESSAGE_REQUEST_MODE = 402   # 5.x (POP); 4.x answers REQUEST_CODE_NOT_SUPPORTED
GET_LITE_CLIENT_INFO = 200077        # 5.5 Lite mode (LiteManagerProcessor)
LITE_TOPICS_ASKED = 10_000           # the most lite topics one answer lists

MASTER_ID = 0
PERM_READ = 1 << 2                   # PermName.PERM_READ
# The broker waits up to 10 s for a client's running info (ClientManageProcessor): ask longer.
RUNNING_INFO_TIMEOUT_S = 15.0


class AdminError(Exception):
    """The server answered with a non-zero code."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"code {code}: {remark}")
        self.code = code
        self.remark = remark

    @property
    def cause(self) -> str:
        return f"code_{self.code}"


class MalformedBody(Exception):
    """A body that does not parse or lacks what its class must have."""

    cause = "malformed_body"


class NoRunningInfo(MalformedBody):
    """A client answered running info with success but without its queue table: nothing is
    known of what it holds. rocketmq-client-go 2.1.2 does so once it has consumed (a rate of
    0/0 in its statistics, which Go's JSON encoder refuses), with the error as its remark."""

    cause = "no_running_info"


@dataclass(frozen=True)
class SubscriptionGroup:
    name: str
    consume_enable: bool = True
    broadcast_enable: bool = True


@dataclass(frozen=True)
class Connection:
    client_id: str
    client_addr: str       # host:port of this connection (one per broker and process)
    language: str
    version: int


@dataclass(frozen=True)
class ConsumerConnections:
    connections: tuple[Connection, ...]
    topics: tuple[str, ...]            # the group's subscription table (the last heartbeat's)
    message_model: str                 # CLUSTERING | BROADCASTING
    consume_type: str                  # CONSUME_PASSIVELY | CONSUME_ACTIVELY | CONSUME_POP


@dataclass(frozen=True)
class RunningInfo:
    """What one client says of itself (ConsumerRunningInfo)."""

    owned: tuple[tuple[str, str, int], ...]          # (topic, broker, queue id), not dropped
    topics: tuple[str, ...]
    properties: Mapping[str, str] = field(default_factory=dict)
    pop_topics: tuple[str, ...] = ()                  # topics it reads in POP mode (5.x)
    # What it pops from (mqPopTable, not dropped): queue id -1 is "any queue of the broker".
    popping: tuple[tuple[str, str, int], ...] = ()

    @property
    def strategy_class(self) -> str | None:
        """The allocation strategy's simple class name; None when the client does not say (Go,
        C++ and other non-Java clients)."""
        text = self.properties.get("allocateMessageQueueStrategy")
        if not text:
            return None
        return text.split("@", 1)[0].rsplit(".", 1)[-1].rsplit("$", 1)[-1] or None

    @property
    def client_rebalance(self) -> bool:
        return str(self.properties.get("clientRebalance", "true")).lower() != "false"


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    readable: Mapping[str, int]        # broker name -> readable queue count (ids 0..n-1)


class RocketMQAdmin:
    def __init__(self, client: RemotingClient, namesrvs: Iterable[str],
                 timeout_s: float = 5.0) -> None:
        self._client = client
        self.namesrvs = list(namesrvs)
        if not self.namesrvs:
            raise ValueError("at least one NameServer address is needed")
        self._timeout_s = timeout_s

    def cluster_info(self) -> dict[str, str]:
        """Each broker name's master address."""
        body = self._ask_namesrv(GET_BROKER_CLUSTER_INFO, {})
        table = _mapping(body, "brokerAddrTable")
        masters = {}
        for name, data in table.items():
            addrs = _mapping(data, "brokerAddrs")
            master = addrs.get(MASTER_ID, addrs.get(str(MASTER_ID)))
            if master:
                masters[str(name)] = str(master)
        return masters

    def subscription_groups(self, broker: str) -> dict[str, SubscriptionGroup]:
        body = self._ask(broker, GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
        groups = {}
        for name, config in _mapping(body, "subscriptionGroupTable").items():
            config = config if isinstance(config, Mapping) else {}
            groups[str(name)] = SubscriptionGroup(
                str(name), bool(config.get("consumeEnable", True)),
                bool(config.get("consumeBroadcastEnable", True)))
        return groups

    def consumer_connections(self, broker: str, group: str) -> ConsumerConnections:
        body = self._ask(broker, GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        connections = []
        for item in _list(body, "connectionSet"):
            if not isinstance(item, Mapping) or not item.get("clientId"):
                raise MalformedBody("a connection without clientId")
            connections.append(Connection(str(item["clientId"]), str(item.get("clientAddr", "")),
                                          str(item.get("language", "")),
                                          int(item.get("version") or 0)))
        topics = tuple(sorted(str(t) for t in _mapping(body, "subscriptionTable")))
        return ConsumerConnections(tuple(connections), topics,
                                   str(body.get("messageModel") or "CLUSTERING"),
                                   str(body.get("consumeType") or "CONSUME_PASSIVELY"))

    def running_info(self, broker: str, group: str, client_id: str) -> RunningInfo:
        body, remark = self._answer(
            broker, GET_CONSUMER_RUNNING_INFO,
            {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"},
            timeout_s=RUNNING_INFO_TIMEOUT_S)
        if "mqTable" not in body:   # present but empty, `"mqTable":}`, is the C++ client's
            raise NoRunningInfo(f"running info of {client_id} without its queue table"
                                + (f": {remark}" if remark else ""))
        owned, popping = _held(body, "mqTable"), _held(body, "mqPopTable")
        pop_topics = sorted({topic for topic, _, _ in popping})
        topics = sorted({str(s["topic"]) for s in _list(body, "subscriptionSet")
                         if isinstance(s, Mapping) and s.get("topic")})
        properties = {str(k): str(v) for k, v in _mapping(body, "properties").items()}
        return RunningInfo(owned, tuple(topics), properties, tuple(pop_topics), popping)

    def topic_route(self, topic: str) -> TopicRoute:
        body = self._ask_namesrv(GET_ROUTEINFO_BY_TOPIC,
                                 {"topic": topic, "acceptStandardJsonOnly": "true"})
        readable = {}
        for queue_data in _list(body, "queueDatas"):
            if not isinstance(queue_data, Mapping) or "brokerName" not in queue_data:
                raise MalformedBody("a QueueData without brokerName")
            if int(queue_data.get("perm", 0)) & PERM_READ:
                readable[str(queue_data["brokerName"])] = int(queue_data.get("readQueueNums", 0))
        return TopicRoute(topic, readable)

    def pop_groups(self, broker: str) -> set[tuple[str, str]]:
        """(topic, group) pairs a 5.x broker serves in POP mode; empty where POP does not exist."""
        try:
            body = self._ask(broker, GET_ALL_MESSAGE_REQUEST_MODE, {})
        except AdminError:
            return set()  # 4.x: REQUEST_CODE_NOT_SUPPORTED
        pairs = set()
        for topic, by_group in _mapping(body, "messageRequestModeMap").items():
            for group, mode in (by_group if isinstance(by_group, Mapping) else {}).items():
                if isinstance(mode, Mapping) and str(mode.get("mode")) == "POP":
                    pairs.add((str(topic), str(group)))
        return pairs

    def query_assignment(self, broker: str, topic: str, group: str, client_id: str,
                         strategy: str) -> tuple[tuple[str, int], ...] | None:
        """What this broker assigns the client of the topic, as it answers a clientRebalance=false
        client (QueryAssignmentProcessor: the strategy over its own client list and its own
        route). None: it gives no assignment (the topic or group unknown to it, or a strategy
        it does not run: only AVG and AVG_BY_CIRCLE), and such a client keeps what it had."""
        request = {"topic": topic, "consumerGroup": group, "clientId": client_id,
                   "strategyName": strategy, "messageModel": "CLUSTERING"}
        body = self._ask(broker, QUERY_ASSIGNMENT, {},
                         body=json.dumps(request, separators=(",", ":")).encode())
        assignments = body.get("messageQueueAssignments")
        if assignments is None:
            return None
        if not isinstance(assignments, list):
            raise MalformedBody("messageQueueAssignments is not a list")
        queues = set()
        for item in assignments:
            queue = item.get("messageQueue") if isinstance(item, Mapping) else None
            if not isinstance(queue, Mapping) or not {"brokerName", "queueId"} <= set(queue):
                raise MalformedBody("an assignment without a MessageQueue")
            queues.add((str(queue["brokerName"]), int(queue["queueId"])))
        return tuple(sorted(queues))

    def lite_topics(self, broker: str, parent_topic: str, group: str,
                    client_id: str) -> tuple[str, ...]:
        """The lite topics a 5.5 LitePushConsumer subscribes under `parent_topic`, as this
        broker holds them (each client syncs its whole set to every broker of the parent
        topic); sorted, without the LMQ prefix the broker keeps them under."""
        body = self._ask(broker, GET_LITE_CLIENT_INFO,
                         {"parentTopic": parent_topic, "group": group, "clientId": client_id,
                          "maxCount": str(LITE_TOPICS_ASKED)})
        names = body.get("liteTopicSet") or []
        if not isinstance(names, list):
            raise MalformedBody("liteTopicSet is not a list")
        prefix = f"%LMQ%${parent_topic}$"
        return tuple(sorted({str(n).removeprefix(prefix) for n in names}))

    def _ask_namesrv(self, code: int, fields: dict) -> dict:
        """The first NameServer that answers (they hold the same routes)."""
        failure: Exception | None = None
        for address in self.namesrvs:
            try:
                return self._ask(address, code, fields)
            except RemotingError as exc:
                failure = exc
        raise failure

    def _ask(self, address: str, code: int, fields: dict, timeout_s: float | None = None,
             body: bytes = b"") -> dict:
        return self._answer(address, code, fields, timeout_s, body)[0]

    def _answer(self, address: str, code: int, fields: dict, timeout_s: float | None = None,
                body: bytes = b"") -> tuple[dict, str]:
        """(the body, {} if none; the remark)."""
        response = self._client.call(address, code, fields, body,
                                     timeout_s=timeout_s or self._timeout_s)
        if response.code != SUCCESS:
            raise AdminError(response.code, response.remark)
        if not response.body:
            return {}, response.remark or ""
        try:
            parsed = fastjson.loads(response.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MalformedBody(str(exc)) from exc
        if not isinstance(parsed, dict):
            raise MalformedBody(f"a {type(parsed).__name__} body, not an object")
        return parsed, response.remark or ""


def _held(body: Mapping, table: str) -> tuple[tuple[str, str, int], ...]:
    """The queues of a running info's mqTable or mqPopTable whose entry is not marked dropped."""
    held = []
    for queue, state in _mapping(body, table).items():
        if not isinstance(queue, Mapping) or not {"topic", "brokerName", "queueId"} <= set(queue):
            raise MalformedBody(f"an {table} key that is not a MessageQueue")
        if not (isinstance(state, Mapping) and state.get("droped")):
            held.append((str(queue["topic"]), str(queue["brokerName"]), int(queue["queueId"])))
    return tuple(sorted(held))


def _mapping(body: Mapping, name: str) -> Mapping:
    value = body.get(name)
    if value is None:  # absent, or the C++ client's `"mqTable":}`
        return {}
    if not isinstance(value, Mapping):
        raise MalformedBody(f"{name} is a {type(value).__name__}, not a map")
    return value


def _list(body: Mapping, name: str) -> list:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedBody(f"{name} is a {type(value).__name__}, not a list")
    return value
