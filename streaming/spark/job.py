"""rebalance-monitor streaming job: Kafka events -> per-group state -> Prometheus and findings.

Usage:
    rebalance-monitor run --bootstrap-servers HOST:9092 --topic rebalance.events \\
        --checkpoint /data/checkpoint [--source auto|kafka|embedded] [--metrics-port 9108]

    spark-submit --master spark://HOST:7077 --py-files rebalance_monitor.zip \\
        streaming/spark/job.py run --bootstrap-servers ... (the same arguments)

One source, one stateful transformation, one foreachBatch sink:
    read_event_stream -> route_events -> groupBy(shard).applyInPandasWithState -> BatchSink
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields, replace

from prometheus_client import CollectorRegistry
from pyspark import SparkContext, java_gateway
from pyspark.errors.exceptions.captured import SparkRuntimeException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent
from pyspark.sql.streaming.state import GroupStateTimeout

from streaming.common import options
from streaming.common.delivery import DeliveryStats, Outbox, RetryPolicy
from streaming.common.delivery_metrics import DeliveryCollector
from streaming.common.faults import Backoff
from streaming.common.listener import listen
from streaming.common.logs import log_format
from streaming.core.state.codec import CodecError
from streaming.core.state.shard import salvage_shard
from streaming.core.step import StepConfig
from streaming.exporter import (
    ClientSeriesPolicy,
    GroupFamiliesText,
    MetricsServer,
    MetricsServerConfig,
    SnapshotStore,
)
from streaming.exporter.api import group_api
from streaming.exporter.health import SourceCollector, query_restarts
from streaming.exporter.prerender import Prerender
from streaming.exporter.restore import restore_group
from streaming.exporter.scrape_text import ScrapeText
from streaming.exporter.views import PageLinks
from streaming.jars import spark_kafka_conf
from streaming.spark import jvm_logs, kafka_client
from streaming.spark.batch_errors import OutageFailures, bounded_failures, summary
from streaming.spark.checkpoint_files import (
    HadoopTextFile,
    checkpoint_child,
    hadoop_checkpoint_problem,
    hadoop_path_exists,
    local_checkpoint_problem,
)
from streaming.spark.checkpoint_layout import (
    DEFAULT_SHARDS,
    MAX_SPREAD_SHARDS,
    ONE_GROUP_PER_SHARD,
    CheckpointLayoutError,
    StateLayout,
    check_layout,
    layout_path,
)
from streaming.spark.config import JobConfig
from streaming.spark.parse import route_events, with_watermark_keeping_late_rows
from streaming.spark.sinks import BatchSink, counters_path
from streaming.spark.source import SourceConfig, read_event_stream
from streaming.spark.source_probe import SourceProbe
from streaming.spark.state_function import OUTPUT_SCHEMA, STATE_SCHEMA, make_state_function

log = logging.getLogger("rebalance_monitor.job")

QUERY_NAME = "rebalance_monitor"
# A stop (SIGTERM, SIGINT) cancels the micro-batch in flight (Spark's query.stop) and waits this
# long for it to end, then abandons it: the checkpoint's offset log has it, so the next run
# re-runs it. A batch stuck on an unreachable broker would otherwise hold the stop for the Kafka
# client's own timeouts (a minute or more).
QUERY_STOP_TIMEOUT_MS = 4_000
# The whole stop, the query's included: past it the process exits at once (still with status 0).
STOP_WITHIN_S = 8.0
# What the findings producer may still deliver once the query has stopped.
FLUSH_ON_STOP_S = 2.0
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# pyspark's daemon, telling a cancelled task in one line instead of a traceback (local masters).
WORKER_DAEMON = "streaming.spark.worker_daemon"


def build_session(config: JobConfig, master: str | None = None) -> SparkSession:
    # Local runs: Python workers must use this interpreter (the one with our dependencies).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("rebalance-monitor")
    if not master and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not launched by spark-submit (which hands over its JVM and its --master): run locally.
        master = "local[*]"
    if master:
        builder = builder.master(master)
    if master and master.startswith("local"):
        # The workers' output is the job's own log here, and they import the project as this
        # process does; a cluster's executors may have it only through --py-files, which their
        # daemon, started before any task, cannot import (pyspark's own daemon runs there).
        builder = builder.config("spark.python.daemon.module", WORKER_DAEMON)
    builder = builder.config("spark.ui.showConsoleProgress", "false")
    # A streaming query never uses adaptive execution, and Spark warns so at each start of it.
    builder = builder.config("spark.sql.adaptive.enabled", "false")
    builder = builder.config("spark.sql.streaming.stopTimeout", str(QUERY_STOP_TIMEOUT_MS))
    # The spread shard keys are a literal array in every batch's plan: a plan's text (a failed
    # query's message, the UI) holds them whole, and Spark does not log that it cut one short.
    builder = builder.config("spark.sql.debug.maxToStringFields", str(MAX_SPREAD_SHARDS))
    # Loaded whatever the source: a later session of this JVM cannot add it to the driver.
    builder = builder.config(map=spark_kafka_conf())
    if config.shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
    if config.state_store == "rocksdb":
        builder = builder.config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    with jvm_logs.configured(log_format()), _jvm_ignoring_sigterm():
        spark = builder.getOrCreate()
    if config.shuffle_partitions is None:
        # Each state partition is one task per batch with a fixed cost (a state store commit, a
        # Python round trip), so more partitions than cores only add to every batch's duration.
        spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    return spark


@contextmanager
def _jvm_ignoring_sigterm() -> Iterator[None]:
    """A JVM that pyspark launches meanwhile starts with SIGTERM ignored, as pyspark starts it
    with SIGINT ignored: a SIGTERM to the process group (`timeout`, a supervisor) then stops the
    job through its Python driver alone (StopSignals), which ends the JVM. The JVM's own
    shutdown on SIGTERM stopped the SparkContext under the batch in flight, which the query
    logged as an ERROR with a NullPointerException. The JVM still ends with its driver: the
    gateway exits when its stdin closes. Under spark-submit nothing is launched here."""
    launch = java_gateway.Popen

    def popen(*args, preexec_fn=None, **kwargs):
        def preexec() -> None:
            if preexec_fn is not None:
                preexec_fn()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return launch(*args, preexec_fn=preexec, **kwargs)

    if os.name != "posix":        # no preexec_fn elsewhere
        yield
        return
    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = launch


def source_config(config: JobConfig) -> SourceConfig:
    """The source's settings: the JobConfig fields of the same names."""
    return SourceConfig(**{each.name: getattr(config, each.name) for each in fields(SourceConfig)})


def restore_snapshots(spark: SparkSession, checkpoint: str, store: SnapshotStore,
                      step_config: StepConfig) -> int:
    """Fill /metrics and the groups' details from the state store of the last committed batch,
    before any new event."""
    if not hadoop_path_exists(spark, checkpoint_child(checkpoint, "state")):
        return 0
    # The state store reader asks the driver's StateStoreCoordinator, which pyspark 4.2 only
    # registers with the session's StreamingQueryManager: before any query, create it.
    spark.streams.active  # noqa: B018
    try:
        rows = spark.read.format("statestore").load(checkpoint).collect()
    except SparkRuntimeException as error:
        # Killed during its first batch: state files exist but no batch was committed. Nothing
        # to restore; the query re-runs that batch.
        if error.getCondition() != "STDS_COMMITTED_BATCH_UNAVAILABLE":
            raise
        return 0
    restored, unreadable = 0, 0
    for row in rows:
        shard = row["value"]["groupState"]["blob"]
        salvaged = salvage_shard(bytes(shard)) if shard is not None else None
        unreadable += bool(salvaged and salvaged.broken)
        for key, entry in salvaged.entries.items() if salvaged else ():
            try:
                restore_group(store, key, entry.blob, step_config)
            except CodecError:
                unreadable += 1
                continue
            restored += 1
    if unreadable:
        # The state function resets them at their next batch, where they are counted.
        log.error("%d stored group states or shards could not be read: not shown until their "
                  "groups' next events rebuild them", unreadable)
    return restored


def start_query(spark: SparkSession, config: JobConfig, sink, state_function=None,
                in_outage=lambda: False,
                shard_keys: Sequence[int] | None = None) -> StreamingQuery:
    """The job's query: source, routing, the per-group state function (default: the core's
    step, as make_state_function wraps it), foreachBatch `sink`; `in_outage`: the events broker
    is known to be down (a failing batch is then the outage's); `shard_keys`: each state
    shard's key, as the checkpoint's layout says (None: the shard's number)."""
    if state_function is None:
        state_function = make_state_function(config.step_config(), config.max_event_bytes,
                                             config.max_clock_skew_ms)
    records = read_event_stream(spark, source_config(config))
    routed = with_watermark_keeping_late_rows(
        route_events(records, config.max_event_bytes, config.state_shards or DEFAULT_SHARDS,
                     config.max_clock_skew_ms, shard_keys),
        f"{config.watermark_delay_ms} milliseconds")
    outputs = routed.groupBy("shard").applyInPandasWithState(
        state_function, OUTPUT_SCHEMA, STATE_SCHEMA, "update", GroupStateTimeout.EventTimeTimeout)
    return (outputs.writeStream.queryName(QUERY_NAME)
            .option("checkpointLocation", config.checkpoint)
            .outputMode("update")
            .trigger(processingTime=f"{config.trigger_interval_ms} milliseconds")
            .foreachBatch(bounded_failures(sink, in_outage))
            .start())


# Each attempt of a finding or dead letter lasts up to a minute in the client, and a record
# gets three: an outage of the findings topic of up to three minutes loses nothing.
PRODUCER_DEFAULTS = {"linger.ms": 20, "message.timeout.ms": 60_000,
                     "queue.buffering.max.kbytes": 65_536}


def make_outbox(config: JobConfig, stats: DeliveryStats) -> Outbox:
    from confluent_kafka import Producer

    stats.client.what = "findings producer"
    settings = {**PRODUCER_DEFAULTS, **stats.client.settings(), **config.producer_options()}
    max_bytes = int(settings.get("message.max.bytes", 1_000_000))
    return Outbox(Producer(settings), stats, RetryPolicy(attempts=3), max_bytes).start()


class ProgressListener(StreamingQueryListener):
    """Spark's own measure of each micro-batch (all of it, not only our foreachBatch): its
    duration, and the records read and rows dropped that the sink accounts for. It gets each
    batch's progress through JsonProgressBridge, or with `exact` through PySpark's own bridge
    (the twin: the same progress, field by field)."""

    def __init__(self, store: SnapshotStore, sink: BatchSink, query_name: str,
                 exact: bool = False) -> None:
        self._store = store
        self._sink = sink
        self._query_name = query_name
        self._exact = exact

    @property
    def _jlistener(self):
        # Read by addListener once it has imported the wrapper's package and started the
        # callback server; a PySpark that no longer reads it uses its own bridge.
        if not self._exact and not hasattr(self, "_jlistenerobj"):
            self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(  # type: ignore[union-attr]
                JsonProgressBridge(self))
        return super()._jlistener

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        if progress.name == self._query_name:
            seconds = progress.durationMs.get("triggerExecution", 0) / 1000.0
            self._store.update_health(batch_duration_seconds=seconds)
            dropped = sum(op.numRowsDroppedByWatermark for op in progress.stateOperators)
            try:
                self._sink.note_progress(progress.batchId, progress.numInputRows, dropped)
            except Exception as error:  # noqa: BLE001 - the listener thread must go on
                # The counters file refused the save; the next batch's save fails the same way
                # and restarts the query, which is where such a fault is counted.
                log.warning("batch %d: Spark's progress not saved: %s", progress.batchId, error)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


class JsonProgressBridge(JStreamingQueryListener):
    """How a batch's progress reaches the listener: its JSON, in one call. PySpark's own bridge
    reads it field by field over py4j, and each Java map it walks ends in an exception that
    PySpark's error conversion tests against some 15 classes by reflection: about 400 round
    trips a batch, with failing class loads in the JVM (16 % of the JVM's samples at 10,000
    groups, docs/benchmarks.md). Spark Connect's listeners get the progress as this JSON too."""

    def onQueryProgress(self, jevent) -> None:
        progress = json.loads(jevent.progress().json())
        self.pylistener.onQueryProgress(QueryProgressEvent.fromJson({"progress": progress}))


class Monitor:
    """The running job: configure, start (metrics first, then the query), stop in reverse."""

    def __init__(self, config: JobConfig, spark: SparkSession,
                 metrics_socket: socket.socket | None = None) -> None:
        self.config = config
        self.spark = spark
        clients = ClientSeriesPolicy(config.client_metrics, config.max_client_series)
        # --exact: no text kept, no render ahead: prometheus_client renders the groups'
        # collector at every scrape (the twin of GroupFamiliesText and Prerender).
        self.group_text = None if config.exact else GroupFamiliesText(clients)
        self.store = SnapshotStore(self.group_text)
        self.scrape_text = ScrapeText(self.store, self.group_text, clients)
        self.prerender = Prerender(self.scrape_text.render_full)
        self.delivery = DeliveryStats()
        self.restarts = query_restarts()
        self.source_probe = SourceProbe(
            kafka_client.client_settings(
                config.bootstrap_servers,
                config.kafka_options.for_librdkafka()),
            config.topic, on_change=self._source_changed)
        self._outage_quiet = jvm_logs.OutageQuiet(getattr(spark, "_jvm", None))
        self._outage_failures = OutageFailures()
        # The job's health families come with the groups' (scrape_text): one view of both.
        self.registry = CollectorRegistry()
        self.registry.register(SourceCollector(self.source_probe.health))
        self.registry.register(DeliveryCollector(self.delivery))
        self.registry.register(self.restarts)
        self.metrics = MetricsServer(MetricsServerConfig(config.metrics_host, config.metrics_port),
                                     self.registry, self._group_families,
                                     group_api(self.store, PageLinks(config.dashboard_base_url,
                                                                     config.runbook_base_url)),
                                     metrics_socket)
        self.query: StreamingQuery | None = None
        self.layout = StateLayout(self.config.state_shards or DEFAULT_SHARDS)  # start() checks it
        self._sink: BatchSink | None = None

    def _group_families(self, names) -> tuple[bytes, ...]:
        return self.scrape_text.served(self.prerender.latest, names)

    def start(self) -> None:
        """Raises CheckpointLayoutError, before serving anything, on a checkpoint of another
        state layout."""
        checkpoint = self.config.checkpoint
        self.layout = check_layout(
            HadoopTextFile(self.spark, layout_path(checkpoint)), checkpoint,
            has_progress=hadoop_path_exists(self.spark, checkpoint_child(checkpoint, "offsets")),
            shards=ONE_GROUP_PER_SHARD if self.config.exact else self.config.state_shards)
        self.config = replace(self.config, state_shards=self.layout.shards)
        restored = restore_snapshots(self.spark, checkpoint, self.store,
                                     self.config.step_config())
        counters = HadoopTextFile(self.spark, counters_path(self.config.checkpoint))
        self._sink = BatchSink(self.store, counters, make_outbox(self.config, self.delivery),
                               self.config.findings_topic, self.config.dead_letter_topic,
                               after_batch=self._batch_completed,
                               cluster_silence_ms=self.config.cluster_silence_ms,
                               cluster_forget_ms=self.config.cluster_forget_ms)
        self.prerender.start().changed()   # the groups restored from the checkpoint
        self.metrics.start()
        self.source_probe.start()
        log.info("metrics on %s:%s, %d groups restored from the checkpoint (%d state shards, "
                 "keyed by %s)", self.config.metrics_host, self.metrics.port, restored,
                 self.layout.shards, self.layout.shard_keys)
        self._listener = ProgressListener(self.store, self._sink, QUERY_NAME, self.config.exact)
        self.spark.streams.addListener(self._listener)
        self.query = self._start_query()

    def _start_query(self) -> StreamingQuery:
        return start_query(self.spark, self.config, self._sink,
                           in_outage=self.source_probe.down, shard_keys=self.layout.keys())

    def _batch_completed(self) -> None:
        self.prerender.changed()
        self._outage_quiet.batch_completed()

    def _source_changed(self, up: bool) -> None:
        """The events topic became reachable (`up`) or not: Spark's lines on each batch that
        fails for an outage are quieted while it lasts, and until a batch completes after it."""
        self._outage_quiet.outage(started=not up)
        said = self._outage_failures.ended() if up else None
        if said:
            log.info(said)

    def run_until(self, stopping: threading.Event, max_backoff_s: float = 60.0) -> None:
        """Keep the query running until `stopping` is set. A query that fails (whatever the
        cause) is restarted on its checkpoint after a backoff, so it resumes exactly where its
        last batch committed; each restart is counted by cause and logged."""
        backoff, started = Backoff(max_s=max_backoff_s), time.monotonic()
        while not stopping.is_set():
            if self.query.isActive:
                stopping.wait(1.0)
                continue
            if stopping.is_set():
                return  # ended by the stop (the JVM got the signal too): not a failure
            error = self.query.exception()
            if error is None:
                return  # stopped on purpose
            if time.monotonic() - started > max_backoff_s:
                backoff.reset()  # it had run well for a while: a new failure, not a loop
            cause = _failure_cause(error)
            self.restarts.labels(cause).inc()
            wait = backoff.next()
            self._say_failed(cause, wait, error)
            if stopping.wait(wait):
                return
            self.query = self._start_query()
            started = time.monotonic()

    def _say_failed(self, cause: str, wait: float, error) -> None:
        """A failure in an outage of the events broker is the outage's: counted on /metrics and
        said when the outage ends, in one line for all of them; any other at once, with its
        error."""
        if not self.source_probe.down():
            log.error("streaming query failed (%s); restarting it on its checkpoint in %.0f s: %s",
                      cause, wait, error)
            return
        self._outage_failures.note(cause)      # said when the topic is reachable again
        log.debug("streaming query failed (%s) while the events topic is unreachable; restarting "
                  "it on its checkpoint in %.0f s", cause, wait)

    def stop(self) -> None:
        """Stop in reverse order of start, each part bounded in time. The query first: Spark
        cancels its batch in flight, which ends within QUERY_STOP_TIMEOUT_MS or is abandoned
        (the next run replays it). The JVM ignores the group's SIGTERM (_jvm_ignoring_sigterm)
        and SIGINT, but under spark-submit or a signal to it alone it may be gone already:
        calls into it then fail, which is expected and not reported."""
        if self.query is not None:
            _quietly(self.query.stop)
            _quietly(self.spark.streams.removeListener, self._listener)
        self.source_probe.stop(timeout_s=1.0)
        if self._sink is not None:
            self._sink.close(FLUSH_ON_STOP_S)
        self.prerender.stop()
        self.metrics.stop()


def _quietly(call, *args) -> None:
    """A call into Spark during the stop: a stopped SparkContext, a JVM already gone or a batch
    that did not end in time is what a stop may meet, and none of them is news. Nor is the
    error's text: a Py4J error fetches it from the JVM, which the group's signal may have
    ended since (`summary` does not fail on that)."""
    try:
        call(*args)
    except Exception as error:  # noqa: BLE001 - Py4JError, Py4JJavaError, captured exceptions
        log.debug("while stopping: %s", summary(error))


def _failure_cause(error) -> str:
    """A label value for a failed query: Spark's error condition, else the exception class."""
    condition = getattr(error, "getCondition", lambda: None)()
    return str(condition or type(error).__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_arguments(parser, JobConfig)


class StopSignals:
    """SIGTERM and SIGINT: the first logs one "stopping" line and sets `stopping`, and from then
    the stop has STOP_WITHIN_S before the process exits regardless; a second one exits at once.
    Exit status 0 either way: a stop asked for is not a failure."""

    def __init__(self, stopping: threading.Event, within_s: float = STOP_WITHIN_S) -> None:
        self.stopping = stopping
        self._within_s = within_s

    def install(self) -> StopSignals:
        # Again after the SparkContext starts: pyspark replaces the SIGINT handler with its own,
        # which cancels the running jobs (the batch in flight would fail with a stack trace).
        for each in (signal.SIGTERM, signal.SIGINT):
            signal.signal(each, self._on_signal)
        return self

    def _on_signal(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        if self.stopping.is_set():
            log.warning("%s again: stopping now", name)
            _exit_now()
        log.info("stopping (%s): cancelling the batch in flight, if any (the next start "
                 "replays it)", name)
        _quiet_py4j()
        self.stopping.set()
        overdue = threading.Timer(self._within_s, self._overdue)
        overdue.daemon = True
        overdue.start()

    def _overdue(self) -> None:
        log.warning("the stop took more than %.0f s: exiting now", self._within_s)
        _exit_now()


class _NotPy4J(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("py4j") or "/py4j/" in record.pathname)


def _quiet_py4j() -> None:
    """From the stop on, py4j's reports of a connection the dying JVM closed (with their stack
    traces, some on the root logger) are what a stop looks like, not news: drop them. So is the
    accumulator server's EOFError when the JVM's end of it closes (socketserver prints that
    one to stderr itself)."""
    from pyspark import accumulators

    for handler in logging.getLogger().handlers:
        handler.addFilter(_NotPy4J())
    for name in ("AccumulatorTCPServer", "AccumulatorUnixServer"):
        server = getattr(accumulators, name, None)
        if server is not None:
            server.handle_error = lambda *_: None


def _exit_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - exiting anyway
            pass
    os._exit(0)


def checked_before_spark(config: JobConfig) -> socket.socket:
    """What can be judged before Spark starts: the metrics port, taken and kept (its socket),
    and a local checkpoint, created and written once. Raises OptionError."""
    sock = listen(config.metrics_host, config.metrics_port)
    problem = local_checkpoint_problem(config.checkpoint)
    if problem is not None:
        sock.close()
        raise options.refused(config, "checkpoint", problem)
    return sock


def checked_with_spark(spark: SparkSession, config: JobConfig) -> None:
    """The checkpoint written once through Hadoop's FileSystem, as the query will write it
    (s3a://, hdfs://), before the query starts. Raises OptionError."""
    problem = hadoop_checkpoint_problem(spark, config.checkpoint)
    if problem is not None:
        raise options.refused(config, "checkpoint", problem)


def main(config: JobConfig) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sock = checked_before_spark(config)
    stopping = threading.Event()
    signals = StopSignals(stopping).install()
    try:
        spark = build_session(config, config.master)
        signals.install()
        spark.sparkContext.setLogLevel("WARN")
        checked_with_spark(spark, config)
        monitor = Monitor(config, spark, sock)
    except options.OptionError:
        _quiet_py4j()
        _quietly(spark.stop)
        raise
    except Exception:
        if _stopped_by_signal(stopping):
            return 0    # signalled while the JVM started: it ended with the signal
        raise
    try:
        if not stopping.is_set():
            monitor.start()
    except CheckpointLayoutError as error:
        log.error("%s", error)
        return 2
    except Exception:
        if not _stopped_by_signal(stopping):
            raise
    try:
        if monitor.query is not None:
            monitor.run_until(stopping)
    except Exception:
        if not _stopped_by_signal(stopping):
            raise
    finally:
        monitor.stop()
        with warnings.catch_warnings():
            # "Unable to cleanly shutdown Spark JVM process": the group's signal ended it first.
            warnings.simplefilter("ignore")
            _quietly(spark.stop)
    return 0


def _stopped_by_signal(stopping: threading.Event) -> bool:
    """Whether a failed call into Spark was the stop's doing: the process group's signal ends
    the JVM too, and its calls can fail a moment before this process's handler has run."""
    return stopping.wait(1.0)


if __name__ == "__main__":  # spark-submit streaming/spark/job.py run ...
    argv = sys.argv[1:]
    if argv and argv[0] == "run":
        argv = argv[1:]
    parser = options.OneLineParser(prog="rebalance-monitor run")
    add_arguments(parser)
    sys.exit(main(parser.parse_args(argv).config))
