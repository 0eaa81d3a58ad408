"""The workflows this product serves, by name, and how to compile them with a checkpointer."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

WORKFLOWS: dict[str, str] = {
    "ingest": "graphs.ingest",
    "chain": "graphs.chain.graph",
    "summarize": "graphs.summarize.graph",
    "offload": "graphs.offload.graph",
    "route": "graphs.route.graph",
}
"""Workflow name -> module exposing ``builder`` (a StateGraph) and ``graph`` (compiled, no checkpointer)."""


def available() -> list[str]:
    """Names of the workflows whose module is present."""
    return [name for name, module in WORKFLOWS.items() if importlib.util.find_spec(module) is not None]


def compile_with(name: str, checkpointer: BaseCheckpointSaver | None) -> Any:
    """Workflow ``name`` compiled with ``checkpointer`` (for Python and LangServe callers); ingest never is."""
    if name not in WORKFLOWS:
        raise KeyError(f"unknown workflow {name!r}; one of {', '.join(WORKFLOWS)}")
    module = importlib.import_module(WORKFLOWS[name])
    # An ingest is one idempotent step: a checkpoint would only keep the caller's document.
    graph = module.builder.compile(checkpointer=None if name == "ingest" else checkpointer)
    limit = getattr(module, "RECURSION_LIMIT", None)
    if limit:
        graph = graph.with_config(recursion_limit=limit)
    graph.name = name
    return graph


def context_schema(name: str) -> Any:
    """The context class of workflow ``name`` (None when it has none)."""
    if name not in WORKFLOWS:
        raise KeyError(f"unknown workflow {name!r}; one of {', '.join(WORKFLOWS)}")
    return getattr(importlib.import_module(WORKFLOWS[name]).builder, "context_schema", None)
