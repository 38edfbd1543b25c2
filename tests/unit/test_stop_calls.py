"""A call into Spark during the stop fails quietly, even when the error cannot say what it is.

A Py4J error fetches its text from the JVM. When the whole process group got SIGTERM, the JVM
may be gone by the time the stop's `query.stop()` fails, and asking the error for its text then
raises ConnectionRefusedError. That escaped the stop as a traceback with a non-zero exit (seen in
test_clean_stop under CI's load)."""

from __future__ import annotations

import logging

import pytest

from streaming.spark.job import _quietly

pytestmark = pytest.mark.unit


class ErrorOfAGoneJvm(Exception):
    """What a Py4JJavaError does once the JVM has exited: its text is asked of the JVM."""

    def __str__(self) -> str:
        raise ConnectionRefusedError(111, "Connection refused")


def stop_query() -> None:
    raise ErrorOfAGoneJvm()


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG])
def test_a_failed_stop_call_whose_error_cannot_be_read_is_quiet(caplog, level):
    caplog.set_level(level, logger="rebalance_monitor.job")
    _quietly(stop_query)
    assert all("Traceback" not in record.getMessage() for record in caplog.records)
    if level == logging.DEBUG:
        assert any("ErrorOfAGoneJvm" in record.getMessage() for record in caplog.records)
