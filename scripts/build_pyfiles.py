"""Build the --py-files zip for spark-submit: the `streaming` and `producers` packages at its root.

    python scripts/build_pyfiles.py dist/rebalance_monitor.zip
    spark-submit --master spark://HOST:7077 --py-files dist/rebalance_monitor.zip \\
        streaming/spark/job.py run --bootstrap-servers ... --topic ... --checkpoint ...

Only sources and package data go in (*.py, *.json): no __pycache__, no tests. The entries are
written in sorted order with a fixed timestamp, so the same sources give the same bytes (a
deploy can compare checksums). The zip carries the project's code only; the third-party
dependencies (pandas, pyarrow, confluent-kafka, prometheus-client) reach the executors another
way: see docs/deploy.md.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("streaming", "producers")
SUFFIXES = (".py", ".json")
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # zip timestamps cannot go before 1980; any constant will do


def package_files(root: Path, packages=PACKAGES) -> list[Path]:
    """Every source and data file of the packages, relative to root, sorted."""
    files = []
    for package in packages:
        base = root / package
        if not (base / "__init__.py").is_file():
            raise FileNotFoundError(f"{base} is not a package (no __init__.py)")
        files += [path.relative_to(root) for path in base.rglob("*")
                  if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts]
    return sorted(files)


def build_zip(destination: Path, root: Path = REPO, packages=PACKAGES) -> list[str]:
    """Write the zip (replacing any old one); return its entry names."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    names = []
    partial = destination.with_name(destination.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for relative in package_files(root, packages):
            info = zipfile.ZipInfo(relative.as_posix(), date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, (root / relative).read_bytes())
            names.append(info.filename)
    partial.replace(destination)  # a reader never sees half a zip
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("destination", type=Path, help="the zip to write, e.g. dist/rebalance_monitor.zip")
    args = parser.parse_args(argv)
    names = build_zip(args.destination)
    print(f"{args.destination}: {len(names)} files from {', '.join(PACKAGES)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
