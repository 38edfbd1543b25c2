"""`rebalance-monitor simulate`: run a named scenario and publish its events to Kafka.

    rebalance-monitor simulate --bootstrap-servers localhost:9092 --topic rebalance.events \\
        --scenario broker-crash --with-view --print-ground-truth
    rebalance-monitor simulate --scenario steady --groups 1000 --clients 4 --stdout | head
    rebalance-monitor simulate --scenario lost-notification --realtime --bootstrap-servers ...

Events are JSON (contract v1), keyed by group. By default simulated time runs as fast as
possible from a fixed epoch (deterministic with --seed); --realtime paces it against the wall
clock with real timestamps (--speed N runs N x faster). --rate caps events per wall second.
--print-ground-truth prints the findings a correct monitor must report, one JSON object a line
({"ground_truth": {...}}), after the events.

No broker fault ends a run: while the broker does not answer, events wait in the producer (a full
queue pauses the simulation until it drains); a delivery that fails with a retriable cause
(`msg_timed_out`, `transport`, ...) is sent again, up to --attempts times; each failed attempt and
each event given up on is counted by cause, and the topic's delivery state is logged once per
change. --metrics-port serves those counts (rebalance_monitor_produce_*) and the events produced
(rebalance_simulator_events_total). SIGTERM, like Ctrl-C, stops the run and flushes (up to 60 s;
what is still held then counts as undelivered, cause `unflushed`). The exit code is 1 when an
event was not delivered at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from functools import partial

from producers.health import CountCollector, metrics_socket, serve_metrics
from producers.simulator.clock import DEFAULT_EPOCH_MS, FastClock, RealtimeClock
from producers.simulator.scenarios import SCENARIOS, Scenario, Steady
from streaming.common import option_values as values
from streaming.common.delivery import RETRIABLE, DeliveryStats, count_unflushed
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.common.faults import Backoff, StateLog, cause_of, error_cause
from streaming.common.kafka_options import KafkaClientOptions, parse_kafka_options
from streaming.common.options import OptionError, option, switch
from streaming.common.options import add_arguments as add_options
from streaming.core.state.fields import LEADING, LEADING_RE
from streaming.core.switches import parse_bool

log = logging.getLogger("rebalance_monitor.simulate")


_positive, _non_negative = values.positive, values.non_negative
STEADY = "steady scenario"


@dataclass(frozen=True)
class SimulateOptions:
    bootstrap_servers: str | None = option(
        "Kafka bootstrap servers", values.host_ports(), default=None, metavar="HOST:PORT[,...]",
        shown_default="none", fallback_env=("KAFKA_BOOTSTRAP_SERVERS",))
    topic: str = option("events topic", values.not_empty, default="rebalance.events",
                        metavar="TOPIC")
    scenario: str = option("what to simulate (listed below)", values.one_of(*sorted(SCENARIOS)),
                           default="steady", metavar="SCENARIO")
    seed: int = option("random seed: one seed, one run", _non_negative, default=0, metavar="N")
    realtime: bool = switch("pace by the wall clock", parse_bool)
    speed: float = option("with --realtime: N x faster", values.number(above=0), default=1.0,
                          metavar="N")
    epoch_ms: int = option("start of simulated time when not --realtime",
                           values.whole(minimum=946_684_800_000, maximum=4_102_444_799_999),
                           default=DEFAULT_EPOCH_MS, metavar="MS")
    simulated_seconds: float | None = option(
        "how long to simulate, in simulated seconds; with --realtime they pass at --speed",
        values.number(above=0), default=None, metavar="SECONDS", shown_default="the scenario's")
    with_view: bool = switch("heartbeats carry view and owned (off: what real clients send)",
                             parse_bool)
    groups_list: bool = switch("one route event naming `groups` instead of one per group",
                               parse_bool)
    notification_loss: float = option(
        "probability that a broker notification is lost", values.number(minimum=0, maximum=1),
        default=0.0, metavar="P")
    groups: int = option("groups", values.whole(1, 1_000_000), default=100, metavar="N",
                         group=STEADY)
    clients: int = option("clients per group", values.whole(1, 10_000), default=4, metavar="N",
                          group=STEADY)
    topics: int = option("topics per group", values.whole(1, 1_000), default=2, metavar="N",
                         group=STEADY)
    queues: int = option("queues per topic", values.whole(1, 65_536), default=8, metavar="N",
                         group=STEADY)
    brokers: int = option("brokers", values.whole(1, 1_000), default=2, metavar="N",
                          group=STEADY)
    rate: float | None = option("at most N events per wall-clock second",
                                values.number(above=0), default=None, metavar="N",
                                shown_default="unpaced")
    cluster: str | None = option(
        "the simulated cluster's name in every event (docs/events.md, cluster); none: the job "
        "reads it as \"default\"", values.name, default=None, metavar="NAME",
        shown_default="none")
    print_ground_truth: bool = switch(
        "after the events, print the findings a correct monitor must report, one JSON object "
        "a line", parse_bool)
    stdout: bool = switch("print events instead of producing", parse_bool)
    create_topic: int | None = option(
        "create the events topic with this many partitions first", _positive, default=None,
        metavar="PARTITIONS", shown_default="none")
    attempts: int = option("deliveries per event when the broker fails with a retriable cause",
                           _positive, default=3, metavar="N")
    kafka_options: KafkaClientOptions = option(
        "a Kafka client setting, librdkafka's name, e.g. security.protocol=SASL_SSL "
        "(docs/deploy.md); repeatable, and the variable holds one KEY=VALUE a line",
        values.key_value, default=KafkaClientOptions(), flag="kafka-option", repeated=True,
        combine=parse_kafka_options, metavar="KEY=VALUE", shown_default="none")
    metrics_port: int | None = option(
        "serve event delivery counts by cause (rebalance_monitor_produce_*) and events "
        "produced on http://HOST:PORT/metrics (docs/metrics.md)", values.port, default=None,
        metavar="PORT", shown_default="off")
    metrics_host: str = option("address of --metrics-port", values.not_empty,
                               default="0.0.0.0", metavar="HOST")

    def check_options(self) -> None:
        if self.groups * self.clients > MAX_MEMBERS:
            raise OptionError(f"--groups x --clients is {self.groups * self.clients:,} members; "
                              f"one simulator holds at most {MAX_MEMBERS:,}")


# A million-member fleet (10,000 x 100) with room to spare; beyond it one process runs out of
# memory before it writes an event.
MAX_MEMBERS = 10_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "scenarios:\n" + "\n".join(
        f"  {name:22} {cls.summary}" for name, cls in sorted(SCENARIOS.items()))
    add_options(parser, SimulateOptions)


def build_scenario(args: SimulateOptions) -> Scenario:
    options = dict(seed=args.seed, with_view=args.with_view,
                   route_groups_list=args.groups_list,
                   notification_loss=args.notification_loss,
                   duration_ms=None if args.simulated_seconds is None
                   else int(args.simulated_seconds * 1000))
    if args.scenario == Steady.name:
        options.update(groups=args.groups, clients=args.clients, topics=args.topics,
                       queues=args.queues, brokers=args.brokers)
    return SCENARIOS[args.scenario](**options)


class RateLimit:
    """Caps events per wall second; checks the clock once per 256 events."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.count = 0
        self.start = time.monotonic()

    def tick(self) -> None:
        self.count += 1
        if self.rate and self.count % 256 == 0:
            ahead = self.count / self.rate - (time.monotonic() - self.start)
            if ahead > 0:
                time.sleep(ahead)  # pacing, not waiting for a condition


# Only failures are reported back (no Python call per delivered record): see EventProducer.
PRODUCER_SETTINGS = {"linger.ms": 20, "delivery.report.only.error": True,
                     "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000,
                     "queue.buffering.max.kbytes": 1_048_576}
FLUSH_TIMEOUT_S = 60.0


class EventProducer:
    """Produces (key, value) pairs to one topic and never ends the run on a broker fault.

    The hot path is confluent-kafka's produce() alone. The client reports failures only
    (`delivery.report.only.error`), to a background thread that serves them: each failure is
    counted by cause in a streaming.common.delivery.DeliveryStats (`errors`), a retriable one is sent
    again up to `attempts` times, and one given up on is counted in `undelivered`. The topic's
    state is logged once per change: at the first failure, and when a record sent after the last
    failure has left the client without failing (delivered), which the thread tells from the
    records sent and those the client still holds, without a report per delivered record."""

    def __init__(self, producer, topic: str, stats: DeliveryStats | None = None,
                 attempts: int = 3, poll_interval_s: float = 0.2) -> None:
        self.producer = producer
        self.topic = topic
        self.stats = stats or DeliveryStats()
        self.attempts = attempts
        self.count = 0       # events produced (the main thread's)
        self._resent = 0     # records sent again (the serving thread's)
        self._mark: int | None = None  # records sent when the last failure was reported
        self._poll_interval_s = poll_interval_s
        self._retry: deque = deque()   # (message, attempt) failed retriably, to send again
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> EventProducer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="simulate-delivery",
                                            daemon=True)
            self._thread.start()
        return self

    def run(self, events, rate: RateLimit) -> int:
        """Produce every event; returns how many (also in `count`, read by /metrics)."""
        self.start()  # the only thread that serves delivery reports (see _check_recovered)
        produce, topic, report, tick = self.producer.produce, self.topic, self._report, rate.tick
        count = self.count
        for key, value in events:
            while True:
                try:
                    produce(topic, value, key, on_delivery=report)
                    break
                except BufferError:  # the client's queue is full (a slow or absent broker)
                    time.sleep(0.05)  # backoff while the serving thread drains it
            count += 1
            self.count = count
            tick()
        return count

    def close(self, timeout_s: float = FLUSH_TIMEOUT_S) -> int:
        """Flush, re-sending what fails retriably, until done or timeout_s; returns the events
        not delivered (given up on, or still in the producer at the deadline: `unflushed`)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.producer.flush(max(0.0, deadline - time.monotonic()))
            self._check_recovered()
            if left == 0 and not self._retry:
                break
            self._resend()
            if time.monotonic() >= deadline:
                break
        count_unflushed(self.stats, self.topic, _outstanding(self.producer) + len(self._retry))
        return sum(self.stats.snapshot().undelivered.values())

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                self.producer.poll(self._poll_interval_s)
                self._check_recovered()
                self._resend()
            except Exception:  # noqa: BLE001 - a report handler's bug must not end the thread
                log.exception("serving delivery reports failed; going on")

    def _report(self, error, message, attempt: int = 1) -> None:
        if error is None:
            return  # reported only if delivery.report.only.error was turned off
        cause = cause_of(error)
        self.stats.count("errors", (self.topic, cause))
        self.stats.note_state(self.topic, cause)
        self._mark = self.count + self._resent
        if error.code() in RETRIABLE and attempt < self.attempts:
            self._retry.append((message, attempt + 1))
        else:
            self.stats.count("undelivered", (self.topic, cause))

    def _check_recovered(self) -> None:
        """After this thread's poll every report of a failed record is served, so a record
        sent after the last failure that the client no longer holds was delivered. More such
        records sent than the client holds in all means at least one was."""
        if self._mark is not None and (self.count + self._resent - self._mark
                                       > _outstanding(self.producer)):
            self._mark = None
            self.stats.note_state(self.topic, None)

    def _resend(self) -> None:
        while self._retry:
            message, attempt = self._retry.popleft()
            try:
                self.producer.produce(message.topic(), message.value(), message.key(),
                                      on_delivery=partial(self._report, attempt=attempt))
            except BufferError:
                self._retry.appendleft((message, attempt))
                return
            self._resent += 1


def _outstanding(producer) -> int:
    """Records the client still holds (confluent-kafka's len(); a test double may have none)."""
    try:
        return len(producer)
    except TypeError:
        return 0


def new_producer(bootstrap: str, settings: dict | None = None,
                 stats: DeliveryStats | None = None):
    """`stats`: where the client's own errors are counted and summarised (else not)."""
    from confluent_kafka import Producer

    quiet = stats.client.settings() if stats is not None else {"log_level": 0}
    return Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, **quiet,
                     **(settings or {})})


def produce(events, bootstrap: str, topic: str, rate: RateLimit, *,
            stats: DeliveryStats | None = None, attempts: int = 3, producer=None,
            flush_timeout_s: float = FLUSH_TIMEOUT_S) -> tuple[int, int]:
    """Produce (key, value) pairs; returns (produced, undelivered)."""
    if producer is None:
        stats = stats or DeliveryStats()
        producer = new_producer(bootstrap, stats=stats)
    sender = EventProducer(producer, topic, stats, attempts).start()
    try:
        count = sender.run(events, rate)
    finally:
        undelivered = sender.close(flush_timeout_s)
    return count, undelivered


def create_topic_when_answered(bootstrap: str, topic: str, partitions: int,
                               max_backoff_s: float = 30.0,
                               settings: dict[str, str] | None = None) -> None:
    """--create-topic: an unreachable broker is waited for (logged once per change), not fatal."""
    from streaming.common.topics import create_topic

    state = StateLog(f"creating topic {topic}", log)
    backoff = Backoff(max_s=max_backoff_s)
    while True:
        try:
            create_topic(bootstrap, topic, partitions=partitions, client_settings=settings)
        except ValueError:
            raise  # exists with another partition count: a configuration error
        except Exception as exc:  # noqa: BLE001 - the broker is down or slow: wait for it
            state.failed(error_cause(exc), exc)
            time.sleep(backoff.next())  # between attempts, not a wait for a condition
            continue
        state.ok()
        return


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def main(args: SimulateOptions) -> int:
    try:
        return _main(args)
    except BrokenPipeError:  # `| head`: the reader has seen enough
        sys.stderr.close()
        return 0


_CLUSTER = LEADING.index("cluster") + 1


def with_cluster(events, cluster: str | None):
    """The encoded events, each naming `cluster` after its other leading members
    (fields.LEADING_PATTERN), or first when it has none (unchanged when `cluster` is None)."""
    if cluster is None:
        yield from events
        return
    named = json.dumps(cluster).encode()
    for key, value in events:
        lead = LEADING_RE.match(value)
        if lead is None:
            yield key, b'{"cluster":' + named + b"," + value[1:]
        elif lead.group(_CLUSTER) is not None:
            yield key, value
        else:
            yield key, value[:lead.end() - 1] + b',"cluster":' + named + value[lead.end() - 1:]


def _main(args: SimulateOptions) -> int:
    scenario = build_scenario(args)
    clock = (RealtimeClock(args.speed) if args.realtime else FastClock(args.epoch_ms))
    events = with_cluster(scenario.run_encoded(clock), args.cluster)
    rate = RateLimit(args.rate)
    if args.stdout:
        for _key, value in events:
            sys.stdout.write(value.decode() + "\n")
            rate.tick()
        sys.stdout.flush()
    elif args.bootstrap_servers:
        sock = metrics_socket(args.metrics_port, args.metrics_host)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        settings = args.kafka_options.for_librdkafka()
        if args.create_topic:
            create_topic_when_answered(args.bootstrap_servers, args.topic, args.create_topic,
                                       settings=settings)
        stats = DeliveryStats()
        producer = new_producer(args.bootstrap_servers, settings, stats)
        sender = EventProducer(producer, args.topic, stats, args.attempts)
        serve_metrics(sock, DeliveryCollector(stats),
                      CountCollector("rebalance_simulator_events",
                                     "Events handed to the producer.", lambda: sender.count))
        started = time.monotonic()
        sender.start()
        previous = signal.signal(signal.SIGTERM, _interrupt)  # stop as Ctrl-C does: flush
        try:
            count = sender.run(events, rate)
        except KeyboardInterrupt:
            count = sender.count
            print(f"simulate: stopped after {count} events; flushing", file=sys.stderr)
        finally:
            signal.signal(signal.SIGTERM, previous)
        failed = sender.close()
        elapsed = time.monotonic() - started
        errors = stats.snapshot().errors
        causes = ", ".join(f"{cause} {n}" for (_, cause), n in sorted(errors.items()))
        print(f"simulate: {scenario.name}: {count} events to {args.topic} in {elapsed:.2f} s "
              f"({count / max(elapsed, 1e-9):,.0f}/s), {failed} failed"
              + (f" (failed attempts: {causes})" if causes else ""), file=sys.stderr)
        if failed:
            return 1
    elif not args.print_ground_truth:
        print("simulate: give --bootstrap-servers, --stdout or --print-ground-truth",
              file=sys.stderr)
        return 2
    if args.print_ground_truth:
        truth = scenario.ground_truth()
        mode = "with view and owned" if args.with_view else "without view (structural only)"
        print(f"simulate: {scenario.name}: ground truth for heartbeats {mode}: "
              f"{len(truth)} findings", file=sys.stderr)
        for finding in truth:
            print(json.dumps({"ground_truth": asdict(finding)}))
    return 0
