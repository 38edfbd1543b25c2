"""Copy the alert and recording rules and the Grafana dashboards into the Helm chart.

Helm reads only files inside the chart, so deploy/helm/rebalance-monitor/files/ holds exact
copies of dashboards/prometheus/rules/*.yml and dashboards/grafana/dashboards/*.json, from which
the chart renders its PrometheusRule and its dashboard ConfigMaps. After changing a rule or a
dashboard, run it again (tests/unit/test_helm_chart.py fails while a copy differs):

    python scripts/sync_helm_chart.py           # write the copies
    python scripts/sync_helm_chart.py --check   # exit 1, naming each copy that differs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "deploy" / "helm" / "rebalance-monitor"
# (source folder, pattern, the copies' folder in the chart)
COPIED = (
    (REPO / "dashboards" / "prometheus" / "rules", "*.yml", CHART / "files" / "rules"),
    (REPO / "dashboards" / "grafana" / "dashboards", "*.json", CHART / "files" / "dashboards"),
)


def pairs(repo: Path = REPO) -> list[tuple[Path, Path]]:
    """(source, copy) for every file to copy."""
    chart = repo / CHART.relative_to(REPO)
    out = []
    for source_dir, pattern, copy_dir in COPIED:
        source_dir = repo / source_dir.relative_to(REPO)
        copy_dir = chart / copy_dir.relative_to(CHART)
        out += [(source, copy_dir / source.name) for source in sorted(source_dir.glob(pattern))]
    return out


def stale(repo: Path = REPO) -> list[str]:
    """What differs: each copy that is missing or not byte for byte its source, and each file in
    the copies' folders that has no source."""
    found = [f"{copy.relative_to(repo)} differs from {source.relative_to(repo)}"
             for source, copy in pairs(repo)
             if not copy.is_file() or copy.read_bytes() != source.read_bytes()]
    wanted = {copy for _, copy in pairs(repo)}
    for _, _, copy_dir in COPIED:
        copy_dir = repo / copy_dir.relative_to(REPO)
        found += [f"{extra.relative_to(repo)} has no source" for extra in
                  sorted(copy_dir.glob("*")) if extra not in wanted]
    return found


def sync(repo: Path = REPO) -> None:
    for _, _, copy_dir in COPIED:
        copy_dir = repo / copy_dir.relative_to(REPO)
        copy_dir.mkdir(parents=True, exist_ok=True)
        wanted = {copy for _, copy in pairs(repo)}
        for extra in copy_dir.glob("*"):
            if extra not in wanted:
                extra.unlink()
    for source, copy in pairs(repo):
        copy.write_bytes(source.read_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a copy differs from its source")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for line in found:
            print(line, file=sys.stderr)
        if found:
            print("run: python scripts/sync_helm_chart.py", file=sys.stderr)
        return 1 if found else 0
    sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
