"""A librdkafka client's own errors: counted by cause, logged once when they start and once when
its brokers answer again, never by librdkafka itself. A real producer against a closed port."""

import logging

import pytest
from confluent_kafka import Producer

from streaming.common.client_errors import ClientErrors
from streaming.embedded_broker import free_port
from tests.support import wait_until

pytestmark = pytest.mark.unit

UP = '{"brokers": {"127.0.0.1:9092/1": {"state": "UP"}}}'


def test_failed_connections_are_counted_and_logged_once_until_a_broker_is_up(caplog, capfd):
    errors = ClientErrors("test producer")
    producer = Producer({**errors.settings(), "bootstrap.servers": f"127.0.0.1:{free_port()}",
                         "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50})
    with caplog.at_level(logging.INFO, logger="rebalance_monitor.kafka_client"):
        wait_until(lambda: sum(errors.counts().values()) >= 3 or producer.poll(0.1) and None,
                   10, "three failed connection attempts")
        errors.on_stats(UP)
        errors.on_stats(UP)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith("test producer: brokers not answering (")
    assert messages[1].startswith("test producer: brokers answer again (failed attempts: ")
    assert "transport" in errors.counts()
    assert "FAIL" not in capfd.readouterr().err   # librdkafka's own lines are off


def test_statistics_without_a_broker_up_end_nothing(caplog):
    errors = ClientErrors("test producer")
    with caplog.at_level(logging.INFO, logger="rebalance_monitor.kafka_client"):
        errors.on_stats('{"brokers": {"b:1/bootstrap": {"state": "CONNECT"}}}')
        errors.on_stats(UP)   # nothing was failing
    assert caplog.records == []
