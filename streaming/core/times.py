"""The times the core deals in, each named once here, and the sentinels that stand for "none".

Every time is event time in milliseconds since the epoch, as producers stamp events; the core
never reads a wall clock.

- `ts`: an event's time (its `ts` field).
- `clock`: a group state's newest event time (GroupState.clock).
- `state.now`: the time up to which a state's sessions have been expired (GroupState.now).
- step `now`: the time one step runs to: max(clock, watermark, every `now` stored); computed
  once per step (step._step_now) and passed down.
- `watermark`: Spark's event-time watermark for the batch, as the job passes it (None: none).
- `horizon`: the reorder window's lower edge; the blob's settled state is the group at it.
- `Cursor(ts, offset)`: a point in a group's event order: events apply in (ts, Kafka offset)
  order, so a time alone cannot say which of two events of one millisecond came first. The
  published cursor is the point up to which finding transitions have been published; the blob
  keeps it as (now, now_offset).
- deadline: the next time a member, a broker's entry or the group itself expires
  (group.next_deadline); `deadline_bound` is a lower bound of it that refreshes only raise.
- timeout: when Spark wakes the group with no event (ShardEntry.timeout_ms).

    >>> Cursor(5, 2) < Cursor(5, 3) < Cursor(6, -1)
    True
    >>> START < Cursor(LONG_AGO + 1, -1) and NEVER > 4_102_444_800_000
    True
"""

from __future__ import annotations

from typing import NamedTuple

LONG_AGO = -(2**62)          # before any event: nothing published, no window yet
NEVER = 2**62                # after any event: no deadline
ALL_PUBLISHED = 2**62        # the now_offset of a blob from before the offset was kept
NO_TIMEOUT = -1              # Spark's GroupState.NO_TIMESTAMP: never woken by time alone
UNKNOWN_DEADLINE = -1        # deadline_bound after a decode: the next expiry scan sets it


class Cursor(NamedTuple):
    """A point in a group's (ts, offset) event order. An offset of -1 is before every event of
    that millisecond (only expiries up to `ts`)."""

    ts: int
    offset: int


START = Cursor(LONG_AGO, -1)  # before every event: where a new group's publishing starts
