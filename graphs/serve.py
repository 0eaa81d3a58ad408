"""LangServe app: one route per workflow (invoke, batch, stream, playground), checkpointed.

Run with ``longdoc serve`` or ``uvicorn graphs.serve:app``. Settings:

- ``LONGDOC_SERVER_API_KEY``: when set, every request except ``/health`` must send it as
  ``X-API-Key`` or ``Authorization: Bearer ...``.
- ``LONGDOC_MAX_REQUEST_BYTES``: larger request bodies are refused with 413 (default 20 MB).

``config={"configurable": {"thread_id": ...}}`` resumes a checkpointed run; context fields
(``namespace``, ``model``, ...) go in ``configurable`` too. A request without a thread id gets a
fresh one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response

from graphs import registry
from stores.settings import InputError, ModelError

DEFAULT_MAX_REQUEST_BYTES = 20 * 1024 * 1024


def _max_request_bytes() -> int:
    raw = os.environ.get("LONGDOC_MAX_REQUEST_BYTES", "")
    return int(raw) if raw.isdigit() else DEFAULT_MAX_REQUEST_BYTES


class GuardMiddleware(BaseHTTPMiddleware):
    """API key check and request size limit."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if request.url.path == "/health":
            return await call_next(request)
        key = os.environ.get("LONGDOC_SERVER_API_KEY", "")
        if key:
            given = request.headers.get("x-api-key", "")
            auth = request.headers.get("authorization", "")
            if auth.lower().startswith("bearer "):
                given = given or auth[7:].strip()
            if given != key:
                return JSONResponse({"detail": "missing or wrong API key"}, status_code=401)
        length = request.headers.get("content-length")
        limit = _max_request_bytes()
        if length is not None and length.isdigit() and int(length) > limit:
            return JSONResponse({"detail": f"request body over {limit} bytes"}, status_code=413)
        if length is None and request.method in ("POST", "PUT", "PATCH"):
            body = await request.body()
            if len(body) > limit:
                return JSONResponse({"detail": f"request body over {limit} bytes"}, status_code=413)
        return await call_next(request)


async def _with_thread_id(config: dict[str, Any], request: Request) -> dict[str, Any]:
    """Keep the caller's ``thread_id`` (LangServe drops keys the context schema lacks) or make one."""
    configurable = dict(config.get("configurable") or {})
    if not configurable.get("thread_id"):
        sent = None
        try:
            body = await request.json()
            given = body.get("config") if isinstance(body, dict) else None
            given = given if isinstance(given, dict) else {}
            configurable_sent = given.get("configurable")
            sent = configurable_sent.get("thread_id") if isinstance(configurable_sent, dict) else None
        except ValueError:
            sent = None
        configurable["thread_id"] = str(sent) if sent else str(uuid.uuid4())
    return {**config, "configurable": configurable}


class DeferredSaver(BaseCheckpointSaver):
    """A checkpointer whose backend is opened later, inside the app's event loop.

    Routes are mounted when the app is built, but the async savers need a running loop, so
    every call is forwarded to the saver opened in the lifespan.
    """

    def __init__(self) -> None:
        super().__init__()
        self.target: BaseCheckpointSaver | None = None

    def _t(self) -> BaseCheckpointSaver:
        if self.target is None:
            raise RuntimeError("the checkpointer is not open yet (the app has not started)")
        return self.target

    async def aget_tuple(self, config: Any) -> Any:
        return await self._t().aget_tuple(config)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        async for item in self._t().alist(config, **kwargs):
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await self._t().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        await self._t().aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._t().adelete_thread(thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self._t().get_next_version(current, channel)


@asynccontextmanager
async def _open_backend() -> AsyncIterator[BaseCheckpointSaver]:
    from stores.checkpoint import open_async_checkpointer

    async with open_async_checkpointer() as saver:
        yield saver


def create_app() -> FastAPI:
    """Build the FastAPI app with every available workflow mounted."""
    from langserve import add_routes

    saver = DeferredSaver()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with _open_backend() as backend:
            saver.target = backend
            try:
                yield
            finally:
                saver.target = None

    app = FastAPI(
        title="longdoc",
        description="Summarize, question, offload and route over long documents.",
        lifespan=lifespan,
    )
    app.add_middleware(GuardMiddleware)

    @app.exception_handler(InputError)
    async def bad_input(_request: Request, exc: InputError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(ModelError)
    async def model_down(_request: Request, exc: ModelError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    names = registry.available()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "workflows": names}

    for name in names:
        add_routes(
            app,
            registry.compile_with(name, saver),
            path=f"/{name}",
            per_req_config_modifier=_with_thread_id,
        )
    return app


def __getattr__(name: str) -> Any:
    # `uvicorn graphs.serve:app` builds the app on first access, not at import.
    if name == "app":
        value = create_app()
        globals()["app"] = value
        return value
    raise AttributeError(name)
