"""docs/architecture.md's module map matches the tree: every package directory and every module
under streaming/ and producers/ (but __init__.py) has its line, and every path the map names
exists.

The map is the first fenced block after "## Module layout": one entry a line, its name first
(a directory ends with "/"), indented two spaces per level under the directory above it. A line
whose first word is not a file or directory name continues the description above it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
MAPPED_ROOTS = ("streaming", "producers")
SKIPPED = {"__init__.py", "__pycache__"}
ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[\w.-]+/|[\w.-]+\.(?:py|json))(?:\s|$)")


def map_block(text: str) -> list[str]:
    """The lines of the first fenced block after the "## Module layout" heading."""
    heading = re.search(r"^## Module layout\s*$", text, re.MULTILINE)
    assert heading, "docs/architecture.md has no '## Module layout' section"
    block = re.search(r"^```[^\n]*\n(.*?)^```", text[heading.end():], re.MULTILINE | re.DOTALL)
    assert block, "the '## Module layout' section has no fenced block"
    return block.group(1).splitlines()


def mapped_paths(lines: list[str]) -> list[str]:
    """Every path the map names, relative to the repository ("streaming/core/step.py");
    directories end with "/"."""
    paths: list[str] = []
    parents: list[str] = []  # parents[d] is the directory entry at depth d
    for number, line in enumerate(lines, 1):
        entry = ENTRY.match(line)
        if not entry:
            continue  # a continued description
        indent, name = len(entry["indent"]), entry["name"]
        depth = indent // 2
        assert indent % 2 == 0 and depth <= len(parents), (
            f"map line {number} is not indented two spaces under a directory: {line!r}")
        del parents[depth:]
        path = "".join(parents) + name
        paths.append(path)
        if name.endswith("/"):
            parents.append(name)
    return paths


def tree_paths() -> set[str]:
    """Every module and directory under the mapped roots, as the map names them."""
    found = set()
    for root in MAPPED_ROOTS:
        for path in (REPO / root).rglob("*"):
            relative = path.relative_to(REPO)
            if SKIPPED & set(relative.parts):
                continue
            if path.is_dir():
                found.add(relative.as_posix() + "/")
            elif path.suffix == ".py":
                found.add(relative.as_posix())
    return found


def test_the_map_parses_nested_entries_and_continuations():
    lines = ["a/          the a package",
             "  b/        its b",
             "    c.py    a module,",
             "            continued here: d.py/ is no entry",
             "  e.py      back one level",
             "f.json      at the top"]
    assert mapped_paths(lines) == ["a/", "a/b/", "a/b/c.py", "a/e.py", "f.json"]


def test_every_module_and_directory_is_in_the_map():
    mapped = set(mapped_paths(map_block(ARCHITECTURE.read_text())))
    missing = sorted(tree_paths() - mapped)
    assert not missing, (
        "docs/architecture.md, '## Module layout', does not list: " + ", ".join(missing))


def test_every_path_in_the_map_exists():
    mapped = mapped_paths(map_block(ARCHITECTURE.read_text()))
    absent = sorted(path for path in mapped if not (REPO / path).exists())
    assert not absent, (
        "docs/architecture.md, '## Module layout', names paths that do not exist: "
        + ", ".join(absent))


def test_the_map_names_each_path_once():
    mapped = mapped_paths(map_block(ARCHITECTURE.read_text()))
    repeated = sorted({path for path in mapped if mapped.count(path) > 1})
    assert not repeated, "docs/architecture.md's module map repeats: " + ", ".join(repeated)
