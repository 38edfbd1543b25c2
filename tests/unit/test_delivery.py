import hashlib
import logging

import pytest
from confluent_kafka import KafkaError

from streaming.common.delivery import (
    ORIGINAL_BYTES_HEADER,
    ORIGINAL_SHA256_HEADER,
    TRUNCATED_HEADER,
    DeliveryStats,
    Outbox,
    Record,
    RetryPolicy,
)
from tests.unit.fake_producer import FakeProducer

pytestmark = pytest.mark.unit


def outbox(producer, attempts=3, max_message_bytes=1_000_000):
    return Outbox(producer, DeliveryStats(), RetryPolicy(attempts), max_message_bytes)


def test_a_delivered_record_is_counted_and_settled():
    box = outbox(FakeProducer())
    sent = box.send(Record("t", b"v", b"k"))
    assert box.wait([sent], timeout_s=1) == 0
    assert sent.delivered
    assert box.stats.snapshot().delivered == {"t": 1}


def test_a_dead_letter_over_the_clients_limit_is_cut_to_fit_with_its_size_and_digest():
    producer = FakeProducer(client_limit=1_000_000)
    box = outbox(producer)
    original = b"x" * 1_100_000
    sent = box.send(Record("dlq", original, headers=(("rebalance-monitor-reason", b"not_json"),),
                           cuttable=True))
    box.wait([sent], timeout_s=1)
    assert sent.delivered
    (message,) = producer.delivered
    assert len(message.value()) <= 1_000_000 and original.startswith(message.value())
    headers = dict(message.headers())
    assert headers["rebalance-monitor-reason"] == b"not_json"
    assert headers[ORIGINAL_BYTES_HEADER] == b"1100000"
    assert headers[ORIGINAL_SHA256_HEADER] == hashlib.sha256(original).hexdigest().encode()
    assert headers[TRUNCATED_HEADER] == b"true"
    assert box.stats.snapshot().truncated == {"dlq": 1}


def test_a_topic_limit_below_the_clients_halves_the_cut_until_the_broker_takes_it():
    def broker(message):  # a topic with max.message.bytes of 100,000
        return KafkaError.MSG_SIZE_TOO_LARGE if len(message.value()) > 100_000 else None

    producer = FakeProducer(broker)
    box = outbox(producer)
    original = b"y" * 900_000
    sent = box.send(Record("dlq", original, cuttable=True))
    box.wait([sent], timeout_s=1)
    assert sent.delivered
    (message,) = producer.delivered
    assert len(message.value()) <= 100_000
    assert dict(message.headers())[ORIGINAL_BYTES_HEADER] == b"900000"
    stats = box.stats.snapshot()
    assert stats.errors[("dlq", "msg_size_too_large")] >= 1
    assert stats.undelivered == {}


def test_a_finding_too_large_is_not_cut_but_counted_as_undelivered():
    box = outbox(FakeProducer(client_limit=10))
    sent = box.send(Record("findings", b"z" * 100))
    box.wait([sent], timeout_s=1)
    assert sent.settled and not sent.delivered and sent.cause == "msg_size_too_large"
    assert box.stats.snapshot().undelivered == {("findings", "msg_size_too_large"): 1}


def test_a_refused_record_is_counted_once_and_not_retried():
    producer = FakeProducer(lambda m: KafkaError.INVALID_RECORD)
    box = outbox(producer, attempts=5)
    sent = box.send(Record("dlq", b"v"))
    box.wait([sent], timeout_s=1)
    assert len(producer.attempts) == 1
    assert box.stats.snapshot().undelivered == {("dlq", "invalid_record"): 1}


def test_a_timed_out_record_is_retried_up_to_the_policy_then_counted():
    producer = FakeProducer(lambda m: KafkaError._MSG_TIMED_OUT)
    box = outbox(producer, attempts=3)
    sent = box.send(Record("findings", b"v"))
    box.wait([sent], timeout_s=1)
    assert len(producer.attempts) == 3
    stats = box.stats.snapshot()
    assert stats.errors == {("findings", "msg_timed_out"): 3}
    assert stats.undelivered == {("findings", "msg_timed_out"): 1}


def test_a_retry_that_succeeds_loses_nothing():
    answers = iter([KafkaError._MSG_TIMED_OUT, None])
    producer = FakeProducer(lambda m: next(answers))
    box = outbox(producer)
    sent = box.send(Record("findings", b"v"))
    box.wait([sent], timeout_s=1)
    assert sent.delivered and box.stats.snapshot().undelivered == {}


def test_a_full_queue_does_not_raise_out_of_send():
    box = outbox(FakeProducer(queue_limit=0), attempts=2)
    sent = box.send(Record("findings", b"v"))
    assert sent.settled and sent.cause == "queue_full"


def test_wait_is_bounded_and_returns_what_is_still_pending():
    class SilentProducer(FakeProducer):
        def poll(self, timeout=None):  # a broker that never answers
            return 0

    box = outbox(SilentProducer())
    sent = box.send(Record("findings", b"v"))
    assert box.wait([sent], timeout_s=0.3) == 1
    assert not sent.settled


def test_a_failing_topic_is_logged_once_per_change_of_state(caplog):
    answers = iter([KafkaError.INVALID_RECORD] * 3 + [None] * 2 + [KafkaError.INVALID_RECORD])
    box = outbox(FakeProducer(lambda m: next(answers)))
    with caplog.at_level(logging.WARNING, logger="streaming.common.delivery"):
        for _ in range(6):
            box.wait([box.send(Record("dlq", b"v"))], timeout_s=1)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["delivery to dlq failing: invalid_record",
                     "delivery to dlq works again (was failing: invalid_record, 3 time(s))",
                     "delivery to dlq failing: invalid_record"]
