"""The layout of the job's state in a checkpoint, recorded beside it, checked before every start.

Spark keeps the state store's key and value schemas in the checkpoint but cannot tell an old
layout from a new one that happens to fit. Layout 1 keyed state by group name only (a Kafka and
a RocketMQ group of the same name shared one state); layout 2 keyed it by (system, group);
layout 3 keys it by a shard of groups, each shard's value holding its groups' codec version 2
blobs (streaming.core.state.shard). A group's shard is a hash of its key modulo the number of
shards, so that number is part of the layout: the same group in another shard would be a second
state. Reading an older layout would misread it, and rebuilding state needs only the events, so
an older checkpoint is refused with what to do, never migrated in place. Layout 4 is layout 3
with what keys each shard recorded (`shard_keys`): a new checkpoint keys shard i by
streaming.spark.shard_keys's spread key, so that Spark's shuffle gives each task as many
shards. A layout-3 checkpoint keys shard i by i, and goes on so; a build that reads layout 3
only refuses layout 4, where it would read every group as new beside its stored state.

    >>> from streaming.spark.checkpoint_files import LocalTextFile
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> marker = LocalTextFile(os.path.join(folder, "monitor", "state-layout.json"))
    >>> check_layout(marker, "ckpt", has_progress=False, shards=None)   # new: recorded
    StateLayout(shards=128, shard_keys='spread')
    >>> check_layout(marker, "ckpt", has_progress=True, shards=None)    # ours: its shards
    StateLayout(shards=128, shard_keys='spread')
    >>> marker.write('{"state_layout": 3, "state_key": ["shard"], "state_shards": 64}')
    >>> check_layout(marker, "ckpt", has_progress=True, shards=None)    # layout 3: numbers
    StateLayout(shards=64, shard_keys='number')
"""

from __future__ import annotations

import json
from typing import NamedTuple

from streaming.spark.checkpoint_files import TextFile, checkpoint_child
from streaming.spark.shard_keys import spread_keys

STATE_LAYOUT = 4
NUMBERED_LAYOUT = 3      # read as layout 4 with `shard_keys` "number"
STATE_KEY = ("shard",)
# A few dozen groups per shard at 5,000 to 10,000 groups: Spark's per-key cost is paid 128
# times a batch, and a shard with events re-writes only its own groups' blobs.
DEFAULT_SHARDS = 128
# --exact: so many shards that every group has its own (but for a hash collision), as Spark's
# one state per key would keep it: the twin of the shard packing.
ONE_GROUP_PER_SHARD = 2**31 - 1


# What shard i's state key is: `spread`, streaming.spark.shard_keys's i-th key; `number`, i
# itself (every layout-3 checkpoint, and one of more than MAX_SPREAD_SHARDS shards, such as
# --exact's: the keys are a literal in every batch's plan, and so many shards spread well
# enough by their numbers).
SPREAD, NUMBER = "spread", "number"
SHARD_KEYINGS = (SPREAD, NUMBER)
MAX_SPREAD_SHARDS = 1024


class StateLayout(NamedTuple):
    """What the job runs with: the number of shards and what keys each."""

    shards: int
    shard_keys: str = NUMBER

    def keys(self) -> tuple[int, ...] | None:
        """Each shard's state key, in shard order (None: the shard's number)."""
        return spread_keys(self.shards) if self.shard_keys == SPREAD else None


class CheckpointLayoutError(RuntimeError):
    """The checkpoint holds state this version cannot read; the message says what to do."""


def layout_path(checkpoint: str) -> str:
    return checkpoint_child(checkpoint, "monitor", "state-layout.json")


def check_layout(marker: TextFile, checkpoint: str, has_progress: bool,
                 shards: int | None) -> StateLayout:
    """Accept a checkpoint of this layout, record the layout of a new one, refuse the rest.
    `has_progress`: Spark has already written offsets to the checkpoint. `shards`: as
    configured (None: the checkpoint's, or DEFAULT_SHARDS for a new one). Returns the layout
    to run with."""
    text = marker.read()
    if text is None:
        if has_progress:
            raise CheckpointLayoutError(_refusal(checkpoint, 1))
        shards = shards or DEFAULT_SHARDS
        keying = SPREAD if shards <= MAX_SPREAD_SHARDS else NUMBER
        marker.write(json.dumps({"state_layout": STATE_LAYOUT, "state_key": list(STATE_KEY),
                                 "state_shards": shards, "shard_keys": keying}))
        return StateLayout(shards, keying)
    recorded = json.loads(text)
    found = recorded.get("state_layout")
    if found not in (NUMBERED_LAYOUT, STATE_LAYOUT):
        raise CheckpointLayoutError(_refusal(checkpoint, found))
    if shards is not None and shards != recorded["state_shards"]:
        raise CheckpointLayoutError(
            f"checkpoint {checkpoint} splits its state into {recorded['state_shards']} shards; "
            f"--state-shards {shards} would put groups in other shards and read them as new. "
            f"Leave --state-shards unset (or set it to {recorded['state_shards']}) to go on with "
            f"this checkpoint, or start a new --checkpoint with {shards}. " + _REBUILD)
    keying = NUMBER if found == NUMBERED_LAYOUT else recorded.get("shard_keys")
    if keying not in SHARD_KEYINGS:
        raise CheckpointLayoutError(
            f"checkpoint {checkpoint} keys its state shards by {keying!r}; this version knows "
            f"{' and '.join(SHARD_KEYINGS)}. " + _START_ANEW)
    return StateLayout(recorded["state_shards"], keying)


_REBUILD = (
    "A new checkpoint rebuilds every group from the events topic: with --starting-offsets "
    "earliest from what the topic still holds, otherwise from the clients' next heartbeats and "
    "routes (within one session timeout). Per-group counters (rebalances, queue moves) and the "
    "job's event counters start again from zero.")
_START_ANEW = ("Start with a new --checkpoint, or move this one aside; keep it to go back to the "
               "version that wrote it. " + _REBUILD)


def _refusal(checkpoint: str, found) -> str:
    return (
        f"checkpoint {checkpoint} holds state of layout {found}; this version reads layouts "
        f"{NUMBERED_LAYOUT} and {STATE_LAYOUT} (state keyed by a shard of groups, each group by "
        "system and name) and will not misread it. " + _START_ANEW)
