"""The layout of the job's state in a checkpoint, recorded beside it, checked before every start.

Spark keeps the state store's key and value schemas in the checkpoint but cannot tell an old
layout from a new one that happens to fit. Layout 1 keyed state by group name only (a Kafka and
a RocketMQ group of the same name shared one state); layout 2 keys it by (system, group) and
stores codec version 2 blobs. Reading a layout-1 checkpoint would misread it, and rebuilding
state needs only the events, so an old checkpoint is refused with what to do, never migrated in
place.

    >>> from streaming.spark.checkpoint_files import LocalTextFile
    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> marker = LocalTextFile(os.path.join(folder, "monitor", "state-layout.json"))
    >>> check_layout(marker, "ckpt", has_progress=False)          # a new checkpoint: recorded
    >>> check_layout(marker, "ckpt", has_progress=True)           # ours: accepted
"""

from __future__ import annotations

import json

from streaming.spark.checkpoint_files import TextFile, checkpoint_child

STATE_LAYOUT = 2
STATE_KEY = ("system", "group")


class CheckpointLayoutError(RuntimeError):
    """The checkpoint holds state this version cannot read; the message says what to do."""


def layout_path(checkpoint: str) -> str:
    return checkpoint_child(checkpoint, "monitor", "state-layout.json")


def check_layout(marker: TextFile, checkpoint: str, has_progress: bool) -> None:
    """Accept a checkpoint of this layout, record the layout of a new one, refuse the rest.
    `has_progress`: Spark has already written offsets to the checkpoint."""
    text = marker.read()
    if text is None:
        if has_progress:
            raise CheckpointLayoutError(_refusal(checkpoint, 1))
        marker.write(json.dumps({"state_layout": STATE_LAYOUT, "state_key": list(STATE_KEY)}))
        return
    found = json.loads(text).get("state_layout")
    if found != STATE_LAYOUT:
        raise CheckpointLayoutError(_refusal(checkpoint, found))


def _refusal(checkpoint: str, found) -> str:
    return (
        f"checkpoint {checkpoint} holds state of layout {found}; this version reads layout "
        f"{STATE_LAYOUT} (state keyed by system and group) and will not misread it. "
        "Start with a new --checkpoint, or move this one aside; keep it to go back to the "
        "version that wrote it. The new checkpoint rebuilds every group from the events topic: "
        "with --starting-offsets earliest from what the topic still holds, otherwise from the "
        "clients' next heartbeats and routes (within one session timeout). Per-group counters "
        "(rebalances, queue moves) and the job's event counters start again from zero.")
