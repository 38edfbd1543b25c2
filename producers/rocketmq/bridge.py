"""What one poll of a RocketMQ cluster learned, turned into the monitor's events. Pure: no I/O.

Member identity. A RocketMQ client opens one connection to each broker, each from its own port,
so the broker-side `clientAddr` belongs to a connection, not to a process. The bridge gives each
process one address that is the same on every broker:

    address = "<connection host>#<k>"

where k numbers the connections that one broker holds for one clientId from one host (0, 1, ...,
in port order). A process therefore counts once however many brokers list it, and two processes
that share a clientId on one host (containers with the same IP@PID, two JVMs with the same
instance name) are #0 and #1: two members, a client-id collision. Which of two such processes is
#0 may differ between brokers; it does not matter, since processes sharing a clientId are
allocated the same queues.

Holdings. A broker forwards GET_CONSUMER_RUNNING_INFO to the first channel it has for a clientId,
so only that process's holdings can be asked. The bridge gives them to #0; #1 and later carry no
`owned` (the monitor uses its re-run) and say `"owned_unknown": true`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from producers import events
from producers.rocketmq import inference
from streaming.core.allocation import STRATEGIES as ALGORITHMS

SYSTEM = "rocketmq"
# Simple class names of the upstream strategies (org.apache.rocketmq.client.consumer.rebalance).
STRATEGIES = {
    "AllocateMessageQueueAveragely": "AVG",
    "AllocateMessageQueueAveragelyByCircle": "AVG_BY_CIRCLE",
    "AllocateMessageQueueConsistentHash": "CONSISTENT_HASH",
    "AllocateMessageQueueByMachineRoom": "MACHINE_ROOM",
    "AllocateMachineRoomNearby": "MACHINE_ROOM_NEARBY",
    "AllocateMessageQueueByConfig": "CONFIG",
}


# The message model a 5.5 proxy lists a lite group's clients with: no queue of the parent topic
# is theirs; the broker dispatches each lite topic's messages to its subscribers, as POP does.
LITE_MODEL = "LITE_SELECTIVE"


@dataclass(frozen=True)
class Listing:
    """One connection a broker lists for a group (GET_CONSUMER_CONNECTION_LIST)."""

    group: str
    broker: str
    client_id: str
    client_addr: str
    topics: tuple[str, ...]          # the broker's subscription table for the group
    message_model: str = "CLUSTERING"
    consume_type: str = "CONSUME_PASSIVELY"
    language: str = "JAVA"           # the client's SDK (LanguageCode: JAVA, GO, CPP, ...)
    via_proxy: bool = False          # listed by a 5.x proxy: a gRPC client, which no broker lists

    @property
    def lite(self) -> bool:
        """A LitePushConsumer (RocketMQ 5.5 Lite mode, RIP-83), which only a proxy lists."""
        return self.message_model == LITE_MODEL


@dataclass(frozen=True)
class AssumedStrategies:
    """The strategy of a client that reports none (every non-Java SDK), by its language; the
    operator names the ones that are not the SDK's default (`--sdk-strategy GO=CONSISTENT_HASH`).

    A Go client is re-run with the Go client's own algorithm (GO_*), which for CONSISTENT_HASH and
    MACHINE_ROOM is not Java's; an SDK without a port of its own is re-run as Java allocates.
    """

    default: str = "AVG"
    by_language: Mapping[str, str] = field(default_factory=dict)
    virtual_nodes: int = 10          # Go's AllocateByConsistentHash has no default: say it

    def for_language(self, language: str) -> tuple[str, dict]:
        """(strategy name, strategy_params) to assume for a client of this SDK."""
        chosen = self.by_language.get(language.upper(), self.default)
        return sdk_strategy(chosen, language, self.virtual_nodes)

    def named(self, language: str) -> bool:
        """The operator named this SDK's strategy: it is not inferred."""
        return language.upper() in self.by_language

    def candidates(self, language: str) -> dict[str, tuple[str, dict]]:
        """What an inference tries for a client of this SDK: name -> (strategy, params)."""
        return {name: sdk_strategy(name, language, self.virtual_nodes)
                for name in inference.INFERABLE}


def sdk_strategy(strategy: str, language: str, virtual_nodes: int = 10) -> tuple[str, dict]:
    """The name the monitor re-runs `strategy` of this SDK with, and its params."""
    go_name = f"GO_{strategy}"
    if language.upper() != "GO" or go_name not in ALGORITHMS:
        return strategy, {}
    return go_name, {"virtual_nodes": virtual_nodes} if strategy == "CONSISTENT_HASH" else {}


@dataclass(frozen=True)
class Holdings:
    """What a client reported of itself (GET_CONSUMER_RUNNING_INFO)."""

    owned: tuple[tuple[str, str, int], ...]
    topics: tuple[str, ...]
    strategy_class: str | None = None
    client_rebalance: bool = True
    pop_topics: tuple[str, ...] = ()
    popping: tuple[tuple[str, str, int], ...] = ()   # POP queues; id -1: any of the broker's
    # clientRebalance=false: broker -> topic -> what it assigns the client (None: nothing, the
    # client keeps what it had); a broker that did not answer is left out.
    broker_answers: Mapping[str, Mapping[str, tuple[tuple[str, int], ...] | None]] | None = None


@dataclass(frozen=True)
class Member:
    """A process of a group as one broker sees it, with its stable address."""

    group: str
    broker: str
    client_id: str
    address: str
    rank: int
    listing: Listing


@dataclass(frozen=True)
class PollResult:
    """Everything one poll learned. `listed` holds the (broker, group) listings that answered:
    a member missing from a broker that did not answer is unknown there, not gone."""

    ts_ms: int
    listings: tuple[Listing, ...]
    listed: frozenset[tuple[str, str]]               # (broker, group) listings that answered
    holdings: Mapping[tuple[str, str], Holdings]     # (group, client_id) -> latest known
    routes: Mapping[str, Mapping[str, int] | None]   # topic -> readable queues per broker; None: no route
    pop: frozenset[tuple[str, str]] = frozenset()    # (topic, group) served in POP mode
    holdings_ms: Mapping[tuple[str, str], int] = field(default_factory=dict)  # when asked
    lite_topics: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    @cached_property
    def client_lists(self) -> Mapping[tuple[str, str], tuple[str, ...]]:
        """(group, broker) -> the client ids that broker lists for the group (one per
        connection: a shared id twice), as a client asking it for the group's clients gets."""
        lists: dict[tuple[str, str], list[str]] = defaultdict(list)
        for listing in self.listings:
            lists[(listing.group, listing.broker)].append(listing.client_id)
        return {key: tuple(ids) for key, ids in lists.items()}


def members_of(listings: Iterable[Listing]) -> list[Member]:
    """Each listing with its process's stable address (see the module docstring)."""
    by_connection_key: dict[tuple, list[Listing]] = defaultdict(list)
    for listing in listings:
        host, _, _ = listing.client_addr.rpartition(":")
        by_connection_key[(listing.group, listing.broker, listing.client_id, host)].append(listing)
    members = []
    for (group, broker, client_id, host), same in sorted(by_connection_key.items()):
        for rank, listing in enumerate(sorted(same, key=lambda item: _port(item.client_addr))):
            members.append(Member(group, broker, client_id, f"{host}#{rank}", rank, listing))
    return members


def strategy_name(strategy_class: str | None) -> str | None:
    return STRATEGIES.get(strategy_class or "")


def heartbeat(member: Member, result: PollResult, assumed: AssumedStrategies,
              inferred: Mapping[tuple[str, str], str] | None = None) -> dict:
    """The member's heartbeat. `inferred`: (group, client_id) -> the strategy last inferred for
    a client that reports none (inference.py), kept while its holdings allow it."""
    listing = member.listing
    known = result.holdings.get((member.group, member.client_id))
    topics = known.topics if known is not None and known.topics else listing.topics
    reported = strategy_name(known.strategy_class) if known is not None else None
    shared = _shared_reason(member, known, result)
    marks: dict = {}
    if reported:
        strategy, params = sdk_strategy(reported, listing.language)
    else:
        previous = inferred.get((member.group, member.client_id)) if inferred else None
        strategy, params, marks = _unreported_strategy(member, known, result, assumed,
                                                       previous, shared is not None)
    event = events.heartbeat(result.ts_ms, member.group, member.client_id, sorted(topics),
                             strategy, system=SYSTEM, address=member.address,
                             broker=member.broker,
                             message_model="CLUSTERING" if listing.lite else listing.message_model,
                             sdk=listing.language.lower())
    if listing.lite and (member.group, member.client_id) in result.lite_topics:
        event["lite_topics"] = list(result.lite_topics[(member.group, member.client_id)])
    if listing.via_proxy:
        return _grpc_heartbeat(event, "lite" if listing.lite else "grpc_proxy")
    if params:
        event["strategy_params"] = params
    event.update(marks)
    if shared:
        event["shared"] = True
        event["shared_reason"] = shared
    elif known is not None and not known.client_rebalance:
        # 5.x clientRebalance=false: a broker allocates for the client (QUERY_ASSIGNMENT) with
        # the client's strategy over that broker's client list. The queues stay exclusive, so the
        # group is checked like any other; brokers whose lists differ show as broker_view_divergent,
        # and the queues their answers give to different clients as broker_split_view.
        event["assigned_by"] = "broker"
        if known.broker_answers is not None and member.rank == 0:
            event["broker_assignments"] = {
                broker: {t: None if q is None else [list(queue) for queue in q]
                         for t, q in sorted(by_topic.items())}
                for broker, by_topic in sorted(known.broker_answers.items())}
    if known is not None and member.rank == 0:
        event["owned"] = [list(queue) for queue in
                          sorted({*known.owned, *_popped(known.popping, result.routes)})]
        asked_ms = result.holdings_ms.get((member.group, member.client_id))
        if asked_ms:
            event["owned_ts"] = asked_ms
    elif member.rank > 0:
        event["owned_unknown"] = True
    return event


def _unreported_strategy(member: Member, known: Holdings | None, result: PollResult,
                         assumed: AssumedStrategies, previous: str | None,
                         shared: bool) -> tuple[str, dict, dict]:
    """(strategy, params, the event's marks) of a client that reports no strategy: the
    operator's for its SDK (named), else the one its holdings give (inference.py), else
    assumed: a guess, on which the job raises nothing. A shared reader (POP) allocates nothing
    to infer from."""
    language = member.listing.language
    if assumed.named(language):
        return (*assumed.for_language(language), {"strategy_named": True})
    if known is None or member.listing.via_proxy or shared:
        return (*assumed.for_language(language), {"strategy_assumed": True})
    matching = inference.matching_strategies(
        member.client_id, known.owned, known.topics or member.listing.topics, result.routes,
        result.client_lists.get((member.group, member.broker), ()),
        assumed.candidates(language))
    name = inference.chosen(matching, previous)
    if name is not None:
        return (*sdk_strategy(name, language, assumed.virtual_nodes),
                {"strategy_inferred": name})
    marks: dict = {"strategy_assumed": True}
    if matching is not None:
        marks["strategy_candidates"] = list(matching)
    return (*assumed.for_language(language), marks)


def _grpc_heartbeat(event: dict, reason: str) -> dict:
    """A gRPC client (rocketmq-clients 5.x) through a proxy: the proxy pops messages for it from
    every queue (a lite consumer: from the lite topics it subscribes), so it owns none; what it
    reads is not asked (the proxy answers running info with "not supported"). Not a broker's
    listing either: brokers do not list it."""
    del event["broker"], event["strategy"]
    return {**event, "strategy": "AVG", "strategy_assumed": True, "shared": True,
            "shared_reason": reason, "owned_unknown": True}


def route_events(result: PollResult, members: Iterable[Member]) -> list[dict]:
    groups_by_topic: dict[str, set[str]] = defaultdict(set)
    for member in members:
        known = result.holdings.get((member.group, member.client_id))
        for topic in (known.topics if known is not None and known.topics else member.listing.topics):
            groups_by_topic[topic].add(member.group)
    found = []
    for topic, groups in sorted(groups_by_topic.items()):
        if topic not in result.routes:
            continue  # not asked (or the NameServer did not answer): no news of it
        readable = result.routes[topic]
        queues = {"brokers": dict(sorted(readable.items()))} if readable else {
            "queues": []}  # no route: its clients have no queue of it
        found.append(events.route(result.ts_ms, topic, system=SYSTEM, groups=sorted(groups),
                                  **queues))
    return found


def unsettled_groups(members: Iterable[Member], holdings: Mapping[tuple[str, str], Holdings],
                     routes: Mapping[str, Mapping[str, int] | None]) -> frozenset[str]:
    """Clustering groups whose clients' last reported holdings do not hold each readable queue
    of their topics exactly once: a client asked in the middle of a rebalance, or a real fault.
    A group with a client not (yet) asked, or with a shared reader (POP, lite), is left out; a
    clientRebalance=false client's queues are exclusive too (the broker allocates them)."""
    by_group: dict[str, dict[str, Member]] = defaultdict(dict)
    for member in members:
        by_group[member.group].setdefault(member.client_id, member)
    return frozenset(group for group, clients in by_group.items()
                     if _misheld([holdings.get((group, c)) for c in clients],
                                 [m.listing for m in clients.values()], routes))


def _misheld(known: list[Holdings | None], listings: list[Listing],
             routes: Mapping[str, Mapping[str, int] | None]) -> bool:
    reported = [h for h in known if h is not None and not h.pop_topics]
    if len(reported) < len(known) or any(
            listing.message_model != "CLUSTERING" or listing.consume_type == "CONSUME_POP"
            for listing in listings):
        return False
    held: dict[tuple[str, str, int], int] = defaultdict(int)
    for holding in reported:
        for queue in holding.owned:
            held[queue] += 1
    if any(count > 1 for count in held.values()):
        return True
    topics = {topic for holding in reported for topic in holding.topics}
    return any((topic, broker, queue) not in held
               for topic in topics for broker, count in (routes.get(topic) or {}).items()
               for queue in range(count))


def unregisters(gone: Iterable[tuple[str, str, str]], ts_ms: int) -> list[dict]:
    """(group, client_id, address) of processes no broker lists any more."""
    return [events.unregister(ts_ms, group, client_id, system=SYSTEM, address=address)
            for group, client_id, address in sorted(gone)]


def _shared_reason(member: Member, known: Holdings | None, result: PollResult) -> str | None:
    """Consumption that is not client-side allocation: never a conflict."""
    if member.listing.consume_type == "CONSUME_POP":
        return "pop"
    if any((topic, member.group) in result.pop for topic in member.listing.topics):
        return "pop"
    if known is not None and known.pop_topics:
        return "pop"
    return None


def _popped(popping, routes) -> list[tuple[str, str, int]]:
    """POP queues as the queues they read: a broker-wide entry (id -1) is every readable queue of
    that broker in the topic's route (none while the route is not known)."""
    out = []
    for topic, broker, queue_id in popping:
        if queue_id >= 0:
            out.append((topic, broker, queue_id))
        else:
            out += [(topic, broker, q) for q in range((routes.get(topic) or {}).get(broker, 0))]
    return out


def _port(client_addr: str) -> int:
    _, _, port = client_addr.rpartition(":")
    return int(port) if port.isdigit() else 0
