"""The routes ``langgraph dev`` serves before its own (``http.app`` in ``langgraph.json``): MCP and A2A.

langgraph-api puts a custom app's routes ahead of its built-in ones, so these answer ``/mcp`` and
``/a2a/...`` in place of the server's: the same code as the scale-out deployment's
(:mod:`deploy.mcp`, :mod:`deploy.a2a`), with JSON tool results, errors that give their reason and
A2A streaming that the official SDK completes. Every call is a run made through the server's own
API, as any client's. The app carries the dev server's guard (:class:`surfaces.studio.StudioGuard`), which
langgraph-api runs before every route, its own included, and which removes the earlier versions of files ingested
again after every run (:func:`retire_on_dev`); behind it, a run request's client leaving stops the run
(:class:`surfaces.dev_runs.RunWatch`), and an MCP or A2A caller leaving stops the run of its call
(:class:`surfaces.disconnect.CallerWatch`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.routing import Route

from deploy import a2a, mcp
from stores.cache import lru_cache
from surfaces.dev_runs import RunWatch
from surfaces.disconnect import CallerWatch
from surfaces.doors import quiet_answered_errors
from surfaces.studio import StudioGuard


@contextlib.asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """Serve ``/mcp`` while the server runs (langgraph-api runs this lifespan with its own).

    Errors the client was answered with are logged as one line (:func:`surfaces.doors.quiet_answered_errors`).
    """
    quiet_answered_errors()
    async with mcp.route.running():
        yield


@lru_cache(maxsize=1)
def _threads() -> Any:
    """The server's own API in process (made on first use: the in-process client needs the running server)."""
    from langgraph_sdk import get_client

    return get_client().threads


async def title_thread(thread_id: str, title: str) -> None:
    """Set thread ``thread_id``'s ``title`` metadata unless it has one, through the server's own API (in process)."""
    threads = _threads()
    thread = await threads.get(thread_id)
    if not (thread.get("metadata") or {}).get("title"):
        await threads.update(thread_id, metadata={"title": title})


async def retire_on_dev(namespace: str) -> None:
    """Remove the queued earlier versions of ``namespace``'s files (:mod:`surfaces.superseded`) after a run.

    The server's threads that read one stay (their next run is told the current version); one a running thread
    read stays queued for the next run.
    """
    from surfaces.superseded import retire_superseded

    await anyio.to_thread.run_sync(retire_superseded, namespace, _drop_on_dev)


def _drop_on_dev(namespace: str, doc_id: str) -> dict[str, Any]:
    """Remove document ``doc_id`` of ``namespace`` unless a running thread of the server read it (a worker thread)."""
    from stores.documents import find_document
    from surfaces.retention import Names, NothingToForget, drop_superseded

    info = find_document(namespace, doc_id)
    if info is None:
        raise NothingToForget(f"no document {doc_id!r} in namespace {namespace!r} to forget")
    anyio.from_thread.run(_refuse_busy, Names.document(namespace, doc_id, info.source))
    return drop_superseded(namespace, doc_id)


async def _refuse_busy(names: Callable[[Any], bool]) -> None:
    """ThreadBusy when a running thread of the server has a state (any checkpoint) ``names`` accepts."""
    from stores.checkpoint import ThreadBusy, busy_message

    threads, offset = _threads(), 0
    while page := await threads.search(limit=100, offset=offset):
        offset += len(page)
        for thread in page:
            if thread.get("status") != "busy":
                continue
            history = await threads.get_history(thread["thread_id"], limit=1000)
            if names(thread.get("values") or {}) or any(names(state["values"]) for state in history):
                raise ThreadBusy(busy_message(str(thread["thread_id"])))


app = FastAPI(
    lifespan=lifespan,
    middleware=[
        Middleware(StudioGuard, titles=title_thread, after_run=retire_on_dev),
        Middleware(RunWatch),  # after the guard: runs of requests it let through, whose clients leave, stop
        Middleware(CallerWatch),
    ],
)
app.router.routes.append(Route("/mcp", endpoint=mcp.route, methods=["GET", "POST", "DELETE"]))
app.include_router(a2a.router)
