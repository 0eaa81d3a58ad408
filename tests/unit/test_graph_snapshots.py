"""Snapshots of every graph's shape: its Mermaid drawing and its input and output JSON schemas.

A change to a graph's nodes, edges, input or output shows up in review as a change to a file under
``tests/unit/snapshots/`` (``<graph>.mmd``, ``<graph>.input.json``, ``<graph>.output.json``). When a
change is intended, write the snapshots again and commit them with it::

    LONGDOC_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/unit/test_graph_snapshots.py

(the run then passes and says which files it wrote); without the variable a missing or different
snapshot fails the test with a diff.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from surfaces.registry import ALIASES, DESCRIPTIONS, WORKFLOWS, canonical

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
UPDATE = os.environ.get("LONGDOC_UPDATE_SNAPSHOTS", "") not in ("", "0")


def _workflow(name: str) -> Callable[[], Any]:
    return lambda: importlib.import_module(WORKFLOWS[name]).graph


def _baseline(factory: str) -> Callable[[], Any]:
    return lambda: getattr(importlib.import_module("graphs.summarize.baselines"), factory)()


GRAPHS: dict[str, Callable[[], Any]] = {
    **{name: _workflow(name) for name in WORKFLOWS},
    "map-reduce": _baseline("map_reduce_graph"),
    "refine": _baseline("refine_graph"),
}


def _json(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def drawings(graph: Any) -> dict[str, str]:
    """What is snapshotted of ``graph``, by file suffix."""
    return {
        "mmd": graph.get_graph().draw_mermaid(),
        "input.json": _json(graph.get_input_jsonschema()),
        "output.json": _json(graph.get_output_jsonschema()),
    }


def check_snapshot(path: Path, text: str) -> None:
    """Fail with a diff when ``path`` does not hold ``text`` (write it instead when updating)."""
    if UPDATE:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")  # noqa: T201 - the snapshot updater reports what it rewrote
        return
    if not path.is_file():
        pytest.fail(f"no snapshot {path.name}; write it with LONGDOC_UPDATE_SNAPSHOTS=1 (see this module's docstring)")
    old = path.read_text(encoding="utf-8")
    if old != text:
        diff = "".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True), path.name, "now"))
        pytest.fail(f"{path.name} changed; if intended, write it again with LONGDOC_UPDATE_SNAPSHOTS=1:\n{diff}")


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_graph_shape_matches_its_snapshot(name: str) -> None:
    for suffix, text in drawings(GRAPHS[name]()).items():
        check_snapshot(SNAPSHOTS / f"{name}.{suffix}", text)


def test_every_snapshot_belongs_to_a_graph() -> None:
    names = {path.name.split(".")[0] for path in SNAPSHOTS.iterdir()} if SNAPSHOTS.is_dir() else set()
    assert names <= set(GRAPHS), f"snapshots of graphs that no longer exist: {sorted(names - set(GRAPHS))}"


def test_a_changed_shape_fails_with_a_diff(tmp_path: Path) -> None:
    path = tmp_path / "g.mmd"
    path.write_text("graph TD;\n\tA --> B;\n", encoding="utf-8")
    if UPDATE:
        pytest.skip("updating snapshots")
    check_snapshot(path, "graph TD;\n\tA --> B;\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)g\.mmd changed.*\+\tA --> C;"):
        check_snapshot(path, "graph TD;\n\tA --> C;\n")


def test_langgraph_json_and_aegra_serve_the_registered_workflows() -> None:
    root = SNAPSHOTS.parents[2]
    graphs = json.loads((root / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    assert set(graphs) == set(WORKFLOWS) | set(ALIASES)
    import asyncio

    from deploy import dev_graphs

    for name, spec in graphs.items():
        path, attribute = spec["path"].split(":")
        module = Path(path).with_suffix("").as_posix().removeprefix("./").replace("/", ".")
        assert module == "deploy.dev_graphs" and attribute == name and (root / path).is_file()
        # each a factory (bounded per run) of the workflow's graph
        workflow = importlib.import_module(WORKFLOWS[canonical(name)]).graph
        assert asyncio.run(_made(getattr(dev_graphs, name), {"configurable": {"run_id": "r1"}})) is workflow
        assert asyncio.run(_made(getattr(dev_graphs, name), {})) is workflow
        # langgraph-api makes the description the assistant's, which its MCP tools and A2A cards show
        if name in WORKFLOWS:
            assert spec["description"] == DESCRIPTIONS[name]
        else:
            assert f"use {canonical(name)}" in spec["description"]
    aegra = json.loads((root / "aegra.json").read_text(encoding="utf-8"))["graphs"]
    assert set(aegra) == set(WORKFLOWS) | set(ALIASES)
    for name in WORKFLOWS:  # a graph's name is the tool name langgraph-api derives
        assert importlib.import_module(WORKFLOWS[name]).graph.name == name


async def _made(factory: Any, config: Any) -> Any:
    """The graph a ``langgraph.json`` factory gives for ``config``."""
    async with factory(config) as graph:
        return graph
