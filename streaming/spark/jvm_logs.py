"""The Spark JVM's logs in the process's format, without a line per retry in an outage.

    with jvm_logs.configured("json"):      # around the call that starts the JVM
        spark = builder.getOrCreate()

The JVM that pyspark starts reads a log4j2 configuration written here (LOG4J_CONFIGURATION_FILE,
which it inherits): Spark's own levels, WARN for the rest, and ERROR for the loggers that write
a line per failed attempt while a broker is down (the Java Kafka client's NetworkClient warnings,
Spark's offset reader's retries with their stack traces). The probe (source_probe.py) already
logs the outage once and counts it on /metrics. In json format the layout is log4j2's
JsonTemplateLayout with the fields of streaming.common.logs.JsonFormatter; and what the JVM
writes outside log4j (the JVM's own warnings, Spark's prints, its Python workers' output) is
read from a pipe and written as JSON lines too, so every line of the process parses.

Where spark-submit started the JVM (a cluster), it is running already: give it a log4j2
configuration with spark-submit (docs/operating.md, Logging); only the pipe is set up, to no
effect.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("rebalance_monitor.jvm")

ENVIRONMENT_VARIABLE = "LOG4J_CONFIGURATION_FILE"

# Logger -> level. Spark's defaults (its log4j2-defaults.properties), then ours.
LEVELS = {
    "org.sparkproject.jetty": "warn",
    "org.sparkproject.jetty.util.component.AbstractLifeCycle": "error",
    "org.apache.parquet.CorruptStatistics": "error",
    "parquet.CorruptStatistics": "error",
    # A warning per failed connection attempt, several a second while a broker is down.
    "org.apache.kafka": "error",
    # "Error in attempt N getting Kafka offsets", with a stack trace, per attempt.
    "org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin": "error",
    "org.apache.spark.sql.kafka010.KafkaOffsetReaderConsumer": "error",
    # "Current batch is falling behind" after every long batch (an outage's among them):
    # rebalance_monitor_batch_duration_seconds says it.
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor": "error",
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor": "error",
}

# Spark's lines on a task and a query that failed (the task's with its stack trace, a killed
# task's shuffle file it could not delete). While the events broker is known to be down, a batch
# that fails for it says nothing the job's own line does not: they are quieted for the outage
# (OutageQuiet) and restored once a batch has completed after it (a failed batch's last tasks
# are killed after the broker is back).
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.storage.DiskBlockObjectWriter",
)

TEXT_LAYOUT = """\
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""
JSON_LAYOUT = """\
appender.console.layout.type = JsonTemplateLayout
appender.console.layout.eventTemplateUri = {template_uri}
"""
# Python's level names (WARNING, CRITICAL), as JsonFormatter writes them.
JSON_TEMPLATE = {
    "time": {"$resolver": "timestamp",
             "pattern": {"format": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "timeZone": "UTC"}},
    "level": {"$resolver": "pattern", "pattern": "%level{WARN=WARNING, FATAL=CRITICAL}",
              "stackTraceEnabled": False},
    "logger": {"$resolver": "logger", "field": "name"},
    "message": {"$resolver": "message", "stringified": True},
    "exception": {"$resolver": "exception", "field": "stackTrace",
                  "stackTrace": {"stringified": True}},
}


def log4j2_properties(log_format: str, template_uri: str = "") -> str:
    lines = ["rootLogger.level = warn", "rootLogger.appenderRef.console.ref = console",
             "appender.console.type = Console", "appender.console.name = console",
             "appender.console.target = SYSTEM_ERR"]
    for index, (name, level) in enumerate(LEVELS.items()):
        lines += [f"logger.l{index}.name = {name}", f"logger.l{index}.level = {level}"]
    layout = (JSON_LAYOUT.format(template_uri=template_uri) if log_format == "json"
              else TEXT_LAYOUT)
    return "\n".join(lines) + "\n" + layout


def write_config(directory: Path, log_format: str) -> Path:
    template = directory / "log4j2-template.json"
    template.write_text(json.dumps(JSON_TEMPLATE))
    config = directory / "log4j2.properties"
    config.write_text(log4j2_properties(log_format, template.as_uri()))
    return config


@contextlib.contextmanager
def configured(log_format: str) -> Iterator[None]:
    """Around the start of the JVM: it reads our configuration and, in json format, writes its
    stdout and stderr into a pipe we rewrite."""
    directory = Path(tempfile.mkdtemp(prefix="rebalance-monitor-log4j2-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ[ENVIRONMENT_VARIABLE] = str(write_config(directory, log_format))
    if log_format != "json":
        yield
        return
    with _outputs_into_pipe() as read_end:
        yield
    threading.Thread(target=_rewrite_as_json, args=(read_end,), name="jvm-output",
                     daemon=True).start()


@contextlib.contextmanager
def _outputs_into_pipe() -> Iterator[int]:
    """File descriptors 1 and 2 write into a new pipe for the block, so the processes started
    in it keep the pipe as their stdout and stderr; ours are restored after it."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    read_end, write_end = os.pipe()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    try:
        for fd in saved:
            os.dup2(write_end, fd)
        yield read_end
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(write_end)


def _rewrite_as_json(read_end: int) -> None:
    """Each line as it is when it is a JSON object (log4j2's layout, or our own logging written
    during the start), else as a JsonFormatter line of logger rebalance_monitor.jvm."""
    with os.fdopen(read_end, "r", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            text = line.rstrip("\n")
            if is_json_object(text):
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
            elif text.strip():
                log.warning("%s", text)


def is_json_object(text: str) -> bool:
    """
    >>> is_json_object('{"level": "WARNING"}'), is_json_object("WARNING: Using incubator modules")
    (True, False)
    """
    if not text.startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


class OutageQuiet:
    """Raises the task-failure loggers of a running JVM to FATAL while an outage lasts, and puts
    back the levels they had at the first batch completed after it (`batch_completed`). A JVM
    that is gone (the job stopping) is left alone."""

    def __init__(self, jvm) -> None:
        self._jvm = jvm
        self._before: dict[str, object] | None = None
        self._ended = False
        self._lock = threading.Lock()

    def outage(self, started: bool) -> None:
        with self._lock:
            if self._jvm is None:       # no JVM of ours to set (Spark Connect)
                return
            self._ended = not started and self._before is not None
            if started and self._before is None:
                self._call(self._quiet)

    def batch_completed(self) -> None:
        with self._lock:
            if self._ended:
                self._call(self._restore)

    def _quiet(self) -> None:
        self._before = {name: self._level(name) for name in TASK_FAILURE_LOGGERS}
        self._set(dict.fromkeys(TASK_FAILURE_LOGGERS, self._jvm.org.apache.logging.log4j
                                .Level.FATAL))

    def _restore(self) -> None:
        self._set(self._before)
        self._before, self._ended = None, False

    def _call(self, change) -> None:
        try:
            change()
        except Exception as error:  # noqa: BLE001 - py4j's errors once the JVM is gone
            log.debug("JVM log levels not changed: %s", error)

    def _level(self, name: str):
        return self._jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel()

    def _set(self, levels: dict[str, object]) -> None:
        configurator = self._jvm.org.apache.logging.log4j.core.config.Configurator
        for name, level in levels.items():
            configurator.setLevel(name, level)

