"""The graphs of ``langgraph.json``: the workflows, each run inside its bound on model calls.

``langgraph dev`` executes a run on a worker task of its own, so the bound of ``LONGDOC_MAX_MODEL_CALLS`` that
LangServe and Aegra open for each request would not reach it. Each graph here is a factory (what langgraph-api
calls with the run's config before it executes the run, on that task) that opens the run's budget for as long as
the run executes (:func:`surfaces.dev_runs.run_bounded`): every model call of the run, on any thread, takes from it,
and the run stops when the client waiting for it leaves (:class:`surfaces.dev_runs.RunWatch`). Read without a run
(Studio drawing a graph, its schemas), a factory gives the graph alone.

``chain`` and ``offload`` are the former ids of ``ask`` and ``chat`` (:data:`surfaces.registry.ALIASES`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from langchain_core.runnables import RunnableConfig

from deploy import served
from surfaces.dev_runs import run_bounded


@contextlib.asynccontextmanager
async def bounded(graph: Any, config: RunnableConfig) -> AsyncIterator[Any]:
    """``graph``, inside the budget of the run ``config`` names for as long as the run executes (none: no run)."""
    run_id = str((config.get("configurable") or {}).get("run_id") or "")
    if not run_id:
        yield graph
        return
    with run_bounded(run_id):
        yield graph


def ingest(config: RunnableConfig) -> contextlib.AbstractAsyncContextManager[Any]:
    """The ingest workflow, bounded per run."""
    return bounded(served.ingest, config)


def ask(config: RunnableConfig) -> contextlib.AbstractAsyncContextManager[Any]:
    """The ask workflow (the anytime chain), bounded per run."""
    return bounded(served.ask, config)


def summarize(config: RunnableConfig) -> contextlib.AbstractAsyncContextManager[Any]:
    """The summarize workflow, bounded per run."""
    return bounded(served.summarize, config)


def chat(config: RunnableConfig) -> contextlib.AbstractAsyncContextManager[Any]:
    """The chat workflow, bounded per run."""
    return bounded(served.chat, config)


def route(config: RunnableConfig) -> contextlib.AbstractAsyncContextManager[Any]:
    """The route workflow, bounded per run."""
    return bounded(served.route, config)


chain = ask
offload = chat
