"""The events every producer writes (docs/events.md, contract v1): one builder per event type, so
that each field is named in one place and `v`, `type` and `ts` come first in every event. A
field given as None is left out (absent means "not known" in the contract); a field the contract
does not name is refused at once, where the producer builds it.

    >>> heartbeat(1_700_000_000_000, "g", "c1", ["T"], "AVG", broker="broker-a", owned=None)
    {'v': 1, 'type': 'heartbeat', 'ts': 1700000000000, 'group': 'g', 'client_id': 'c1', \
'topics': ['T'], 'strategy': 'AVG', 'broker': 'broker-a'}
    >>> route(1_700_000_000_000, "T", groups=["g1", "g2"], brokers={"broker-a": 4})["groups"]
    ['g1', 'g2']
    >>> alive(1_700_000_000_000, "g", [("c1", "h:1"), ("c2", None)], broker="broker-a")["members"]
    [['c1', 'h:1'], ['c2']]
    >>> unregister(1_700_000_000_000, "g", "c1", adress="h:1")
    Traceback (most recent call last):
    ...
    TypeError: unregister has no field adress (docs/events.md)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streaming.core.state.fields import COMMON, LEADING, names_for

VERSION = 1
# The fields each builder may write beyond its arguments: the contract's table, where every field
# is declared once (informational ones, such as strategy_assumed, among them).
HEARTBEAT_FIELDS = names_for("heartbeat") - {"v", "type", "ts", "group", "client_id", "topics",
                                             "strategy"}
UNREGISTER_FIELDS = names_for("unregister") - {"v", "type", "ts", "group", "client_id"}
ROUTE_FIELDS = names_for("route") - {"v", "type", "ts", "topic"}
ALIVE_FIELDS = names_for("alive") - {"v", "type", "ts", "group", "members"}


def heartbeat(ts: int, group: str, client_id: str, topics: Sequence[str], strategy: str,
              **fields: Any) -> dict[str, Any]:
    return _with({"v": VERSION, "type": "heartbeat", "ts": ts, "group": group,
                  "client_id": client_id, "topics": topics, "strategy": strategy},
                 fields, HEARTBEAT_FIELDS)


def unregister(ts: int, group: str, client_id: str, **fields: Any) -> dict[str, Any]:
    return _with({"v": VERSION, "type": "unregister", "ts": ts, "group": group,
                  "client_id": client_id}, fields, UNREGISTER_FIELDS)


def route(ts: int, topic: str, **fields: Any) -> dict[str, Any]:
    """A topic's readable queues now; name its `group` or `groups`, and one of `queues`,
    `brokers` or (Kafka) `partitions`."""
    return _with({"v": VERSION, "type": "route", "ts": ts, "topic": topic}, fields, ROUTE_FIELDS)


def alive(ts: int, group: str, members: Sequence[tuple[str, str | None]],
          **fields: Any) -> dict[str, Any]:
    """Members whose last full heartbeat (through `broker`, when given) still holds: send each
    one's full heartbeat first, and again whenever it changes."""
    return _with({"v": VERSION, "type": "alive", "ts": ts, "group": group,
                  "members": [[client_id, address] if address else [client_id]
                              for client_id, address in members]}, fields, ALIVE_FIELDS)


def _with(event: dict[str, Any], fields: Mapping[str, Any], allowed: frozenset[str]
          ) -> dict[str, Any]:
    unknown = fields.keys() - allowed
    if unknown:
        raise TypeError(f"{event['type']} has no field {', '.join(sorted(unknown))} "
                        f"(docs/events.md)")
    for name, value in fields.items():
        if value is not None:
            event[name] = value
    return _envelope_first(event)


def stamped(event: dict[str, Any], cluster: str) -> dict[str, Any]:
    """The event naming the cluster it describes (docs/events.md, cluster)."""
    return _envelope_first({**event, "cluster": cluster})


def _envelope_first(event: dict[str, Any]) -> dict[str, Any]:
    """The members every event may have first, in their order (fields.LEADING): the job
    routes such an event without parsing all of it."""
    return {**{name: event[name] for name in LEADING if name in event},
            **{name: value for name, value in event.items() if name not in COMMON}}
