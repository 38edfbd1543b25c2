"""What a group's blob holds, as one frozen value (streaming.core.state.codec turns it into bytes
and back). The settled state comes as a GroupState when decoded and as its rendered text when a
step has just cut it: the type parameter says which, `Stored[GroupState]` or `Stored[str]`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from streaming.core.contract import FindingIdentity, JsonValue
from streaming.core.state.events import Event
from streaming.core.state.group import GroupState

_Settled = TypeVar("_Settled", GroupState, str)


@dataclass(frozen=True)
class Stored(Generic[_Settled]):
    """What the blob holds: the settled state, the events still inside the reorder window, the
    window's lower edge, the findings last published (identity -> since) and the step's time.
    Finding transitions are published up to (now, now_offset): the offset of the last event at
    `now` that step() applied (-1: none, only expiries up to `now`). Built once, whole: a step
    makes the new one in `_conclude` from what it computed (step.Window and the view)."""

    settled: _Settled                # str: already rendered by render_state
    pending: list[tuple[Event, int]]
    horizon: int
    open_findings: dict[FindingIdentity, int]   # as last published: identity -> since
    now: int
    now_offset: int = -1
    # The state after `pending`, expired up to `now` (what the last step showed); None in blobs
    # written before it existed. Lets a step whose events all come after it skip the replay.
    view: GroupState | None = None
    # Window events still in their stored JSON form ([offset, event]), before `pending`.
    pending_raw: list[JsonValue] = field(default_factory=list)
