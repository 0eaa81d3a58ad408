"""The FastAPI app Aegra mounts its routes on (``http.app`` in ``aegra.json``), with the tenant guard.

Aegra authenticates every API route with :mod:`deploy.auth` and confines reads to the caller's
own threads and runs, but in version 0.6 a run may be created on any thread id (the owner of an
existing thread is not checked) and ``/runs/wait`` and ``/runs/stream`` call no authorization
handler. :class:`TenantGuard` closes both, applying the rules of :mod:`surfaces.access` that the
LangServe app applies:

- a request without a valid key is refused (401) on every path, Aegra's own or not;
- a run is created only with a built-in assistant (one of the five graphs), only with the
  ``context`` keys :data:`surfaces.access.SERVED_FIELDS` serves (400), only in a namespace of the
  tenant, in its context, input and state update alike (403; none given: the tenant's first),
  naming a server file only inside ``LONGDOC_INGEST_ROOT`` (400), addressing a checkpoint by id
  only (never another thread's, 400), without ``command.goto`` (400), and only on a thread the
  tenant created (404 for any other, the same whether another tenant holds the id or nobody does);
  the thread is bound to its namespace in PostgreSQL on first use, so no instance moves it;
- thread ids are chosen by the server (``POST /threads`` with a ``thread_id`` is refused, 400), and a
  500's body never reaches the caller (it could hold a database's SQL statement);
- a request body must be JSON (415), nested at most ``LONGDOC_MAX_JSON_DEPTH`` deep, without ``NaN``
  (400), as on LangServe;
- the namespace is then fixed in the run's ``context``, where every node reads it;
- as on LangServe, a run on a thread whose last run stopped half-way (its instance was killed)
  resumes that run when it brings the same input, and starts from its last finished step when it
  brings another (:func:`continue_dead_run`);
- as on LangServe, bodies over ``LONGDOC_MAX_REQUEST_BYTES`` are refused (413) and every model
  call of a run has the deadline of ``LONGDOC_RUN_TIMEOUT``.

The app also serves ``/mcp`` (:mod:`deploy.mcp`: the workflows as MCP tools) and ``/a2a/offload``
(:mod:`deploy.a2a`: the chat as an A2A agent), whose calls are runs made through this guard with
the caller's key.

A pure ASGI middleware, since the request body must be read and rewritten before Aegra sees it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deploy import a2a, mcp
from deploy.assistants import GRAPHS, workflow_of
from stores.deadlines import run_deadline, run_timeout
from stores.errors import InputError
from stores.settings import get_settings
from surfaces.access import (
    FILE_INPUTS,
    AccessError,
    IngestRoot,
    Refused,
    Tenant,
    ThreadOwners,
    max_request_bytes,
    read_json_body,
    replay_body,
    served_fields,
    thread_key,
)
from surfaces.resume import plan

RUN_PATH = re.compile(r"^/threads/(?P<thread>[^/]+)/runs(?:/stream|/wait)?/?$")


@functools.cache
def _owners() -> ThreadOwners:
    return ThreadOwners()


def _aegra_owner(thread_id: str) -> str | None:
    """The user (tenant) Aegra recorded for ``thread_id``: empty when there is no such thread, None
    without Aegra's database to ask (``LONGDOC_POSTGRES_URL`` unset)."""
    url = get_settings().postgres_url
    if not url:
        return None
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT user_id FROM thread WHERE thread_id = %s", (thread_id,)).fetchone()
    return "" if row is None else str(row[0])


def thread_not_found(thread_id: str) -> Refused:
    """The one answer to a thread the tenant does not own, whether another tenant has it or nobody does."""
    return Refused(404, f"no thread {thread_id[:80]!r} for this API key; create one with POST /threads")


CONFIG_KEYS = frozenset({"configurable", "tags", "recursion_limit", "metadata"})
"""Top-level ``config`` keys a run request may carry.

``configurable`` (what LangServe-style clients send) is moved into the run's ``context`` and checked with it:
nodes read their settings only from ``runtime.context``.
"""

CHECKPOINT_KEYS = frozenset({"checkpoint_id", "checkpoint_ns"})
"""``checkpoint`` keys a run may address (Aegra copies them into ``configurable``: never a thread id)."""


def _checked_value(value: Any, files: IngestRoot) -> tuple[Any, str]:
    """``value`` (an input or a state update) with server file names resolved in the ingest root; its namespace."""
    if not isinstance(value, dict):
        return value, ""
    out = dict(value)
    for key in FILE_INPUTS:
        if out.get(key):
            out[key] = files.resolve(str(out[key]))
    return out, str(out.get("namespace") or "")


def check_run(body: dict[str, Any], thread_id: str, tenant: Tenant, files: IngestRoot) -> dict[str, Any]:
    """The run request ``body`` with its namespace fixed; :class:`Refused` when the tenant may not run it."""
    workflow = workflow_of(str(body.get("assistant_id", "")))
    if workflow is None:
        raise Refused(403, "only the built-in assistants are served: " + ", ".join(GRAPHS))
    config = dict(body.get("config") or {})
    checkpoint = dict(body.get("checkpoint") or {})
    command = dict(body.get("command") or {})
    for what, given, allowed in (("config", config, CONFIG_KEYS), ("checkpoint", checkpoint, CHECKPOINT_KEYS)):
        if set(given) - allowed:
            raise Refused(400, f"{what} may hold only: {', '.join(sorted(allowed))}")
    if command.get("goto"):
        raise Refused(400, "command.goto is not served: continue a thread with command.update or command.resume")
    context = {**dict(config.pop("configurable", None) or {}), **dict(body.get("context") or {})}
    context.pop("thread_id", None)
    extra = sorted(set(context) - served_fields(workflow))
    if extra:
        raise Refused(400, f"{workflow} does not take these context keys from callers: {', '.join(extra)}")
    try:
        value, wanted = _checked_value(body.get("input"), files)
        update, updated = _checked_value(command.get("update"), files)
        asked = {n for n in (wanted, updated, str(context.get("namespace") or "")) if n}
        if len(asked) > 1:
            raise AccessError("the request names different namespaces")
        namespace = tenant.namespace_for(asked.pop() if asked else "")
        name = tenant.name or "anonymous"
        owner = _aegra_owner(thread_id)
        if owner is not None and owner != name:
            raise thread_not_found(thread_id)
        _owners().claim(thread_key(name, thread_id), name, namespace)
    except AccessError as exc:
        raise Refused(403, str(exc)) from None
    except InputError as exc:
        raise Refused(400, files.scrub(str(exc))) from None
    out = {**body, "config": config, "context": {**context, "namespace": namespace}}
    if "input" in body:
        out["input"] = value
    if command:
        out["command"] = {**command, "update": update} if "update" in command else command
    return out


def _postgres_saver() -> Any:
    """A synchronous saver over the deployment's PostgreSQL (Aegra's checkpoint tables), as a context manager."""
    from langgraph.checkpoint.postgres import PostgresSaver

    return PostgresSaver.from_conn_string(str(get_settings().postgres_url))


def continue_dead_run(workflow: str, thread_id: str, body: dict[str, Any], saver: Any = None) -> dict[str, Any]:
    """``body`` planned like a LangServe request on a thread whose last run stopped half-way (:mod:`surfaces.resume`).

    The same input again resumes the dead run: it becomes a ``Command`` that writes the input's
    values again (Aegra 0.6 turns a null input into ``{}``, a new run; LangGraph resumes on any
    Command), so only the unfinished steps run. Another input starts from the dead run's last
    finished step (``checkpoint``). A thread whose last run finished is left as it is.
    """
    if body.get("command") or body.get("checkpoint") or not isinstance(body.get("input"), dict) or not body["input"]:
        return body
    if saver is None and not get_settings().postgres_url:
        return body
    from deploy import served

    graph = getattr(served, workflow)
    with contextlib.nullcontext(saver) if saver is not None else _postgres_saver() as opened:
        value, config = plan(graph.copy(update={"checkpointer": opened}), body["input"], _thread_config(thread_id))
    if value is None:
        return {**{k: v for k, v in body.items() if k != "input"}, "command": {"update": body["input"]}}
    checkpoint_id = (config.get("configurable") or {}).get("checkpoint_id")
    return {**body, "checkpoint": {"checkpoint_id": checkpoint_id}} if checkpoint_id else body


def _thread_config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


class TenantGuard:
    """Key check on every request, run checks on every run creation (see the module's docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.files = IngestRoot.from_env()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from deploy.auth import keyring

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        tenant = keyring().tenant_of(headers)
        if tenant is None:
            await _answer(send, 401, "a valid API key is required")
            return
        send = _without_details(send)
        limit = max_request_bytes()
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _answer(send, 413, f"request body over {limit} bytes")
            return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        try:
            raw = await read_json_body(headers, receive, limit)
            body = json.loads(raw or b"{}")
        except Refused as exc:
            await _answer(send, exc.status, str(exc))
            return
        except json.JSONDecodeError:
            await _answer(send, 422, "the request is not JSON")
            return
        match = RUN_PATH.match(scope["path"])
        if match is None or scope["method"] != "POST":
            if scope["path"].rstrip("/") == "/threads" and isinstance(body, dict) and body.get("thread_id"):
                # Ids are the server's to choose: one answer, whether or not another tenant holds the id.
                await _answer(send, 400, "thread ids are chosen by the server: create the thread without thread_id")
                return
            await self.app(scope, replay_body(raw, receive), send)
            return
        try:
            if not isinstance(body, dict):
                raise Refused(422, "the run request must be a JSON object")
            checked = await anyio.to_thread.run_sync(check_run, body, match["thread"], tenant, self.files)
            workflow = str(workflow_of(str(checked["assistant_id"])))
            checked = await anyio.to_thread.run_sync(continue_dead_run, workflow, match["thread"], checked)
        except Refused as exc:
            await _answer(send, exc.status, str(exc))
            return
        payload = json.dumps(checked).encode()
        scope = {
            **scope,
            "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
            + [(b"content-length", str(len(payload)).encode())],
        }
        # The run's task is created inside this call and copies the context: every model call of the
        # run (and of its node threads) then has the deadline of LONGDOC_RUN_TIMEOUT, as on LangServe.
        with run_deadline(run_timeout()):
            await self.app(scope, replay_body(payload, receive), send)


def _without_details(send: Send) -> Send:
    """``send`` with the body of a 500 replaced by a plain message: an internal error (a database's,
    with its SQL statement) never reaches the caller; the server's log keeps it."""
    failed = False

    async def guarded(message: Message) -> None:
        nonlocal failed
        if message["type"] == "http.response.start" and message["status"] == 500:
            failed = True
            await _answer(send, 500, "the server failed on this request; its log has the details")
            return
        if not failed:
            await send(message)

    return guarded


async def _answer(send: Send, status: int, message: str) -> None:
    kind = {403: "forbidden", 404: "not_found", 500: "internal_error"}.get(status, "refused")
    body = json.dumps({"error": kind, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """Serve ``/mcp`` while the app runs (Aegra runs this lifespan with its own)."""
    async with mcp.route.running():
        yield


async def documents(request: Request) -> JSONResponse:
    """``GET /documents?namespace=NS``: the documents of one of the key's namespaces (:mod:`surfaces.listing`)."""
    from deploy.auth import keyring
    from surfaces.listing import served_listing

    tenant = keyring().tenant_of({k.lower(): v for k, v in request.headers.items()})
    if tenant is None:
        return JSONResponse({"error": "refused", "message": "a valid API key is required"}, status_code=401)
    try:
        listing = await anyio.to_thread.run_sync(served_listing, tenant, request.query_params.get("namespace", ""))
    except AccessError as exc:
        return JSONResponse({"error": "forbidden", "message": str(exc)}, status_code=403)
    except InputError as exc:
        return JSONResponse({"error": "refused", "message": str(exc)}, status_code=400)
    return JSONResponse(listing)


app = FastAPI(title="longdoc on Aegra", lifespan=lifespan)
app.add_middleware(TenantGuard)
app.router.routes.append(Route("/mcp", endpoint=mcp.route, methods=["GET", "POST", "DELETE"]))
app.router.routes.append(Route("/documents", endpoint=documents, methods=["GET"]))
app.include_router(a2a.router)
"""The workflows as MCP tools (:mod:`deploy.mcp`) and the chat as an A2A agent (:mod:`deploy.a2a`), behind the
guard like every other path."""
