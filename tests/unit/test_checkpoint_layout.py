"""The state layout recorded in a checkpoint: a new checkpoint records it, ours is accepted, an
older one (no marker but Spark progress, or another layout) is refused with what to do."""

import json

import pytest

from streaming.spark.checkpoint_files import LocalTextFile
from streaming.spark.checkpoint_layout import (
    DEFAULT_SHARDS,
    MAX_SPREAD_SHARDS,
    NUMBER,
    NUMBERED_LAYOUT,
    ONE_GROUP_PER_SHARD,
    SPREAD,
    STATE_LAYOUT,
    CheckpointLayoutError,
    StateLayout,
    check_layout,
    layout_path,
)
from streaming.spark.shard_keys import spread_keys

pytestmark = pytest.mark.unit


@pytest.fixture
def marker(tmp_path) -> LocalTextFile:
    return LocalTextFile(layout_path(str(tmp_path / "checkpoint")))


def test_a_new_checkpoint_records_the_layout_and_is_then_accepted(marker):
    new = StateLayout(DEFAULT_SHARDS, SPREAD)
    assert check_layout(marker, "cp", has_progress=False, shards=None) == new
    assert json.loads(marker.read()) == {"state_layout": STATE_LAYOUT, "state_key": ["shard"],
                                         "state_shards": DEFAULT_SHARDS, "shard_keys": SPREAD}
    assert check_layout(marker, "cp", has_progress=True, shards=None) == new
    assert check_layout(marker, "cp", has_progress=True, shards=DEFAULT_SHARDS) == new
    assert new.keys() == spread_keys(DEFAULT_SHARDS)


def test_the_shards_of_a_new_checkpoint_are_recorded_and_kept_when_unset(marker):
    assert check_layout(marker, "cp", has_progress=False, shards=7) == StateLayout(7, SPREAD)
    assert check_layout(marker, "cp", has_progress=True, shards=None) == StateLayout(7, SPREAD)


def test_a_layout_3_checkpoint_goes_on_keying_shards_by_number(marker):
    """Its state is stored under the shards' numbers: other keys would read every group as
    new."""
    marker.write(json.dumps({"state_layout": NUMBERED_LAYOUT, "state_key": ["shard"],
                             "state_shards": DEFAULT_SHARDS}))
    layout = check_layout(marker, "cp", has_progress=True, shards=None)
    assert layout == StateLayout(DEFAULT_SHARDS, NUMBER) and layout.keys() is None


@pytest.mark.parametrize("shards", [MAX_SPREAD_SHARDS + 1, ONE_GROUP_PER_SHARD])
def test_more_shards_than_a_table_of_keys_holds_are_keyed_by_number(marker, shards):
    """--exact's shards (one group each) among them."""
    layout = check_layout(marker, "cp", has_progress=False, shards=shards)
    assert layout == StateLayout(shards, NUMBER) and layout.keys() is None
    assert json.loads(marker.read())["shard_keys"] == NUMBER


def test_the_largest_table_of_keys_is_spread(marker):
    layout = check_layout(marker, "cp", has_progress=False, shards=MAX_SPREAD_SHARDS)
    assert layout.keys() == spread_keys(MAX_SPREAD_SHARDS)


@pytest.mark.parametrize("recorded", [{"shard_keys": "balanced-v9"}, {}])
def test_unknown_or_missing_shard_keys_of_layout_4_are_refused(marker, recorded):
    marker.write(json.dumps({"state_layout": STATE_LAYOUT, "state_key": ["shard"],
                             "state_shards": 8, **recorded}))
    keying = repr(recorded.get("shard_keys"))
    with pytest.raises(CheckpointLayoutError, match=f"keys its state shards by {keying}") as refused:
        check_layout(marker, "cp", has_progress=True, shards=None)
    assert "Start with a new --checkpoint" in str(refused.value)


def test_other_shards_than_the_checkpoint_recorded_are_refused(marker):
    check_layout(marker, "cp", has_progress=False, shards=7)
    with pytest.raises(CheckpointLayoutError, match="splits its state into 7 shards") as refused:
        check_layout(marker, "/data/cp", has_progress=True, shards=8)
    assert "Leave --state-shards unset (or set it to 7)" in str(refused.value)
    assert json.loads(marker.read())["state_shards"] == 7


def test_progress_without_a_marker_is_the_previous_layout_and_is_refused(marker):
    with pytest.raises(CheckpointLayoutError, match="holds state of layout 1") as refused:
        check_layout(marker, "/data/cp", has_progress=True, shards=None)
    assert "Start with a new --checkpoint" in str(refused.value)
    assert "/data/cp" in str(refused.value)
    assert marker.read() is None                    # nothing written on a refused checkpoint


@pytest.mark.parametrize("layout", [2, 5])
def test_another_recorded_layout_is_refused(marker, layout):
    """Layout 2 (one state per (system, group)), and one this build does not know."""
    marker.write(json.dumps({"state_layout": layout, "state_key": ["system", "group"]}))
    with pytest.raises(CheckpointLayoutError, match=f"holds state of layout {layout}"):
        check_layout(marker, "cp", has_progress=True, shards=None)
