"""Every command's logging: `--log-level` and `--log-format text|json` (environment defaults
REBALANCE_MONITOR_LOG_LEVEL and REBALANCE_MONITOR_LOG_FORMAT), options like any other
(`LogOptions`), set once before the command runs.

    >>> record = logging.LogRecord("rebalance_monitor.job", logging.WARNING, __file__, 1,
    ...                            "query restarted (%s)", ("StreamingQueryException",), None)
    >>> record.created = 1_700_000_000.25
    >>> JsonFormatter().format(record)
    '{"time": "2023-11-14T22:13:20.250Z", "level": "WARNING", "logger": "rebalance_monitor.job", "message": "query restarted (StreamingQueryException)"}'
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

from streaming.common import option_values as values
from streaming.common.options import option

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        out = {"time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
               "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


@dataclass(frozen=True)
class LogOptions:
    log_level: str | None = option(
        ", ".join(LEVELS), values.one_of(*LEVELS, case_insensitive=True), default=None,
        metavar="LEVEL", shown_default="INFO, demo: WARNING")
    log_format: str = option("text, or json: one object a line", values.one_of("text", "json"),
                             default="text", metavar="FORMAT")

    def level(self, default: str) -> str:
        return self.log_level or default


# py4j logs every call the JVM makes into Python (each micro-batch's foreachBatch) at INFO.
QUIETED = {"py4j": logging.WARNING,
           # Its ERROR on a foreachBatch failure repeats the sink's own line
           # (streaming/spark/batch_errors.py), which says it once.
           "py4j.clientserver": logging.CRITICAL}


def configure_logging(level: str, log_format: str) -> None:
    global _format
    _format = log_format
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name, quieted_level in QUIETED.items():
        logging.getLogger(name).setLevel(quieted_level)
    logging.captureWarnings(True)   # the warnings module's lines take the same format


_format = "text"


def log_format() -> str:
    """The format configure_logging set: the JVM's logs (streaming/spark/jvm_logs.py) follow it."""
    return _format
