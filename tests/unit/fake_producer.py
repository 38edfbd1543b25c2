"""FakeProducer: a stand-in for confluent_kafka.Producer in unit tests of what sits on top of it
(the Outbox, the job's sink). It answers each record by a rule, as a broker would, so failures a
local broker cannot produce (a topic size limit below the client's, an authorization error) can
be tested. The real producer against a real broker is in tests/integration/test_faults.py.
Not a test module itself.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException


class FakeMessage:
    def __init__(self, topic, value, key, headers) -> None:
        self._topic, self._value, self._key, self._headers = topic, value, key, headers

    def topic(self):
        return self._topic

    def value(self):
        return self._value

    def key(self):
        return self._key

    def headers(self):
        return self._headers


def accept_all(message: FakeMessage) -> int | None:
    return None


class FakeProducer:
    """produce() queues; poll()/flush() answer each queued record with `broker(message)`: None
    (delivered) or a KafkaError code. `client_limit`: produce() raises MSG_SIZE_TOO_LARGE at
    once above it, as librdkafka does above message.max.bytes."""

    def __init__(self, broker: Callable[[FakeMessage], int | None] = accept_all,
                 client_limit: int = 1_000_000, queue_limit: int | None = None) -> None:
        self.broker = broker
        self.client_limit = client_limit
        self.queue_limit = queue_limit
        self.queued: list[tuple[FakeMessage, Callable]] = []
        self.delivered: list[FakeMessage] = []
        self.attempts: list[FakeMessage] = []

    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None):
        if value is not None and len(value) > self.client_limit:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
        if self.queue_limit is not None and len(self.queued) >= self.queue_limit:
            raise BufferError("Local: Queue full")
        message = FakeMessage(topic, value, key, headers)
        self.attempts.append(message)
        self.queued.append((message, on_delivery))

    def poll(self, timeout=None):
        answered, self.queued = self.queued, []
        for message, callback in answered:
            code = self.broker(message)
            if code is None:
                self.delivered.append(message)
            if callback is not None:
                callback(None if code is None else KafkaError(code), message)
        return len(answered)

    def flush(self, timeout=None):
        while self.queued:
            self.poll(0)
        return 0
