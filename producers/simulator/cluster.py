"""The name server and the brokers of the simulated RocketMQ cluster (see model.py)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from producers.simulator.model import Client

Queue = tuple[str, str, int]  # (topic, broker, queue id)


class NameServer:
    """Topic routes: queues per broker, minus the brokers that are down."""

    def __init__(self) -> None:
        self.topics: dict[str, dict[str, int]] = {}
        self.down: set[str] = set()
        self.version = 0  # bumped on every route change
        self._queues: dict[str, tuple[Queue, ...]] = {}

    def set_topic(self, topic: str, queues_per_broker: Mapping[str, int]) -> None:
        self.topics[topic] = dict(queues_per_broker)
        self._queues.pop(topic, None)
        self.version += 1

    def set_broker_down(self, broker: str, down: bool) -> list[str]:
        """Mark a broker down or up; return the topics whose route changed."""
        (self.down.add if down else self.down.discard)(broker)
        changed = [t for t, per_broker in self.topics.items() if broker in per_broker]
        for topic in changed:
            self._queues.pop(topic, None)
        self.version += 1
        return changed

    def queues(self, topic: str) -> tuple[Queue, ...]:
        cached = self._queues.get(topic)
        if cached is None:
            per_broker = self.topics.get(topic, {})
            cached = tuple(
                (topic, broker, qid)
                for broker in sorted(per_broker)
                if broker not in self.down
                for qid in range(per_broker[broker])
            )
            self._queues[topic] = cached
        return cached


class Broker:
    """ConsumerManager of one broker: members per group, in last-heartbeat order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.alive = True
        self.members: dict[str, OrderedDict[Client, int]] = {}
        self.subscriptions: dict[str, frozenset[str]] = {}
        self._ids: dict[str, tuple[str, ...]] = {}
        self.expiry_check_at: int | None = None

    def heartbeat(self, client: Client, now: int) -> bool:
        """Register or refresh a member; True when the group changed (new member or new topics)."""
        members = self.members.setdefault(client.group, OrderedDict())
        is_new = client not in members
        members[client] = now
        members.move_to_end(client)
        if is_new:
            self._ids.pop(client.group, None)
        # The group's subscription table follows the latest heartbeat, as updateSubscription does.
        subscription_changed = self.subscriptions.get(client.group) != client.topic_set
        self.subscriptions[client.group] = client.topic_set
        return is_new or subscription_changed

    def unregister(self, client: Client) -> bool:
        removed = self.members.get(client.group, {}).pop(client, None) is not None
        if removed:
            self._ids.pop(client.group, None)
        return removed

    def member_ids(self, group: str) -> tuple[str, ...]:
        """The client ids GET_CONSUMER_LIST_BY_GROUP returns (one per connection), sorted
        (the client sorts them anyway) so that equal lists from two brokers compare equal."""
        ids = self._ids.get(group)
        if ids is None:
            ids = tuple(sorted(c.client_id for c in self.members.get(group, ())))
            self._ids[group] = ids
        return ids

    def expire(self, now: int, expiry_ms: int) -> list[tuple[str, Client]]:
        """Drop members silent for expiry_ms; return (group, client) dropped."""
        dropped = []
        for group, members in self.members.items():
            while members:
                client, last = next(iter(members.items()))
                if now - last <= expiry_ms:  # upstream: expired when diff > timeout
                    break
                members.popitem(last=False)
                self._ids.pop(group, None)
                dropped.append((group, client))
        return dropped

    def oldest_heartbeat(self) -> int | None:
        firsts = [next(iter(m.values())) for m in self.members.values() if m]
        return min(firsts) if firsts else None

    def crash(self) -> None:
        self.alive = False
        self.members.clear()
        self.subscriptions.clear()
        self._ids.clear()
