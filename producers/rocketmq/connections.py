"""Which of the connections a broker lists are still a client's. Pure: no I/O.

A broker lists one connection per client process (GET_CONSUMER_CONNECTION_LIST). Two listed
connections with one clientId from one host are normally two processes (a client-id collision).
They can also be one process and a dead connection the broker has not dropped yet:
- RocketMQ 5.x, after the broker stalled (SIGSTOP, a long pause): the client timed out, opened a
  new connection, and the broker lists the old one beside it until its channel expiry (120 s
  without a heartbeat on it; 4.9.8 drops it as soon as it runs again);
- the broker says so itself when it fails to forward running info to it ("send request to
  <addr> failed").

    known = ConnectionLiveness()
    known.answered({"broker-a"}, failed=set(), now=now)   # each poll, after the listings
    listings = known.live(listings, now)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from producers.rocketmq.bridge import Listing

# The broker's channel expiry (ClientHousekeepingService: 120 s) plus its 10 s scan.
BROKER_CHANNEL_EXPIRY_S = 130.0

Key = tuple[str, str, str, str]       # (broker, group, client_id, client address)


def _host(address: str) -> str:
    return address.rpartition(":")[0]


class ConnectionLiveness:
    def __init__(self, expiry_s: float = BROKER_CHANNEL_EXPIRY_S) -> None:
        self._expiry_s = expiry_s
        self._first_seen: dict[Key, float] = {}
        self._failing: set[str] = set()
        self._recovered_at: dict[str, float] = {}
        self._unreachable: set[Key] = set()

    def unreachable(self, broker: str, group: str, client_id: str, address: str) -> None:
        """The broker failed to forward a request to this connection."""
        self._unreachable.add((broker, group, client_id, address))

    def answered(self, brokers: Iterable[str], failed: Iterable[str], now: float) -> None:
        """This poll's listings: brokers that answered every one, and those that failed some."""
        failed = set(failed)
        for broker in set(brokers) - failed:
            if broker in self._failing:
                self._recovered_at[broker] = now
        self._failing = (self._failing | failed) - (set(brokers) - failed)

    def live(self, listings: list[Listing], now: float) -> list[Listing]:
        """The listings less the connections presumed dead; forgets what is no longer listed."""
        keys = {(x.broker, x.group, x.client_id, x.client_addr): x for x in listings}
        silent = {k: at for k, at in self._first_seen.items() if k[0] in self._failing}
        self._first_seen = {**silent, **{k: self._first_seen.get(k, now) for k in keys}}
        self._unreachable &= set(keys)
        dead = self._unreachable | self._superseded(keys, now)
        return [x for key, x in keys.items() if key not in dead]

    def _superseded(self, keys: Iterable[Key], now: float) -> set[Key]:
        """Connections from before a broker's recovery that the same clientId and host replaced
        with a newer one after it, while the broker may still list them."""
        by_process: dict[tuple, list[Key]] = defaultdict(list)
        for key in keys:
            broker, group, client_id, address = key
            recovered = self._recovered_at.get(broker)
            if recovered is not None and now - recovered < self._expiry_s:
                by_process[(broker, group, client_id, _host(address))].append(key)
        old = set()
        for (broker, *_), same in by_process.items():
            recovered = self._recovered_at[broker]
            if any(self._first_seen[k] >= recovered for k in same):
                old |= {k for k in same if self._first_seen[k] < recovered}
        return old
