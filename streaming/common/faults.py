"""Outside faults, one way everywhere: the label value that names a failure's cause, its message
without the class name, a log line once per change of state (never once per retry), and the
doubling backoff between attempts.

    >>> from confluent_kafka import KafkaError, KafkaException
    >>> error_cause(KafkaException(KafkaError(KafkaError._TRANSPORT))), error_cause(OSError())
    ('transport', 'OSError')
    >>> backoff = Backoff()
    >>> [backoff.next() for _ in range(7)]
    [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    >>> backoff.reset(); backoff.next()
    1.0
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

log = logging.getLogger("rebalance_monitor")


def cause_of(error: KafkaError) -> str:
    """A label value for a librdkafka error: its name without the local-error underscore."""
    return (error.name() or str(error.code())).lstrip("_").lower()


def error_cause(error: BaseException) -> str:
    """A short label value for a failure: librdkafka's error name, else the exception class."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return cause_of(error.args[0])
    return type(error).__name__


def describe(error: BaseException | None) -> str:
    """An error's message without the class name its cause already says.

    >>> from kafka.errors import RequestTimedOutError
    >>> describe(RequestTimedOutError("Request timed out after 9999 ms"))
    'Request timed out after 9999 ms'
    """
    if error is None:
        return ""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return str(error.args[0].str())
    text = str(error)
    return re.sub(rf"^(\[Error -?\d+\] )?{type(error).__name__}(: |$)", "", text)


def is_client_error(error: BaseException) -> bool:
    """A Kafka or RocketMQ client's or the network's error: expected in an outage, no
    traceback needed."""
    module = type(error).__module__ or ""
    return (module.startswith(("kafka", "confluent_kafka", "cimpl", "producers.rocketmq"))
            or isinstance(error, OSError | TimeoutError))


class StateLog:
    """Logs one thing's state once per change: when it starts failing, and when it works again
    (naming every cause it failed with meanwhile: an outage alternates between a refused
    connection and a node not ready, poll after poll). A failure `already_said` (by the
    request that failed it) is counted and named at the end, not said again at its start; a
    streak of only such failures ends silently too. Thread-safe; returns whether it logged."""

    def __init__(self, what: str, logger: logging.Logger = log) -> None:
        self.what = what
        self.cause: str | None = None
        self.causes: list[str] = []   # every cause since it last worked, in order
        self.failures = 0  # since it last worked
        self.said = False  # whether this streak's start was logged
        self._log = logger
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        """Picklable without its lock: Spark ships a source reader that holds one to its
        workers."""
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def failed(self, cause: str, error: BaseException | None = None, detail: str = "",
               already_said: bool = False) -> bool:
        # The traceback once, for a cause never seen: a bug shows where it is, even inside an
        # outage already said.
        unexpected = error is not None and not is_client_error(error)
        with self._lock:
            self.failures += 1
            self.cause = cause
            new = cause not in self.causes
            if new:
                self.causes.append(cause)
            if already_said or (self.said and not (new and unexpected)):
                return False
            self.said = True
        detail = detail or describe(error)
        self._log.warning("%s failing: %s%s", self.what, cause, f" ({detail})" if detail else "",
                          exc_info=error if unexpected else None)
        return True

    def ok(self) -> bool:
        with self._lock:
            if self.cause is None:
                return False
            before, failures, said = ", ".join(self.causes), self.failures, self.said
            self.cause, self.causes, self.failures, self.said = None, [], 0, False
            if not said:
                return False
        self._log.warning("%s works again (was failing: %s, %d time(s))", self.what, before,
                          failures)
        return True


class Backoff:
    """Seconds to wait before the next attempt: 1, 2, 4, ... up to `max_s`; `reset` after a
    success (or after a long enough good run)."""

    def __init__(self, first_s: float = 1.0, max_s: float = 30.0) -> None:
        self.first_s, self.max_s = first_s, max_s
        self._next = first_s

    def next(self) -> float:
        wait, self._next = self._next, min(self.max_s, self._next * 2)
        return wait

    def reset(self) -> None:
        self._next = self.first_s
