"""`rebalance-monitor alert-rules`: the shipped alert rules, with each alert's runbook link on
the operator's own copy of docs/metrics.md and its group page link on the address operators
reach the job at.

    rebalance-monitor alert-rules --runbook-base-url https://wiki.example.com/rebalance/metrics.md \\
        --group-page-base-url http://rebalance-monitor.internal:9108 \\
        > /etc/prometheus/rules/rebalance-alerts.yml

Each alert's `runbook_url` annotation becomes `<base>#<its section's anchor>`. A group alert's
`group_page_url` links the job's page of that group (docs/api.md); shipped, it is on the address
Prometheus scraped the job at (`$labels.instance`), which a browser may not reach. Every other
line of the file is written as it is (comments, templates, layout), so the result diffs cleanly
against the shipped dashboards/prometheus/rules/rebalance-alerts.yml.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from streaming.common import option_values as values
from streaming.common.options import add_arguments as add_options
from streaming.common.options import option
from streaming.common.runbooks import runbook_url

SHIPPED_RULES = (Path(__file__).resolve().parents[1] / "dashboards" / "prometheus" / "rules"
                 / "rebalance-alerts.yml")
SCRAPED_JOB = "http://{{ $labels.instance }}/groups/"
_RUNBOOK_URL = re.compile(r"^(?P<key>[ \t]+runbook_url:[ \t]+)[^#\s]+#(?P<anchor>[\w-]+)[ \t]*$",
                          re.MULTILINE)


@dataclass(frozen=True)
class AlertRulesOptions:
    runbook_base_url: str | None = option(
        "where your operators read docs/metrics.md, e.g. "
        "https://wiki.example.com/rebalance/metrics.md; each alert's section anchor is appended",
        values.absolute_url, default=None, metavar="URL", shown_default="the shipped links")
    group_page_base_url: str | None = option(
        "where operators reach the job's metrics port, e.g. "
        "http://rebalance-monitor.internal:9108", values.absolute_url, default=None,
        metavar="URL", shown_default="the address Prometheus scrapes it at")
    rules: Path | None = option(
        "the rules file to rewrite", values.readable_file, default=None, metavar="FILE",
        shown_default="this source tree's dashboards/prometheus/rules/rebalance-alerts.yml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, AlertRulesOptions)


def main(args: AlertRulesOptions) -> int:
    rules = args.rules or SHIPPED_RULES
    if not rules.is_file():
        print(f"alert-rules: no rules file at {rules} (an installed package has none): "
              f"pass --rules FILE", file=sys.stderr)
        return 2
    if args.runbook_base_url is None and args.group_page_base_url is None:
        print("alert-rules: give --runbook-base-url, --group-page-base-url or both",
              file=sys.stderr)
        return 2
    text = rules.read_text()
    if args.runbook_base_url is not None:
        text, count = with_runbook_base_url(text, args.runbook_base_url)
        if count == 0:
            print(f"alert-rules: {rules} has no runbook_url annotation", file=sys.stderr)
            return 2
    if args.group_page_base_url is not None:
        text, count = with_group_page_base_url(text, args.group_page_base_url)
        if count == 0:
            print(f"alert-rules: {rules} has no group_page_url on {SCRAPED_JOB}",
                  file=sys.stderr)
            return 2
    sys.stdout.write(text)
    return 0


def with_runbook_base_url(rules_text: str, base_url: str) -> tuple[str, int]:
    """The rules text with every runbook_url on `base_url`, and how many were rewritten.

    >>> with_runbook_base_url("    runbook_url: https://a.example/m.md#rebalancestorm\\n",
    ...                       "https://wiki.example.com/m")
    ('    runbook_url: https://wiki.example.com/m#rebalancestorm\\n', 1)
    """
    return _RUNBOOK_URL.subn(lambda m: m["key"] + runbook_url(base_url, m["anchor"]), rules_text)


def with_group_page_base_url(rules_text: str, base_url: str) -> tuple[str, int]:
    """The rules text with every group page link on `base_url`, and how many were rewritten.

    >>> with_group_page_base_url("  http://{{ $labels.instance }}/groups/{{ $labels.system }}",
    ...                          "https://monitor.example.com/")
    ('  https://monitor.example.com/groups/{{ $labels.system }}', 1)
    """
    base = base_url.rstrip("/") + "/groups/"
    return rules_text.replace(SCRAPED_JOB, base), rules_text.count(SCRAPED_JOB)
