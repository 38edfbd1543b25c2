"""A foreachBatch function's failure, handed to Spark in a few hundred characters.

When the query is being stopped, Spark asks whether the foreachBatch failure was the stop
itself by matching the Python error's text against
`py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)(<interrupt>)`
(StreamExecution.isInterruptionException, Spark 4). java.util.regex recurses once per character
of that group, so a traceback that holds a Java stack trace (a DataFrame call interrupted by
the stop: thousands of characters) overflows the stack inside Spark's catch block, and the
stream thread dies with StackOverflowError instead of stopping. The sink therefore fails with
its error's first lines only: the Py4J call and the Java exception, which is what that test
reads. The whole error is logged here, once (an interruption, the stop itself, in one line).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable

log = logging.getLogger(__name__)

LINE_CHARS = 200   # per line of the summary; two lines, so Spark's match stays shallow
# What Spark's stop test looks for (StreamExecution.IO_EXCEPTION_NAMES): a stop, not a fault.
INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                 "java.nio.channels.ClosedByInterruptException")


class BatchFailed(RuntimeError):
    """The sink's batch failed; the message is `summary(error)`."""


def bounded_failures(sink, in_outage: Callable[[], bool] = lambda: False):
    """`sink` as a foreachBatch function whose failures reach Spark as BatchFailed. During a
    known outage of the events broker (`in_outage`) a failure is the outage's: the query's
    restart says it, once."""

    def call(batch_df, batch_id: int) -> None:
        try:
            sink(batch_df, batch_id)
        except Exception as error:
            text = summary(error)
            if any(name in text for name in INTERRUPTIONS):
                log.info("batch %d interrupted (the query is stopping): %s", batch_id, text)
            elif in_outage():
                log.debug("batch %d failed in the events broker's outage: %s", batch_id, text)
            else:
                log.error("batch %d failed in the sink: %s", batch_id, text, exc_info=error)
            raise BatchFailed(text) from None

    return call


def summary(error: BaseException) -> str:
    """The error's type and its first two lines of text, each cut to LINE_CHARS."""
    try:
        text = str(error)
    except Exception:  # a Py4J error renders through the JVM, which may be gone
        text = getattr(error, "errmsg", "") or ""
    lines = [line[:LINE_CHARS] for line in text.splitlines() if line.strip()][:2]
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}: " + "\n".join(lines)


class OutageFailures:
    """The query's failures while the events broker is known to be down: each is the outage's,
    counted, and said in one line when the broker is reachable again."""

    def __init__(self) -> None:
        self._causes: Counter = Counter()
        self._lock = threading.Lock()

    def note(self, cause: str) -> None:
        with self._lock:
            self._causes[cause] += 1

    def ended(self) -> str | None:
        """The line that says them, once (None when there were none)."""
        with self._lock:
            causes, self._causes = self._causes, Counter()
        if not causes:
            return None
        return (f"the streaming query failed {causes.total()} times while the events topic was "
                f"unreachable ({', '.join(f'{c} {n}' for c, n in sorted(causes.items()))}) and "
                "was restarted on its checkpoint each time")

