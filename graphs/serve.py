"""LangServe app: one route per workflow (invoke, batch, stream, playground), checkpointed.

Run with ``longdoc serve`` or ``uvicorn graphs.serve:app``. Settings:

- ``LONGDOC_SERVER_API_KEY``: when set, every request except ``/health`` must send it as
  ``X-API-Key`` or ``Authorization: Bearer ...``.
- ``LONGDOC_MAX_REQUEST_BYTES``: larger request bodies are refused with 413 (default 20 MB).

``config={"configurable": {"thread_id": ...}}`` resumes a checkpointed run; context fields
(``namespace``, ``model``, ...) go in ``configurable`` too. A request without a thread id gets a
fresh one. In a batch, ``config`` may be a list (one config, and thread, per input); inputs that
would share a thread run on ``<thread_id>-<i>``.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import field, is_dataclass, make_dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from langchain_core.runnables import RunnableBinding, RunnableConfig
from langchain_core.runnables.config import get_config_list
from langgraph.checkpoint.base import BaseCheckpointSaver
from pydantic import BaseModel, create_model
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


async def _with_thread_id(config: dict[str, Any], _request: Request) -> dict[str, Any]:
    """Give a request without a ``thread_id`` a fresh one (so every run is checkpointed)."""
    configurable = dict(config.get("configurable") or {})
    if not configurable.get("thread_id"):
        configurable["thread_id"] = str(uuid.uuid4())
    return {**config, "configurable": configurable}


class ServedGraph(RunnableBinding):  # type: ignore[type-arg]
    """A compiled workflow as LangServe serves it.

    Its config schema adds ``thread_id`` to the workflow's context fields, so LangServe keeps
    the caller's thread id (it drops keys the schema lacks), per input in a batch too. A batch
    whose inputs would share one thread (one config for all, or the same id twice) runs input
    ``i`` on thread ``<thread_id>-<i>`` instead: concurrent runs never write one thread.
    """

    def config_schema(self, *, include: Sequence[str] | None = None) -> type[BaseModel]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = self.bound.config_schema(include=include)
        context = getattr(self.bound, "context_schema", None)
        if context is None or not is_dataclass(context):
            return base
        served = make_dataclass(
            f"{context.__name__}Served",
            [
                (
                    "thread_id",
                    str,
                    field(
                        default="",
                        metadata={"description": "Checkpointed thread: the same id resumes it (empty: a new one)."},
                    ),
                )
            ],
            bases=(context,),
            kw_only=True,
        )
        fields = {name: (info.annotation, info) for name, info in base.model_fields.items()}
        fields["configurable"] = (served | None, None)  # type: ignore[assignment]
        return create_model(base.__name__, **fields)  # type: ignore[call-overload, no-any-return]

    @staticmethod
    def _own_threads(configs: list[RunnableConfig]) -> list[RunnableConfig]:
        ids = [str((c.get("configurable") or {}).get("thread_id") or "") for c in configs]
        out = []
        for i, (config, thread) in enumerate(zip(configs, ids, strict=True)):
            configurable = dict(config.get("configurable") or {})
            if not thread:
                configurable["thread_id"] = str(uuid.uuid4())
            elif ids.count(thread) > 1:
                configurable["thread_id"] = f"{thread}-{i}"
            out.append({**config, "configurable": configurable})
        return out

    def batch(self, inputs: list[Any], config: Any = None, **kwargs: Any) -> list[Any]:
        configs = self._own_threads(get_config_list(config, len(inputs)))
        return super().batch(inputs, configs, **kwargs)

    async def abatch(self, inputs: list[Any], config: Any = None, **kwargs: Any) -> list[Any]:
        configs = self._own_threads(get_config_list(config, len(inputs)))
        return await super().abatch(inputs, configs, **kwargs)


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
            ServedGraph(bound=registry.compile_with(name, saver), name=name),
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
