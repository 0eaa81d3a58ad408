"""The layers import downwards only: ``surfaces`` -> ``graphs`` -> ``nodes`` -> ``stores``; tests use no benchmark code.

``stores/`` (I/O, models, text helpers) imports neither ``nodes`` nor ``graphs``; ``nodes/`` (the agents)
imports from ``graphs`` only the schemas (``nodes.context`` and each workflow's ``state``/``context``),
never a wiring module; no runtime layer imports ``surfaces`` (the ways in), ``bench``, ``tests`` or the
test doubles of ``doubles``; the benchmarks take their scripted models from ``doubles``, never from ``tests``;
and tests import ``bench`` only when they test a benchmark. Imports are read
from the source (module level and inside functions, ``importlib.import_module("...")`` with a literal too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "stores": ("nodes", "graphs", "surfaces", "bench", "tests", "doubles"),
    "nodes": ("surfaces", "bench", "tests", "doubles"),
    "graphs": ("surfaces", "bench", "tests", "doubles"),
    "surfaces": ("bench", "tests", "doubles"),
    "bench": ("tests",),
    "doubles": ("tests", "bench"),
}

SCHEMA_MODULES = ("state", "context")
"""The modules of ``graphs`` that ``nodes`` may import: the workflows' schemas, never their wiring."""

BENCH_TESTS = (
    "test_bench_*.py",
    "test_offload_bench.py",
    "test_reliability_bench.py",
    "test_notebooks.py",
    "test_notebook_outputs.py",
    "test_fast_embedder.py",
)
"""Test modules that test benchmark code, and so may import it."""


def imported_names(path: Path) -> set[str]:
    """Full module names ``path`` imports, wherever the import statement is."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def imported_modules(path: Path) -> set[str]:
    """Top-level package names ``path`` imports, wherever the import statement is."""
    return {name.split(".")[0] for name in imported_names(path)}


def _sources(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "node_modules" not in p.parts)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_runtime_layers_import_downwards_only(package: str) -> None:
    files = _sources(package)
    assert files, f"no Python files under {package}/"
    wrong = {
        str(path.relative_to(ROOT)): sorted(imported_modules(path) & set(FORBIDDEN[package]))
        for path in files
        if imported_modules(path) & set(FORBIDDEN[package])
    }
    assert not wrong, f"{package}/ must not import {', '.join(FORBIDDEN[package])}: {wrong}"


def test_nodes_import_only_the_schemas_of_graphs() -> None:
    wrong = {
        str(path.relative_to(ROOT)): sorted(bad)
        for path in _sources("nodes")
        if (
            bad := {
                name
                for name in imported_names(path)
                if name.split(".")[0] == "graphs" and name.split(".")[-1] not in SCHEMA_MODULES
            }
        )
    }
    assert not wrong, f"nodes/ may import only nodes.context and the workflows' state/context: {wrong}"


def test_tests_import_bench_only_to_test_benchmarks() -> None:
    allowed = {path for pattern in BENCH_TESTS for path in (ROOT / "tests").rglob(pattern)}
    wrong = sorted(
        str(path.relative_to(ROOT))
        for path in _sources("tests")
        if path not in allowed and "bench" in imported_modules(path)
    )
    assert not wrong, f"these tests import bench/ (move the doubles they need to doubles/): {wrong}"


MAX_MODULE_LINES = 400
"""The longest a module of the workflows, agents or stores may be: past it, it is split by concern."""


def test_no_workflow_agent_or_store_module_is_over_the_line_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for package in ("graphs", "nodes", "stores")
        for path in (ROOT / package).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_the_checker_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        "import graphs.chain.graph\nfrom bench.offload import x\n"
        "def f():\n    from nodes import canvas\n    importlib.import_module('stores.text')\n"
        "from . import sibling\n",
        encoding="utf-8",
    )
    assert imported_modules(source) == {"graphs", "bench", "nodes", "stores"}
    assert "graphs.chain.graph" in imported_names(source)
