"""The event contract v1, declared once: every field an event may carry, which event types
read it, its JSON Schema, its line in docs/events.md, and a sample value.

From this table come `event.schema.json` and the field tables of docs/events.md (both written
by `scripts/sync_event_contract.py`, and checked equal to it by tests/unit/test_event_contract.py),
the producers' builders (producers/events.py: the fields each may write), and the checks that
the parser reads exactly these fields: each field's sample reaches the parsed event, and the
parser's source names no other key.

    >>> [f.name for f in FIELDS if "unregister" in f.types and f.name not in COMMON]
    ['client_id', 'address']
    >>> names_for("route") >= {"topic", "queues", "brokers", "partitions", "groups"}
    True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from streaming.core.contract import KAFKA_GROUP_TYPES, JsonValue

EventType = Literal["heartbeat", "unregister", "route", "alive"]
EVENT_TYPES: tuple[EventType, ...] = ("heartbeat", "unregister", "route", "alive")
ALL: frozenset[EventType] = frozenset(EVENT_TYPES)
HEARTBEAT: frozenset[EventType] = frozenset({"heartbeat"})
MEMBER: frozenset[EventType] = frozenset({"heartbeat", "unregister"})
ROUTE: frozenset[EventType] = frozenset({"route"})
ALIVE: frozenset[EventType] = frozenset({"alive"})

NAME: dict[str, JsonValue] = {"$ref": "#/$defs/name"}
NAMES: dict[str, JsonValue] = {"type": "array", "items": NAME}
QUEUE_SET = ("one of `queues`, `brokers`, `partitions` (several: `partitions` for Kafka, then "
             "`queues`, then `brokers`)")
EPOCH: dict[str, JsonValue] = {"type": "integer", "minimum": -1, "maximum": 2147483647}


@dataclass(frozen=True)
class ContractField:
    """One field of the contract. `types`: the event types that read it (or, for `read=False`,
    that may carry it); `required`: the docs' required column; `attr`: the parsed event's
    attribute it fills (None: it shapes others, e.g. `v`, or is not read); `sample`: a valid
    value, different from the default, for a test to send."""

    name: str
    types: frozenset[EventType]
    json_type: str
    required: str
    doc: str
    schema: Mapping[str, JsonValue]
    sample: JsonValue
    attr: str | None = None
    read: bool = True                    # False: informational, for people; the job ignores it
    extra: Mapping[str, JsonValue] = field(default_factory=dict)   # other fields the sample needs
    more_attrs: tuple[str, ...] = ()     # further attributes it fills (a view: its queues too)


FIELDS: tuple[ContractField, ...] = (
    # Fields every event has.
    ContractField("v", ALL, "integer", "no (default `1`)",
                  "contract version; anything but `1` is rejected (`bad_version`)",
                  {"const": 1}, 1),
    ContractField("type", ALL, "string", "yes", "`heartbeat`, `unregister`, `route` or `alive`",
                  {"enum": list(EVENT_TYPES)}, "heartbeat", "type"),
    ContractField(
        "ts", ALL, "number or string", "yes",
        "event time: epoch milliseconds (a number, or a string of digits) or an ISO-8601 string "
        "(`2024-05-01T12:00:00.250Z`; no zone = UTC). Must be in [2000-01-01, 2100-01-01). "
        "Fractions of a millisecond are dropped.",
        {"description": "Event time: epoch milliseconds (number or digit string) or an ISO-8601 "
                        "string (no zone = UTC); must fall in [2000-01-01, 2100-01-01).",
         "oneOf": [{"type": "number", "minimum": 946684800000,
                    "exclusiveMaximum": 4102444800000},
                   {"type": "string", "minLength": 1}]},
        "2024-05-01T12:00:00Z", "ts"),
    ContractField("group", ALL, "string", "yes (a route may give `groups` instead)",
                  "the consumer group", NAME, "g-sample", "group"),
    ContractField("system", ALL, "string", "no (default `rocketmq`)", "`rocketmq` or `kafka`",
                  {"enum": ["rocketmq", "kafka"], "default": "rocketmq"}, "kafka", "system",
                  extra={"strategy": "range"}),
    ContractField(
        "cluster", ALL, "string", "no (default `default`)",
        "the cluster the event describes, as its producers name it (`observe-rocketmq` and "
        "`observe-kafka` name `COMMAND@` their first address unless `--cluster NAME`; "
        "`simulate --cluster NAME`). A group is its system, its cluster and its name: two "
        "clusters' groups of one name are two groups. All producers of one cluster use one name "
        "(for example every Kafka reporter of a cluster). The job follows each cluster's newest "
        "event time: a cluster that goes silent while others go on leaves its groups stale, "
        "never \"healthy\" (Producers that go silent, below).",
        {"description": "The cluster the event describes, as its producers name it; a group is "
                        "(system, cluster, group).", "$ref": "#/$defs/name",
         "default": "default"},
        "prod-1"),
    # heartbeat (and unregister's two).
    ContractField("client_id", MEMBER, "string", "yes",
                  "RocketMQ clientId (`ip@pid`...) / Kafka member or client id", NAME,
                  "c-sample", "client_id"),
    ContractField("topics", HEARTBEAT, "list of strings", "yes", "subscribed topics (may be empty)",
                  NAMES, ["T-sample"], "topics"),
    ContractField(
        "strategy", HEARTBEAT, "string", "yes",
        "RocketMQ, as the Java client computes it: `AVG`, `AVG_BY_CIRCLE`, `CONSISTENT_HASH`, "
        "`MACHINE_ROOM`, `MACHINE_ROOM_NEARBY`, `CONFIG`; as the Go client (rocketmq-client-go "
        "v2) computes it: `GO_AVG`, `GO_AVG_BY_CIRCLE`, `GO_CONSISTENT_HASH` (a CRC32 ring, not "
        "Java's MD5 one), `GO_MACHINE_ROOM`, `GO_MACHINE_ROOM_NEARBY` (Go's is AVG). Kafka: "
        "`range`, `roundrobin`, `sticky`, `cooperative-sticky`. Case-insensitive.",
        {"description": "Case-insensitive. RocketMQ, as the Java client computes it: AVG, "
                        "AVG_BY_CIRCLE, CONSISTENT_HASH, MACHINE_ROOM, MACHINE_ROOM_NEARBY, "
                        "CONFIG; as the Go client does: GO_AVG, GO_AVG_BY_CIRCLE, "
                        "GO_CONSISTENT_HASH (strategy_params.virtual_nodes required), "
                        "GO_MACHINE_ROOM, GO_MACHINE_ROOM_NEARBY. Kafka classic groups: range, "
                        "roundrobin, sticky, cooperative-sticky; a broker-assigned group "
                        "(group_type consumer or share): the broker's assignor, any name.",
         "type": "string"},
        "AVG_BY_CIRCLE", "strategy"),
    ContractField(
        "strategy_params", HEARTBEAT, "object", "no",
        "`virtual_nodes` (CONSISTENT_HASH; required for GO_CONSISTENT_HASH, which has no "
        "default), `consumer_idcs` (MACHINE_ROOM, GO_MACHINE_ROOM), `inner`, `broker_rooms`, "
        "`client_rooms` (MACHINE_ROOM_NEARBY), `machine_room` (this client's room; merged into "
        "`client_rooms` for the group), `queues` (CONFIG: `[[topic, broker, id], ...]`)",
        {"type": "object"}, {"virtual_nodes": 7}, "strategy_params"),
    ContractField(
        "sdk", HEARTBEAT, "string", "no",
        "RocketMQ: the client's SDK as its connection names it (`java`, `go`, `cpp`, ...). For "
        "reading only: `strategy` already says whose algorithm to run",
        {"type": "string", "description": "RocketMQ: the client's SDK as its connection names "
                                          "it (java, go, cpp, ...); for reading only."},
        "go", read=False),
    ContractField("message_model", HEARTBEAT, "string", "no (`CLUSTERING`)",
                  "`BROADCASTING` = every client reads every queue; never a conflict",
                  {"enum": ["CLUSTERING", "BROADCASTING"], "default": "CLUSTERING"},
                  "BROADCASTING", "message_model"),
    ContractField("shared", HEARTBEAT, "boolean", "no (`false`)",
                  "POP-style shared consumption; never a conflict",
                  {"type": "boolean", "default": False,
                   "description": "POP-style shared consumption: never a conflict. Alias: pop."},
                  True, "shared"),
    ContractField("pop", HEARTBEAT, "boolean", "no", "the older name of `shared`",
                  {"type": "boolean"}, True, "shared"),
    ContractField(
        "lite_topics", HEARTBEAT, "list of strings", "no",
        "RocketMQ 5.5 Lite mode: the lite topics a LitePushConsumer subscribes under its "
        "parent topic (`topics`), as the broker holds them. Shown on the member; a lite "
        "consumer is a `shared` reader, never a conflict", NAMES, ["orders-1", "orders-2"],
        "lite_topics"),
    ContractField(
        "address", MEMBER, "string", "no",
        "the connection's `host:port`. A member is a process: (client_id, address). Two "
        "addresses with one client_id are two members. Send it on every heartbeat or on none. "
        "In an `unregister`, only that process leaves; without it every process with that "
        "client_id leaves.", NAME, "10.0.0.7:52114", "address"),
    ContractField(
        "broker", HEARTBEAT | ALIVE, "string", "no",
        "the broker that received this heartbeat (a RocketMQ client heartbeats to every "
        "broker; in an `alive`, the broker that lists the members); used to compare the "
        "brokers' member lists", NAME, "broker-a", "broker"),
    ContractField(
        "view", HEARTBEAT, "object", "no",
        "the inputs this client last allocated from: `{\"clients\": [...], \"queues\": "
        "{\"topic\": [[\"broker\", id], ...]}}`. A missing part (or a topic missing from "
        "`queues`) means \"the group's current consensus\"",
        {"type": "object", "properties": {
            "clients": NAMES,
            "queues": {"type": "object", "additionalProperties": {"$ref": "#/$defs/queues"}}}},
        {"clients": ["c-sample"]}, "view_clients", more_attrs=("view_queues",)),
    ContractField(
        "owned", HEARTBEAT, "list", "no",
        "what the client says it holds. RocketMQ `[[\"topic\", \"broker\", id], ...]`, Kafka "
        "`[[\"topic\", partition], ...]`. When present it is what the member claims; when "
        "absent the monitor's re-run is",
        {"type": "array", "description": "RocketMQ: [topic, broker, queue_id] items. Kafka: "
                                         "[topic, partition] items.",
         "items": {"type": "array", "minItems": 2, "maxItems": 3}},
        [["T-sample", "broker-a", 0]], "owned"),
    ContractField(
        "owned_ts", HEARTBEAT, "integer (ms)", "no",
        "when the client reported `owned`, for a producer that re-sends holdings it asked "
        "earlier (observe-rocketmq). Holdings reported before a topic's route changed are not "
        "taken as the member's claim on that topic (`holdings_pending`). Without it, `owned` is "
        "taken as fresh with each heartbeat",
        {"type": "integer", "minimum": 0, "exclusiveMaximum": 4102444800000},
        1_700_000_000_000, "owned_ts"),
    ContractField(
        "broker_assignments", HEARTBEAT, "object", "no",
        "RocketMQ members a broker allocates for (5.x `clientRebalance=false`): what each broker "
        "answers the client's QUERY_ASSIGNMENT, `{\"broker-a\": {\"T\": [[\"broker-a\", 0], "
        "...], \"%RETRY%g\": null}, ...}`. `null` is a broker that gives the client no "
        "assignment of that topic (it does not know the topic or the group, or does not run the "
        "strategy); a broker left out did not answer. Feeds `broker_split_view`",
        {"type": "object", "additionalProperties": {
            "type": "object",
            "additionalProperties": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/queues"}]}}},
        {"broker-a": {"T-sample": [["broker-a", 0]]}}, "broker_assignments"),
    ContractField("generation", HEARTBEAT, "integer >= -1", "no", "Kafka generation of `owned`",
                  {"type": "integer", "minimum": -1}, 7, "generation",
                  extra={"system": "kafka", "strategy": "range"}),
    ContractField("group_instance_id", HEARTBEAT, "string", "no", "Kafka static membership id",
                  NAME, "pod-1", "group_instance_id"),
    ContractField(
        "group_type", HEARTBEAT, "string", "no (`classic`)",
        "Kafka: `classic` (the group's leader assigns), `consumer` (KIP-848: the broker "
        "assigns), `share` (KIP-932: members share partitions by design; never a double "
        "assignment) or `streams` (KIP-1071: the broker assigns a Kafka Streams application's "
        "tasks; a task is a partition of its subtopology's task space, the topic "
        "`subtopology <id>`, and `owned` and `target` are the member's active tasks). For the "
        "three the broker assigns, `strategy` is the broker's assignor (`uniform`, `range`, "
        "`simple`, streams' `sticky` or a plugged-in one: any name)",
        {"enum": list(KAFKA_GROUP_TYPES), "default": "classic",
         "description": "Kafka. consumer (KIP-848), share (KIP-932) and streams (KIP-1071) "
                        "groups are assigned by the broker; their strategy is the broker's "
                        "assignor, any name."},
        "consumer", "protocol", extra={"system": "kafka", "strategy": "range"}),
    ContractField(
        "target", HEARTBEAT, "list", "no",
        "Kafka `consumer` and `streams` groups: the member's target assignment from the "
        "broker, `[[\"topic\", partition], ...]`. `owned` is then the member's current "
        "assignment",
        {"type": "array", "description": "Kafka, broker-assigned groups: the member's target "
                                         "assignment, [topic, partition] items.",
         "items": {"type": "array", "minItems": 2, "maxItems": 2}},
        [["T-sample", 0]], "protocol",
        extra={"system": "kafka", "strategy": "uniform", "group_type": "consumer"}),
    ContractField(
        "group_state", HEARTBEAT, "string", "no",
        "Kafka `streams` groups: the group's state as the broker describes it (`Stable`, "
        "`Reconciling`, `Assigning`, `Empty`, or `NotReady`: no configured topology, its source "
        "or internal topics missing or wrongly partitioned, so no task is assigned and the "
        "application processes nothing: `streams_not_ready`)", NAME, "NotReady", "protocol",
        extra={"system": "kafka", "strategy": "sticky", "group_type": "streams"}),
    *(ContractField(
        name, HEARTBEAT, "list", "no",
        f"Kafka `streams` groups: the member's current {what} tasks, `[[\"subtopology 0\", 3], "
        f"...]` as in `owned`. {why}",
        {"type": "array", "description": f"Kafka, streams groups: the member's {what} tasks, "
                                         "[task space, partition] items.",
         "items": {"type": "array", "minItems": 2, "maxItems": 2}},
        [["subtopology 0", 1]], "protocol",
        extra={"system": "kafka", "strategy": "sticky", "group_type": "streams"})
      for name, what, why in (
          ("standby", "standby", "A standby keeps a copy of the task's state to take it over; "
           "never on the process of the task's active owner (`standby_with_active`)"),
          ("warmup", "warm-up", "A warm-up is a standby catching up to become the active "
           "owner"))),
    ContractField(
        "standby_replicas", HEARTBEAT, "object", "no",
        "Kafka `streams` groups: the standby copies the group wants of each task, by task "
        "space: its `streams.num.standby.replicas` for a subtopology with state, 0 for one "
        "without, `{\"subtopology 0\": 0, \"subtopology 1\": 1}`. A task kept on fewer "
        "processes is `standby_missing`. Left out when the observer could not read the "
        "group's configs: nothing is then judged",
        {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0,
                                                    "maximum": 2147483647}},
        {"subtopology 1": 1}, "protocol",
        extra={"system": "kafka", "strategy": "sticky", "group_type": "streams"}),
    ContractField(
        "process_id", HEARTBEAT, "string", "no",
        "Kafka `streams` groups: the member's Kafka Streams instance (its process UUID). A "
        "member is one stream thread; the threads of one instance share its state stores",
        NAME, "4c2a8c4e-9f0b-4e55-a3f8-1d3f0e2b7a10", "protocol",
        extra={"system": "kafka", "strategy": "sticky", "group_type": "streams"}),
    *(ContractField(
        name, HEARTBEAT, "integer >= -1", "no",
        f"Kafka groups the broker assigns: the {whose} epoch. A member below the target "
        "assignment's epoch has not caught up", EPOCH, 3, "protocol",
        extra={"system": "kafka", "strategy": "uniform", "group_type": "consumer"})
      for name, whose in (("member_epoch", "member's"), ("group_epoch", "group's"),
                          ("assignment_epoch", "target assignment's"))),
    *(ContractField(name, HEARTBEAT, kind, "no", doc, {"type": kind}, sample, "strategy_basis")
      for name, kind, doc, sample in (
          ("strategy_assumed", "boolean", "the client does not say its strategy and its holdings "
           "do not tell it: `strategy` is a guess (observe-rocketmq: `--default-strategy`). The "
           "job re-runs the client with it but raises nothing that rests on it: no "
           "`allocation_mismatch` or `strategy_inconsistent` for the client, and no double or "
           "orphan from its re-run share; the member is shown `strategy_unknown`", True),
          ("strategy_inferred", "string", "the client does not say its strategy and this one "
           "alone gives what it holds (`AVG`, `AVG_BY_CIRCLE`, `CONSISTENT_HASH`), so "
           "`strategy` is its SDK's version of it; shown on the member as `inferred`",
           "CONSISTENT_HASH"),
          ("strategy_named", "boolean", "the client does not say its strategy and the operator "
           "named it for the client's SDK (observe-rocketmq `--sdk-strategy`); shown on the "
           "member as `named`", True))),
    *(ContractField(name, HEARTBEAT, kind, "no", doc, {"type": kind}, sample, read=False)
      for name, kind, doc, sample in (
          ("shared_reason", "string", "observe-rocketmq: why a member is `shared` (`pop`, "
           "`grpc_proxy`, `lite`: a RocketMQ 5.5 LitePushConsumer); for people, not read by "
           "the job", "pop"),
          ("owned_unknown", "boolean", "observe-rocketmq: the process's holdings could not be "
           "asked (a second process of one clientId); for people, not read by the job", True),
          ("assigned_by", "string", "observe-rocketmq: a broker allocates for the client "
           "(`broker`); for people, not read by the job", "broker"))),
    ContractField(
        "strategy_candidates", HEARTBEAT, "list of strings", "no",
        "with `strategy_assumed`, the strategies that give what the client holds (several: "
        "they cannot be told apart; none: it is between two views, or runs settings the "
        "producer does not know); shown in the member's `strategy_unknown` finding", NAMES,
        ["AVG", "AVG_BY_CIRCLE"], "strategy_candidates", extra={"strategy_assumed": True}),
    # alive.
    ContractField(
        "members", ALIVE, "list", "yes",
        "`[[\"client_id\", \"address\"], ...]` (`address` null or left out for a member "
        "without one): members whose last full heartbeat (through `broker`, when given) still "
        "holds, now. Each is taken as that heartbeat again at this `ts`. A member the job does "
        "not know is counted (`rebalance_alive_unknown_members_total`) and otherwise ignored: "
        "send a member's full heartbeat first, and again whenever a fact changes",
        {"type": "array", "items": {"type": "array", "minItems": 1, "maxItems": 2,
                                    "prefixItems": [{"$ref": "#/$defs/name"},
                                                    {"oneOf": [{"type": "null"},
                                                               {"$ref": "#/$defs/name"}]}]}},
        [["c-sample", "10.0.0.7:52114"], ["c-other"]], "members"),
    # route.
    ContractField("topic", ROUTE, "string", "yes", "the topic whose readable queues this is",
                  NAME, "T-sample", "topic", extra={"brokers": {"b": 1}}),
    ContractField(
        "groups", ROUTE, "list of strings", "instead of `group`",
        "the groups the route is for: the event is fanned out to each (duplicates removed)",
        NAMES, ["g-sample", "g-other"], "group", extra={"brokers": {"b": 1}}),
    ContractField(
        "queues", ROUTE, "list", QUEUE_SET,
        "`[[\"broker\", id], ...]`, the topic's complete readable queue set (an empty list is "
        "valid: every broker of the topic is down)", {"$ref": "#/$defs/queues"},
        [["broker-a", 3]], "queues"),
    ContractField(
        "brokers", ROUTE, "object", QUEUE_SET,
        "`{\"broker-a\": 8, ...}` = queue ids 0..n-1 on each broker",
        {"type": "object",
         "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 65536}},
        {"broker-a": 2}, "queues"),
    ContractField(
        "partitions", ROUTE, "integer", QUEUE_SET,
        "Kafka (`\"system\": \"kafka\"`): the topic's partition count",
        {"type": "integer", "minimum": 0, "maximum": 1000000}, 3, "queues",
        extra={"system": "kafka"}),
)

# The members every event may have, in the order this project's producers write them first.
LEADING = ("v", "type", "ts", "group", "system", "cluster")
COMMON = frozenset(LEADING)
# An event that starts with them as they are written here is routed by them, without a full
# parse (streaming/spark/parse.py); its later members must not say otherwise (docs/events.md,
# repeated_envelope). Each value is plain: an integer as JSON writes it, or a string with no
# quote or backslash; system and cluster may be left out. Java's regex and Python's re read
# the pattern alike; group i + 1 is LEADING[i]'s value.
LEADING_INTEGERS = {"v": "1", "ts": "-?[1-9][0-9]{0,17}|0"}
LEADING_STRINGS = {"type": "[a-z_]+", "group": r'[^"\\]*', "system": "[a-z]+",
                   "cluster": r'[^"\\]*'}
LEADING_OPTIONAL = ("system", "cluster")


def _leading_member(name: str) -> str:
    if name in LEADING_INTEGERS:
        return f'"{name}":({LEADING_INTEGERS[name]})'
    return f'"{name}":"({LEADING_STRINGS[name]})"'


LEADING_PATTERN = ("^\\{" + ",".join(_leading_member(name) for name in LEADING
                                     if name not in LEADING_OPTIONAL)
                   + "".join(f"(?:,{_leading_member(name)})?" for name in LEADING_OPTIONAL)
                   + "[,}]")
LEADING_RE = re.compile(LEADING_PATTERN.encode())      # Python's, on a record's bytes
BY_NAME: dict[str, ContractField] = {f.name: f for f in FIELDS}


def names_for(event_type: EventType) -> frozenset[str]:
    """Every field an event of this type may carry."""
    return frozenset(f.name for f in FIELDS if event_type in f.types)


# What the schema says beyond single fields: the shared definitions and each type's rules.
_DEFS: dict[str, JsonValue] = {
    "name": {"type": "string", "minLength": 1, "pattern": "^[^\\u0000-\\u001f\\u007f]+$"},
    "queueId": {"type": "integer", "minimum": 0, "maximum": 2147483647},
    "queue": {"type": "array", "prefixItems": [{"$ref": "#/$defs/name"},
                                               {"$ref": "#/$defs/queueId"}],
              "minItems": 2, "maxItems": 2},
    "queues": {"type": "array", "items": {"$ref": "#/$defs/queue"}},
}
_ROUTE_RULES: dict[str, JsonValue] = {
    "anyOf": [{"required": ["group"]}, {"required": ["groups"]}],
    # At least one queue set; with several, the parser takes a Kafka route's partitions, then
    # queues, then brokers. A RocketMQ route's partitions are not a queue set.
    "allOf": [{"anyOf": [{"required": ["queues"]}, {"required": ["brokers"]},
                         {"required": ["partitions", "system"],
                          "properties": {"system": {"const": "kafka"}}}]}],
}
_DESCRIPTION = (
    "One JSON object per Kafka message; the message key is the group name. docs/events.md "
    "explains every field. Unknown fields are ignored. Written from "
    "streaming/core/state/fields.py by scripts/sync_event_contract.py; the parser "
    "(streaming/core/state/events.py) is the authority and reads the same fields (it also "
    "checks the 1 MiB size limit and each strategy's name).")


def _required(event_type: EventType) -> list[str]:
    own = [f.name for f in FIELDS
           if event_type in f.types and f.name not in COMMON and f.required == "yes"]
    return own if event_type == "route" else ["group", *own]


def schema_document() -> dict[str, JsonValue]:
    """event.schema.json, as the table gives it."""
    cases: list[JsonValue] = []
    for event_type in EVENT_TYPES:
        then: dict[str, JsonValue] = {
            "required": list(_required(event_type)),
            "properties": {f.name: dict(f.schema) for f in FIELDS
                           if event_type in f.types and f.name not in COMMON}}
        if event_type == "route":
            then.update(_ROUTE_RULES)
        cases.append({"if": {"properties": {"type": {"const": event_type}}}, "then": then})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://rebalance-monitor/event.schema.json",
        "title": "rebalance-monitor event, contract v1",
        "description": _DESCRIPTION,
        "type": "object",
        "required": [f.name for f in FIELDS if f.name in COMMON and f.required == "yes"],
        "properties": {f.name: dict(f.schema) for f in FIELDS if f.name in COMMON},
        "allOf": cases,
        "$defs": _DEFS,
    }


def docs_table(section: str) -> str:
    """The docs' field table of a section: `common` (every event), or an event type's own."""
    rows = [f for f in FIELDS if (f.name in COMMON) == (section == "common")
            and (section == "common" or section in f.types)]
    lines = ["| field | type | required | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{f.name}` | {f.json_type} | {f.required} | {f.doc} |" for f in rows]
    return "\n".join(lines)


DOCS_SECTIONS = ("common", *EVENT_TYPES)
