"""The state layout recorded in a checkpoint: a new checkpoint records it, ours is accepted, an
older one (no marker but Spark progress, or another layout) is refused with what to do."""

import json

import pytest

from streaming.spark.checkpoint_files import LocalTextFile
from streaming.spark.checkpoint_layout import (
    STATE_LAYOUT,
    CheckpointLayoutError,
    check_layout,
    layout_path,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def marker(tmp_path) -> LocalTextFile:
    return LocalTextFile(layout_path(str(tmp_path / "checkpoint")))


def test_a_new_checkpoint_records_the_layout_and_is_then_accepted(marker):
    check_layout(marker, "cp", has_progress=False)
    assert json.loads(marker.read()) == {"state_layout": STATE_LAYOUT,
                                         "state_key": ["system", "group"]}
    check_layout(marker, "cp", has_progress=True)


def test_progress_without_a_marker_is_the_previous_layout_and_is_refused(marker):
    with pytest.raises(CheckpointLayoutError, match="holds state of layout 1") as refused:
        check_layout(marker, "/data/cp", has_progress=True)
    assert "Start with a new --checkpoint" in str(refused.value)
    assert "/data/cp" in str(refused.value)
    assert marker.read() is None                    # nothing written on a refused checkpoint


def test_another_recorded_layout_is_refused(marker):
    marker.write(json.dumps({"state_layout": 3}))
    with pytest.raises(CheckpointLayoutError, match="holds state of layout 3"):
        check_layout(marker, "cp", has_progress=True)
