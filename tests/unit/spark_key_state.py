"""What Spark keeps of one key of applyInPandasWithState between batches, for the tests that
call the state function as Spark calls it (shard state, record accounting)."""

from pyspark.sql import Row
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from streaming.core.times import NO_TIMEOUT
from streaming.spark.state_function import STATE_SCHEMA


class SparkKeyState:
    """What Spark keeps of one key between batches: the value and the timeout."""

    def __init__(self) -> None:
        self.value, self.timeout = None, NO_TIMEOUT

    def group_state(self, watermark, timed_out: bool) -> GroupState:
        return GroupState(
            Row(*self.value) if self.value is not None else None, 0,
            watermark if watermark is not None else 0, GroupStateTimeout.EventTimeTimeout,
            timed_out, True, self.value is not None, False, False, self.timeout, b"",
            STATE_SCHEMA)

    def keep(self, state: GroupState) -> None:
        self.value = tuple(state._value) if state.exists else None
        self.timeout = state._timeout_timestamp if state.exists else NO_TIMEOUT
