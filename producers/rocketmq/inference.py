"""The strategy of a client that reports none (the Go SDK, C++), inferred from what it holds.

Such a client allocates like any other: from its view (the topic's readable queues and the
client ids its broker lists for the group) with one strategy. The bridge re-runs that view
under each strategy the client's SDK offers without settings of its own and keeps those that
give exactly what the client holds. One left: that is the client's strategy. Several (two
clients over two queues, where AVG and AVG_BY_CIRCLE agree) or none (it is moving between two
views): the strategy is not known, and the events say so. An operator's
`--sdk-strategy LANGUAGE=...` is never second-guessed.

A client once inferred keeps its strategy while the holdings still allow it (several match,
or none while it moves), so a rebalance in progress does not flip it back to the assumption.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from streaming.core.allocation import InvalidAllocationInput, allocate_group

# MACHINE_ROOM, MACHINE_ROOM_NEARBY and CONFIG need settings no broker sees: never inferred.
INFERABLE = ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")

Owned = tuple[tuple[str, str, int], ...]          # (topic, broker, queue id)


def matching_strategies(client_id: str, owned: Owned, topics: tuple[str, ...],
                        routes: Mapping[str, Mapping[str, int] | None],
                        client_ids: tuple[str, ...],
                        candidates: Mapping[str, tuple[str, Mapping]]) -> tuple[str, ...] | None:
    """The candidates (name -> the strategy and params its SDK runs it as) under which
    `client_id`, from its view, computes exactly `owned` for every topic whose route is known;
    None when no topic can be compared."""
    held: dict[str, set[tuple[str, int]]] = {topic: set() for topic in topics}
    for topic, broker, queue_id in owned:
        held.setdefault(topic, set()).add((broker, queue_id))
    views = {topic: tuple(sorted((broker, q) for broker, n in (routes[topic] or {}).items()
                                 for q in range(n)))
             for topic in sorted(held) if routes.get(topic) is not None}
    if not views or client_id not in client_ids:
        return None
    found = []
    for base, (strategy, params) in candidates.items():
        if all(_share(strategy, tuple(sorted(params.items())), topic, queues, client_ids,
                      client_id) == held[topic] for topic, queues in views.items()):
            found.append(base)
    return tuple(found)


def chosen(matching: tuple[str, ...] | None, previous: str | None) -> str | None:
    """The inferred strategy: the one match, else the previous inference while the holdings
    still allow it; None when the strategy is not known."""
    if matching is not None and len(matching) == 1:
        return matching[0]
    if previous is not None and (matching is None or not matching or previous in matching):
        return previous
    return None


def _share(strategy: str, params: tuple, topic: str, queues: tuple[tuple[str, int], ...],
           client_ids: tuple[str, ...], client_id: str) -> set[tuple[str, int]] | None:
    """What `client_id` takes of `queues` under `strategy` (None: the SDK would fail)."""
    shares = _shares(strategy, params, topic, queues, client_ids)
    return None if shares is None else shares.get(client_id)


# One allocation serves every client of a view: the group's members share it.
@lru_cache(maxsize=1024)
def _shares(strategy: str, params: tuple, topic: str, queues: tuple[tuple[str, int], ...],
            client_ids: tuple[str, ...]) -> dict[str, set[tuple[str, int]] | None] | None:
    try:
        result = allocate_group(strategy, dict(params), [(topic, b, q) for b, q in queues],
                                list(client_ids))
    except InvalidAllocationInput:
        return None
    return {client: None if share is None else {(broker, q) for _, broker, q in share}
            for client, share in result.results.items()}
