"""Simulated clients allocate with the project's allocation engine, memoised per view.

A whole fleet re-runs the same allocation every 20 s from the same view, so the group-level
result is computed once per (strategy, params, queues, client list) and read per client.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from streaming.core.allocation.group import InvalidAllocationInput, allocate_group

Queue = tuple[str, str, int]

_CACHE: dict[tuple, dict[str, tuple[Queue, ...] | None]] = {}
_CACHE_LIMIT = 20_000


def _params_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True) if params else ""


def allocate_topic(client, cids: Sequence[str], queues: tuple[Queue, ...]
                   ) -> tuple[Queue, ...] | None:
    """The queues `client` takes of one topic from its view; None when the strategy throws
    (RebalanceImpl then logs and keeps what it had)."""
    if not queues:
        return ()
    key = (client.strategy, _params_key(client.params), queues, tuple(cids))
    shares = _CACHE.get(key)
    if shares is None or client.client_id not in shares:
        shares = _group_shares(client, cids, queues, shares or {})
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = shares
    return shares[client.client_id]


def _group_shares(client, cids: Sequence[str], queues: tuple[Queue, ...],
                  known: dict) -> dict[str, tuple[Queue, ...] | None]:
    for_clients = list(dict.fromkeys([*cids, client.client_id]))
    try:
        result = allocate_group(client.strategy, client.params, queues, cids,
                                for_clients=for_clients)
    except InvalidAllocationInput:
        return {**known, client.client_id: None}
    shares = {cid: (None if share is None else tuple(share))
              for cid, share in result.results.items()}
    return {**known, **shares}
