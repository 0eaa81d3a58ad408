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
  naming a server file only inside ``LONGDOC_INGEST_ROOT`` (400), without a chat ``session`` (the thread is
  the session, 400), addressing a checkpoint by id
  only (never another thread's, 400), without ``command.goto`` and with a ``command.update`` of the
  workflow's input keys only (400), and only on a thread the
  tenant created (404 for any other, the same whether another tenant holds the id or nobody does);
  the thread is bound to its namespace in PostgreSQL on first use, so no instance moves it;
- a thread's state is written by its runs only (``POST /threads/{id}/state`` with ``values`` is refused, 400:
  it would set the namespace or session a thread is bound to);
- thread ids are chosen by the server (``POST /threads`` with a ``thread_id`` is refused, 400), and a
  500's body never reaches the caller (it could hold a database's SQL statement);
- a request body must be JSON (415), nested at most ``LONGDOC_MAX_JSON_DEPTH`` deep, without ``NaN``
  (400), as on LangServe;
- the namespace is then fixed in the run's ``context``, where every node reads it;
- documents attached to a chat message (file and ``text-plain`` content blocks) are ingested at the door into that
  namespace, under every ingest's size and archive bounds, and the run gets their ids in their place, as on
  LangServe (:func:`detach_attachments`): Aegra's run record and checkpoints never hold an upload; a file that
  cannot be taken refuses the request, 413 over a size bound and 400 otherwise (wrong type, a link, broken base64),
  with the reason;
- one run at a time per thread, on every instance: a run on a thread whose run is still going is refused
  (409) or, with ``multitask_strategy: enqueue``, waits and runs as the next turn (:func:`take_thread`);
- as on LangServe, a run on a thread whose last run stopped half-way (its instance was killed)
  resumes that run when it brings the same input, and starts from its last finished step when it
  brings another (:func:`continue_dead_run`);
- as on LangServe, bodies over ``LONGDOC_MAX_REQUEST_BYTES`` are refused (413) and every model
  call of a run has the deadline of ``LONGDOC_RUN_TIMEOUT``, and a run makes at most ``LONGDOC_MAX_MODEL_CALLS``;
- a ``/runs/wait`` or ``/runs/stream`` (unless ``on_disconnect: continue``) whose client leaves before the answer
  starts no more model calls (:func:`surfaces.disconnect.stops_on_disconnect`), nor does an MCP tool call or an A2A
  message (:class:`surfaces.disconnect.CallerWatch`);
- after every run, once its thread is free, the earlier versions of files ingested again in its namespace are
  removed with the threads and run records that read them, as on LangServe (:func:`retire_on_aegra`).

The app also serves ``/mcp`` (:mod:`deploy.mcp`: the workflows as MCP tools) and ``/a2a/chat``
(:mod:`deploy.a2a`: the chat as an A2A agent), whose calls are runs made through this guard with
the caller's key, and ``/forget`` (:func:`forget_on_aegra`: a tenant deletes its own thread or document).

A pure ASGI middleware, since the request body must be read and rewritten before Aegra sees it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deploy import a2a, mcp
from deploy.assistants import workflow_of
from nodes.ingest import check_input_sizes
from nodes.inputs import check_workflow_input
from stores.cache import ProcessCache, lru_cache
from stores.checkpoint import ThreadLock, busy_message
from stores.deadlines import DEFAULT_RUN_TIMEOUT, run_deadline, run_timeout
from stores.errors import Gone, InputError, TooLarge, raised_status
from stores.files import IngestRoot
from stores.readers import reading
from stores.settings import get_settings
from stores.usage import max_model_calls, run_budget
from surfaces.access import (
    FILE_INPUTS,
    AccessError,
    Refused,
    Tenant,
    ThreadOwners,
    check_settings,
    max_request_bytes,
    read_json_body,
    refuse_server_inputs,
    replay_body,
    served_fields,
    thread_key,
    with_length,
)
from surfaces.assistant_settings import AssistantGuard
from surfaces.disconnect import CallerWatch, stopper, stops_on_disconnect, until_disconnect
from surfaces.doors import quiet_answered_errors
from surfaces.registry import WORKFLOWS
from surfaces.resume import plan

log = logging.getLogger(__name__)

RUN_PATH = re.compile(r"^/threads/(?P<thread>[^/]+)/runs(?:/stream|/wait)?/?$")
STATE_PATH = re.compile(r"^/threads/[^/]+/state/?$")


@lru_cache(maxsize=1)
def _owners() -> ThreadOwners:
    return ThreadOwners()


def _aegra_owner(thread_id: str) -> str | None:
    """The user (tenant) Aegra recorded for ``thread_id``.

    Empty when there is no such thread, None without Aegra's database to ask (``LONGDOC_POSTGRES_URL`` unset).
    """
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
    refuse_server_inputs(value)
    out = dict(value)
    for key in FILE_INPUTS:
        if out.get(key):
            out[key] = files.resolve(str(out[key]))
    return out, str(out.get("namespace") or "")


@lru_cache(maxsize=16)
def input_keys(workflow: str) -> frozenset[str]:
    """The keys of ``workflow``'s input: all a ``command.update`` may write.

    Never the state's own, e.g. what a chat session is bound to.
    """
    from deploy import served

    return frozenset(getattr(served, workflow).get_input_jsonschema().get("properties", {}))


def check_run(body: dict[str, Any], thread_id: str, tenant: Tenant, files: IngestRoot) -> dict[str, Any]:
    """The run request ``body`` with its namespace fixed; :class:`Refused` when the tenant may not run it."""
    workflow = workflow_of(str(body.get("assistant_id", "")))
    if workflow is None:
        raise Refused(403, "only the built-in assistants are served: " + ", ".join(WORKFLOWS))
    config = dict(body.get("config") or {})
    checkpoint = dict(body.get("checkpoint") or {})
    command = dict(body.get("command") or {})
    _check_run_keys(workflow, config, checkpoint, command)
    context = {**dict(config.pop("configurable", None) or {}), **dict(body.get("context") or {})}
    context.pop("thread_id", None)
    extra = sorted(set(context) - served_fields(workflow))
    if extra:
        raise Refused(400, f"{workflow} does not take these context keys from callers: {', '.join(extra)}")
    try:
        # Every setting checked now: a refused one never becomes a run, whose record would keep its input.
        check_settings(workflow, {k: v for k, v in context.items() if k != "namespace"}, "context")
        if command:  # resuming or updating a thread: its input may hold only what changes
            check_input_sizes(body.get("input"))
        else:
            check_workflow_input(workflow, body.get("input"))
        value, wanted = _checked_value(body.get("input"), files)
        update, updated = _checked_value(command.get("update"), files)
        asked = {n for n in (wanted, updated, str(context.get("namespace") or "")) if n}
        if len(asked) > 1:
            raise AccessError("the request names different namespaces")
        namespace = tenant.namespace_for(asked.pop() if asked else "")
        name = tenant.name or "anonymous"
        owner = _aegra_owner(thread_id)
        if owner == "":  # no such thread: one deleted with a document another user forgot says so (410)
            _owners().refuse_buried(thread_key(name, thread_id))
        if owner is not None and owner != name:
            raise thread_not_found(thread_id)
        _owners().claim(thread_key(name, thread_id), name, namespace)
        served_context = {**context, "namespace": namespace}
        value = detach_attachments(workflow, value, served_context)
        update = detach_attachments(workflow, update, served_context)
    except AccessError as exc:
        raise Refused(403, str(exc)) from None
    except TooLarge as exc:
        raise Refused(413, files.scrub(str(exc))) from None
    except InputError as exc:
        raise Refused(exc.status if exc.status == Gone.status else 400, files.scrub(str(exc))) from None
    out = {**body, "config": config, "context": {**context, "namespace": namespace}}
    if "input" in body:
        out["input"] = value
    if command:
        out["command"] = {**command, "update": update} if "update" in command else command
    return out


def _check_run_keys(workflow: str, config: dict[str, Any], checkpoint: dict[str, Any], command: dict[str, Any]) -> None:
    """:class:`Refused` 400 for ``config``, ``checkpoint`` or ``command`` keys a run request may not carry."""
    for what, given, allowed in (("config", config, CONFIG_KEYS), ("checkpoint", checkpoint, CHECKPOINT_KEYS)):
        if set(given) - allowed:
            raise Refused(400, f"{what} may hold only: {', '.join(sorted(allowed))}")
    if command.get("goto"):
        raise Refused(400, "command.goto is not served: continue a thread with command.update or command.resume")
    update_keys = set(command["update"]) if isinstance(command.get("update"), dict) else set()
    if "update" in command and (not isinstance(command["update"], dict) or update_keys - input_keys(workflow)):
        raise Refused(400, f"command.update may set only {workflow}'s input: {', '.join(sorted(input_keys(workflow)))}")


def detach_attachments(workflow: str, value: Any, context: dict[str, Any]) -> Any:
    """A chat input (or state update) with the documents attached to its messages ingested now, named by id.

    The documents go in the tenant's namespace under every ingest's bounds, and are named by id
    (:func:`nodes.offload.session.detach_uploads`, as on LangServe): Aegra's run record and the thread's checkpoints
    never hold an upload. A file that cannot be taken raises its InputError (``TooLarge`` over a size bound), so the
    request is refused before any run exists.
    """
    if workflow != "chat" or not isinstance(value, dict) or not value.get("messages"):
        return value
    from nodes.offload.context import OffloadContext
    from nodes.offload.session import detach_uploads

    return detach_uploads(value, OffloadContext.from_mapping(context), strict=True)


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
        """Check the API key of an HTTP request, then pass it on; pass other scopes through."""
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
        if STATE_PATH.match(scope["path"]) and isinstance(body, dict) and body.get("values") is not None:
            # A state update would write any channel (the namespace or session a thread is bound to), unchecked.
            await _answer(send, 400, "state updates are not served: send the input as a new run")
            return
        if match is None or scope["method"] != "POST":
            if scope["path"].rstrip("/") == "/threads" and isinstance(body, dict) and body.get("thread_id"):
                # Ids are the server's to choose: one answer, whether or not another tenant holds the id.
                await _answer(send, 400, "thread ids are chosen by the server: create the thread without thread_id")
                return
            await self.app(scope, replay_body(raw, receive), send)
            return
        await self._run(scope, receive, send, tenant, body, match["thread"])

    async def _run(self, scope: Scope, receive: Receive, send: Send, tenant: Tenant, body: Any, thread: str) -> None:
        """Check a run request on ``thread``, hold the thread and pass the checked run on until it is done."""
        try:
            if not isinstance(body, dict):
                raise Refused(422, "the run request must be a JSON object")
            checked = await anyio.to_thread.run_sync(check_run, body, thread, tenant, self.files)
            workflow = str(workflow_of(str(checked["assistant_id"])))
        except Refused as exc:
            await _answer(send, exc.status, str(exc))
            return
        namespace = str(checked["context"]["namespace"])
        lock = RunHold(thread, namespace)
        try:
            await take_thread(lock, thread, checked)
        except Refused as exc:
            await _answer(send, exc.status, str(exc))
            return
        released = False
        try:
            try:
                checked = await anyio.to_thread.run_sync(continue_dead_run, workflow, thread, checked)
            except Refused as exc:
                await _answer(send, exc.status, str(exc))
                return
            known = await anyio.to_thread.run_sync(thread_runs, thread)
            payload = json.dumps(checked).encode()
            scope = with_length(scope, payload)
            # The run's task is created inside this call and copies the context: every model call of the
            # run (and of its node threads) then has the deadline of LONGDOC_RUN_TIMEOUT and takes from the
            # bound of LONGDOC_MAX_MODEL_CALLS, as on LangServe.
            held = HeldResponse() if scope["path"].rstrip("/").endswith("/runs/wait") else None
            answer = send if held is None else held.send
            with run_deadline(run_timeout()), run_budget(max_model_calls()) as budget:
                if stops_on_disconnect(scope["path"], checked):
                    await until_disconnect(self.app, scope, replay_body(payload, receive), answer, stopper(budget))
                else:
                    await self.app(scope, replay_body(payload, receive), answer)
            if held is not None:
                await _answer_wait(held, send, thread, known)
            released = await hold_until_done(lock, thread, known, namespace)
        finally:
            if not released:
                await anyio.to_thread.run_sync(lock.release)
                await anyio.to_thread.run_sync(retire_on_aegra, namespace)


MULTITASK = ("reject", "enqueue")
"""The ``multitask_strategy`` values served: a run on a busy thread is refused (409), or waits for its turn."""


class RunHold:
    """What a run holds from its start to its end: its thread, and its namespace as one of the runs reading it.

    The thread: one run at a time (:class:`stores.checkpoint.ThreadLock`); the namespace: the earlier versions of
    its changed files stay until no run reads it (:func:`stores.readers.reading`).
    """

    def __init__(self, thread: str, namespace: str) -> None:
        self.thread = ThreadLock(thread)
        self.namespace = namespace
        self._reading = contextlib.ExitStack()

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the thread (waiting up to ``wait`` seconds) and then the namespace; False when the thread is busy."""
        if not self.thread.acquire(wait):
            return False
        self._reading.enter_context(reading(self.namespace))
        return True

    def release(self) -> None:
        """Give the namespace and the thread back."""
        self._reading.close()
        self.thread.release()


async def take_thread(lock: RunHold, thread: str, body: dict[str, Any]) -> None:
    """Take ``thread`` for the run ``body`` asks for; :class:`Refused` 409 while another run holds it.

    Aegra 0.6 takes ``multitask_strategy`` and ignores it, so two runs on one thread would both write turn 2:
    with ``reject`` (the default) the second is refused at once, with ``enqueue`` it waits (at most the run
    deadline) and runs as the next turn. The lock holds across instances (:class:`stores.checkpoint.ThreadLock`).
    """
    strategy = body.get("multitask_strategy") or "reject"
    if strategy not in MULTITASK:
        raise Refused(400, f"multitask_strategy {str(strategy)[:20]!r} is not served: use reject or enqueue")
    wait = (run_timeout() or DEFAULT_RUN_TIMEOUT) if strategy == "enqueue" else 0.0
    if not await anyio.to_thread.run_sync(lock.acquire, wait):
        raise Refused(409, busy_message(thread))


def run_records(thread: str) -> list[tuple[str, str, str | None]]:
    """Id, status and error message of each run Aegra has recorded on ``thread`` (none without its database)."""
    url = get_settings().postgres_url
    if not url:
        return []
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT run_id, status, error_message FROM runs WHERE thread_id = %s", (thread,))
        return [(str(run), str(status), None if error is None else str(error)) for run, status, error in rows]


def thread_runs(thread: str) -> set[str]:
    """Ids of the runs Aegra has recorded on ``thread``."""
    return {run for run, _status, _error in run_records(thread)}


def run_refusal(thread: str, known: set[str]) -> tuple[int, str] | None:
    """The status and reason of the run this request created on ``thread`` when it failed, else None.

    Aegra 0.6 answers a ``/runs/wait`` whose run failed with 200 and the run's output (``{}``), keeping only the
    error's message in the run record; the graph ran in this process, which knows the status of the errors it
    raised (:func:`stores.errors.raised_status`). Another failure is a 500 whose detail stays in the log.
    """
    for run, status, error in run_records(thread):
        if run not in known and status == "error":
            message = error or "the run failed"
            return raised_status(message) or 500, IngestRoot.from_env().scrub(message)
    return None


class HeldResponse:
    """An ASGI response kept back until it is known to answer for a run that did not fail (``/runs/wait``)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def send(self, message: Message) -> None:
        """Keep ``message``."""
        self.messages.append(message)

    @property
    def status(self) -> int | None:
        """The status the response started with (None before it started)."""
        return next((int(m["status"]) for m in self.messages if m["type"] == "http.response.start"), None)

    async def release(self, send: Send) -> None:
        """Send the response kept."""
        for message in self.messages:
            await send(message)


_holders: ProcessCache[int, asyncio.Task[None]] = ProcessCache("running lock holders", maxsize=4096)
"""The tasks giving threads back when their runs end, referenced here so none is collected while it waits."""


async def hold_until_done(lock: RunHold, thread: str, known: set[str], namespace: str) -> bool:
    """Keep ``thread`` taken while the run this request created still runs in this instance.

    That run is a background run, or a stream the caller left with ``on_disconnect: continue``. True when a task now
    gives the lock back, and then removes the superseded documents of the run's ``namespace`` (:func:`retire_on_aegra`).
    """
    created = await anyio.to_thread.run_sync(thread_runs, thread) - known
    if not created:
        return False
    from aegra_api.api.runs import active_runs

    running = [active_runs[run] for run in created if run in active_runs and not active_runs[run].done()]
    if not running:
        return False

    async def release_after() -> None:
        try:
            await asyncio.gather(*running, return_exceptions=True)
        finally:
            await anyio.to_thread.run_sync(lock.release)
            await anyio.to_thread.run_sync(retire_on_aegra, namespace)

    holder = asyncio.create_task(release_after())
    _holders.put(id(holder), holder)
    holder.add_done_callback(lambda done: _holders.pop(id(done)))
    return True


async def _answer_wait(held: HeldResponse, send: Send, thread: str, known: set[str]) -> None:
    """Answer a ``/runs/wait`` with its run's refusal (status and reason) when the run failed, else as Aegra did."""
    refused = await anyio.to_thread.run_sync(run_refusal, thread, known) if held.status == 200 else None
    if refused is None:
        await held.release(send)
    else:
        await _answer(send, *refused)


def _without_details(send: Send) -> Send:
    """``send`` with the body of a 500 replaced by a plain message.

    An internal error (a database's, with its SQL statement) never reaches the caller; the server's log keeps it.
    """
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


def forget_on_aegra(tenant: Tenant, request: Any) -> dict[str, Any]:
    """A tenant's forget on the deployment: a thread it created, or a document of one of its namespaces.

    The request is ``{"thread_id": ID}`` (a thread it created) or ``{"doc_id": ID, "namespace": NS}`` (a document of
    one of its namespaces, with every thread that read it, alone or in a collection, whoever's: any of their
    checkpoints or run records names it, :class:`surfaces.retention.Names`; another user's thread answers its next
    run with 410 saying why).

    A thread goes with its checkpoints, chat items and owner record (:mod:`surfaces.retention`) and Aegra's own
    rows: the thread, its runs (which hold their inputs and outputs) and their stream events.
    """
    from surfaces.retention import NothingToForget

    if not isinstance(request, dict) or sum(bool(request.get(k)) for k in ("thread_id", "doc_id")) != 1:
        raise InputError("send {'thread_id': ID} or {'doc_id': ID, 'namespace': NS}")
    name = tenant.name or "anonymous"
    if request.get("doc_id"):
        namespace = tenant.namespace_for(str(request.get("namespace") or ""))
        return forget_document_on_aegra(namespace, str(request["doc_id"]), name)
    with _aegra_database() as (conn, saver):
        thread = str(request["thread_id"])
        if (
            conn.execute("SELECT 1 FROM thread WHERE thread_id = %s AND user_id = %s", (thread, name)).fetchone()
            is None
        ):
            raise NothingToForget(f"no thread {thread[:80]!r} for this API key to forget")
        return _forget_on_aegra(conn, saver, {thread: name}, "", "")


def forget_document_on_aegra(namespace: str, doc_id: str, user: str | None = None) -> dict[str, Any]:
    """Forget document ``doc_id`` of ``namespace`` with every user's threads that read it.

    Their checkpoints and run records hold its text. ``user`` (the caller): the report names its threads and counts
    the others' (``others``), and each of the others' is left a record that answers its next run with 410.
    """
    from stores.documents import doc_dir, find_document
    from surfaces.retention import Names, NothingToForget, threads_where

    with _aegra_database() as (conn, saver):
        doc_dir(namespace, doc_id)  # checks the id
        info = find_document(namespace, doc_id)
        if info is None:
            raise NothingToForget(f"no document {doc_id!r} in namespace {namespace!r} to forget")
        names = Names.document(namespace, doc_id, info.source)
        users = {str(t): str(u) for t, u in conn.execute("SELECT thread_id, user_id FROM thread")}
        threads = threads_where(saver, names, users)
        runs = conn.execute("SELECT thread_id, input, output FROM runs")
        threads += [str(t) for t, asked, made in runs if str(t) in users and (names(asked) or names(made))]
        found = {t: users[t] for t in threads}
        report = _forget_on_aegra(conn, saver, found, namespace, doc_id)
    if user is None:
        return report
    reason = f"document {doc_id!r} of namespace {namespace!r}, which this thread read, was forgotten with it"
    for thread, owner in found.items():
        if owner != user:
            _owners().bury(thread_key(owner, thread), reason)
    mine = [t for t in report["threads"] if found.get(t) == user]
    return {**report, "threads": mine, "others": len(report["threads"]) - len(mine)}


@contextlib.contextmanager
def _aegra_database() -> Iterator[tuple[Any, Any]]:
    """A connection to the deployment's PostgreSQL and a checkpoint saver over it."""
    from langgraph.checkpoint.postgres import PostgresSaver

    url = str(get_settings().postgres_url or "")
    if not url:
        raise InputError("forget on this deployment needs its PostgreSQL database (LONGDOC_POSTGRES_URL)")
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, PostgresSaver.from_conn_string(url) as saver:
        yield conn, saver


def _forget_on_aegra(conn: Any, saver: Any, threads: dict[str, str], namespace: str, doc_id: str) -> dict[str, Any]:
    """Delete ``threads`` (id: user) with Aegra's rows of them, then document ``doc_id`` when given: the report."""
    from surfaces.retention import Report, compact, drop_document, forget_threads, threads_held

    report = Report()
    with threads_held(threads):
        forget_threads(saver, threads, report)
        for thread, user in threads.items():
            _owners().forget(thread_key(user, thread))
            conn.execute(
                "DELETE FROM run_events WHERE run_id IN (SELECT run_id FROM runs WHERE thread_id = %s)", (thread,)
            )
            conn.execute("DELETE FROM thread WHERE thread_id = %s", (thread,))  # its runs go with it
        if doc_id:
            drop_document(namespace, doc_id, report)
    return compact(report)


def retire_on_aegra(namespace: str) -> None:
    """Remove the queued earlier versions of ``namespace``'s files (:mod:`surfaces.superseded`).

    The threads and Aegra run records that read them stay (their next run is told the current version); while a
    run reads the namespace they stay queued for the next run. Run after every run once its thread is free; a
    failure leaves the queue as it is (logged).
    """
    from surfaces.superseded import retire_superseded

    try:
        retire_superseded(namespace)
    except Exception:  # the run is answered already: the queue waits for the next one
        log.warning("the superseded documents of %r stay queued", namespace, exc_info=True)


@contextlib.asynccontextmanager
async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
    """Serve ``/mcp`` while the app runs (Aegra runs this lifespan with its own); answered errors logged as one line."""
    quiet_answered_errors()
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
app.add_middleware(CallerWatch)  # inside the guards: the MCP and A2A runs of a caller who leaves stop
app.add_middleware(AssistantGuard)  # inside the tenant guard: the key and the body are checked first
app.add_middleware(TenantGuard)


@app.post("/forget")
async def forget(request: Request) -> JSONResponse:
    """Delete the caller's own thread or document with everything kept about it (:func:`forget_on_aegra`).

    Answers with the report of what was deleted, 404 for what does not exist, 409 for a thread whose run is still
    going.
    """
    from deploy.auth import keyring
    from stores.checkpoint import ThreadBusy
    from surfaces.retention import NothingToForget

    tenant = keyring().tenant_of({k.lower(): v for k, v in request.headers.items()})
    if tenant is None:  # the guard answers 401 before; kept for a direct call
        return JSONResponse({"error": "refused", "message": "a valid API key is required"}, status_code=401)
    try:
        body = json.loads(await request.body() or b"{}")
        return JSONResponse(await anyio.to_thread.run_sync(forget_on_aegra, tenant, body))
    except NothingToForget as exc:
        return JSONResponse({"error": "not_found", "message": str(exc)}, status_code=404)
    except ThreadBusy as exc:
        return JSONResponse({"error": "busy", "message": str(exc)}, status_code=409)
    except AccessError as exc:
        return JSONResponse({"error": "forbidden", "message": str(exc)}, status_code=403)
    except (InputError, ValueError) as exc:
        return JSONResponse({"error": "refused", "message": str(exc)[:300]}, status_code=400)


app.router.routes.append(Route("/mcp", endpoint=mcp.route, methods=["GET", "POST", "DELETE"]))
app.router.routes.append(Route("/documents", endpoint=documents, methods=["GET"]))
app.include_router(a2a.router)
"""The workflows as MCP tools (:mod:`deploy.mcp`) and the chat as an A2A agent (:mod:`deploy.a2a`), behind the
guard like every other path."""
