"""One poll of a RocketMQ cluster, as the bridge asks it, with what it costs the cluster bounded.

    observer = RocketMQObserver(admin, ObserverOptions(), CallStats())  # producers.health
    events = observer.poll()        # heartbeats, routes and unregisters worth sending now
    observer.namesrv_answered       # False: the poll went on with the brokers last named

Per poll: cluster info (106) from a NameServer; each master's subscription groups (201); each
group's connections on each master (203); each master's POP table (402, 5.x); running info (307)
of at most `running_info_budget` clients, chosen by need; each subscribed topic's route (105).
A failed call is counted by request and cause and the poll goes on with what it has.

What is sent: a change at once; an unchanged route only every `keepalive_s`; an unchanged
member's keep-alive in one `alive` per group and broker (producers.restate), and in full every
`restate_s`, so a large quiet cluster costs the events topic a few events per group. A process
gets an `unregister` when no broker lists it any more, and only if every broker that listed it
before answered this poll.
"""

from __future__ import annotations

import logging
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from producers.health import CallStats
from producers.restate import Restatements, facts_of
from producers.rocketmq.admin import AdminError, MalformedBody, RocketMQAdmin
from producers.rocketmq.bridge import (
    AssumedStrategies,
    Holdings,
    Listing,
    Member,
    PollResult,
    heartbeat,
    members_of,
    route_events,
    strategy_name,
    unregisters,
    unsettled_groups,
)
from producers.rocketmq.connections import ConnectionLiveness
from producers.rocketmq.frames import CONSUMER_NOT_ONLINE, TOPIC_NOT_EXIST
from producers.rocketmq.remoting import RemotingError

log = logging.getLogger(__name__)

# MixAll's own groups (tools, self-test, ONS proxies) and 5.x's CID_RMQ_SYS_*: not applications.
SYSTEM_GROUPS = re.compile(
    r"^(TOOLS_CONSUMER|FILTERSRV_CONSUMER|SELF_TEST_C_GROUP|__MONITOR_CONSUMER|DEFAULT_CONSUMER"
    r"|CID_ONS-HTTP-PROXY|CID_ONSAPI_\w+|CID_RMQ_SYS_.*|CID_SYS_RMQ_TRANS|CID_HEARTBEAT_SYNCER.*)$")
CALL_ERRORS = (RemotingError, AdminError, MalformedBody)


# RemotingSendRequestException's text, as a broker relays it (RocketMQ 5.x quotes the channel).
DEAD_CONNECTION = re.compile(r"send request to <[^>]*?/(?P<address>[^/>]+:\d+)> failed")


def proxy_name(address: str) -> str:
    return f"proxy@{address}"


@dataclass(frozen=True)
class ObserverOptions:
    include: re.Pattern | None = None
    exclude: re.Pattern | None = None
    exclude_system_groups: bool = True
    strategies: AssumedStrategies = AssumedStrategies()
    proxies: tuple[str, ...] = ()        # 5.x proxies' remoting addresses: they list gRPC clients
    running_info_budget: int = 50        # clients asked per poll at most
    running_info_refresh_s: float = 120.0
    # After a membership change, clients rebalance at once and again within 20 s
    # (rebalanceInterval): ask their holdings every poll for this long.
    settle_s: float = 45.0
    # After a route change of a topic (a scale-out, a broker joining or lost), clients learn it
    # within 30 s (pollNameServerInterval) and move at their next rebalance (20 s): ask the
    # clients of the topic every poll for this long.
    route_settle_s: float = 80.0
    # A group whose clients' reported holdings do not hold each queue once: ask again after
    # the clients' next rebalance (20 s) until they do, so that holdings caught in the middle
    # of one are not shown until the refresh.
    unsettled_refresh_s: float = 20.0
    keepalive_s: float = 30.0
    restate_s: float = 600.0
    concurrency: int = 8

    def __post_init__(self) -> None:
        if (self.running_info_budget < 0 or self.keepalive_s <= 0 or self.restate_s < 0
                or self.concurrency < 1):
            raise ValueError("budget >= 0, keepalive_s > 0, restate_s >= 0 and concurrency >= 1 "
                             "are required")

    def wants(self, group: str) -> bool:
        if self.exclude_system_groups and SYSTEM_GROUPS.match(group):
            return False
        if self.include is not None and not self.include.search(group):
            return False
        return not (self.exclude is not None and self.exclude.search(group))


@dataclass
class _Asked:
    holdings: Holdings | None   # None: no answer since the holdings it gave grew stale
    at: float
    signature: frozenset
    at_ms: int = 0           # wall time of the request: the holdings are at least this fresh


class RocketMQObserver:
    def __init__(self, admin: RocketMQAdmin, options: ObserverOptions, stats: CallStats,
                 clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self._admin = admin
        self._options = options
        self.stats = stats
        self._clock = clock
        self._wall_ms = wall_ms
        self._pool = ThreadPoolExecutor(options.concurrency, thread_name_prefix="rocketmq-call")
        self._masters: dict[str, str] = {}
        self._broker_groups: dict[str, set[str]] = {}
        self._asked: dict[tuple[str, str], _Asked] = {}
        self._signatures: dict[str, frozenset] = {}
        self._changed_at: dict[str, float] = {}
        self._unsettled: frozenset[str] = frozenset()   # as of the last poll's holdings
        self._routes_seen: dict[str, dict[str, int] | None] = {}
        self._connections = ConnectionLiveness()
        self._route_changed_at: dict[str, float] = {}
        self._route_changed_ms: dict[str, int] = {}
        self._present: dict[tuple[str, str, str], set[str]] = {}
        self._sent: dict[tuple, tuple[str, float]] = {}        # routes
        self._restate = Restatements(options.keepalive_s, options.restate_s)
        self.groups_seen = 0
        self.members_seen = 0
        self.namesrv_answered = False  # in the last poll
        self._inferred: dict[tuple[str, str], str] = {}   # (group, client_id) -> its strategy
        # (group, client_id) of a 5.5 lite consumer -> (its lite topics, when asked)
        self._lite: dict[tuple[str, str], tuple[tuple[str, ...], float]] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def poll(self) -> list[dict]:
        now, ts_ms = self._clock(), self._wall_ms()
        masters = self._cluster()
        groups = self._groups(masters)
        listings, listed = self._listings(masters, groups)
        pop = self._pop(masters)
        members = members_of(listings)
        self._note_membership(members, listed, now)
        holdings = self._holdings(members, masters, now)
        topics = {t for m in members for t in self._topics_of(m, holdings)}
        routes = self._routes(topics)
        self._note_routes(routes, now, ts_ms)
        self._unsettled = unsettled_groups(members, holdings, routes)
        result = PollResult(ts_ms, tuple(listings), frozenset(listed), holdings, routes,
                            frozenset(pop), self._holdings_ms(),
                            self._lite_topics(members, masters, routes, now))
        self.groups_seen, self.members_seen = len(groups), len({(m.group, m.client_id, m.address)
                                                                for m in members})
        events = [heartbeat(m, result, self._options.strategies, self._inferred)
                  for m in members]
        self._inferred = {(e["group"], e["client_id"]): e["strategy_inferred"] for e in events
                          if "strategy_inferred" in e}
        events = self._restate.due(events, now, ts_ms, self._facts)
        events += [e for e in route_events(result, members)
                   if self._due(("route", e["topic"]), e, now)]
        return events + unregisters(self._gone(members, listed), ts_ms)

    # -- the calls ---------------------------------------------------------------------------

    def _call(self, request: str, target: str, call: Callable, *args, tolerate=()):
        """One admin call, timed and counted; a failure is counted and yields None. A response
        code in `tolerate` is an answer (e.g. "not online"), returned as the AdminError."""
        started = self._clock()
        try:
            answer = call(*args)
        except AdminError as exc:
            if exc.code in tolerate:
                self.stats.record(request, target, "ok", self._clock() - started)
                return exc
            self.stats.record(request, target, exc.cause, self._clock() - started, exc)
            return None
        except CALL_ERRORS as exc:
            self.stats.record(request, target, exc.cause, self._clock() - started, exc)
            return None
        self.stats.record(request, target, "ok", self._clock() - started)
        return answer

    def _cluster(self) -> dict[str, str]:
        masters = self._call("cluster_info", "namesrv", self._admin.cluster_info)
        self.namesrv_answered = masters is not None
        if masters is not None:
            self._masters = masters
        return self._masters  # the NameServer silent: the brokers it last named

    def _groups(self, masters: dict[str, str]) -> set[str]:
        groups: set[str] = set()
        for broker, address in masters.items():
            answer = self._call("subscription_groups", broker, self._admin.subscription_groups,
                                address)
            if answer is not None:
                self._broker_groups[broker] = {g for g in answer if self._options.wants(g)}
            # A silent broker: its groups as it last named them, so their listings are still
            # asked (and their failures counted) and their members not taken for gone.
            groups |= self._broker_groups.get(broker, set())
        return groups

    def _listings(self, masters, groups) -> tuple[list[Listing], set[tuple[str, str]]]:
        sources = {**masters, **{proxy_name(a): a for a in self._options.proxies}}
        jobs = {(broker, group): self._pool.submit(
                    self._call, "consumer_connections", broker, self._admin.consumer_connections,
                    address, group, tolerate=(CONSUMER_NOT_ONLINE,))
                for broker, address in sources.items() for group in sorted(groups)}
        listings, listed, failed = [], set(), set()
        for (broker, group), job in jobs.items():
            answer = job.result()
            if answer is None:
                failed.add(broker)
                continue  # no answer: what this broker holds of the group is unknown
            listed.add((broker, group))
            if isinstance(answer, AdminError):
                continue  # not online on this broker
            listings += [Listing(group, broker, c.client_id, c.client_addr, answer.topics,
                                 answer.message_model, answer.consume_type, c.language,
                                 broker not in masters)
                         for c in answer.connections]
        now = self._clock()
        self._connections.answered({broker for broker, _ in jobs}, failed, now)
        return self._connections.live(listings, now), listed

    def _pop(self, masters) -> set[tuple[str, str]]:
        pairs: set[tuple[str, str]] = set()
        for broker, address in masters.items():
            pairs |= self._call("pop_groups", broker, self._admin.pop_groups, address) or set()
        return pairs

    def _holdings(self, members: list[Member], masters, now: float):
        """Ask the clients that need it most, within the budget; keep the rest as known."""
        present = {(m.group, m.client_id) for m in members}
        self._asked = {key: asked for key, asked in self._asked.items() if key in present}
        via = {}
        for member in sorted(members, key=lambda m: m.broker):
            if not member.listing.via_proxy:   # a proxy answers running info "not supported"
                via.setdefault((member.group, member.client_id), member.broker)
        chosen = sorted(via, key=lambda key: self._need(key, now))[:self._options.running_info_budget]
        chosen = [key for key in chosen if self._need(key, now)[0] < 4]
        asked_ms = self._wall_ms()
        jobs = {key: self._pool.submit(self._call, "running_info", via[key], self._running_info,
                                       via[key], masters[via[key]], *key)
                for key in chosen if via[key] in masters}
        infos = {key: info for key, job in jobs.items() if (info := job.result()) is not None}
        self._forget_stale(set(jobs) - set(infos), now)
        answers = self._broker_answers(infos, masters)
        for (group, client_id), info in infos.items():
            self._asked[(group, client_id)] = _Asked(
                Holdings(info.owned, info.topics, info.strategy_class, info.client_rebalance,
                         info.pop_topics, info.popping, answers.get((group, client_id))), now,
                self._signatures.get(group, frozenset()),
                asked_ms)
        return {key: asked.holdings for key, asked in self._asked.items()
                if asked.holdings is not None}

    def _forget_stale(self, unanswered: set[tuple[str, str]], now: float) -> None:
        """A client that did not answer keeps the holdings it last gave for a rebalance
        interval past the refresh (asked again at each poll meanwhile); older, they are no
        longer taken as what it holds (its events carry no `owned`), and it is asked again a
        rebalance interval later, and so on."""
        grace = self._options.running_info_refresh_s + self._options.unsettled_refresh_s
        for key in unanswered:
            asked = self._asked.get(key)
            if asked is None or asked.holdings is None or now - asked.at >= grace:
                self._asked[key] = _Asked(None, now, self._signatures.get(key[0], frozenset()))

    def _broker_answers(self, infos, masters) -> dict[tuple[str, str], dict]:
        """For each clientRebalance=false client just asked: what every master would assign it
        of each topic it subscribes (QUERY_ASSIGNMENT). The client itself asks one broker of the
        topic's route, picked at random, at each rebalance; brokers whose client lists or
        routes differ answer differently."""
        jobs = {(key, broker, topic): self._pool.submit(
                    self._call, "query_assignment", broker, self._assignment, address, topic,
                    *key, strategy_name(info.strategy_class) or "AVG")
                for key, info in infos.items() if not info.client_rebalance
                for broker, address in sorted(masters.items()) for topic in info.topics}
        answers: dict[tuple[str, str], dict] = {}
        for (key, broker, topic), job in jobs.items():
            by_broker = answers.setdefault(key, {})
            answered = job.result()
            if answered is not None:       # None: the call failed, what it assigns is unknown
                by_broker.setdefault(broker, {})[topic] = answered[0]
        return answers

    def _assignment(self, address: str, topic: str, group: str, client_id: str,
                    strategy: str) -> tuple:
        """(the answer,): a broker's "no assignment" (None) told apart from a failed call."""
        return (self._admin.query_assignment(address, topic, group, client_id, strategy),)

    def _running_info(self, broker: str, address: str, group: str, client_id: str):
        """The client's running info. A broker that could not reach the connection it forwarded
        to names it ("send request to <addr> failed"): that listing is left out from now on."""
        try:
            return self._admin.running_info(address, group, client_id)
        except AdminError as error:
            dead = DEAD_CONNECTION.search(error.remark or "")
            if dead:
                self._connections.unreachable(broker, group, client_id, dead["address"])
            raise

    def _lite_topics(self, members: list[Member], masters: Mapping[str, str],
                     routes: Mapping[str, Mapping[str, int] | None],
                     now: float) -> dict[tuple[str, str], tuple[str, ...]]:
        """Each lite consumer's lite topics, asked of a master of its parent topic when never
        asked or older than the refresh, within the running-info budget; kept otherwise."""
        parents = {(m.group, m.client_id): m.listing.topics for m in members if m.listing.lite}
        self._lite = {key: known for key, known in self._lite.items() if key in parents}
        due = sorted((key for key in parents if key not in self._lite
                      or now - self._lite[key][1] >= self._options.running_info_refresh_s),
                     key=lambda key: self._lite[key][1] if key in self._lite else float("-inf"))
        jobs = {}
        for key in due[:self._options.running_info_budget]:
            for parent in parents[key]:
                broker = next((b for b in sorted(routes.get(parent) or {}) if b in masters), None)
                if broker is not None:
                    jobs[(key, parent)] = self._pool.submit(
                        self._call, "lite_client_info", broker, self._admin.lite_topics,
                        masters[broker], parent, key[0], key[1])
        answers: dict[tuple[str, str], list[str]] = {}
        for ((group, client_id), _), job in jobs.items():
            answer = job.result()
            if answer is not None:
                answers.setdefault((group, client_id), []).extend(answer)
        for key, topics in answers.items():
            self._lite[key] = (tuple(sorted(set(topics))), now)
        return {key: topics for key, (topics, _) in self._lite.items()}

    def _need(self, key: tuple[str, str], now: float) -> tuple[int, float]:
        """(priority, age): 0 never asked, 1 its group's membership changed since (or is
        settling) or a route of its topics moved, 2 asked a rebalance ago and its group's holdings
        do not hold each queue once, or its own are not known, 3 older than the refresh, 4 not
        needed."""
        asked = self._asked.get(key)
        if asked is None:
            return 0, 0.0
        group = key[0]
        age = now - asked.at
        if (asked.signature != self._signatures.get(group)
                or now - self._changed_at.get(group, float("-inf")) < self._options.settle_s
                or self._route_moved(asked, now)):
            return 1, -age
        if ((group in self._unsettled or asked.holdings is None)
                and age >= self._options.unsettled_refresh_s):
            return 2, -age
        if age >= self._options.running_info_refresh_s:
            return 3, -age
        return 4, -age

    def _route_moved(self, asked: _Asked, now: float) -> bool:
        """A topic of the client's changed its route since it was asked, or lately."""
        if asked.holdings is None:
            return False
        changes = [self._route_changed_at.get(t) for t in asked.holdings.topics]
        return any(at is not None and (at >= asked.at or now - at < self._options.route_settle_s)
                   for at in changes)

    def _note_routes(self, routes: Mapping[str, dict[str, int] | None], now: float,
                     ts_ms: int) -> None:
        for topic, readable in routes.items():
            if topic in self._routes_seen and self._routes_seen[topic] != readable:
                self._route_changed_at[topic] = now
                self._route_changed_ms[topic] = ts_ms
            self._routes_seen[topic] = readable

    def _holdings_ms(self) -> dict[tuple[str, str], int]:
        return {key: asked.at_ms for key, asked in self._asked.items()
                if asked.holdings is not None}

    def _routes(self, topics: Iterable[str]) -> dict[str, dict[str, int] | None]:
        jobs = {topic: self._pool.submit(self._call, "topic_route", "namesrv",
                                         self._admin.topic_route, topic, tolerate=(TOPIC_NOT_EXIST,))
                for topic in sorted(topics)}
        routes = {}
        for topic, job in jobs.items():
            answer = job.result()
            if isinstance(answer, AdminError):
                routes[topic] = None
            elif answer is not None:
                routes[topic] = dict(answer.readable)
        return routes

    # -- what to send ------------------------------------------------------------------------

    def _note_membership(self, members: list[Member], listed, now: float) -> None:
        by_group: dict[str, set] = defaultdict(set)
        for member in members:
            by_group[member.group].add((member.client_id, member.address))
        for group in {group for _, group in listed}:
            signature = frozenset(by_group.get(group, ()))
            if self._signatures.get(group) != signature:
                self._signatures[group] = signature
                self._changed_at[group] = now

    def _topics_of(self, member: Member, holdings) -> tuple[str, ...]:
        known = holdings.get((member.group, member.client_id))
        return known.topics if known is not None and known.topics else member.listing.topics

    def _facts(self, event: dict) -> str:
        """A heartbeat's facts: holdings asked again but unchanged are no change, unless they
        are the first asked since a route change of one of the member's topics (the job waits
        for those: holdings_pending). So the facts name, per topic, the last route change the
        holdings were asked after (None: one came after them)."""
        facts = {k: v for k, v in event.items() if k not in ("ts", "owned_ts")}
        if "owned_ts" in event:
            changes = ((t, self._route_changed_ms.get(t, 0)) for t in event["topics"])
            facts["after_route_changes"] = [[t, at if at <= event["owned_ts"] else None]
                                            for t, at in changes]
        return facts_of(facts)

    def _due(self, key: tuple, event: dict, now: float) -> bool:
        """Whether to send a route now: it changed, or its keep-alive is due."""
        content = facts_of(event)
        last = self._sent.get(key)
        if last is not None and last[0] == content and now - last[1] < self._options.keepalive_s:
            return False
        self._sent[key] = (content, now)
        return True

    def _gone(self, members: list[Member], listed) -> list[tuple[str, str, str]]:
        now_present: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        for member in members:
            now_present[(member.group, member.client_id, member.address)].add(member.broker)
        gone = []
        for key, brokers in self._present.items():
            if key in now_present:
                continue
            if all((broker, key[0]) in listed for broker in brokers):
                gone.append(key)
            else:
                now_present[key] = brokers  # unknown where it was listed: keep it, say nothing
        gone_keys = set(gone)
        self._restate.forget(lambda source: source[:3] in gone_keys)
        self._present = dict(now_present)
        return gone
