"""The simulator's producer (EventProducer) with a fake broker: failures are retried, counted
by cause and logged once per change of state; none ends the run; nothing is lost silently."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError

from producers.simulator.cli import EventProducer, RateLimit, produce
from streaming.common.delivery import DeliveryStats
from tests.unit.fake_clients import LockedFakeProducer

pytestmark = pytest.mark.unit

TOPIC = "events"


def events(n: int):
    return [(b"g%d" % (i % 7), b'{"n":%d}' % i) for i in range(n)]


class Outage:
    """The broker answers `cause` to every attempt while down; down for the first `failures`
    attempts."""

    def __init__(self, failures: int, cause: int = KafkaError._MSG_TIMED_OUT) -> None:
        self.failures = failures
        self.cause = cause
        self.seen = 0

    def __call__(self, message):
        self.seen += 1
        return self.cause if self.seen <= self.failures else None


def delivery_logs(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "streaming.common.delivery"]


def test_an_outage_is_retried_counted_by_cause_and_logged_once_each_way(caplog):
    caplog.set_level(logging.INFO)
    producer = LockedFakeProducer(Outage(failures=300))
    stats = DeliveryStats()
    # More attempts than failures: whatever the order of retries, none is given up.
    count, undelivered = produce(events(1000), "unused", TOPIC, RateLimit(None), stats=stats,
                                 attempts=301, producer=producer)
    assert (count, undelivered) == (1000, 0)
    assert sorted(m.value() for m in producer.delivered) == sorted(v for _, v in events(1000))
    snapshot = stats.snapshot()
    assert snapshot.errors == {(TOPIC, "msg_timed_out"): 300}
    assert snapshot.undelivered == {}
    assert delivery_logs(caplog) == [f"delivery to {TOPIC} failing: msg_timed_out",
                                     f"delivery to {TOPIC} works again (was failing: "
                                     "msg_timed_out, 300 time(s))"]


def test_a_record_failing_every_attempt_is_given_up_and_counted():
    producer = LockedFakeProducer(lambda message: KafkaError._TRANSPORT
                                  if message.value() == b'{"n":3}' else None)
    stats = DeliveryStats()
    count, undelivered = produce(events(10), "unused", TOPIC, RateLimit(None), stats=stats,
                                 attempts=3, producer=producer)
    assert (count, undelivered) == (10, 1)
    assert stats.snapshot().errors == {(TOPIC, "transport"): 3}
    assert stats.snapshot().undelivered == {(TOPIC, "transport"): 1}
    assert len(producer.delivered) == 9


def test_a_refused_record_is_not_retried_and_the_run_goes_on():
    producer = LockedFakeProducer(lambda message: KafkaError.INVALID_RECORD
                                  if message.value().endswith(b'0}') else None)
    stats = DeliveryStats()
    count, undelivered = produce(events(100), "unused", TOPIC, RateLimit(None), stats=stats,
                                 attempts=5, producer=producer)
    assert (count, undelivered) == (100, 10)
    assert stats.snapshot().errors == {(TOPIC, "invalid_record"): 10}
    assert len(producer.attempts) == 100 and len(producer.delivered) == 90


def test_a_full_queue_pauses_the_run_until_it_drains():
    producer = LockedFakeProducer(queue_limit=50)
    count, undelivered = produce(events(2000), "unused", TOPIC, RateLimit(None),
                                 producer=producer)
    assert (count, undelivered) == (2000, 0)
    assert len(producer.delivered) == 2000


def test_records_still_held_at_the_deadline_are_counted_unflushed():
    class Stuck(LockedFakeProducer):  # a broker that never answers
        def poll(self, timeout=None):
            return 0

        def flush(self, timeout=None):
            return len(self)

    stats = DeliveryStats()
    sender = EventProducer(Stuck(), TOPIC, stats).start()
    assert sender.run(events(5), RateLimit(None)) == 5
    assert sender.close(timeout_s=0.1) == 5
    assert stats.snapshot().undelivered == {(TOPIC, "unflushed"): 5}


def test_recovery_is_not_logged_while_only_records_sent_before_the_failure_leave(caplog):
    caplog.set_level(logging.INFO)
    producer = LockedFakeProducer()
    stats = DeliveryStats()
    sender = EventProducer(producer, TOPIC, stats)  # no thread: the test serves by hand
    for key, value in events(10):
        producer.produce(TOPIC, value, key, on_delivery=sender._report)
    sender.count = 10
    sender._report(KafkaError(KafkaError._MSG_TIMED_OUT), producer.queued[0][0])
    sender._check_recovered()  # 10 held, none sent since the failure
    producer.poll(0)           # the 10 older records leave
    sender._check_recovered()
    assert delivery_logs(caplog) == [f"delivery to {TOPIC} failing: msg_timed_out"]
    producer.produce(TOPIC, b"new", b"g", on_delivery=sender._report)
    sender.count = 11
    sender._check_recovered()  # sent after the failure, still held
    assert len(delivery_logs(caplog)) == 1
    producer.poll(0)
    sender._check_recovered()  # ... and now delivered
    assert delivery_logs(caplog)[-1] == (f"delivery to {TOPIC} works again (was failing: "
                                         "msg_timed_out, 1 time(s))")
