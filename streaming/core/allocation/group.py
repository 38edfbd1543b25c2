"""The group-level call: every client's RocketMQ allocation for one shared view, in one pass.

Equal to calling `rocketmq.allocate` once per client (duplicates and exceptions included), but the
inputs are sorted once, `cidAll.indexOf` is one dict, and a consistent-hash ring is built once
(and reused across the topics of `allocate_group_topics`). The Go client's `GO_*` strategies
(rocketmq_go.py) get the Go client's sort and guard: no Java errors, only Go panics.

>>> g = allocate_group("AVG", {}, [("T", "b", i) for i in range(10)], ["c3", "c1", "c2"])
>>> {cid: [q[2] for q in share] for cid, share in g.results.items()}
{'c1': [0, 1, 2, 3], 'c2': [4, 5, 6], 'c3': [7, 8, 9]}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

from streaming.core.allocation.rocketmq import (
    STRATEGIES,
    AllocationError,
    ByConfig,
    Params,
    Queue,
    Strategy,
    as_queue,
    make_strategy,
    sort_client_ids,
    sort_queue_list,
)
from streaming.core.allocation.rocketmq_go import (
    GoStrategy,
    sort_client_ids_go,
    sort_queues_go,
)

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True)
class GroupAllocation:
    results: Mapping[str, list[Queue] | None]  # client id -> its share in Java's order; None on error
    errors: dict[str, str]                     # client id -> "java.lang.IllegalArgumentException: ..."


class InvalidAllocationInput(ValueError):
    """The request cannot be run at all (malformed input, not a Java exception)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _View:
    cids: list[str]         # cidAll, sorted as RebalanceImpl sorts it
    members: frozenset[str]
    requested: list[str]    # distinct ids to compute, in output order


@dataclass(frozen=True)
class _Plan:
    instance: Strategy | AllocationError  # one per distinct parameter set, or its Java error
    clients: list[str]                    # the requested ids computed with it
    all_members: bool                     # every client is a non-empty id of cidAll


def _is_java_int(value: object) -> bool:
    return type(value) is int and _INT_MIN <= value <= _INT_MAX


def queue_problem(queue: object) -> str | None:
    """Why `queue` is not a valid Queue (topic str, broker str, Java int id), or None."""
    if type(queue) is not tuple or len(queue) != 3:
        return f"a queue must be a (topic, broker, queue_id) tuple, got {queue!r}"
    topic, broker, queue_id = queue
    if type(topic) is not str or type(broker) is not str or not _is_java_int(queue_id):
        return f"a queue needs str topic, str broker and a 32-bit int queue id, got {queue!r}"
    return None


def _rooms_problem(name: str, rooms: object) -> str | None:
    if rooms is None:
        return None
    if not isinstance(rooms, Mapping):
        return f"{name} must map names to rooms"
    if any(type(k) is not str or (v is not None and type(v) is not str) for k, v in rooms.items()):
        return f"{name} must map str names to str rooms (or null)"
    return None


def is_go(strategy: object) -> bool:
    """True for a registered strategy of the Go client (sorted and guarded the Go way)."""
    return isinstance(strategy, str) and issubclass(STRATEGIES.get(strategy, Strategy), GoStrategy)


def params_problem(strategy: str, params: object) -> str | None:
    """Why (strategy, params) cannot be run, or None. Java's own exceptions are not problems."""
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        return f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}"
    if params is not None and not isinstance(params, Mapping):
        return "params must be a mapping"
    if strategy == "GO_CONSISTENT_HASH" and "virtual_nodes" not in (params or {}):
        return "GO_CONSISTENT_HASH needs virtual_nodes (Go's AllocateByConsistentHash has no default)"
    if params is None:
        return None
    if strategy in ("CONSISTENT_HASH", "GO_CONSISTENT_HASH") and not _is_java_int(
            params.get("virtual_nodes", 10)):
        return "virtual_nodes must be a 32-bit int"
    if strategy in ("MACHINE_ROOM", "GO_MACHINE_ROOM"):
        idcs = params.get("consumer_idcs", ())
        if not isinstance(idcs, list | tuple | set | frozenset) or any(
                type(i) is not str for i in idcs):
            return "consumer_idcs must be a collection of str"
    if strategy == "MACHINE_ROOM_NEARBY":
        if is_go(params.get("inner", "AVG")):
            return "MACHINE_ROOM_NEARBY is Java's: its inner strategy must be a Java one"
        problem = params_problem(params.get("inner", "AVG"), params.get("inner_params"))
        return (problem or _rooms_problem("broker_rooms", params.get("broker_rooms"))
                or _rooms_problem("client_rooms", params.get("client_rooms")))
    if strategy == "CONFIG":
        configured = params.get("queues") or ()
        try:
            queues = [as_queue(q) for q in configured]
        except (KeyError, TypeError, ValueError):
            return "queues must be (topic, broker, queue_id) items"
        return next(filter(None, map(queue_problem, queues)), None)
    return None


def sorted_valid_queues(queues: list[Queue], go: bool = False) -> list[Queue]:
    """`sort_queues` (`sort_queues_go` if `go`) after validating every queue; raises
    InvalidAllocationInput with a reason.

    The common valid case is checked with C-level passes whose results the sort reuses.
    """
    try:
        ids = list(map(itemgetter(2), queues))  # IndexError if a queue is too short
        if sum(map(len, queues)) == 3 * len(ids):  # so none is longer either
            distinct = set(queues)  # TypeError if unhashable (a list); reused to drop duplicates
            topics, brokers = set(map(itemgetter(0), queues)), set(map(itemgetter(1), queues))
            if (set(map(type, ids)) <= {int}
                    and (not ids or (min(ids) >= _INT_MIN and max(ids) <= _INT_MAX))):
                # Names that are not str raise TypeError in either sort's str.isascii.
                if go:
                    return sort_queues_go(queues)
                return sort_queue_list(queues, topics, brokers, ids, distinct)
    except (TypeError, LookupError):
        pass  # not a sequence of (str, str, int) tuples: queue_problem says which one
    raise InvalidAllocationInput(next(filter(None, map(queue_problem, queues)), "invalid queue"))


def _ids_problem(what: str, ids: Sequence[object]) -> str | None:
    if not set(map(type, ids)) <= {str}:
        return f"{what} must be str, got {next(i for i in ids if type(i) is not str)!r}"
    return None


def _plans(strategy: str, params: Params | None, requested: list[str], members: frozenset[str],
           client_params: Mapping[str, Params] | None) -> list[_Plan]:
    """One strategy instance per distinct parameter set (per-client params: CONFIG's lists)."""
    by_params: dict[int, tuple[Params | None, list[str]]] = {}
    if not client_params:
        by_params[id(None)] = (None, requested)
    for cid in requested if client_params else ():
        own = client_params.get(cid)  # type: ignore[union-attr]  # not None: the loop runs
        by_params.setdefault(id(own), (own, []))[1].append(cid)
    plans: list[_Plan] = []
    for own, clients in by_params.values():
        effective = params if own is None else {**(params or {}), **own}
        instance: Strategy | AllocationError
        try:
            instance = make_strategy(strategy, effective)
        except AllocationError as error:
            instance = error
        all_members = "" not in clients and members.issuperset(clients)
        plans.append(_Plan(instance, clients, all_members))
    return plans


def _check_all(plan: _Plan, mq_all: list[Queue], view: _View,
               results: dict[str, list[Queue] | None], errors: dict[str, str]) -> None:
    """`check` for every client of one plan, then one `shares` call for the members among them."""
    instance = plan.instance
    if isinstance(instance, AllocationError):
        errors.update(dict.fromkeys(plan.clients, str(instance)))
        return
    if isinstance(instance, ByConfig):
        results.update({cid: instance.allocate(cid, mq_all, view.cids) for cid in plan.clients})
        return
    group_failure = None
    if not mq_all:
        group_failure = "mqAll is null or mqAll empty"
    elif not view.cids:
        group_failure = "cidAll is null or cidAll empty"
    # The plan's own list when it can be passed whole: strategies cache work per list object.
    members = plan.clients if plan.all_members and not group_failure else []
    for cid in () if members else plan.clients:
        if not cid:
            errors[cid] = str(AllocationError("currentCID is empty"))
        elif group_failure:
            errors[cid] = str(AllocationError(group_failure))
        elif cid in view.members:
            members.append(cid)
        else:
            results[cid] = []
    if members:
        try:
            results.update(instance.shares(mq_all, view.cids, members))
        except AllocationError as error:
            errors.update(dict.fromkeys(members, str(error)))


def _check_all_go(plan: _Plan, mq_all: list[Queue], view: _View,
                  results: dict[str, list[Queue] | None], errors: dict[str, str]) -> None:
    """Go's guard returns nil where Java throws: an empty id or list, or a stranger, gets []."""
    runnable = bool(mq_all and view.cids)
    members = [cid for cid in plan.clients if runnable and cid and cid in view.members]
    results.update({cid: [] for cid in plan.clients})
    if members:
        # The caller found a GoStrategy.
        shares, panics = plan.instance.outcomes(mq_all, view.cids, members)  # type: ignore[union-attr]
        results.update(shares)
        errors.update(panics)


def _allocate_sorted(plans: list[_Plan], mq_all: list[Queue], view: _View) -> GroupAllocation:
    only = plans[0] if len(plans) == 1 else None
    if only is not None and only.all_members and mq_all and view.cids:
        if isinstance(only.instance, GoStrategy):
            # Go's guard lets every client through; panics are all that can set one apart.
            return GroupAllocation(*only.instance.outcomes(mq_all, view.cids, only.clients))
        if not isinstance(only.instance, ByConfig) and isinstance(only.instance, Strategy):
            # Common case: one parameter set, every requested id a member; shares() keeps order.
            try:
                return GroupAllocation(only.instance.shares(mq_all, view.cids, only.clients), {})
            except AllocationError as error:
                return GroupAllocation(dict.fromkeys(only.clients),
                                       dict.fromkeys(only.clients, str(error)))
    results: dict[str, list[Queue] | None] = dict.fromkeys(view.requested)
    errors: dict[str, str] = {}
    for plan in plans:
        if isinstance(plan.instance, GoStrategy):
            _check_all_go(plan, mq_all, view, results, errors)
        else:
            _check_all(plan, mq_all, view, results, errors)
    return GroupAllocation(results=results, errors=errors)


def _prepare(strategy: str, params: Params | None, client_ids: Iterable[str],
             for_clients: Iterable[str] | None,
             client_params: Mapping[str, Params] | None) -> tuple[list[_Plan], _View]:
    cids = list(client_ids)
    requested_raw = cids if for_clients is None else list(for_clients)
    problem = (params_problem(strategy, params) or _ids_problem("client ids", cids)
               or _ids_problem("requested client ids", requested_raw))
    if problem is None and client_params is not None:
        if not isinstance(client_params, Mapping) or not all(
                isinstance(own, Mapping) for own in client_params.values()):
            raise InvalidAllocationInput("client_params must map client ids to mappings")
        problem = next(filter(None, (params_problem(strategy, {**(params or {}), **own})
                                     for own in client_params.values())), None)
    if problem:
        raise InvalidAllocationInput(problem)
    cids_sorted = sort_client_ids_go(cids) if is_go(strategy) else sort_client_ids(cids)
    requested = list(dict.fromkeys(cids_sorted if for_clients is None else requested_raw))
    view = _View(cids=cids_sorted, members=frozenset(cids_sorted), requested=requested)
    return _plans(strategy, params, requested, view.members, client_params), view


def allocate_group(strategy: str, params: Params | None, queues: Iterable[Queue],
                   client_ids: Iterable[str], for_clients: Iterable[str] | None = None,
                   client_params: Mapping[str, Params] | None = None) -> GroupAllocation:
    """Every requested client's share of one topic's queues, as each client computes it.

    Sorts the inputs as RebalanceImpl does (a GO_ strategy: as the Go client does); `for_clients`
    defaults to every distinct id of `client_ids` and may name ids outside it (Java gives them
    []). Raises InvalidAllocationInput (with a reason) for malformed input; Java's exceptions
    (and Go's panics) land in `errors`, never raised.
    """
    mq_all = sorted_valid_queues(list(queues), is_go(strategy))
    plans, view = _prepare(strategy, params, client_ids, for_clients, client_params)
    return _allocate_sorted(plans, mq_all, view)


def allocate_group_topics(strategy: str, params: Params | None,
                          queues_by_topic: Mapping[str, Iterable[Queue]],
                          client_ids: Iterable[str], for_clients: Iterable[str] | None = None,
                          client_params: Mapping[str, Params] | None = None,
                          ) -> dict[str, GroupAllocation]:
    """`allocate_group` for each topic of a subscription, as RebalanceImpl runs topic by topic.

    The client list is sorted once and a consistent-hash ring is built once for all topics.
    >>> by_topic = {"A": [("A", "b", 0), ("A", "b", 1)], "B": [("B", "b", 0), ("B", "b", 1)]}
    >>> groups = allocate_group_topics("AVG", {}, by_topic, ["c1", "c2", "c3", "c4"])
    >>> [sum(len(groups[t].results[c]) for t in groups) for c in ("c1", "c2", "c3", "c4")]
    [2, 2, 0, 0]
    """
    sorted_by_topic = {}
    for topic, queues in queues_by_topic.items():
        mq_all = sorted_valid_queues(list(queues), is_go(strategy))
        if mq_all and (mq_all[0][0] != topic or mq_all[-1][0] != topic):  # sorted: ends suffice
            raise InvalidAllocationInput(f"topic {topic!r} lists a queue of another topic")
        sorted_by_topic[topic] = mq_all
    plans, view = _prepare(strategy, params, client_ids, for_clients, client_params)
    return {topic: _allocate_sorted(plans, mq_all, view)
            for topic, mq_all in sorted_by_topic.items()}
