"""producers/health.py: the producer commands' poll-loop accounting and /metrics."""

from __future__ import annotations

import logging
import threading
import urllib.request

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka.errors import KafkaTimeoutError
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from producers.health import (
    CallStats,
    PollHealth,
    metrics_socket,
    serve_metrics,
)
from producers.poll import run_polls
from streaming.common.faults import StateLog, error_cause
from streaming.embedded_broker import free_port

pytestmark = pytest.mark.unit

LOGGER = "rebalance_monitor.producers"


def samples(*collectors) -> dict[tuple, float]:
    registry = serve_metrics(None, *collectors)
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_causes_are_librdkafka_names_or_exception_classes():
    assert error_cause(KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN))) == \
        "all_brokers_down"
    assert error_cause(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))) == \
        "group_authorization_failed"
    assert error_cause(KafkaTimeoutError("no answer")) == "KafkaTimeoutError"
    assert error_cause(KeyError("x")) == "KeyError"


def test_a_state_is_logged_once_per_change_not_once_per_failure(caplog):
    caplog.set_level(logging.INFO, LOGGER)
    state = StateLog("thing")
    assert [state.failed("timed_out") for _ in range(5)] == [True, False, False, False, False]
    # Causes that alternate in one outage (observe-kafka's polls saw a refused connection, then
    # a node not ready, poll after poll) are named when it ends, not at each change.
    assert [state.failed(cause) for cause in ["transport", "timed_out"] * 3] == [False] * 6
    assert state.ok() is True and state.ok() is False
    assert warnings(caplog) == ["thing failing: timed_out",
                                "thing works again (was failing: timed_out, transport, "
                                "11 time(s))"]
    # A failure its request already said (CallStats.timed) is not said again, start or end.
    caplog.clear()
    assert state.failed("timed_out", already_said=True) is False
    assert state.ok() is False and warnings(caplog) == []


def test_an_unexpected_error_is_logged_with_its_traceback_once(caplog):
    caplog.set_level(logging.INFO, LOGGER)
    state = StateLog("poll")
    for _ in range(3):
        try:
            {}["missing"]
        except KeyError as exc:
            state.failed("KeyError", exc)
    (record,) = caplog.records
    assert record.exc_info is not None and record.getMessage() == "poll failing: KeyError ('missing')"
    # A bug that shows inside an outage already said is still said, with its traceback.
    caplog.clear()
    outage = StateLog("poll")
    assert outage.failed("timed_out", KafkaTimeoutError("slow")) is True   # no traceback
    (record,) = caplog.records
    assert record.exc_info is None
    assert outage.failed("ValueError", ValueError("bug")) is True
    assert caplog.records[-1].exc_info is not None


def test_calls_are_timed_and_counted_by_request_and_outcome(caplog):
    caplog.set_level(logging.INFO, LOGGER)
    calls = CallStats()
    with calls.timed("list_groups", "k:9092"):
        pass
    for _ in range(3):
        with pytest.raises(KafkaTimeoutError), calls.timed("list_groups", "k:9092"):
            raise KafkaTimeoutError("no answer")
    with calls.timed("list_groups", "k:9092"):
        pass
    counts, seconds = calls.snapshot()
    assert counts == {("list_groups", "ok"): 2, ("list_groups", "KafkaTimeoutError"): 3}
    assert seconds["list_groups"] >= 0
    assert warnings(caplog) == [
        "list_groups to k:9092 failing: KafkaTimeoutError (no answer)",
        "list_groups to k:9092 works again (was failing: KafkaTimeoutError, 3 time(s))"]


def test_poll_health_metrics():
    health = PollHealth(clock=lambda: 1234.5)
    with health.calls.timed("describe_groups", "k"):
        pass
    health.failed(KafkaTimeoutError())
    health.failed(KafkaTimeoutError())
    health.failed("bootstrap_failed")
    health.group_failed("g1", "GroupAuthorizationFailedError")
    health.succeeded(groups=3, members=7, events=12)
    health.succeeded(groups=2, members=5, events=3)
    got = samples(health)
    assert got[("rebalance_observer_calls_total",
                (("outcome", "ok"), ("request", "describe_groups")))] == 1
    assert ("rebalance_observer_call_seconds_total", (("request", "describe_groups"),)) in got
    assert got[("rebalance_observer_poll_failures_total", (("cause", "KafkaTimeoutError"),))] == 2
    assert got[("rebalance_observer_poll_failures_total", (("cause", "bootstrap_failed"),))] == 1
    assert got[("rebalance_observer_group_errors_total",
                (("cause", "GroupAuthorizationFailedError"),))] == 1
    assert got[("rebalance_observer_last_success_timestamp_seconds", ())] == 1234.5
    assert got[("rebalance_observer_groups", ())] == 2
    assert got[("rebalance_observer_members", ())] == 5
    assert got[("rebalance_observer_events_total", ())] == 15


def test_the_loop_survives_every_failing_poll_and_goes_on(caplog):
    caplog.set_level(logging.INFO, LOGGER)
    health = PollHealth("observe poll")
    stopping = threading.Event()
    outcomes = [KafkaTimeoutError("slow"), KafkaTimeoutError("slow"),
                KafkaException(KafkaError(KafkaError._TRANSPORT)), None, RuntimeError("bug"),
                None, None]

    def poll_once():
        outcome = outcomes.pop(0)
        if not outcomes:
            stopping.set()
        if outcome is not None:
            raise outcome
        health.succeeded(groups=1)

    assert run_polls(poll_once, health, interval_s=0, stopping=stopping) is True
    assert outcomes == []
    assert health.failures == {"KafkaTimeoutError": 2, "transport": 1, "RuntimeError": 1}
    assert warnings(caplog) == [
        "observe poll failing: KafkaTimeoutError (slow)",
        "observe poll works again (was failing: KafkaTimeoutError, transport, 3 time(s))",
        "observe poll failing: RuntimeError (bug)",
        "observe poll works again (was failing: RuntimeError, 1 time(s))"]


def test_once_returns_whether_the_poll_succeeded():
    health = PollHealth()

    def failing():
        raise KafkaTimeoutError()

    assert run_polls(failing, health, 10, threading.Event(), once=True) is False
    assert run_polls(lambda: None, health, 10, threading.Event(), once=True) is True


def test_metrics_are_served_on_the_port():
    health = PollHealth()
    health.failed("timed_out")
    port = free_port()
    serve_metrics(metrics_socket(port, "127.0.0.1"), health)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    assert 'rebalance_observer_poll_failures_total{cause="timed_out"} 1.0' in text


def test_a_state_log_survives_pickling_as_a_spark_source_reader_needs(caplog):
    import pickle

    caplog.set_level(logging.INFO)
    state = pickle.loads(pickle.dumps(StateLog("events topic T: events broker")))
    assert state.failed("transport") and not state.failed("transport") and state.ok()
    assert [r.getMessage() for r in caplog.records][-1].startswith(
        "events topic T: events broker works again (was failing: transport, 2 time(s))")
