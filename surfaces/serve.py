"""LangServe app: one route per workflow (invoke, batch, stream, playground), checkpointed.

Run with ``longdoc serve`` (:func:`run`) or ``uvicorn surfaces.serve:app``; both need the ``serve`` extra
(``pip install 'longdoc[serve]'``). Settings:

- ``LONGDOC_SERVER_KEYS`` / ``LONGDOC_SERVER_API_KEY``: API keys and their tenants (see
  :mod:`surfaces.access`); every request except ``/health`` must send one as ``X-API-Key`` or
  ``Authorization: Bearer ...`` when any is set. A tenant's key fixes its namespaces and threads.
- ``LONGDOC_INGEST_ROOT``: the only folder whose files callers may name (``path``); unset, they
  send ``text`` or a file's bytes (``data`` in base64, with its ``filename``).
- ``LONGDOC_MAX_REQUEST_BYTES``: larger request bodies are refused with 413 (default 20 MiB),
  counted as they arrive; ``LONGDOC_MAX_BATCH`` inputs at most in a ``/batch`` (413),
  ``LONGDOC_MAX_JSON_DEPTH`` levels of JSON (400); bodies must be JSON (415).
- ``LONGDOC_RUN_TIMEOUT``: a run still going after this many seconds ends in 503 (default 1800;
  0 for no limit).
- ``LONGDOC_MAX_MODEL_CALLS``: the model calls one request may make (413 past them); a request whose
  client disconnects before its answer makes no more (:mod:`surfaces.disconnect`).

``config={"configurable": {"thread_id": ...}}`` resumes a checkpointed run (the key's own thread of
that id: :func:`surfaces.access.thread_key`); the workflow knobs a
caller may set (``namespace``, ``chunk_size``, ...; never models or endpoints) go in
``configurable`` too (LangServe has no ``context``): the run's context is built from them here,
once, and nodes read only ``runtime.context``. A request without a thread id runs without a checkpoint
(no caller could resume or forget it).
In a batch, ``config`` may be a list (one config, and thread, per input); inputs that would share
a thread run on ``<thread_id>-<i>``. A thread whose last run did not finish is resumed when the same input comes
again, and rolled back to its last finished step when another input comes (:mod:`surfaces.resume`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import threading
import typing
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import MISSING, field, fields, is_dataclass, make_dataclass
from typing import Any, cast

import anyio
from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding, RunnableConfig
from langchain_core.runnables.config import get_config_list, get_executor_for_config
from langchain_core.runnables.utils import gather_with_concurrency
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from pydantic import BaseModel, create_model
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from nodes.ingest import MAX_REQUESTS, detach_text
from nodes.inputs import check_workflow_input
from nodes.offload.session import detach_uploads
from stores.checkpoint import ThreadBusy, ThreadLock, athread_lock, busy_message, thread_lock
from stores.deadlines import run_deadline, run_timeout, run_timeout_message
from stores.errors import InputError, ModelError, RunTimeout
from stores.models import ChatFactory, use_chat_model
from stores.readers import reading
from stores.settings import get_settings, run_config
from surfaces import registry, resume
from surfaces.access import (
    TENANT_KEY,
    Access,
    AccessError,
    Refused,
    check_finite,
    check_settings,
    check_thread_id,
    read_json_body,
    replay_body,
    served_fields,
    thread_key,
)
from surfaces.disconnect import DisconnectMiddleware
from surfaces.doors import log_failure
from surfaces.resume import aforget_refused, forget_refused
from surfaces.retention import forget_for_tenant
from surfaces.superseded import retire_superseded

log = logging.getLogger(__name__)


@asynccontextmanager
async def _deadline() -> AsyncIterator[None]:
    """Cut the run at ``LONGDOC_RUN_TIMEOUT`` with a :class:`RunTimeout`.

    The request gets its answer then; the model calls of its worker threads, which the event
    loop cannot cancel, are held to the same deadline (:func:`stores.deadlines.run_deadline`):
    the one in flight is cut, none is sent after it.
    """
    seconds = run_timeout()
    try:
        with run_deadline(seconds):
            async with asyncio.timeout(seconds):
                yield
    except TimeoutError:
        raise RunTimeout(run_timeout_message(seconds or 0)) from None


class GuardMiddleware:
    """API key check (the key names the request's tenant), the request size limit and the JSON checks.

    The body is counted as it streams in: a request without ``Content-Length`` (chunked) is cut
    with 413 as soon as it passes the limit, never read whole first. A request with a body must be
    JSON (415), nested at most ``LONGDOC_MAX_JSON_DEPTH`` deep and without ``NaN`` (400), all
    checked before LangServe parses it.
    """

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the API key of an HTTP request (not /health), then pass it on."""
        if scope["type"] != "http" or scope["path"] == "/health":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        tenant = self.access.keys.tenant_of(headers)
        if tenant is None:
            await JSONResponse({"detail": "missing or wrong API key"}, status_code=401)(scope, receive, send)
            return
        scope.setdefault("state", {})["tenant"] = tenant
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        try:
            body = await read_json_body(headers, receive)
        except Refused as exc:
            await JSONResponse({"detail": str(exc)}, status_code=exc.status)(scope, receive, send)
            return
        await self.app(scope, replay_body(body, receive), send)


def error_reply(exc: BaseException, files: Any = None) -> tuple[int, str]:
    """The status and message a failed request answers with.

    400/413 for bad input, 403, 503 for the model, else 500 with no detail (an internal error's text never reaches
    the caller).
    """
    if isinstance(exc, InputError):
        return _input_status(exc), files.scrub(str(exc)) if files is not None else str(exc)
    if isinstance(exc, AccessError):
        return 403, str(exc)
    if isinstance(exc, ModelError):
        return 503, str(exc)
    return 500, "the server failed on this request; its log has the details"


def _leaf(exc: BaseException) -> BaseException:
    """What a streamed run failed with: the first exception inside (nested) exception groups.

    It is also looked for behind Starlette's ``RuntimeError`` for a handled exception raised once the response had
    started.
    """
    while True:
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        elif isinstance(exc, RuntimeError) and "response already started" in str(exc) and exc.__cause__:
            exc = exc.__cause__
        else:
            return exc


class StreamErrorMiddleware:
    """A streamed response whose run fails ends with one ``error`` event and a complete body.

    LangServe sends a generic error event, then re-raises, and the server drops the connection half-way
    through the body. Here its event is held back: the stream ends with an event naming what failed
    (status and message as :func:`error_reply` gives them) and the body is finished; a stream that ends
    well gets the held event back.
    """

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; a failing streamed run ends with one error event and a complete body."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "stream": False, "done": False}
        held: list[Any] = []

        async def guarded(message: Any) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
                kind = dict(message.get("headers") or []).get(b"content-type", b"")
                state["stream"] = kind.startswith(b"text/event-stream")
            elif message["type"] == "http.response.body" and state["stream"]:
                if b"event: error" in message.get("body", b""):
                    held.append(message)
                    return
                if not message.get("more_body"):
                    state["done"] = True
                    for early in held:
                        await send({**early, "more_body": True})
                    held.clear()
            await send(message)

        try:
            await self.app(scope, receive, guarded)
        except BaseException as failure:  # a started stream is finished with an error event, not dropped
            if not (state["started"] and state["stream"]) or state["done"]:
                raise
            status, text = error_reply(_leaf(failure), self.access.files)
            log_failure(log, "a streamed run failed after its response started", failure, status, text)
            event = f"event: error\r\ndata: {json.dumps({'status_code': status, 'message': text})}\r\n\r\n"
            await send({"type": "http.response.body", "body": event.encode(), "more_body": False})


class ChatModelMiddleware:
    """Runs every request inside ``use_chat_model(model)``: the graph runs, and their worker threads, see it."""

    def __init__(self, app: ASGIApp, model: ChatFactory | BaseChatModel) -> None:
        self.app = app
        self.model = model

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with this chat model in use."""
        with use_chat_model(self.model):
            await self.app(scope, receive, send)


def _input_status(exc: InputError) -> int:
    """The status a request refused with ``exc`` answers with.

    The error's own (:attr:`stores.errors.InputError.status`): 413 for input over a size bound, 409 for a thread
    whose run is still going, 404 for something to forget that does not exist, 400 for other bad input.
    """
    return exc.status


def _configs(body: Any) -> list[dict[str, Any]]:
    raw = body.get("config") if isinstance(body, dict) else None
    items = raw if isinstance(raw, list) else [raw]
    return [c for c in items if isinstance(c, dict)]


def _inputs(body: Any) -> list[Any]:
    if not isinstance(body, dict):
        return []
    return list(body["inputs"]) if isinstance(body.get("inputs"), list) else [body.get("input")]


def _batch_inputs(body: Any, allowed: frozenset[str]) -> list[Any]:
    """The inputs of a request ``body``; refused for configurable keys outside ``allowed`` or too large a batch."""
    refused = sorted({k for c in _configs(body) for k in (c.get("configurable") or {}) if k not in allowed})
    if refused:
        raise HTTPException(400, f"configurable {', '.join(refused)} cannot be set by callers of this server")
    batch = body.get("inputs", []) if isinstance(body, dict) else []
    if not isinstance(batch, list) or not all(isinstance(i, dict) for i in batch):
        raise HTTPException(422, "inputs must be a list of objects, one input each")
    inputs = _inputs(body)
    most = get_settings().max_batch
    if len(inputs) > most:
        raise HTTPException(413, f"a batch may hold at most {most} inputs (LONGDOC_MAX_BATCH), got {len(inputs)}")
    requests = sum(len(i["requests"]) for i in inputs if isinstance(i, dict) and isinstance(i.get("requests"), list))
    if len(inputs) > 1 and requests > MAX_REQUESTS:  # one input's own bound is check_input_sizes's (400)
        raise HTTPException(413, f"a batch may carry at most {MAX_REQUESTS} route requests in all, got {requests}")
    return inputs


def authorizer(access: Access, workflow: str) -> Any:
    """LangServe's per-request config modifier for ``workflow``: tenant, namespace and thread checks.

    Refuses (400) ``configurable`` keys outside the served allow-list, (403) a namespace or thread
    the key does not own, and (400) file inputs the ingest root does not allow, all before a
    stream starts. The namespace and tenant are then fixed in the config.
    """
    allowed = served_fields(workflow) | {"thread_id"}

    async def authorize(config: dict[str, Any], request: Request) -> dict[str, Any]:
        tenant = getattr(request.state, "tenant", None)
        if tenant is None:
            raise HTTPException(401, "missing or wrong API key")
        try:
            body = await request.json()
        except ValueError:
            body = {}
        inputs = _batch_inputs(body, allowed)
        try:
            check_finite(config.get("configurable") or {})
            # Every setting checked now (the body's and the URL's): a refused one never ingests the text it came
            # with nor starts a run.
            for sent in [*_configs(body), config]:
                check_settings(workflow, dict(sent.get("configurable") or {}))
            for value in inputs:
                check_workflow_input(workflow, value)
            access.check_inputs(inputs, tenant)
            configurable = dict(config.get("configurable") or {})
            requested = str(configurable.get("namespace") or "")
            given = {str(i["namespace"]) for i in inputs if isinstance(i, dict) and i.get("namespace")}
            if not requested and len(given) == 1:
                requested = given.pop()
            namespace = tenant.namespace_for(requested)
            configurable.update(namespace=namespace, **{TENANT_KEY: tenant.name})
            if configurable.get("thread_id"):  # else a stateless run (ServedGraph._prepare): nothing to claim
                thread = str(configurable["thread_id"])
                check_thread_id(thread)
                access.threads.claim(thread_key(tenant.name, thread), tenant.name, namespace)
                if not await anyio.to_thread.run_sync(_thread_free, thread_key(tenant.name, thread)):
                    # Said before a stream starts; the run itself holds the thread (ServedGraph._one_run).
                    raise ThreadBusy(busy_message(thread))
        except AccessError as exc:
            raise HTTPException(403, str(exc)) from None
        except InputError as exc:
            raise HTTPException(_input_status(exc), access.files.scrub(str(exc))) from None
        return {**config, "configurable": configurable}

    return authorize


def _thread_free(thread: str) -> bool:
    """Whether no run holds ``thread`` now (taken and given back at once)."""
    lock = ThreadLock(thread)
    if not lock.acquire():
        return False
    lock.release()
    return True


def _served_context(context: type, workflow: str) -> type:
    """The workflow's context reduced to the fields callers may set, plus ``thread_id``."""
    allowed = served_fields(workflow)
    hints = typing.get_type_hints(context)
    specs: list[tuple[str, Any, Any]] = []
    for f in fields(context):
        if f.name not in allowed:
            continue
        spec: Any
        if f.name == "namespace":
            spec = field(
                default="",
                metadata={"description": "Namespace (empty: the API key's first); only the key's own are open."},
            )
        elif f.default_factory is not MISSING:
            spec = field(default_factory=f.default_factory, metadata=f.metadata)
        else:
            spec = field(default=f.default, metadata=f.metadata)
        specs.append((f.name, hints[f.name], spec))
    specs.append(
        (
            "thread_id",
            str,
            field(
                default="", metadata={"description": "Checkpointed thread: the same id resumes it (empty: a new one)."}
            ),
        )
    )
    return make_dataclass(f"{context.__name__}Served", specs, kw_only=True)


class ServedGraph(RunnableBinding[Any, Any]):
    """A compiled workflow as LangServe serves it.

    Its config schema holds only the context fields callers may set (see
    :data:`surfaces.access.SERVED_FIELDS`) and ``thread_id``; LangServe drops every other key. A
    batch whose inputs would share one thread (one config for all, or the same id twice) runs
    input ``i`` on thread ``<thread_id>-<i>`` instead: concurrent runs never write one thread.
    With ``access`` set, every input is checked again right before it runs: file names resolved
    inside the ingest root, the namespace the tenant's, the (derived) thread bound to both.
    """

    access: Any = None

    @property
    def workflow(self) -> str:
        """The served workflow's name."""
        return str(self.name or getattr(self.bound, "name", "") or "")

    def with_config(self, config: RunnableConfig | None = None, **kwargs: Any) -> ServedGraph:
        """The graph with the config bound, keeping the workflow's name and access."""
        copy = cast(ServedGraph, super().with_config(config, **kwargs))  # RunnableBinding copies its own class
        copy.name, copy.access = self.workflow, self.access
        return copy

    def config_schema(self, *, include: Sequence[str] | None = None) -> type[BaseModel]:
        """The graph's config schema, with the served context fields."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = self.bound.config_schema(include=include)
        context = getattr(self.bound, "context_schema", None)
        if context is None or not is_dataclass(context):
            return base
        served = _served_context(context, self.workflow)  # type: ignore[arg-type]
        fields_: dict[str, Any] = {name: (info.annotation, info) for name, info in base.model_fields.items()}
        fields_["configurable"] = (served | None, None)
        model: type[BaseModel] = create_model(base.__name__, **fields_)
        return model

    def _prepare(self, value: Any, config: RunnableConfig | None) -> tuple[Any, RunnableConfig]:
        """The input and config a run starts from: checked, the tenant's, and without document text.

        Oversized questions are refused and a document's ``text`` (or a file attached to a chat message)
        is ingested here, before the run writes its first checkpoint: the thread keeps the ``doc_id``,
        never the text.
        """
        base: dict[str, Any] = dict(config or {})
        configurable = dict(base.get("configurable") or {})
        check_workflow_input(self.workflow, value)
        check_settings(self.workflow, configurable)
        stateless = configurable.get(CONFIG_KEY_CHECKPOINTER, self) is None  # prepared already (astream_log)
        if not configurable.get("thread_id"):
            stateless = True
            # No caller can name this run's thread again (to resume or forget it): it keeps no checkpoint. The id is
            # the run's own (a chat turn's session).
            configurable.update({"thread_id": str(uuid.uuid4()), CONFIG_KEY_CHECKPOINTER: None})
        if self.access is not None:
            tenant = self.access.tenant(str(configurable.get(TENANT_KEY, "")))
            value = self.access.check_input(value, tenant)
            wanted = value.get("namespace") if isinstance(value, dict) else None
            namespace = tenant.namespace_for(str(wanted or configurable.get("namespace") or ""))
            configurable["namespace"] = namespace
            # The tenant's own thread of that id: another tenant's id names another thread.
            configurable["thread_id"] = thread_key(tenant.name, str(configurable["thread_id"]))
            if not stateless:
                self.access.threads.claim(configurable["thread_id"], tenant.name, namespace)
        schema = getattr(self.bound, "context_schema", None)
        if schema is not None and getattr(self.bound, "checkpointer", None) is not None:
            value = detach_text(value, schema.from_mapping(configurable))
            if self.workflow == "chat":  # a file attached to a chat message, too
                value = detach_uploads(value, schema.from_mapping(configurable))
        return value, cast(RunnableConfig, run_config({**base, "configurable": configurable}))

    async def _aprepare(self, value: Any, config: RunnableConfig | None) -> tuple[Any, RunnableConfig]:
        """:meth:`_prepare` on a worker thread: ingesting a chat message's documents never holds the event loop."""
        return await anyio.to_thread.run_sync(self._prepare, value, config)

    @staticmethod
    def _own_threads(configs: list[RunnableConfig]) -> list[RunnableConfig]:
        ids = [str((c.get("configurable") or {}).get("thread_id") or "") for c in configs]
        out: list[RunnableConfig] = []
        for i, (config, thread) in enumerate(zip(configs, ids, strict=True)):
            configurable = dict(config.get("configurable") or {})
            if thread and ids.count(thread) > 1:
                configurable["thread_id"] = f"{thread}-{i}"
            out.append(cast(RunnableConfig, {**config, "configurable": configurable}))
        return out

    def _prepare_all(self, inputs: list[Any], config: Any) -> tuple[list[Any], list[RunnableConfig]]:
        configs = self._own_threads(get_config_list(config, len(inputs)))
        pairs = [self._prepare(value, c) for value, c in zip(inputs, configs, strict=True)]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _checkpointed(self, config: RunnableConfig) -> bool:
        """Whether the run keeps checkpoints: the graph has a checkpointer and the caller named a thread."""
        stateless = (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER, self) is None
        return getattr(self.bound, "checkpointer", None) is not None and not stateless

    @contextlib.contextmanager
    def _one_run(self, config: RunnableConfig) -> Iterator[None]:
        """Hold the run's thread while it plans and runs (:func:`stores.checkpoint.thread_lock`).

        A second run on a busy thread is refused (409) instead of writing the same turn beside the first. The run,
        with or without a thread, holds its namespace as a reader (:func:`stores.readers.reading`), so no earlier
        version it reads is removed under it. Once both are given back, the earlier versions of the files ingested
        again are removed (:meth:`_retire`).
        """
        try:
            thread = thread_lock(self._thread(config)) if self._checkpointed(config) else contextlib.nullcontext()
            with thread, reading(self._namespace(config)):
                yield
        finally:
            self._retire(config)

    @asynccontextmanager
    async def _aone_run(self, config: RunnableConfig) -> AsyncIterator[None]:
        """:meth:`_one_run` for asyncio callers."""
        try:
            async with athread_lock(self._thread(config)) if self._checkpointed(config) else contextlib.nullcontext():
                with contextlib.ExitStack() as held:
                    await anyio.to_thread.run_sync(held.enter_context, reading(self._namespace(config)))
                    yield
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._retire, config)

    @staticmethod
    def _thread(config: RunnableConfig) -> str:
        return str((config.get("configurable") or {}).get("thread_id") or "")

    def _namespace(self, config: RunnableConfig) -> str:
        """The namespace the run reads: its context's, else its config's."""
        context = self._context(config, {}).get("context")
        namespace = getattr(context, "namespace", None) or (config.get("configurable") or {}).get("namespace")
        return str(namespace or "default")

    def _retire(self, config: RunnableConfig) -> None:
        """Remove the earlier versions of files ingested again in the run's namespace (:mod:`surfaces.superseded`).

        One a run still holds stays queued for the next run; a failure here leaves the queue as it is.
        """
        namespace = self._namespace(config)
        try:
            retire_superseded(namespace)
        except (InputError, OSError, sqlite3.Error):
            log.warning("the superseded documents of %r stay queued", namespace, exc_info=True)

    def _plan(self, value: Any, config: RunnableConfig) -> tuple[Any, RunnableConfig]:
        """The input and config the run goes on with (:func:`surfaces.resume.plan`; a stateless run as it is)."""
        return resume.plan(self.bound, value, config) if self._checkpointed(config) else (value, config)

    async def _aplan(self, value: Any, config: RunnableConfig) -> tuple[Any, RunnableConfig]:
        """:meth:`_plan` for asyncio callers."""
        return await resume.aplan(self.bound, value, config) if self._checkpointed(config) else (value, config)

    def _forget(self, config: RunnableConfig) -> Any:
        """:func:`surfaces.resume.forget_refused` for a checkpointed run."""
        return forget_refused(self.bound, config) if self._checkpointed(config) else contextlib.nullcontext()

    def _aforget(self, config: RunnableConfig) -> Any:
        """:func:`surfaces.resume.aforget_refused` for a checkpointed run."""
        return aforget_refused(self.bound, config) if self._checkpointed(config) else contextlib.nullcontext()

    def _context(self, config: RunnableConfig, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the run's ``context``: the workflow's context built from the prepared ``configurable``.

        Always built here, never taken from the caller: ``configurable`` holds only the served fields and the
        namespace :meth:`_prepare` fixed for the tenant.
        """
        schema = getattr(self.bound, "context_schema", None)
        if schema is None:
            return kwargs
        return {**kwargs, "context": schema.from_mapping(dict(config.get("configurable") or {}))}

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the graph with the served checks, the resume plan and the run's deadline."""
        value, config = self._prepare(input, config)
        with self._one_run(config):
            value, config = self._plan(value, config)
            with self._forget(config):
                return super().invoke(value, config, **self._context(config, kwargs))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the graph as :meth:`invoke` does: with the served checks, the resume plan and the run's deadline."""
        value, config = await self._aprepare(input, config)
        async with self._aone_run(config):
            value, config = await self._aplan(value, config)
            async with _deadline(), self._aforget(config):
                return await super().ainvoke(value, config, **self._context(config, kwargs))

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """Run the graph as :meth:`invoke` does: with the served checks, the resume plan and the run's deadline."""
        value, config = self._prepare(input, config)
        with self._one_run(config):
            value, config = self._plan(value, config)
            with self._forget(config):
                yield from super().stream(value, config, **self._context(config, kwargs))

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        """Run the graph as :meth:`invoke` does: with the served checks, the resume plan and the run's deadline."""
        value, config = await self._aprepare(input, config)
        async with self._aone_run(config):
            value, config = await self._aplan(value, config)
            async with _deadline(), self._aforget(config):
                async for chunk in super().astream(value, config, **self._context(config, kwargs)):
                    yield chunk

    async def astream_log(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the graph as :meth:`invoke` does: with the served checks, the resume plan and the run's deadline."""
        value, config = await self._aprepare(input, config)
        async with self._aone_run(config):
            value, config = await self._aplan(value, config)
            async with _deadline(), self._aforget(config):
                async for chunk in super().astream_log(value, config, **self._context(config, kwargs)):
                    yield chunk

    async def astream_events(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the graph as :meth:`invoke` does: with the served checks, the resume plan and the run's deadline."""
        value, config = await self._aprepare(input, config)
        async with self._aone_run(config):
            value, config = await self._aplan(value, config)
            async with _deadline(), self._aforget(config):
                async for event in super().astream_events(value, config, **self._context(config, kwargs)):
                    yield event

    # Each input of a batch runs with its own context: RunnableBinding.batch would give them all the same kwargs.
    def batch(
        self, inputs: list[Any], config: Any = None, *, return_exceptions: bool = False, **kwargs: Any
    ) -> list[Any]:
        """Run the graph as :meth:`invoke` does: with the served checks, the resume plan and the run's deadline."""
        values, configs = self._prepare_all(inputs, config)
        run = super().invoke

        def one(value: Any, config: RunnableConfig) -> Any:
            try:
                with self._one_run(config):
                    value, config = self._plan(value, config)
                    with self._forget(config):
                        return run(value, config, **self._context(config, kwargs))
            except Exception as exc:
                if return_exceptions:
                    return exc
                raise

        with get_executor_for_config(configs[0] if configs else None) as executor:
            return list(executor.map(one, values, configs))

    async def abatch(
        self, inputs: list[Any], config: Any = None, *, return_exceptions: bool = False, **kwargs: Any
    ) -> list[Any]:
        """Run the graph as :meth:`invoke` does: with the served checks, the resume plan and the run's deadline."""
        values, configs = await anyio.to_thread.run_sync(self._prepare_all, inputs, config)
        run = super().ainvoke

        async def one(value: Any, config: RunnableConfig) -> Any:
            try:
                async with self._aone_run(config):
                    value, config = await self._aplan(value, config)
                    async with self._aforget(config):
                        return await run(value, config, **self._context(config, kwargs))
            except Exception as exc:
                if return_exceptions:
                    return exc
                raise

        async with _deadline():
            limit = configs[0].get("max_concurrency") if configs else None
            return await gather_with_concurrency(limit, *(one(v, c) for v, c in zip(values, configs, strict=True)))


class DeferredSaver(BaseCheckpointSaver[Any]):
    """A checkpointer whose backend is opened later, inside the app's event loop.

    Routes are mounted when the app is built, but the async savers need a running loop, so
    every call is forwarded to the saver opened in the lifespan.
    """

    def __init__(self) -> None:
        super().__init__()
        self.target: BaseCheckpointSaver[Any] | None = None

    def _t(self) -> BaseCheckpointSaver[Any]:
        if self.target is None:
            raise RuntimeError("the checkpointer is not open yet (the app has not started)")
        return self.target

    async def aget_tuple(self, config: Any) -> Any:
        """Read a checkpoint from the checkpointer opened at startup."""
        return await self._t().aget_tuple(config)

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """List checkpoints from the checkpointer opened at startup."""
        async for item in self._t().alist(config, **kwargs):
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """Write a checkpoint to the checkpointer opened at startup."""
        return await self._t().aput(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        """Write pending writes to the checkpointer opened at startup."""
        await self._t().aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints from the checkpointer opened at startup."""
        await self._t().adelete_thread(thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The next channel version, as the checkpointer opened at startup numbers them."""
        return self._t().get_next_version(current, channel)


@asynccontextmanager
async def _open_backend() -> AsyncIterator[BaseCheckpointSaver[Any]]:
    from stores.checkpoint import open_async_checkpointer

    async with open_async_checkpointer() as saver:
        yield saver


def _add_error_handlers(app: FastAPI, access: Access) -> None:
    """Answer the input, validation, access and model errors of ``app``'s requests with their status codes."""

    @app.exception_handler(InputError)
    async def bad_input(_request: Request, exc: InputError) -> JSONResponse:
        return JSONResponse({"detail": access.files.scrub(str(exc))}, status_code=_input_status(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # What was wrong and where, without echoing the value (a NaN cannot even be written as JSON).
        if not all(isinstance(e, dict) for e in exc.errors()):  # LangServe's "Invalid JSON body": empty or cut
            return JSONResponse({"detail": "the request body is not valid JSON (empty or cut short)"}, status_code=400)
        errors = [{k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in exc.errors()]
        return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)

    @app.exception_handler(AccessError)
    async def forbidden(_request: Request, exc: AccessError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=403)

    @app.exception_handler(ModelError)
    async def model_down(_request: Request, exc: ModelError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)


def create_app(chat_model: ChatFactory | BaseChatModel | None = None) -> FastAPI:
    """Build the FastAPI app with every available workflow mounted.

    ``chat_model`` (a model, or a factory of one per role) answers every model call of its requests
    (tests, scripted benchmarks); unset, the roles' configured endpoints do.
    """
    from langserve import add_routes

    access = Access.from_env()
    saver = DeferredSaver()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        from stores.embedders import warm_embedder

        # the first large upload should not wait for the embedder's load
        threading.Thread(target=warm_embedder, name="embedder-warm-up", daemon=True).start()
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
    app.add_middleware(StreamErrorMiddleware, access=access)
    app.add_middleware(DisconnectMiddleware)  # inside the guard: it gets the body whole
    app.add_middleware(GuardMiddleware, access=access)
    if chat_model is not None:
        app.add_middleware(ChatModelMiddleware, model=chat_model)

    _add_error_handlers(app, access)
    names = registry.available()

    @app.get("/documents")
    async def documents(request: Request, namespace: str = "") -> dict[str, Any]:
        """The documents of one of the key's namespaces (default: its first): id, title, words, chunks..."""
        from starlette.concurrency import run_in_threadpool

        from surfaces.listing import served_listing

        tenant = getattr(request.state, "tenant", None)
        if tenant is None:
            raise HTTPException(401, "missing or wrong API key")
        return await run_in_threadpool(served_listing, tenant, namespace)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "workflows": names}

    @app.post("/forget")
    async def forget(request: Request) -> JSONResponse:
        """Delete the caller's own thread or a document of one of its namespaces with everything kept about it.

        The body names the thread (``{"thread_id": ID}``) or the document (``{"doc_id": ID, "namespace": NS}``);
        the answer is the report of what was deleted (404: nothing was).
        """
        tenant = getattr(request.state, "tenant", None)
        if tenant is None:
            raise HTTPException(401, "missing or wrong API key")
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise InputError("the request is not JSON") from None
        return JSONResponse(await anyio.to_thread.run_sync(forget_for_tenant, tenant, body))

    former = [alias for alias, name in registry.ALIASES.items() if name in names]
    for name in [*names, *former]:  # a former id serves the same graph, threads and checkpoints
        add_routes(
            app,
            ServedGraph(bound=registry.compile_with(name, saver), name=registry.canonical(name), access=access),
            path=f"/{name}",
            per_req_config_modifier=authorizer(access, registry.canonical(name)),
        )
    return app


def run(host: str, port: int) -> None:
    """Serve the app on ``host:port`` with uvicorn until interrupted (``longdoc serve``)."""
    import uvicorn

    uvicorn.run("surfaces.serve:app", host=host, port=port, log_level="info")


def __getattr__(name: str) -> Any:
    # `uvicorn surfaces.serve:app` builds the app on first access, not at import.
    if name == "app":
        value = create_app()
        globals()["app"] = value
        return value
    raise AttributeError(name)
