"""The package graph has layers, no cycle and no upward import. Every import statement in
streaming/ and producers/ (function-level ones too) is read with `ast` and checked against:

    app        streaming.cli, .demo, .allocate_cli, .alert_rules   may import anything
    job        streaming.spark, .exporter and the brokers           core, common, job
    producers  producers.*                                          core, common, producers
    common     streaming.common                                     common
    core       streaming.core                                       core

So the job and the producers never import each other; what both need is in streaming.common,
and only the commands (app) put them together.

    .venv/bin/pytest -q tests/unit/test_import_layers.py
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
APP = {"streaming.cli", "streaming.demo", "streaming.allocate_cli", "streaming.alert_rules"}
MAY_IMPORT = {
    "app": {"app", "job", "producers", "common", "core"},
    "job": {"job", "common", "core"},
    "producers": {"producers", "common", "core"},
    "common": {"common"},
    "core": {"core"},
}


def layer_of(module: str) -> str | None:
    if module == "streaming":
        return None      # the package's __init__ holds a docstring only: `from streaming import x`
    if module in APP:                                        # is read as importing streaming.x
        return "app"
    if module == "producers" or module.startswith("producers."):
        return "producers"
    for layer, prefix in (("core", "streaming.core"), ("common", "streaming.common")):
        if module == prefix or module.startswith(prefix + "."):
            return layer
    if module.startswith("streaming."):
        return "job"
    return None      # not the project's


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if layer_of(f"{node.module}.{alias.name}") != layer_of(node.module)]
    return found


def violations(root: Path = REPO) -> list[str]:
    out = []
    for package in ("streaming", "producers"):
        for path in sorted((root / package).rglob("*.py")):
            importer = module_name(path, root)
            allowed = MAY_IMPORT.get(layer_of(importer) or "app", set())
            for line, imported in imports(path):
                layer = layer_of(imported)
                if layer is not None and layer not in allowed:
                    out.append(f"{path.relative_to(root)}:{line}: {layer_of(importer)} "
                               f"imports {layer} ({imported})")
    return out


def test_no_module_imports_a_layer_it_may_not():
    assert violations() == []


def test_the_checker_sees_an_upward_import(tmp_path):
    (tmp_path / "streaming" / "core").mkdir(parents=True)
    (tmp_path / "producers").mkdir()
    (tmp_path / "streaming" / "core" / "x.py").write_text("from streaming.common import faults\n")
    (tmp_path / "producers" / "y.py").write_text(
        "def f():\n    from streaming.spark import job\n")
    assert violations(tmp_path) == ["streaming/core/x.py:1: core imports common (streaming.common)",
                     "producers/y.py:2: producers imports job (streaming.spark)"]
