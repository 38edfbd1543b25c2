"""The job's progress listener in a real SparkSession, through each bridge: the JSON one (the
default) and PySpark's own (`exact`, the twin). Each must hand the sink exactly what Spark's own
record of the query says of every batch (`StreamingQuery.recentProgress`), and the default must
really take the JSON way.
"""

from __future__ import annotations

import pytest

from streaming.spark import job
from tests.support import wait_until

pytestmark = [pytest.mark.integration]

QUERY = "progress-listener-test"


class RecordingSink:
    """Named as a fake: the BatchSink's note_progress, recorded."""

    def __init__(self) -> None:
        self.noted: list[tuple[int, int, int]] = []

    def note_progress(self, batch_id: int, input_rows: int, dropped: int) -> None:
        self.noted.append((batch_id, input_rows, dropped))


class RecordingStore:
    """Named as a fake: the SnapshotStore's update_health, recorded."""

    def __init__(self) -> None:
        self.durations: list[float] = []

    def update_health(self, batch_duration_seconds: float) -> None:
        self.durations.append(batch_duration_seconds)


@pytest.mark.parametrize("exact", [False, True], ids=["json_bridge", "pyspark_bridge"])
def test_each_batch_reaches_the_sink_as_spark_recorded_it(spark, exact, monkeypatch, tmp_path):
    through_json = []
    original = job.JsonProgressBridge.onQueryProgress

    def counted(self, jevent) -> None:
        through_json.append(1)
        original(self, jevent)

    monkeypatch.setattr(job.JsonProgressBridge, "onQueryProgress", counted)
    sink, store = RecordingSink(), RecordingStore()
    listener = job.ProgressListener(store, sink, QUERY, exact)   # type: ignore[arg-type]
    spark.streams.addListener(listener)
    events = spark.readStream.format("rate").option("rowsPerSecond", 20).load()
    query = (events.withWatermark("timestamp", "1 second").groupBy("value").count()
             .writeStream.queryName(QUERY).outputMode("update").format("noop")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        wait_until(lambda: len(sink.noted) >= 4 and any(rows for _, rows, _ in sink.noted), 60,
                   "four batches noted, one with rows", interval=0.2)
    finally:
        query.stop()
        spark.streams.removeListener(listener)
    recorded = {p.batchId: (p.batchId, p.numInputRows,
                            sum(op.numRowsDroppedByWatermark for op in p.stateOperators))
                for p in query.recentProgress}
    for noted in sink.noted:
        assert noted == recorded[noted[0]]
    assert len(store.durations) == len(sink.noted)
    assert (len(through_json) == len(sink.noted)) if not exact else not through_json
