"""Events per contract v1 (docs/events.md) for what the simulated fleet does.

A heartbeat event is one heartbeat as one broker received it, so it carries `broker`: that lets
the monitor compare brokers' member lists. With `with_view`, heartbeats also carry the client's
`view` (the member list and queues it last allocated from) and `owned` (what it holds), and the
client heartbeats whenever its view changes (a real client only does when its allocation
changes). Route events come from a route watcher polling the name server: one per group by
default (so every event of a group lands in that group's partition), or one naming `groups`.

    >>> sink = EventSink(epoch_ms=1_700_000_000_000)
    >>> sink.route("T", [("T", "broker-a", 0)], ["g"], 5)
    >>> sink.drain()
    [{'v': 1, 'type': 'route', 'ts': 1700000000005, 'group': 'g', 'topic': 'T', 'queues': [['broker-a', 0]]}]

`EncodedSink` yields (key, value) bytes ready for Kafka; a client's heartbeat is encoded once per
change of the client and only the timestamp and broker are spliced in per event.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from producers import events

SYSTEM = "rocketmq"


class EventSink:
    """Collects event dicts; `drain()` hands them over in emission order."""

    def __init__(self, epoch_ms: int, with_view: bool = False, route_groups_list: bool = False):
        self.epoch_ms = epoch_ms
        self.with_view = with_view
        self.route_groups_list = route_groups_list
        self.heartbeat_on_view_change = with_view
        self._out: list = []

    def pending(self) -> list:
        """The list collecting events now (replaced by drain())."""
        return self._out

    def drain(self) -> list:
        out, self._out = self._out, []
        return out

    def heartbeat(self, client, broker: str, now: int) -> None:
        self._out.append(heartbeat_event(client, broker, self.epoch_ms + now, self.with_view))

    def unregister(self, client, now: int) -> None:
        self._out.append(events.unregister(self.epoch_ms + now, client.group, client.client_id,
                                           address=client.address))

    def route(self, topic: str, queues: Sequence, groups: Sequence[str], now: int) -> None:
        for event in route_events(topic, queues, groups, self.epoch_ms + now,
                                  self.route_groups_list):
            self._out.append(event)


def heartbeat_event(client, broker: str, ts: int, with_view: bool) -> dict:
    view = owned = None
    if with_view and client.view_clients is not None:
        view = {"clients": list(client.view_clients),
                "queues": {t: [[q[1], q[2]] for q in client.view_queues.get(t, ())]
                           for t in client.topics}}
        owned = [[q[0], q[1], q[2]] for q in client.owned()]
    return events.heartbeat(ts, client.group, client.client_id, list(client.topics),
                            client.strategy, address=client.address, broker=broker,
                            strategy_params=client.params or None, view=view, owned=owned)


def route_events(topic: str, queues: Sequence, groups: Sequence[str], ts: int,
                 groups_list: bool) -> list[dict]:
    queue_list = [[q[1], q[2]] for q in queues]
    if groups_list:
        return [events.route(ts, topic, groups=list(groups), queues=queue_list)]
    return [events.route(ts, topic, group=g, queues=queue_list) for g in groups]


_TS_VALUE = 1_000_000_000_000
_TS_PROBE = b'{"v":1,"type":"route","ts":1000000000000'
_HEARTBEAT_PROBE = b'{"v":1,"type":"heartbeat","ts":1000000000000'


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class EncodedSink(EventSink):
    """Collects (key, value) bytes: key = the group name, value = the JSON event."""

    def __init__(self, epoch_ms: int, with_view: bool = False, route_groups_list: bool = False):
        super().__init__(epoch_ms, with_view, route_groups_list)
        self._templates: dict = {}  # client -> (version, key, tail bytes)
        self._brokers: dict[str, bytes] = {}
        self._routes: dict = {}  # (topic, queues, groups) -> [(key, bytes after the ts)]

    def heartbeat(self, client, broker: str, now: int) -> None:
        cached = self._templates.get(client)
        # Without a view, nothing in a heartbeat changes during a process's life.
        version = client.version if self.with_view else 0
        if cached is None or cached[0] != version:
            # The event after its ts, without the closing brace: ',"group":...'.
            tail = _dumps(heartbeat_event(client, None, _TS_VALUE, self.with_view))[
                len(_HEARTBEAT_PROBE):-1]
            cached = (version, client.group.encode(), tail)
            self._templates[client] = cached
        broker_json = self._brokers.get(broker)
        if broker_json is None:
            broker_json = self._brokers[broker] = _dumps(broker)
        self._out.append((cached[1], b'{"v":1,"type":"heartbeat","ts":%d%b,"broker":%b}'
                          % (self.epoch_ms + now, cached[2], broker_json)))

    def unregister(self, client, now: int) -> None:
        self._templates.pop(client, None)
        super().unregister(client, now)
        event = self._out.pop()
        self._out.append((client.group.encode(), _dumps(event)))

    def route(self, topic: str, queues: Sequence, groups: Sequence[str], now: int) -> None:
        cache_key = (topic, queues, tuple(groups))
        encoded = self._routes.get(cache_key)
        if encoded is None:
            encoded = [((e.get("group") or e["groups"][0]).encode(), _dumps(e)[len(_TS_PROBE):])
                       for e in route_events(topic, queues, groups, _TS_VALUE,
                                             self.route_groups_list)]
            if len(self._routes) > 100_000:
                self._routes.clear()
            self._routes[cache_key] = encoded
        prefix = b'{"v":1,"type":"route","ts":%d' % (self.epoch_ms + now)
        self._out.extend((key, prefix + tail) for key, tail in encoded)
