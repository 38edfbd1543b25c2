"""The typed contract between the core, the job and the exporter: its serialisation at the Spark
boundary, and a rule that nothing outside it reads group metrics or finding records by key."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from producers.simulator.scenarios import SCENARIOS
from streaming.core.contract import (
    FindingIdentity,
    FindingRecord,
    GroupDetail,
    GroupKey,
    GroupMetrics,
    to_plain,
)
from streaming.core.state.events import parse_event
from streaming.core.step import StepConfig, step
from tests.unit.state_helpers import group_metrics, hb, parsed, route

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
METRICS_FIELDS = {f.name for f in dataclasses.fields(GroupMetrics)}
RECORD_FIELDS = {f.name for f in dataclasses.fields(FindingRecord)}
# Names the events contract and the allocation cases use too: forbidden only where metrics and
# finding records are handled (ADAPTERS).
SHARED_NAMES = {"group", "system", "topic", "queue", "clients", "address", "brokers", "members",
                "queues", "detail", "cluster", "group_type", "assignor"}
ADAPTERS = ["streaming/spark/state_function.py", "streaming/spark/sinks.py",
            "streaming/spark/job.py", "streaming/exporter/collector.py", "streaming/demo.py",
            "streaming/core/step.py", "streaming/core/findings.py", "streaming/core/detail.py",
            "streaming/exporter/details.py", "streaming/exporter/views.py",
            "streaming/exporter/api.py", "streaming/exporter/pages.py"]


def string_key_reads(text: str, names: set[str]) -> list[str]:
    """`x["name"]` and `x.get("name"...)` for the given names (not a list literal `["name"]`)."""
    alternatives = "|".join(sorted(names))
    pattern = re.compile(
        rf"""(?<=[\w)\]])\[\s*["']({alternatives})["']\s*\]|\.get\(\s*["']({alternatives})["']""")
    return [match.group(0) for match in pattern.finditer(text)]


def offenders(paths: list[Path], names: set[str]) -> list[str]:
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            found += [f"{path.relative_to(REPO)}:{number}: {hit}"
                      for hit in string_key_reads(line, names)]
    return found


def test_no_module_outside_the_contract_reads_metrics_or_records_by_string_key():
    modules = [p for root in ("streaming", "producers") for p in (REPO / root).rglob("*.py")
               if p != REPO / "streaming/core/contract.py"]
    assert offenders(modules, (METRICS_FIELDS | RECORD_FIELDS) - SHARED_NAMES) == []
    assert offenders([REPO / p for p in ADAPTERS], METRICS_FIELDS | RECORD_FIELDS) == []


def test_the_rule_sees_a_string_key_read():
    assert string_key_reads('snap["skew_ratio"] + snap.get("members", 0) + ["members"]',
                            {"skew_ratio", "members"}) == ['["skew_ratio"]', '.get("members"']


def test_metrics_cross_the_spark_boundary_unchanged():
    out = step(None, parsed([route("T", brokers={"a": 4}), hb("c1", ["T"]), hb("c2", ["T"]),
                             hb("c2", ["T"], address="other:1")]))
    assert out.metrics.client_id_collisions == 1
    assert GroupMetrics.from_json(out.metrics.to_json()) == out.metrics
    for record in out.findings:
        assert FindingRecord.from_json(record.to_json()) == record


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_groups_detail_is_written_as_its_plain_data_is(name):
    """GroupDetail.to_json lets the encoder convert the detail as it writes: the same bytes as
    the plain data `to_plain` makes (the definition), and read back the same detail (its
    heading alone: the same without queues and members). Every
    group of the scenario steps ten events at a time (exact: a detail every step)."""
    per_group: dict[str, list] = {}
    for offset, raw in enumerate(SCENARIOS[name](seed=1, with_view=True).run()):
        for event in parse_event(raw):
            per_group.setdefault(event.group, []).append((event, offset))
    details = []
    for items in per_group.values():
        blob = None
        for at in range(0, len(items), 10):
            out = step(blob, items[at:at + 10], config=StepConfig(exact=True))
            blob = out.blob
            details += [out.detail] if out.detail is not None else []
    assert any(detail.findings for detail in details) or name == "steady"
    for detail in details:
        plain = json.dumps(to_plain(detail), separators=(",", ":"), ensure_ascii=False)
        assert detail.to_json() == plain.encode()
        assert GroupDetail.from_json(detail.to_json()) == detail
        assert GroupDetail.heading_from_json(detail.to_json()) == dataclasses.replace(
            detail, queues=(), members=())


def test_a_finding_record_is_the_documented_json():
    record = FindingRecord.of("started", FindingIdentity("double_assignment", "T", ("b", 3),
                                                         ("c1", "c2"), None, ()),
                              GroupKey("kafka", "g", "prod-1"), since=1, at=2,
                              detail={"addresses": ["x"]})
    assert json.loads(record.to_json()) == {
        "status": "started", "kind": "double_assignment", "group": "g", "system": "kafka",
        "cluster": "prod-1", "topic": "T", "queue": ["b", 3], "clients": ["c1", "c2"], "since": 1, "at": 2,
        "detail": {"addresses": ["x"]}}


def test_group_keys_of_two_systems_differ_and_sort_by_system_first():
    kafka, rocketmq = group_metrics("orders", "kafka"), group_metrics("orders", "rocketmq")
    assert kafka.key != rocketmq.key
    assert sorted([rocketmq.key, GroupKey("kafka", "zz"), kafka.key]) == [
        GroupKey("kafka", "orders"), GroupKey("kafka", "zz"), GroupKey("rocketmq", "orders")]


def test_two_clusters_groups_of_one_name_are_two_groups():
    east, west = (group_metrics("orders", cluster=s) for s in ("prod-east", "prod-west"))
    assert east.key != west.key and GroupKey("rocketmq", "orders").cluster == "default"


def test_the_next_timeout_is_the_groups_own_systems_expiry():
    """The Spark timeout comes from the step, not from metrics: a Kafka member expires after the
    Kafka session timeout (45 s by default), not RocketMQ's 120 s."""
    kafka = {"system": "kafka"}
    out = step(None, parsed([route("T", partitions=2, **kafka),
                             hb("m1", ["T"], strategy="range", **kafka)]))
    assert out.next_timeout_ms - out.metrics.event_time_ms == 45_001


def test_the_contract_is_a_leaf():
    """contract.py imports nothing of the project's, so every layer may import it."""
    import ast
    from pathlib import Path

    import streaming.core.contract as contract

    tree = ast.parse(Path(contract.__file__).read_text())
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names]
    assert [name for name in imported if name.split(".")[0] in ("streaming", "producers")] == []
