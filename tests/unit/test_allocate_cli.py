"""`rebalance-monitor allocate`: the batch form against the conformance files, the table form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from streaming import cli
from tests.unit.conformance_vectors import CONFORMANCE

pytestmark = pytest.mark.unit

ROCKETMQ = CONFORMANCE / "rocketmq_allocate.jsonl"
KAFKA = CONFORMANCE / "kafka_assign.jsonl"


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"conformance vectors missing: {path}")
    return path.read_text(encoding="utf-8").splitlines()


def _run_batch(stdin_text: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli", "allocate", "--cases", "-"],
        input=stdin_text, capture_output=True, text=True, encoding="utf-8", timeout=120,
        check=False,
    )


def test_batch_reproduces_the_rocketmq_file_byte_for_byte():
    lines = _lines(ROCKETMQ)
    done = _run_batch("\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == lines


def test_batch_fills_results_when_the_expected_fields_are_absent(tmp_path, capsys):
    stripped, expected = [], []
    for line in _lines(ROCKETMQ):
        case = json.loads(line)
        distinct = set(case["clients"])
        expected.append(({c: r for c, r in case["results"].items() if c in distinct},
                         {c: e for c, e in case.get("errors", {}).items() if c in distinct}))
        case.pop("results")
        case.pop("errors", None)
        stripped.append(json.dumps(case, ensure_ascii=False))
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text("\n".join(stripped) + "\n", encoding="utf-8")
    assert cli.main(["allocate", "--cases", str(cases_file)]) == 0
    outputs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(outputs) == len(expected) == 398
    for output, (results, errors) in zip(outputs, expected, strict=True):
        assert output["results"] == results, output["id"]
        assert output.get("errors", {}) == errors, output["id"]
        assert list(output)[-1] == "tags"


def test_batch_reproduces_the_kafka_file_byte_for_byte():
    lines = _lines(KAFKA)
    assert {json.loads(line)["assignor"] for line in lines} == {
        "range", "roundrobin", "sticky", "cooperative-sticky"}
    done = _run_batch("\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == lines


def test_bad_lines_are_reported_on_stderr_and_the_good_ones_still_run():
    good = '{"strategy":"AVG","queues":[],"clients":["a"]}'
    bad = ["not json", '{"strategy":"NOPE","queues":[],"clients":[]}', "[1]",
           '{"strategy":"AVG","queues":[{"topic":"T","broker":"b","queue_id":"x"}],'
           '"clients":["a"]}', '{"strategy":"AVG","clients":["a"]}',
           '{"strategy":"AVG","queues":5,"clients":[]}',
           '{"assignor":"range","partitions_per_topic":[],"members":[]}']
    done = _run_batch("\n".join([good, *bad]) + "\n")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stdout == (
        '{"strategy":"AVG","queues":[],"clients":["a"],"results":{"a":null},'
        '"errors":{"a":"java.lang.IllegalArgumentException: mqAll is null or mqAll empty"}}\n')
    assert done.stderr.splitlines() == [
        "allocate: line 2: not JSON (Expecting value at column 1)",
        "allocate: line 3: unknown strategy 'NOPE'; known: AVG, AVG_BY_CIRCLE, CONSISTENT_HASH,"
        " MACHINE_ROOM, MACHINE_ROOM_NEARBY, CONFIG, GO_AVG, GO_AVG_BY_CIRCLE, GO_CONSISTENT_HASH,"
        " GO_MACHINE_ROOM, GO_MACHINE_ROOM_NEARBY",
        "allocate: line 4: a case must be a JSON object",
        "allocate: line 5: a queue needs str topic, str broker and a 32-bit int queue id,"
        " got ('T', 'b', 'x')",
        "allocate: line 6: missing field 'queues'",
        "allocate: line 7: 'clients' and 'queues' must be lists",
        "allocate: line 8: 'partitions_per_topic' must be an object of topic -> partition count",
    ]


def test_table_for_ten_queues_and_three_clients(capsys):
    assert cli.main(["allocate", "--strategy", "AVG", "--topic", "T:broker-a=10",
                     "--clients", "c1,c2,c3"]) == 0
    assert capsys.readouterr().out == (
        "strategy AVG: 3 processes, 3 client ids\n"
        "\n"
        "client  T (10)        total\n"
        "c1      broker-a:0-3  4\n"
        "c2      broker-a:4-6  3\n"
        "c3      broker-a:7-9  3\n"
        "\n"
        "every queue has exactly one consumer process\n")


def test_table_for_four_clients_on_two_small_topics(capsys):
    assert cli.main(["allocate", "--strategy", "AVG", "--topic", "A:b=2", "--topic", "B:b=2",
                     "--clients", "c1,c2,c3,c4"]) == 0
    assert capsys.readouterr().out.splitlines()[2:7] == [
        "client  A (2)  B (2)  total",
        "c1      b:0    b:0    2",
        "c2      b:1    b:1    2",
        "c3      -      -      0",
        "c4      -      -      0",
    ]


def test_table_shows_what_a_duplicated_client_id_loses_and_doubles(capsys):
    assert cli.main(["allocate", "--strategy", "AVG", "--topic", "T:broker-a=4,broker-b=4",
                     "--clients", "c1,c2,c3,c1"]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == [
        "client             T (8)         total",
        "c1 (x2 processes)  broker-a:0-1  2",
        "c2                 broker-b:0-1  2",
        "c3                 broker-b:2-3  2",
        "",
        "T: unassigned 2: broker-a:2-3",
        "T: doubly assigned 2: broker-a:0-1",
    ]


def test_table_reports_java_exceptions_per_client(capsys):
    assert cli.main(["allocate", "--strategy", "MACHINE_ROOM_NEARBY", "--topic", "T:b1=2",
                     "--clients", "c1", "--broker-room", "b1=hz"]) == 0
    out = capsys.readouterr().out
    assert "c1      error  0" in out
    assert ("T: c1: java.lang.IllegalArgumentException: Machine room is null for consumer id c1"
            in out)


def test_interactive_usage_errors_exit_2(capsys):
    assert cli.main(["allocate", "--strategy", "AVG", "--clients", "c1"]) == 2
    with pytest.raises(SystemExit) as refused:       # refused where the option is parsed
        cli.main(["allocate", "--strategy", "AVG", "--topic", "T:b=x", "--clients", "c"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "allocate: give --strategy, at least one --topic and --clients (or --cases FILE)",
        "rebalance-monitor allocate: error: argument --topic: queue count of 'b' must be a "
        "number, got 'x'",
    ]
