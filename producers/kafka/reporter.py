"""Make a Kafka consumer report its own membership to rebalance-monitor.

Install it in the consumer application without Spark: `pip install rebalance-monitor` (the base
install: confluent-kafka, kafka-python, prometheus-client; the job's Spark comes with the `job`
extra only; tests/integration/test_reporter_package.py installs it in a clean virtualenv).

confluent-kafka, a few lines added to an existing consumer:

    from producers.kafka.reporter import RebalanceReporter

    reporter = RebalanceReporter({"bootstrap.servers": "monitor-kafka:9092"},
                                 "rebalance.events", group="orders", assignor="range",
                                 cluster="kafka-prod-1")   # the cluster, in every reporter of it
    consumer = Consumer({"bootstrap.servers": ..., "group.id": "orders",
                         "partition.assignment.strategy": "range"})
    consumer.subscribe(["A", "B"], **reporter.hooks(consumer, ["A", "B"]))
    reporter.start()                      # heartbeat every interval_s in a background thread
    ...                                   # consumer.poll() as usual
    consumer.close()                      # runs on_revoke: reports owning nothing
    reporter.close()                      # unregister, flush

`hooks()` returns on_assign / on_revoke / on_lost callbacks for `subscribe()`; they keep the set
of owned partitions (eager: replaced on assign; cooperative: added / removed) and heartbeat at
once on every change. Your own callbacks can be passed to `hooks()` and are called first.
A consumer that `assign()`s partitions by hand is not a group member: call
`reporter.assigned(consumer, partitions)`; it reports an empty subscription and owns them.

kafka-python: `consumer.subscribe(topics, listener=reporter.kafka_python_listener(consumer))`.

A heartbeat is (system "kafka", key = group): client_id = the member id (the consumer's
client.id before it joined), address = host:pid, topics, strategy = the assignor, owned,
group_instance_id, and generation where the client exposes it (kafka-python does, librdkafka
does not).

Nothing here raises into your consumer loop, nor waits for a broker. Heartbeats go through
streaming.common.delivery's Outbox: a failure a later attempt can overcome (a broker that does not
answer, a full producer queue) is retried, 3 attempts of up to message.timeout.ms (60 s unless
your producer_conf sets it); one it cannot (the topic refuses the record, no authorization) is
not. Every failed attempt and every heartbeat given up on is counted by topic and cause in
`reporter.stats` (a streaming.common.delivery.DeliveryStats), and the topic's delivery state is logged
once per change (logger `streaming.common.delivery`), never once per heartbeat. `close()` waits at most
about its timeout and counts what is still undelivered then (cause `unflushed`).
To see the counts on your own /metrics, register the reporter's collector:

    from prometheus_client import REGISTRY          # or your own CollectorRegistry
    REGISTRY.register(reporter.collector())
    # rebalance_monitor_produce_errors_total{topic,cause}
    # rebalance_monitor_undelivered_records_total{topic,cause}

Several reporters in one process share one count: pass them the same `stats=DeliveryStats()`
and register one collector (a registry refuses two with the same metric names).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from producers import events
from streaming.common.delivery import DeliveryStats, Outbox, Record, RetryPolicy, count_unflushed
from streaming.common.faults import StateLog, error_cause

log = logging.getLogger("rebalance_monitor.reporter")


class RebalanceReporter:
    """Publishes one consumer's heartbeats; configure, `hooks()`/`start()`, then `close()`."""

    def __init__(self, producer_conf: Mapping | None, events_topic: str, group: str,
                 assignor: str, *, producer=None, interval_s: float = 10.0,
                 group_instance_id: str | None = None, address: str | None = None,
                 client_id: str | None = None, cluster: str | None = None,
                 clock: Callable[[], float] = time.time,
                 stats: DeliveryStats | None = None) -> None:
        if producer is None and producer_conf is None:
            raise ValueError("give producer_conf or producer")
        self.events_topic = events_topic
        self.group = group
        self.assignor = assignor
        self.interval_s = interval_s
        self.group_instance_id = group_instance_id
        self.address = address or f"{socket.gethostname()}:{os.getpid()}"
        self.clock = clock
        self.topics: list[str] = []
        self.owned: set[tuple[str, int]] = set()
        self.member_id: str | None = None
        self.client_id = client_id  # overrides the member id (e.g. for a manual assign())
        # The Kafka cluster's name in the events: the same in every reporter of one cluster.
        self.cluster = cluster
        self.generation: int | None = None
        self._member_of: Callable[[], str | None] = lambda: None
        self._generation_of: Callable[[], int | None] = lambda: None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._own_producer = producer is None
        self.stats = DeliveryStats() if stats is None else stats
        if producer is None:
            from confluent_kafka import Producer

            producer = Producer({"linger.ms": 5, "message.timeout.ms": 60_000,
                                 **self.stats.client.settings(), **producer_conf})
        self.producer = producer
        self.outbox = Outbox(producer, self.stats, RetryPolicy(attempts=3))
        self._failing = StateLog(f"rebalance reporter of group {group}", log)

    # --- confluent-kafka -------------------------------------------------------------------
    def hooks(self, consumer, topics: Iterable[str], *, on_assign=None, on_revoke=None,
              on_lost=None) -> dict:
        """Callbacks for `consumer.subscribe(topics, **hooks)`."""
        self.topics = sorted(set(topics))
        self._member_of = lambda: _client_name(consumer)

        def cooperative() -> bool:
            try:
                return consumer.rebalance_protocol() == "COOPERATIVE"
            except (AttributeError, RuntimeError):
                return False

        def assigned(cons, partitions):
            if on_assign:
                on_assign(cons, partitions)
            self._changed(added=partitions, replace=not cooperative())

        def revoked(cons, partitions):
            if on_revoke:
                on_revoke(cons, partitions)
            self._changed(removed=partitions)

        def lost(cons, partitions):
            if on_lost:
                on_lost(cons, partitions)
            self._changed(removed=partitions)

        return {"on_assign": assigned, "on_revoke": revoked, "on_lost": lost}

    def assigned(self, consumer, partitions) -> None:
        """A consumer that assign()ed partitions by hand: no subscription, owns them."""
        self.topics = []
        self._member_of = lambda: _client_name(consumer)
        self._changed(added=partitions, replace=True)

    # --- kafka-python ----------------------------------------------------------------------
    def kafka_python_listener(self, consumer):
        from kafka import ConsumerRebalanceListener

        reporter = self
        reporter.topics = sorted(consumer.subscription() or [])
        coordinator = getattr(consumer, "_coordinator", None)

        def generation():
            gen = getattr(coordinator, "_generation", None)
            return getattr(gen, "generation_id", None), getattr(gen, "member_id", None)

        self._generation_of = lambda: generation()[0]
        self._member_of = lambda: generation()[1]

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                reporter._changed(removed=revoked)

            def on_partitions_assigned(self, assigned):
                reporter.topics = sorted(consumer.subscription() or [])
                reporter._changed(added=assigned, replace=True)

        return Listener()

    # --- reporting -------------------------------------------------------------------------
    def _changed(self, added=(), removed=(), replace: bool = False) -> None:
        with self._lock:
            if replace:
                self.owned = set()
            self.owned |= {(tp.topic, tp.partition) for tp in added}
            self.owned -= {(tp.topic, tp.partition) for tp in removed}
        self.heartbeat()

    def event(self) -> dict:
        with self._lock:
            self.member_id = self._member_of() or self.member_id
            generation = self._generation_of()
            if isinstance(generation, int) and generation >= 0:
                self.generation = generation
            return events.heartbeat(
                int(self.clock() * 1000), self.group, self._client_id(), list(self.topics),
                self.assignor, system="kafka", address=self.address,
                owned=[[t, p] for t, p in sorted(self.owned)],
                group_instance_id=self.group_instance_id or None, generation=self.generation)

    def _client_id(self) -> str:
        return self.client_id or self.member_id or self.address

    def heartbeat(self) -> None:
        """Report what this member owns now. Never raises (see the module docstring)."""
        try:
            event = self.event()
            if event["client_id"] == self.address and not event["owned"]:
                return  # not joined yet (no member id) and holding nothing: nothing to report
        except Exception as exc:  # noqa: BLE001 - the user's consumer loop must go on
            self._lost(exc)
            return
        self._send(event)

    def collector(self):
        """A prometheus_client collector of `stats` (rebalance_monitor_produce_* metrics)."""
        from streaming.common.delivery_metrics import DeliveryCollector

        return DeliveryCollector(self.stats)

    def _send(self, event: dict) -> None:
        if self.cluster is not None:
            event = events.stamped(event, self.cluster)
        try:
            self.outbox.send(Record(self.events_topic,
                                    json.dumps(event, separators=(",", ":")).encode(),
                                    self.group.encode()))
            self.producer.poll(0)  # serve delivery reports (and retries) now
            self._failing.ok()
        except Exception as exc:  # noqa: BLE001 - the user's consumer loop must go on
            self._lost(exc)

    def _lost(self, exc: BaseException) -> None:
        """An event that could not even be handed to the producer: counted, logged on change."""
        cause = error_cause(exc)
        self.stats.count("errors", (self.events_topic, cause))
        self.stats.count("undelivered", (self.events_topic, cause))
        self._failing.failed(cause, exc)

    def start(self) -> RebalanceReporter:
        """Heartbeat every interval_s from a daemon thread (the callbacks heartbeat on change);
        delivery reports are served in the background too."""
        def loop():
            while not self._stop.wait(self.interval_s):
                self.heartbeat()

        self.outbox.start()
        self._thread = threading.Thread(target=loop, name="rebalance-reporter", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the heartbeats, unregister (the member leaves at once) and flush, for at most
        about timeout_s. Never raises; what is still undelivered then is counted."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._send(events.unregister(int(self.clock() * 1000), self.group, self._client_id(),
                                     system="kafka", address=self.address))
        try:
            left = self.outbox.close(timeout_s)
        except Exception as exc:  # noqa: BLE001 - closing must not raise either
            self._lost(exc)
            return
        count_unflushed(self.stats, self.events_topic, left)


def _client_name(consumer) -> str | None:
    try:
        return consumer.memberid() or None
    except (AttributeError, RuntimeError):
        return None
