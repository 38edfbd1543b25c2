import pytest

from streaming.spark.checkpoint_files import HadoopTextFile, checkpoint_child, hadoop_path_exists

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
