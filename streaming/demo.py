"""`rebalance-monitor demo`: the whole monitor on one machine, in one command.

Starts a real Apache Kafka broker (one KRaft node on 127.0.0.1, from the jar cache that `make
jars` fills) or uses --bootstrap-servers, a simulated RocketMQ fleet playing named scenarios in
real time, and the streaming job (local Spark, reading with Spark's own Kafka source: the parts an
operator deploys) with its /metrics endpoint and group pages (/groups). Where the jars cannot be
fetched it says so and falls back to the embedded broker (tansu) and the project's own reader.
It shows a live table of groups and findings until Ctrl-C, SIGTERM or --duration-seconds (on a
terminal, redrawn every --refresh-seconds; elsewhere, printed again only when it changed); then
the final state: the groups and the findings still open when the fleet stopped.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from streaming.common import option_values as values
from streaming.common.listener import listen
from streaming.common.options import add_arguments as add_options
from streaming.common.options import declared_in, option
from streaming.core.contract import FindingRecord, GroupMetrics
from streaming.spark.config import JobConfig

DEFAULT_SCENARIOS = "client-id-collision,multi-topic-skew,broker-crash,lost-notification"
CONFLICT_SCENARIOS = {"broker-crash", "lost-notification", "network-partition", "strategy-change",
                      "client-id-collision", "subscription-mismatch"}
FINDINGS_KEPT = 200  # finding records a SnapshotStore keeps
CLEAR_SCREEN = "\033[2J\033[H"
# `rebalance-monitor demo --help`: what it runs, from the module's docstring.
DESCRIPTION = " ".join(__doc__.split("\n\n", 1)[1].split())


def _scenarios(text: str) -> str:
    from producers.simulator.scenarios import SCENARIOS

    listed = values.names(text)
    unknown = [name for name in listed.split(",") if name not in SCENARIOS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(sorted(SCENARIOS))}")
    return listed


_seconds = values.number(above=0)


@dataclass(frozen=True)
class DemoOptions:
    duration_seconds: float | None = option(
        "stop after this many wall-clock seconds", _seconds, default=None, metavar="SECONDS",
        shown_default="run until Ctrl-C")
    scenarios: str = option("comma-separated simulator scenarios, played in parallel, repeated",
                            _scenarios, default=DEFAULT_SCENARIOS, metavar="NAME[,NAME...]")
    speed: float = option("simulated seconds per wall second", _seconds, default=2.0,
                          metavar="N")
    bootstrap_servers: str | None = option(
        "use this Kafka instead of starting a broker", values.host_ports(), default=None,
        metavar="HOST:PORT[,...]", shown_default="a broker of its own")
    topic: str = option("the events topic", values.not_empty, default="rebalance.events",
                        metavar="TOPIC")
    metrics_host: str = option("address of the job's /metrics", values.not_empty,
                               default="127.0.0.1", metavar="HOST")
    metrics_port: int = option("port of the job's /metrics", values.port, default=9108,
                               metavar="PORT")
    refresh_seconds: float = option("seconds between table refreshes", _seconds, default=2.0,
                                    metavar="SECONDS")
    dashboard_base_url: str | None = declared_in(JobConfig, "dashboard_base_url")
    runbook_base_url: str | None = declared_in(JobConfig, "runbook_base_url")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = DESCRIPTION
    add_options(parser, DemoOptions)


def main(args: DemoOptions) -> int:
    logging.basicConfig(level=logging.WARNING)     # run as a module; the CLI has set --log-level
    sock = listen(args.metrics_host, args.metrics_port)     # first: a port in use ends it here
    signal.signal(signal.SIGTERM, _interrupt)
    workdir = tempfile.mkdtemp(prefix="rebalance-monitor-demo-")
    broker, source = _choose_broker(args, workdir)
    stop = threading.Event()
    monitor = fleet = None
    try:
        if broker is not None:
            broker.start()
        bootstrap = args.bootstrap_servers or broker.bootstrap_servers
        _create_topics(bootstrap, args.topic)
        monitor = _start_monitor(bootstrap, args, workdir, source, sock)
        # Replaces pyspark's handler, which cancels the running Spark jobs first: the micro-batch
        # in flight would fail and log its stack trace.
        signal.signal(signal.SIGINT, _interrupt)
        fleet = _start_fleet(bootstrap, args, stop)
        base = f"http://{args.metrics_host}:{monitor.metrics.port}"
        print(f"demo: broker {bootstrap} ({_broker_name(broker)}), metrics {base}/metrics, "
              f"groups {base}/groups, scenarios {args.scenarios} at {args.speed}x. "
              "Ctrl-C stops.", flush=True)
        _show_until_done(monitor, args)
    except KeyboardInterrupt:
        pass
    finally:
        _ignore_interrupts()
        stop.set()
        if fleet is not None:
            fleet.join(timeout=10)
        try:
            if monitor is not None:
                _wait_for_last_batch(monitor.query, broker)
                _print_final_state(monitor)
        finally:
            _shut_down(monitor, broker, workdir)
    print("demo: stopped", flush=True)
    return 0


def _choose_broker(args: DemoOptions, workdir: str):
    """(the broker to start, or None with --bootstrap-servers; the job's source). The embedded
    broker's high watermark misses its last batch's tail, which only the embedded reader
    works around: on it the job reads with that reader."""
    from pathlib import Path

    from streaming.embedded_broker import EmbeddedBroker
    from streaming.jars import kafka_broker_dir, kafka_broker_jars
    from streaming.kafka_broker import ApacheKafkaBroker

    if args.bootstrap_servers:
        return None, "auto"
    if kafka_broker_jars():
        return ApacheKafkaBroker(Path(workdir) / "kafka"), "auto"
    print(f"demo: no Apache Kafka jars in {kafka_broker_dir()} (make jars fetches them): "
          "using the embedded broker and reader", flush=True)
    return EmbeddedBroker(port=0), "embedded"


def _broker_name(broker) -> str:
    from streaming.jars import KAFKA_VERSION
    from streaming.kafka_broker import ApacheKafkaBroker

    if broker is None:
        return "--bootstrap-servers"
    return f"Apache Kafka {KAFKA_VERSION}" if isinstance(broker, ApacheKafkaBroker) else "embedded"


def _shut_down(monitor, broker, workdir: str) -> None:
    if monitor is not None:
        monitor.stop()
        monitor.spark.stop()
    if broker is not None:
        broker.stop()
    shutil.rmtree(workdir, ignore_errors=True)


class Interrupts:
    """SIGINT and SIGTERM as a KeyboardInterrupt in the main thread, except inside a call into
    Spark (`held`): py4j logs a call that a KeyboardInterrupt cuts as an ERROR with its
    traceback, so there the interrupt waits until the call has returned.

        >>> interrupts = Interrupts()
        >>> try:
        ...     with interrupts.held():
        ...         interrupts.handle(signal.SIGINT, None)      # Ctrl-C inside the call
        ...         print("the call returns")
        ... except KeyboardInterrupt:
        ...     print("then the interrupt")
        the call returns
        then the interrupt
    """

    def __init__(self) -> None:
        self._holding = False
        self._pending = False

    def handle(self, signum, frame) -> None:
        if self._holding:
            self._pending = True
            return
        raise KeyboardInterrupt

    @contextmanager
    def held(self) -> Iterator[None]:
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt


_INTERRUPTS = Interrupts()
_interrupt = _INTERRUPTS.handle


def _ignore_interrupts() -> None:
    """Shutting down takes a few seconds: a second Ctrl-C must not cut it (and the final state)
    short with a traceback. os.write: a print here could re-enter one the main thread is in."""
    def note(signum, frame) -> None:
        os.write(2, b"demo: stopping, please wait\n")

    signal.signal(signal.SIGINT, note)
    signal.signal(signal.SIGTERM, note)


def _create_topics(bootstrap: str, topic: str) -> None:
    from streaming.common.topics import create_topic

    create_topic(bootstrap, topic, partitions=4)
    create_topic(bootstrap, "rebalance.findings", partitions=1)
    create_topic(bootstrap, "rebalance.events.dlq", partitions=1)


def _start_monitor(bootstrap: str, args: DemoOptions, workdir: str, source: str,
                   sock: socket.socket):
    from streaming.spark.job import Monitor, build_session

    config = JobConfig(bootstrap_servers=bootstrap, topic=args.topic, source=source,
                       checkpoint=os.path.join(workdir, "checkpoint"),
                       metrics_host=args.metrics_host, metrics_port=args.metrics_port,
                       dashboard_base_url=args.dashboard_base_url,
                       runbook_base_url=args.runbook_base_url,
                       trigger_interval_ms=1_000, shuffle_partitions=2)
    spark = build_session(config, master="local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    monitor = Monitor(config, spark, sock)
    monitor.start()
    return monitor


def _start_fleet(bootstrap: str, args: DemoOptions, stop: threading.Event) -> threading.Thread:
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    thread = threading.Thread(target=_play_fleet, args=(bootstrap, args, names, stop),
                              name="demo-fleet", daemon=True)
    thread.start()
    return thread


def _play_fleet(bootstrap: str, args, names: list[str], stop: threading.Event) -> None:
    """Play every scenario in its own thread, each repeated back to back in event time."""
    threads = [threading.Thread(target=_play_scenario, args=(bootstrap, args, n, stop), daemon=True)
               for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _play_scenario(bootstrap: str, args, name: str, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    from producers.simulator.clock import RealtimeClock
    from producers.simulator.scenarios import SCENARIOS

    class StoppableClock(RealtimeClock):
        def wait_until(self, sim_ms: int) -> None:
            stop.wait(max(0.0, self._wall_start + sim_ms / 1000.0 / self.speed - time.monotonic()))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    epoch = int(time.time() * 1000)
    while not stop.is_set():
        scenario = SCENARIOS[name](seed=1, with_view=name in CONFLICT_SCENARIOS)
        # Each repetition continues the scenario's event time, so its groups never go back in time.
        for key, value in scenario.run_encoded(StoppableClock(args.speed, epoch_ms=epoch)):
            if stop.is_set():
                break
            producer.produce(args.topic, value, key)
            producer.poll(0)
        epoch += scenario.duration_ms + 60_000
    producer.flush(10)


def _show_until_done(monitor, args: DemoOptions) -> None:
    deadline = (None if args.duration_seconds is None
                else time.monotonic() + args.duration_seconds)
    view = LiveView(interactive=sys.stdout.isatty())
    while deadline is None or time.monotonic() < deadline:
        with _INTERRUPTS.held():
            failure = monitor.query.exception()
        if failure is not None:
            raise RuntimeError(f"streaming query failed: {failure}")
        text = view.refresh(monitor.store.groups(), monitor.store.recent_findings(10))
        if text is not None:
            print(text, flush=True)
        # Not stop.wait: a Ctrl-C landing inside Event.wait can leave its lock held, and the
        # shutdown's stop.set() would then hang.
        time.sleep(args.refresh_seconds)


class LiveView:
    """What each refresh of the live table prints. On a terminal: the whole table, redrawn in
    place, every refresh. Elsewhere (a pipe, a log file, CI), where nothing is redrawn: the table
    only when it differs, its clock line aside, from the one printed last (None: print nothing),
    after a blank line; the final state is printed at the end either way."""

    def __init__(self, interactive: bool,
                 clock: Callable[[], str] = lambda: time.strftime("%H:%M:%S")) -> None:
        self.interactive = interactive
        self.clock = clock
        self.shown: str | None = None   # the table printed last, without its clock line

    def refresh(self, groups: list[GroupMetrics], findings: list[FindingRecord]) -> str | None:
        table = _table(groups, findings, "latest findings:")
        if not self.interactive and table == self.shown:
            return None
        self.shown = table
        return (CLEAR_SCREEN if self.interactive else "\n") + _stamped(table, self.clock())


def _wait_for_last_batch(query, broker, quiet_s: float = 2.0, timeout_s: float = 10.0) -> None:
    """Until the query has found no new data for quiet_s (two triggers) and is between triggers:
    the store then holds what the fleet sent last, and stopping the query interrupts no batch
    (which would log its stack trace). Not when the embedded broker is gone (a Ctrl-C in the
    terminal reaches it too): nothing more can come."""
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    while query.isActive and (broker is None or broker.running) and time.monotonic() < deadline:
        status = query.status
        if status["isDataAvailable"]:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s and not status["isTriggerActive"]:
            return
        time.sleep(0.1)


def _print_final_state(monitor) -> None:
    """The last state the store holds, printed once the fleet has stopped and before the monitor
    stops: the group table and every finding still open, not just the latest ones."""
    history = monitor.store.recent_findings(FINDINGS_KEPT)
    text = render_table(monitor.store.groups(), open_findings(history),
                        f"open findings (of the last {len(history)} records):")
    print("\ndemo: final state\n" + text, flush=True)


def open_findings(records: list[FindingRecord]) -> list[FindingRecord]:
    """The findings whose latest record (oldest first in `records`) says started, by group."""
    latest = {(record.key, record.identity): record for record in records}
    started = [record for record in latest.values() if record.status == "started"]
    return sorted(started, key=lambda record: (record.group, record.system, repr(record.identity)))


def render_table(groups: list[GroupMetrics], findings: list[FindingRecord],
                 title: str = "latest findings:") -> str:
    """The live view: one line per group, then findings (by default the latest that started or
    ended)."""
    return _stamped(_table(groups, findings, title), time.strftime("%H:%M:%S"))


def _stamped(table: str, clock: str) -> str:
    return f"{clock}  rebalance-monitor demo\n\n{table}"


def _table(groups: list[GroupMetrics], findings: list[FindingRecord], title: str) -> str:
    header = f"{'group':<22} {'sys':<8} {'members':>7} {'queues':>6} {'double':>6} {'orphan':>6} " \
             f"{'skew':>5} {'idle':>4} {'rebal':>5}  flags"
    lines = [header, "-" * len(header)]
    for group in groups:
        flags = [name for value, name in ((group.subscription_inconsistent, "SUBSCRIPTION"),
                                          (group.strategy_inconsistent, "STRATEGY"),
                                          (group.client_id_collisions, "CLIENT-ID"),
                                          (group.view_divergent_clients, "STALE-VIEW"),
                                          (group.broker_view_divergent, "BROKER-VIEW"))
                 if value]
        lines.append(
            f"{group.group[:22]:<22} {group.system:<8} {group.members:>7} "
            f"{sum(group.queues.values()):>6} {sum(group.double_assigned.values()):>6} "
            f"{sum(group.orphaned.values()):>6} {group.skew_ratio:>5.2f} "
            f"{group.idle_clients:>4} {group.rebalances_total:>5}  {' '.join(flags)}")
    lines += ["", title]
    for record in findings:
        queue = record.queue
        where = f"{record.topic or ''} {queue[0]}:{queue[1]}" if queue else ""
        lines.append(f"  {record.status:<7} {record.kind:<22} {record.group:<18} "
                     f"{where:<22} {','.join(record.clients)}")
    return "\n".join(lines)
