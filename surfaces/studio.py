"""The guard of ``langgraph dev`` (LangGraph Studio), on the app ``langgraph.json`` mounts (:mod:`deploy.dev`).

``langgraph dev`` serves the graphs to whoever can reach it: by default it answers every origin (CORS
``*``, with Chrome's private-network permission) and takes a run's ``context`` from the caller, so any
web page open in the operator's browser could run a graph, read a file by ``path`` or point the models at
a URL of its choosing with the operator's key. ``langgraph.json`` narrows CORS to Studio's origin and turns
webhooks off; this middleware, which the server runs before every route (its own and ``/mcp``, ``/a2a``),
keeps the rest of what the other servers keep:

- a request must come from this machine, judged by its connection's peer address, not by its headers (a loopback
  address, or one ``LONGDOC_DEV_CLIENTS`` lists: :mod:`surfaces.loopback`), must name a loopback host
  (``localhost``, ``127.0.0.1``, ``[::1]``: a DNS-rebinding page names its own) and, when it comes from a
  browser, LangGraph Studio (:data:`STUDIO_ORIGIN`), the server's own pages or a page of this machine: a
  loopback origin (``http://localhost:3000``, where Agent Chat UI runs) when the request reached the server on
  a loopback address, or the origins ``LONGDOC_DEV_ORIGINS`` lists
  in their place; any other origin, or a cross-site fetch from one, is refused (403) before any work,
  preflights included; the command line, the SDK and a web app's server-side proxy send no ``Origin`` and pass.
  CORS for the pages of this machine is answered here (``langgraph.json`` allows Studio's origin only);
- a run, an assistant or a state update never sets the operator's settings (model names, endpoints,
  keys, temperatures, embedder, LLM cache: :func:`surfaces.access.operator_fields`) in its ``context`` or
  ``configurable`` (400), and an assistant no key its workflow does not read (400,
  :mod:`surfaces.assistant_settings`);
- a chat message attaches at most ``LONGDOC_MAX_ATTACHMENTS`` documents of ``LONGDOC_MAX_ATTACHMENT_BYTES``
  in all (413, before any is read: :func:`nodes.inputs.check_attachments`);
- a server file named in an input (``path``, ``registry_path``) is resolved inside ``LONGDOC_INGEST_ROOT``
  and refused without one, and a chat ``session`` is refused, as on LangServe and Aegra; the MCP and A2A
  routes run their tools through the server's own loopback requests, which pass here too;
- bodies are JSON, bounded and checked as on the other servers (:func:`surfaces.access.read_json_body`; one
  that does not parse is a 400 with the parser's reason, :func:`surfaces.doors.parse_body`);
  a body sent without a type of its own (Agent Chat UI's server-side proxy forwards bodies as strings,
  with no ``Content-Type`` or the ``text/plain`` ``fetch`` gives them) is taken when it parses as JSON,
  and passed on as ``application/json``. A browser labels a page's cross-origin request with its
  ``Origin``, so this takes no more from pages than the origin checks above let through.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from nodes.inputs import check_attachments
from stores.errors import InputError
from stores.files import IngestRoot
from stores.readers import reading
from stores.settings import get_settings
from surfaces.access import (
    FILE_INPUTS,
    Refused,
    check_caller_settings,
    check_finite,
    json_media_type,
    operator_fields,
    read_json_body,
    refuse_server_inputs,
    replay_body,
    with_length,
)
from surfaces.assistant_settings import ASSISTANT_PATH, check_assistant, context_fields
from surfaces.doors import parse_body
from surfaces.loopback import LOOPBACK_HOSTS, answered_peer, host_name, loopback_address

STUDIO_ORIGIN = "https://smith.langchain.com"
"""LangGraph Studio's origin: the one web page allowed to call the dev server."""

LOOPBACK_ROOT = "/noauth"
"""``root_path`` of the server's in-process requests (its MCP and A2A tools run their graphs through them)."""

TITLE_CHARS = 80
"""Most characters of a thread's title."""

ThreadTitler = Callable[[str, str], Awaitable[None]]
"""Gives thread ``thread_id`` the title ``title`` unless it has one (``deploy.dev.title_thread``)."""

RunDone = Callable[[str], Awaitable[None]]
"""What follows a run answered in namespace ``namespace`` (``deploy.dev.retire_on_dev``)."""

logger = logging.getLogger(__name__)

_THREAD_RUN = re.compile(r"^/threads/([^/]+)/runs(?:/stream|/wait)?/?$")
_RUNS = re.compile(r"^(?:/threads/[^/]+)?/runs(?:/stream|/wait|/batch|/crons)?/?$")
_ASSISTANTS = re.compile(r"^/assistants(?:/[^/]+)?/?$")
_STATE = re.compile(r"^/threads/[^/]+/state/?$")
_THREADS = re.compile(r"^/threads/?$")


EXPOSED_HEADERS = ("x-pagination-total", "x-pagination-next", "content-location")
"""Response headers a page may read (as ``langgraph.json`` exposes them to Studio): the SDK pages thread lists."""


def allowed_origin(origin: str, host: str) -> bool:
    """Studio, or a page of this very server (same scheme-less host and port, on loopback)."""
    if origin == STUDIO_ORIGIN:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc == host and host_name(host) in LOOPBACK_HOSTS


def loopback_origin(origin: str) -> bool:
    """``http(s)://`` and a loopback host, any port or none: a page served on this machine."""
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return False
    host = parts.hostname or ""
    named = f"[{host}]" if ":" in host else host
    plain = f"{parts.scheme}://{parts.netloc}" == origin and not parts.username and not parts.password
    return parts.scheme in ("http", "https") and plain and named in LOOPBACK_HOSTS


def local_origin(origin: str, server: Any) -> bool:
    """Whether a page of ``origin`` on this machine may call the server, reached at ``server`` (ASGI ``server``).

    ``LONGDOC_DEV_ORIGINS`` lists the origins when set; unset, every loopback origin may when the request
    reached the server on a loopback address.
    """
    listed = get_settings().dev_origins
    if listed is not None:
        return origin in {o.strip().rstrip("/") for o in listed.split(",") if o.strip()}
    address = str(server[0]) if isinstance(server, list | tuple) and server else ""
    return loopback_origin(origin) and loopback_address(address)


class StudioGuard:
    """Origin, host, operator-settings and file checks for every request of ``langgraph dev`` (the module)."""

    def __init__(self, app: ASGIApp, titles: ThreadTitler | None = None, after_run: RunDone | None = None) -> None:
        """Guard ``app``; ``titles``, when given, names a thread by its first question (:func:`thread_title`).

        ``after_run``, when given, is called with the namespace of each run request once it is answered.
        """
        self.app = app
        self.titles = titles
        self.after_run = after_run
        self._files: IngestRoot | None = None

    @property
    def files(self) -> IngestRoot:
        """The ingest root, read on first use (when the server runs, on a worker thread: it touches the disk)."""
        if self._files is None:
            self._files = IngestRoot.from_env()
        return self._files

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an HTTP request as the class describes, then pass it on; pass other scopes through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope.get("root_path") != LOOPBACK_ROOT:  # the server's own in-process calls come from checked ones
            host = headers.get("host", "")
            if not answered_peer(scope.get("client"), scope.get("server")):  # the peer, not a header, says where
                await _answer(send, 403, "this development server answers this machine only (LONGDOC_DEV_CLIENTS)")
                return
            if host_name(host) not in LOOPBACK_HOSTS:
                await _answer(send, 403, "this development server answers requests for localhost only")
                return
            origin = headers.get("origin", "")
            local = bool(origin) and origin != STUDIO_ORIGIN and local_origin(origin, scope.get("server"))
            cross_site = headers.get("sec-fetch-site", "") == "cross-site"
            if (origin and not (local or allowed_origin(origin, host))) or (
                cross_site and not (local or origin == STUDIO_ORIGIN)
            ):
                await _answer(
                    send,
                    403,
                    f"this development server answers LangGraph Studio ({STUDIO_ORIGIN}) and pages of this machine "
                    "only (LONGDOC_DEV_ORIGINS)",
                )
                return
            if local:  # CORS for a page of this machine (Starlette's), before the server's own CORS (Studio's)
                app = CORSMiddleware(
                    self._checked,
                    allow_origins=[origin],
                    allow_methods=["*"],
                    allow_headers=["*"],
                    expose_headers=list(EXPOSED_HEADERS),
                )
                await app(scope, receive, send)
                return
        await self._checked(scope, receive, send)

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The body checks of a request whose host and origin passed, then the app."""
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            raw = await read_json_body(headers, receive, untyped=True)
            body = parse_body(raw)
        except Refused as exc:
            await _answer(send, exc.status, str(exc))
            return
        if not json_media_type(headers.get("content-type", "")):  # taken as JSON: so the server's parsers read it
            kept = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-type"]
            scope = {**scope, "headers": [*kept, (b"content-type", b"application/json")]}
        try:
            # On a worker thread: resolving a file name touches the disk (the dev server flags blocking calls).
            checked = await anyio.to_thread.run_sync(self.check, scope["path"], body)
        except InputError as exc:
            message = self.files.scrub(str(exc))
            rpc = _json_rpc(scope["path"], body)
            if rpc is not None:  # a tool's refusal, as MCP and A2A callers read one
                await _answer_rpc(send, rpc, message, body.get("id"))
            else:
                await _answer(send, exc.status, message)
            return
        named = thread_title(scope["path"], checked) if self.titles is not None else None
        if named is not None and self.titles is not None:
            try:
                await self.titles(*named)
            except Exception:  # a title is a courtesy: the turn goes on without one
                logger.warning("could not title thread %s", named[0], exc_info=True)
        if checked is not body:
            raw = json.dumps(checked).encode()
            scope = with_length(scope, raw)
        await self._pass_on(scope, receive, send, raw, checked)

    async def _pass_on(self, scope: Scope, receive: Receive, send: Send, raw: bytes, checked: Any) -> None:
        """Pass the checked request on; a run answered in it holds its namespaces as a reader meanwhile.

        Then ``after_run`` is called with each of them (:func:`stores.readers.reading`: no earlier version of a
        changed file is removed under a run answered in the request, with or without a thread).
        """
        runs = bool(_RUNS.match(scope["path"]))
        with contextlib.ExitStack() as held:
            for namespace in sorted(run_namespaces(checked)) if runs else []:
                with contextlib.suppress(InputError):  # not a namespace: the run itself refuses it
                    await anyio.to_thread.run_sync(held.enter_context, reading(namespace))
            await self.app(scope, replay_body(raw, receive), send)
        if self.after_run is not None and runs:
            for namespace in sorted(run_namespaces(checked)):
                try:
                    await self.after_run(namespace)
                except Exception:  # the run is answered: what follows it waits for the next one
                    logger.warning("after the run in namespace %r", namespace, exc_info=True)

    def check(self, path: str, body: Any) -> Any:
        """``body`` with its file names resolved in the ingest root (the same object when nothing changed).

        InputError for an operator setting, a file outside the root or a session.
        """
        if _RUNS.match(path):
            return [self._run(b) for b in body] if isinstance(body, list) else self._run(body)
        if _json_rpc(path, body) == "mcp" and body.get("method") == "tools/call":
            params = body["params"] if isinstance(body.get("params"), dict) else {}
            self._settings(params)
            if "arguments" not in params:
                return body
            return {**body, "params": {**params, "arguments": self._value(params["arguments"])}}
        if _json_rpc(path, body) == "a2a":
            params = body["params"] if isinstance(body.get("params"), dict) else {}
            self._settings(params)
            message = params["message"] if isinstance(params.get("message"), dict) else {}
            parts = [
                {**part, "data": self._value(part["data"])} if isinstance(part, dict) and "data" in part else part
                for part in message.get("parts") or []
            ]
            return {**body, "params": {**params, "message": {**message, "parts": parts}}} if parts else body
        if _ASSISTANTS.match(path) and isinstance(body, dict):
            self._settings(body)
            if ASSISTANT_PATH.match(path):
                check_assistant(body, context_fields)
            return body
        if _STATE.match(path) and isinstance(body, dict) and body.get("values") is not None:
            return {**body, "values": self._value(body["values"])}
        if _THREADS.match(path) and isinstance(body, dict) and body.get("supersteps"):
            steps = [
                {**step, "updates": [{**u, "values": self._value(u.get("values"))} for u in step.get("updates") or []]}
                for step in body["supersteps"]
                if isinstance(step, dict)
            ]
            return {**body, "supersteps": steps}
        return body

    def _run(self, body: Any) -> Any:
        if not isinstance(body, dict):
            return body
        self._settings(body)
        out = dict(body)
        if "input" in body:
            out["input"] = self._value(body["input"])
        command = body.get("command")
        if isinstance(command, dict) and command.get("update") is not None:
            out["command"] = {**command, "update": self._value(command["update"])}
        return out if out != body else body

    def _value(self, value: Any) -> Any:
        """An input or state update as the other servers take it: no ``session``, server files inside the root."""
        if isinstance(value, list):
            return [self._value(v) for v in value]
        if not isinstance(value, dict):
            return value
        refuse_server_inputs(value)
        check_attachments(value.get("messages"))
        named = {key: self.files.resolve(str(value[key])) for key in FILE_INPUTS if value.get(key)}
        return {**value, **named} if named else value

    @staticmethod
    def _settings(body: dict[str, Any]) -> None:
        config = body["config"] if isinstance(body.get("config"), dict) else {}
        for where, given in (("context", body.get("context")), ("configurable", config.get("configurable"))):
            if not isinstance(given, dict):
                continue
            check_finite(given, where)
            check_caller_settings(given, where)
            refused = sorted(set(given) & operator_fields())
            if refused:
                raise InputError(
                    f"{where} {', '.join(refused)} cannot be set by callers of this server: models, endpoints and "
                    "keys are the operator's (LONGDOC_* settings)"
                )


def run_namespaces(body: Any) -> set[str]:
    """The namespaces the run requests of ``body`` (one, or a batch's list) name: context, configurable or input."""
    out = set()
    for run in body if isinstance(body, list) else [body]:
        if not isinstance(run, dict):
            continue
        config = run["config"] if isinstance(run.get("config"), dict) else {}
        parts = (run.get("context"), config.get("configurable"), run.get("input"))
        named = [str(p["namespace"]) for p in parts if isinstance(p, dict) and p.get("namespace")]
        out.add(named[0] if named else "default")
    return out


def thread_title(path: str, body: Any) -> tuple[str, str] | None:
    """``(thread_id, title)`` for a run on a thread whose input is a chat message, else None.

    The title is the message's words (its text blocks), else the names of the files it attaches, cut to
    :data:`TITLE_CHARS` at a word: what a chat client's thread list shows instead of the thread's id.
    """
    match = _THREAD_RUN.match(path)
    given = body.get("input") if match and isinstance(body, dict) else None
    messages = given.get("messages") if isinstance(given, dict) else None
    if not isinstance(messages, list):
        return None
    human = [m for m in messages if isinstance(m, dict) and m.get("type", m.get("role")) in ("human", "user")]
    content = human[-1].get("content") if human else None
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    blocks = [b for b in blocks if isinstance(b, dict)]
    words = " ".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text").split()
    if not words:
        words = [_block_name(b) for b in blocks if b.get("type") == "file" and _block_name(b)]
    title = " ".join(words)
    if len(title) > TITLE_CHARS:
        title = title[: TITLE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return (str(match.group(1)), title) if match and title else None


def _block_name(block: dict[str, Any]) -> str:
    """The file name a chat client gives an attached file (``metadata`` or ``extras``), else ""."""
    for key in ("metadata", "extras"):
        holder = block.get(key)
        if isinstance(holder, dict) and holder.get("filename"):
            return str(holder["filename"])
    return ""


def _json_rpc(path: str, body: Any) -> str | None:
    """``mcp`` or ``a2a`` for a JSON-RPC request to the server's MCP or A2A route, else None."""
    if not isinstance(body, dict) or "jsonrpc" not in body:
        return None
    if path.rstrip("/") == "/mcp":
        return "mcp"
    return "a2a" if path.startswith("/a2a/") else None


async def _answer_rpc(send: Send, kind: str, message: str, request_id: Any = None) -> None:
    """A refused tool call: an MCP tool error, or an A2A invalid-params error (HTTP 200, as JSON-RPC answers)."""
    if kind == "mcp":
        result = {"result": {"content": [{"type": "text", "text": message}], "isError": True}}
    else:
        result = {"error": {"code": -32602, "message": message}}
    await _send_json(send, 200, {"jsonrpc": "2.0", "id": request_id, **result})


async def _answer(send: Send, status: int, message: str) -> None:
    await _send_json(send, status, {"detail": message})


async def _send_json(send: Send, status: int, value: Any) -> None:
    body = json.dumps(value).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
