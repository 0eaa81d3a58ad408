"""The routes ``langgraph dev`` serves before its own (``http.app`` in ``langgraph.json``): MCP and A2A.

langgraph-api puts a custom app's routes ahead of its built-in ones, so these answer ``/mcp`` and
``/a2a/...`` in place of the server's: the same code as the scale-out deployment's
(:mod:`deploy.mcp`, :mod:`deploy.a2a`), with JSON tool results, errors that give their reason and
A2A streaming that the official SDK completes. Every call is a run made through the server's own
API, as any client's. The app carries the dev server's guard (:class:`surfaces.studio.StudioGuard`), which
langgraph-api runs before every route, its own included.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.routing import Route

from deploy import a2a, mcp
from stores.cache import lru_cache
from surfaces.studio import StudioGuard


@contextlib.asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """Serve ``/mcp`` while the server runs (langgraph-api runs this lifespan with its own)."""
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


app = FastAPI(lifespan=lifespan, middleware=[Middleware(StudioGuard, titles=title_thread)])
app.router.routes.append(Route("/mcp", endpoint=mcp.route, methods=["GET", "POST", "DELETE"]))
app.include_router(a2a.router)
