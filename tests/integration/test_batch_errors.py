"""The sink's failures as Spark's own stop test reads them (StreamExecution.isInterruptionException,
called through the real SparkSession's JVM on the text py4j hands it: the Python traceback)."""

from __future__ import annotations

import logging
import traceback

import pytest
from py4j.protocol import Py4JError

from streaming.spark.batch_errors import BatchFailed, OutageFailures, bounded_failures
from streaming.spark.jvm_logs import TASK_FAILURE_LOGGERS, OutageQuiet
from tests.support import wait_until

pytestmark = pytest.mark.integration

PROXY_PREFIX = "An exception was raised by the Python Proxy. Return Message: "


def spark_reads_as_stop(spark, text: str) -> bool:
    """What Spark concludes from a foreachBatch function's failure while its query stops."""
    jvm = spark.sparkContext._jvm
    proxy_error = jvm.py4j.Py4JException(PROXY_PREFIX + text)
    runtime = jvm.org.apache.spark.sql.execution.streaming.runtime
    return runtime.StreamExecution.isInterruptionException(proxy_error, spark.sparkContext._jsc.sc())


def failure_text(sink) -> str:
    """What py4j's callback server sends the JVM when the function raises: its traceback."""
    try:
        sink(None, 7)
    except Exception:
        return traceback.format_exc()
    raise AssertionError("the sink did not fail")


def long_java_failure(spark):
    def sink(batch_df, batch_id):  # a JVM call whose error holds 200,000 characters
        spark.sparkContext._jvm.java.lang.Integer.parseInt("x" * 200_000)
    return sink


def interrupted_java_call(spark):
    def sink(batch_df, batch_id):  # what a DataFrame call sees when stop() interrupts it
        thread = spark.sparkContext._jvm.java.lang.Thread
        thread.currentThread().interrupt()
        thread.sleep(1000)
    return sink


def stopped_mid_batch(spark, tmp_path, wrap) -> dict:
    """A query whose foreachBatch function is inside a DataFrame call (a Spark job that sleeps)
    when the query is stopped, as the job's sink is at any moment of a long batch. Returns the
    query's final status."""
    def sink(batch_df, batch_id):
        batch_df.selectExpr("reflect('java.lang.Thread', 'sleep', cast(600000 as bigint))").collect()

    query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load()
             .writeStream.foreachBatch(wrap(sink))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    tracker = spark.sparkContext.statusTracker()
    wait_until(tracker.getActiveJobsIds, 120, "the sink's Spark job started", interval=0.05)
    query.stop()
    return query.status


def test_a_stop_during_the_sinks_dataframe_call_ends_the_stream_thread_normally(spark, tmp_path):
    """Spark's catch block completes: the stop is recognised ("Stopped"), or, if the stop reached
    the call as a cancelled job rather than an interrupt, recorded as the query's end. Without
    the bound the thread died in that block, its status left at "Processing new data"."""
    message = stopped_mid_batch(spark, tmp_path, bounded_failures)["message"]
    assert message == "Stopped" or message.startswith("Terminated with exception"), message


# The text an interrupted DataFrame call hands Spark when its Java stack trace is deep (a task's
# frames under Spark's scheduler run to hundreds): long enough to overflow any thread's stack.
DEEP_INTERRUPTION = ("py4j.protocol.Py4JJavaError: An error occurred while calling "
                     "o49.collectToPython.\n: java.lang.InterruptedException\n"
                     + "\tat org.apache.spark.Frame.call(Frame.java:1)\n" * 3_000)


def test_a_deep_java_trace_overflows_sparks_stop_test(spark):
    """The fault itself: Spark's regex on the unbounded text throws StackOverflowError (here in
    the py4j thread that calls it; in the job, in the stream thread's catch block)."""
    with pytest.raises(Py4JError) as raised:
        spark_reads_as_stop(spark, DEEP_INTERRUPTION)
    assert "StackOverflowError" in str(raised.value)


def test_the_same_failure_through_the_bound_reads_as_the_stop(spark):
    def sink(batch_df, batch_id):
        raise RuntimeError(DEEP_INTERRUPTION)
    text = failure_text(bounded_failures(sink))
    assert len(text) < 2_000
    assert spark_reads_as_stop(spark, text) is True


def test_a_long_failure_reaches_spark_bounded_and_is_not_a_stop(spark):
    text = failure_text(bounded_failures(long_java_failure(spark)))
    assert "BatchFailed: pyspark.errors.exceptions.captured.NumberFormatException" in text
    assert len(text) < 2_000
    assert spark_reads_as_stop(spark, text) is False


def test_an_interrupted_call_still_reads_as_the_stop(spark):
    text = failure_text(bounded_failures(interrupted_java_call(spark)))
    assert ("BatchFailed: py4j.protocol.Py4JJavaError: An error occurred while calling" in text
            and "java.lang.InterruptedException" in text)
    assert spark_reads_as_stop(spark, text) is True


def test_the_whole_error_is_logged_once(spark, caplog):
    with pytest.raises(BatchFailed) as raised:
        bounded_failures(long_java_failure(spark))(None, 3)
    logged = [r for r in caplog.records if r.name == "streaming.spark.batch_errors"]
    assert len(logged) == 1 and "batch 3 failed" in logged[0].getMessage()
    assert "x" * 10_000 in logging.Formatter().formatException(logged[0].exc_info)
    assert len(str(raised.value)) < 500


def test_an_interruption_is_logged_as_the_stop_not_as_a_failure(spark, caplog):
    caplog.set_level(logging.INFO, logger="streaming.spark.batch_errors")
    with pytest.raises(BatchFailed):
        bounded_failures(interrupted_java_call(spark))(None, 4)
    logged = [r for r in caplog.records if r.name == "streaming.spark.batch_errors"]
    assert [(r.levelname, r.exc_info) for r in logged] == [("INFO", None)]
    assert "batch 4 interrupted" in logged[0].getMessage()


def test_a_failure_in_a_known_outage_is_not_logged_as_an_error_and_still_fails_the_batch(
        caplog):
    def sink(batch_df, batch_id):
        raise RuntimeError("Timeout of 60000ms expired before the position could be determined")

    with caplog.at_level(logging.DEBUG, logger="streaming.spark.batch_errors"):
        with pytest.raises(BatchFailed):
            bounded_failures(sink, in_outage=lambda: True)(None, 3)
        with pytest.raises(BatchFailed):
            bounded_failures(sink)(None, 4)
    levels = [(record.levelno, record.getMessage().split(":")[0]) for record in caplog.records]
    assert levels == [(logging.DEBUG, "batch 3 failed in the events broker's outage"),
                      (logging.ERROR, "batch 4 failed in the sink")]


def test_the_querys_failures_in_an_outage_are_said_in_one_line_when_it_ends():
    failures = OutageFailures()
    assert failures.ended() is None
    for cause in ("StreamingQueryException", "StreamingQueryException", "KAFKA_TIMEOUT"):
        failures.note(cause)
    assert failures.ended() == (
        "the streaming query failed 3 times while the events topic was unreachable "
        "(KAFKA_TIMEOUT 1, StreamingQueryException 2) and was restarted on its checkpoint "
        "each time")
    assert failures.ended() is None          # said once


def test_sparks_task_failure_lines_are_quieted_for_an_outage_and_put_back_after(spark):
    jvm = spark.sparkContext._jvm
    log_manager, level = jvm.org.apache.logging.log4j.LogManager, jvm.org.apache.logging.log4j.Level

    def levels():
        return [log_manager.getLogger(name).getLevel().toString() for name in TASK_FAILURE_LOGGERS]

    before = levels()
    quiet = OutageQuiet(jvm)
    quiet.outage(started=True)
    quiet.outage(started=True)               # the probe may say it again: the first levels kept
    assert levels() == [level.FATAL.toString()] * len(TASK_FAILURE_LOGGERS)
    quiet.batch_completed()                  # a batch of the outage's own (before it was seen)
    assert levels() == [level.FATAL.toString()] * len(TASK_FAILURE_LOGGERS)
    quiet.outage(started=False)
    # The failed batch's last tasks are killed after the broker is back: kept quiet until a
    # batch has completed.
    assert levels() == [level.FATAL.toString()] * len(TASK_FAILURE_LOGGERS)
    quiet.batch_completed()
    assert levels() == before
    quiet.batch_completed()
    assert levels() == before
    OutageQuiet(None).outage(started=True)   # no JVM of ours: nothing to do
