"""`rebalance-monitor alert-rules --runbook-base-url URL`: the shipped alert rules with every
runbook_url on the operator's base, and nothing else changed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from streaming import alert_rules, cli
from tests.unit.metric_contract import RULES_DIR

pytestmark = pytest.mark.unit

SHIPPED = RULES_DIR / "rebalance-alerts.yml"
BASE = "https://wiki.example.com/ops/rebalance-metrics.md"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["alert-rules", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def alert_annotations(text: str) -> list[tuple[str, dict]]:
    return [(rule["alert"], rule["annotations"])
            for group in yaml.safe_load(text)["groups"] for rule in group["rules"]
            if "alert" in rule]


def test_the_default_rules_are_the_shipped_file():
    assert alert_rules.SHIPPED_RULES == SHIPPED


def test_every_runbook_url_moves_to_the_base_with_its_anchor(capsys):
    code, out, err = run(capsys, "--runbook-base-url", BASE)
    assert (code, err) == (0, "")
    shipped = alert_annotations(SHIPPED.read_text())
    rewritten = alert_annotations(out)
    assert [name for name, _ in rewritten] == [name for name, _ in shipped]
    for (name, before), (_, after) in zip(shipped, rewritten, strict=True):
        assert after["runbook_url"] == f"{BASE}#{name.lower()}"
        assert {**after, "runbook_url": before["runbook_url"]} == before, name


def test_every_other_line_is_written_as_it_is(capsys):
    _, out, _ = run(capsys, "--runbook-base-url", BASE)
    shipped = SHIPPED.read_text().splitlines()
    changed = [(a, b) for a, b in zip(shipped, out.splitlines(), strict=True) if a != b]
    assert len(changed) == sum(1 for line in shipped if "runbook_url:" in line) > 20
    assert all("runbook_url:" in a and "runbook_url:" in b for a, b in changed)
    assert "{{ $value | humanizeDuration }}" in out


def test_another_rules_file(tmp_path: Path, capsys):
    rules = tmp_path / "mine.yml"
    rules.write_text("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n"
                     "    annotations:\n      runbook_url: https://old.example/x.md#a\n")
    code, out, _ = run(capsys, "--runbook-base-url", "http://docs.internal:8080/m.md",
                       "--rules", str(rules))
    assert code == 0
    assert "      runbook_url: http://docs.internal:8080/m.md#a\n" in out


def test_a_rules_file_without_runbook_urls_is_refused(tmp_path: Path, capsys):
    rules = tmp_path / "none.yml"
    rules.write_text("groups: []\n")
    code, out, err = run(capsys, "--runbook-base-url", BASE, "--rules", str(rules))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "no runbook_url" in err


def test_without_a_source_tree_it_asks_for_the_rules_file(monkeypatch, tmp_path: Path, capsys):
    monkeypatch.setattr(alert_rules, "SHIPPED_RULES", tmp_path / "absent.yml")
    code, out, err = run(capsys, "--runbook-base-url", BASE)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "--rules" in err


def test_every_group_page_link_moves_to_the_base_and_nothing_else(capsys):
    code, out, err = run(capsys, "--group-page-base-url", "https://monitor.example.com:9108/")
    assert (code, err) == (0, "")
    shipped = alert_annotations(SHIPPED.read_text())
    for (name, before), (_, after) in zip(shipped, alert_annotations(out), strict=True):
        if "group_page_url" not in before:
            assert after == before, name
            continue
        assert after["group_page_url"] == before["group_page_url"].replace(
            "http://{{ $labels.instance }}/", "https://monitor.example.com:9108/"), name
        assert {**after, "group_page_url": before["group_page_url"]} == before, name


def test_both_bases_at_once_and_neither_refused(capsys):
    code, out, _ = run(capsys, "--runbook-base-url", BASE,
                       "--group-page-base-url", "http://m.internal:9108")
    assert code == 0 and f"{BASE}#rebalancestorm" in out and "http://m.internal:9108/groups/" in out
    code, out, err = run(capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1
