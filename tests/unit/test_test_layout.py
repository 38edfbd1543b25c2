"""The tests' own layout: no test module imports another (what tests share lives in a support
module, not named test_*.py, next to its users: tests/support.py, tests/unit/step_strategies.py,
tests/integration/rocketmq_watch.py and the like), and tests/support.py's Scrape is the one
parser of /metrics answers under tests/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imported(package: list[str], node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dotted names an import statement may load as modules: relative imports resolved
    against the file's package, and `from package import name` counted as package.name too."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    module = node.module or ""
    if node.level:
        base = package[:len(package) - node.level + 1]
        module = ".".join([*base, *([node.module] if node.module else [])])
    return [module, *(f"{module}.{alias.name}" for alias in node.names)]


def imports_of_test_modules(root: Path) -> list[str]:
    """`path:line imports name` for each import statement, at module level or inside a function,
    by which a root/tests/**/test_*.py loads another test module: tests.<...>.test_*, relative,
    or by the bare name of one of the test files."""
    test_files = sorted((root / "tests").rglob("test_*.py"))
    stems = {path.stem for path in test_files}
    found = []
    for path in test_files:
        package = list(path.relative_to(root).parent.parts)
        for node in ast.walk(_parsed(path)):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            tests = [name for name in _imported(package, node)
                     if name.rsplit(".", 1)[-1].startswith("test_")
                     and (name.startswith("tests.") or name.rsplit(".", 1)[-1] in stems)]
            if tests:
                found.append(f"{path.relative_to(root)}:{node.lineno} imports {tests[0]}")
    return found


def scrape_classes(root: Path) -> list[str]:
    """`path:line` of every class named Scrape (at any depth) in a root/tests/**/*.py."""
    return [f"{path.relative_to(root)}:{node.lineno}"
            for path in sorted((root / "tests").rglob("*.py"))
            for node in ast.walk(_parsed(path))
            if isinstance(node, ast.ClassDef) and node.name == "Scrape"]


def test_no_test_module_imports_another():
    found = imports_of_test_modules(ROOT)
    assert found == [], ("test modules importing test modules (move what they share into a "
                         "support module next to them):\n" + "\n".join(found))


def test_one_class_scrape_under_tests():
    found = scrape_classes(ROOT)
    assert len(found) <= 1, ("more than one class Scrape under tests/ (tests/support.py's is "
                             "the one to use):\n" + "\n".join(found))


def test_the_checks_find_what_they_forbid(tmp_path):
    """Each form of import of a test module is found, and nothing else; so is a second Scrape."""
    unit, integration = tmp_path / "tests" / "unit", tmp_path / "tests" / "integration"
    unit.mkdir(parents=True)
    integration.mkdir()
    # Written with PKG for the package: no grep for imports of test modules finds this file.
    sources = {
        unit / "test_shared.py": "class Scrape:\n    pass\n",
        unit / "helpers.py": "import PKG.unit.test_shared\n",   # not a test module: allowed
        unit / "test_user.py": (
            "import os\n"
            "from PKG.unit.helpers import thing\n"
            "from PKG.unit import helpers\n"
            "from PKG.unit.test_shared import CONFIG\n"
            "import PKG.unit.test_shared\n"
            "from PKG.unit import test_shared\n"
            "from . import test_shared\n"
            "from .test_shared import CONFIG\n"
            "from ..integration.test_other import fresh\n"
            "def later():\n"
            "    import test_shared\n"),
        integration / "test_other.py": (
            "from PKG.unit.helpers import thing\n"
            "class Harness:\n"
            "    class Scrape:\n"
            "        pass\n"),
    }
    for path, source in sources.items():
        path.write_text(source.replace("PKG", "tests"))
    assert imports_of_test_modules(tmp_path) == [
        f"tests/unit/test_user.py:{line} imports {name}" for line, name in [
            (4, "tests.unit.test_shared"), (5, "tests.unit.test_shared"),
            (6, "tests.unit.test_shared"), (7, "tests.unit.test_shared"),
            (8, "tests.unit.test_shared"), (9, "tests.integration.test_other"),
            (11, "test_shared")]]
    assert scrape_classes(tmp_path) == ["tests/integration/test_other.py:3",
                                        "tests/unit/test_shared.py:1"]
