"""The layers import one way, without circles: ``surfaces`` -> ``graphs`` -> ``nodes`` -> ``stores`` / ``prompts``.

``deploy`` and ``bench`` sit on top, beside ``surfaces``; the test ``doubles`` sit below ``bench`` and above the
runtime layers they exercise, and no runtime layer imports them. Each package may import only the packages
below it (:data:`MAY_IMPORT`); no module of the eight packages reaches itself again through the modules it
imports; tests import ``bench`` only when they test a benchmark. Imports are read from the source: module
level, inside functions and under ``TYPE_CHECKING`` alike, relative ones too, and
``importlib.import_module("...")`` with a literal.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MAY_IMPORT: dict[str, frozenset[str]] = {
    "prompts": frozenset(),
    "stores": frozenset(),
    "nodes": frozenset({"stores", "prompts"}),
    "graphs": frozenset({"nodes", "stores", "prompts"}),
    "surfaces": frozenset({"graphs", "nodes", "stores", "prompts"}),
    "deploy": frozenset({"surfaces", "graphs", "nodes", "stores", "prompts"}),
    "doubles": frozenset({"surfaces", "graphs", "nodes", "stores", "prompts"}),
    "bench": frozenset({"deploy", "surfaces", "graphs", "nodes", "stores", "prompts", "doubles"}),
}
"""The project packages each package may import besides itself; any other (``tests`` included) is upward."""

PROJECT = frozenset(MAY_IMPORT) | {"tests"}

BENCH_TESTS = (
    "test_bench_*.py",
    "test_offload_bench.py",
    "test_reliability_bench.py",
    "test_notebooks.py",
    "test_notebook_outputs.py",
    "test_fast_embedder.py",
)
"""Test modules that test benchmark code, and so may import it."""

MAX_MODULE_LINES = 400
"""The longest a module of the workflows, agents or stores may be: past it, it is split by concern."""


def module_name(path: Path, root: Path) -> str:
    """The dotted name of the module at ``path`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, module: str = "") -> set[str]:
    """Full names ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), wherever the statement is.

    ``module`` (the dotted name of ``path``) resolves relative imports; without it they are left out.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not module or node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)] + ([node.module] if node.module else [])
                source = ".".join(base)
            else:
                source = node.module or ""
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names if alias.name != "*")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return {name for name in names if name}


def imported_modules(path: Path) -> set[str]:
    """Top-level package names ``path`` imports, wherever the import statement is."""
    return {name.split(".")[0] for name in imported_names(path)}


def _sources(root: Path, package: str) -> list[Path]:
    return sorted(p for p in (root / package).rglob("*.py") if "node_modules" not in p.parts)


def module_graph(root: Path, packages: frozenset[str] | set[str]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (each import resolved to the longest module name it
    names: ``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``)."""
    files = {module_name(p, root): p for package in sorted(packages) for p in _sources(root, package)}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets = set()
        for name in imported_names(path, module):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"a.b -> c.d"`` for every import of a package that :data:`MAY_IMPORT` does not allow ``a``."""
    found = []
    for module, targets in sorted(graph.items()):
        package = module.split(".")[0]
        allowed = MAY_IMPORT.get(package, frozenset()) | {package}
        found += [f"{module} -> {t}" for t in sorted(targets) if t.split(".")[0] not in allowed]
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of imports as ``[a, b, ..., a]`` (empty when there is none): a depth-first search that
    stops at the first import of a module still on its path."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, on_path = [start], {start}
        stack = [iter(sorted(graph[start]))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif nxt in on_path:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in done and nxt in graph:
                path.append(nxt)
                on_path.add(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return []


@pytest.fixture(scope="module")
def project_graph() -> dict[str, set[str]]:
    return module_graph(ROOT, set(MAY_IMPORT))


def test_every_package_imports_only_the_layers_below_it(project_graph: dict[str, set[str]]) -> None:
    assert set(project_graph) >= {"graphs", "nodes.context", "stores.settings", "surfaces.cli", "deploy.app"}
    wrong = upward_imports(project_graph)
    assert not wrong, f"imports against the layers ({MAY_IMPORT}): {wrong}"


def test_no_package_imports_the_tests() -> None:
    wrong = {
        str(path.relative_to(ROOT))
        for package in MAY_IMPORT
        for path in _sources(ROOT, package)
        if "tests" in imported_modules(path)
    }
    assert not wrong, f"these modules import tests/: {sorted(wrong)}"


def test_no_module_imports_itself_through_others(project_graph: dict[str, set[str]]) -> None:
    cycle = find_cycle(project_graph)
    assert not cycle, "import circle: " + " -> ".join(cycle)


def test_tests_import_bench_only_to_test_benchmarks() -> None:
    allowed = {path for pattern in BENCH_TESTS for path in (ROOT / "tests").rglob(pattern)}
    wrong = sorted(
        str(path.relative_to(ROOT))
        for path in _sources(ROOT, "tests")
        if path not in allowed and "bench" in imported_modules(path)
    )
    assert not wrong, f"these tests import bench/ (move the doubles they need to doubles/): {wrong}"


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
        "if TYPE_CHECKING:\n    from prompts import render\n"
        "from . import sibling\n",
        encoding="utf-8",
    )
    assert imported_modules(source) == {"graphs", "bench", "nodes", "stores", "prompts"}
    assert "graphs.chain.graph" in imported_names(source)
    assert "pkg.sibling" in imported_names(source, "pkg.example")


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_catches_an_upward_import(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "stores/__init__.py": "",
            "stores/files.py": "def read():\n    from nodes.chain import state\n",
            "nodes/__init__.py": "",
            "nodes/chain/__init__.py": "",
            "nodes/chain/state.py": "from stores.files import read\n",
            "graphs/__init__.py": "",
            "graphs/chain.py": "from nodes.chain.state import read\nimport doubles.chat\n",
            "doubles/__init__.py": "",
            "doubles/chat.py": "from graphs import chain\n",
        },
    )
    graph = module_graph(tmp_path, {"stores", "nodes", "graphs", "doubles"})
    assert graph["stores.files"] == {"nodes.chain", "nodes.chain.state"}
    assert graph["doubles.chat"] == {"graphs", "graphs.chain"}
    assert upward_imports(graph) == [
        "graphs.chain -> doubles.chat",
        "stores.files -> nodes.chain",
        "stores.files -> nodes.chain.state",
    ]


def test_the_checker_catches_an_import_circle(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "stores/__init__.py": "",
            "stores/a.py": "from stores.b import x\n",
            "stores/b.py": "def f():\n    from stores import c\n",
            "stores/c.py": "from .a import y\n",
            "stores/d.py": "import stores.a\n",
        },
    )
    graph = module_graph(tmp_path, {"stores"})
    assert find_cycle(graph) == ["stores.a", "stores.b", "stores.c", "stores.a"]
    graph["stores.c"].clear()
    assert find_cycle(graph) == []
