import pytest

from streaming.spark.checkpoint_files import (
    HadoopTextFile,
    checkpoint_child,
    hadoop_checkpoint_problem,
    hadoop_path_exists,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("scheme", ["", "file://"])
def test_hadoop_text_file_round_trips_and_overwrites(spark, tmp_path, scheme):
    uri = checkpoint_child(scheme + str(tmp_path / "checkpoint"), "monitor", "counters.json")
    file = HadoopTextFile(spark, uri)
    assert file.read() is None
    assert not hadoop_path_exists(spark, uri)
    file.write('{"batch_id": 1}')
    file.write('{"batch_id": 2, "name": "é"}')
    assert HadoopTextFile(spark, uri).read() == '{"batch_id": 2, "name": "é"}'
    assert hadoop_path_exists(spark, uri)
    assert (tmp_path / "checkpoint" / "monitor" / "counters.json").read_text() == \
        '{"batch_id": 2, "name": "é"}'
    assert not (tmp_path / "checkpoint" / "monitor" / "counters.json.tmp").exists()


def test_a_checkpoint_is_written_once_through_hadoop_before_the_query_or_refused(spark, tmp_path):
    good = checkpoint_child(str(tmp_path), "fresh", "checkpoint")
    assert hadoop_checkpoint_problem(spark, good) is None
    assert (tmp_path / "fresh" / "checkpoint").is_dir()
    assert list((tmp_path / "fresh" / "checkpoint").iterdir()) == []    # the check left nothing
    (tmp_path / "a-file").write_text("")
    under_a_file = hadoop_checkpoint_problem(spark, str(tmp_path / "a-file" / "checkpoint"))
    assert under_a_file is not None and "a-file" in under_a_file
    # A scheme this Spark has no file system for: what the query would fail on, said first.
    assert "s3a" in hadoop_checkpoint_problem(spark, "s3a://bucket/checkpoint").lower()
    assert len(under_a_file.splitlines()) == 1


def test_a_write_cut_short_between_its_two_renames_still_reads_a_whole_version(spark, tmp_path):
    """Hadoop's rename over a file deletes it first: a kill between that delete and the move
    used to leave no counters at all (test_catch_up saw a restart count from zero)."""
    folder = tmp_path / "checkpoint" / "monitor"
    file = HadoopTextFile(spark, str(folder / "counters.json"))
    file.write('{"batch_id": 1}')
    file.write('{"batch_id": 2}')
    assert (folder / "counters.json.old").read_text() == '{"batch_id": 1}'
    # The moment between moving the file aside and moving the new one into place.
    (folder / "counters.json").unlink()
    (folder / ".counters.json.crc").unlink(missing_ok=True)
    assert HadoopTextFile(spark, str(folder / "counters.json")).read() == '{"batch_id": 1}'
    file.write('{"batch_id": 3}')
    assert HadoopTextFile(spark, str(folder / "counters.json")).read() == '{"batch_id": 3}'
