"""The five workflows as MCP tools (``/mcp``, streamable HTTP), on the scale-out deployment and on ``langgraph dev``.

Aegra 0.6 has no MCP route, so :mod:`deploy.app` mounts this one; ``langgraph dev`` has one whose
tool results are Python ``repr`` text and whose errors name the exception's type only, so
:mod:`deploy.dev` mounts this one there in its place (a custom route of ``langgraph.json`` comes
before the server's own). It is the ``mcp`` SDK's low-level server, served statelessly (one request,
one answer: any number of instances behind a load balancer), as JSON, or as server-sent events when a
call asks for progress.

- **Tools** are the workflows by the names users call them (:data:`surfaces.registry.WORKFLOWS`), each
  described by what it does, when to use it and how to name one document or several as a collection
  (``doc_ids``, a folder ``path``, ``whole_namespace``: :data:`surfaces.registry.DESCRIPTIONS`), and
  ``documents``, the documents of the caller's namespace. A tool's input schema is the graph's, every
  field with its description, bounds and example, and no other field (``additionalProperties: false``):
  an unknown argument is a tool error naming the ones the tool takes, sent before any run. Its output
  schema is what its result holds (:func:`output_schema`); its annotations say which tools only read
  (:data:`ANNOTATIONS`).
- **A call** is a run on a new thread, made over this instance's own loopback address with the
  caller's key, so it passes the same checks as any run: on Aegra :class:`deploy.app.TenantGuard`
  (a key-less request gets 401 before it reaches this module; a foreign namespace 403, a server
  file outside ``LONGDOC_INGEST_ROOT`` 400) and Aegra's per-tenant threads. A ``chat`` call goes on
  with a conversation when it passes back the ``thread_id`` an earlier one returned.
- **Progress.** A call whose request carries a ``progressToken`` gets a progress notification as each
  step of its run finishes (reading, drawing the map, ingesting N of M chunks): the graph's
  ``updates`` and ``custom`` stream (:func:`progress_message`).
- **The result** is JSON (structured content, and the same as text): the workflow's output, less what
  only its internals need (:func:`output_schema`). A refused or failed run is a tool error
  (``isError``) whose text is the reason, never a result.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import anyio
import httpx
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from stores.cache import lru_cache
from stores.errors import InputError
from stores.files import IngestRoot
from stores.status import progress_line
from surfaces.access import MAX_THREAD_ID_CHARS, max_request_bytes, presented_key, read_body, replay_body
from surfaces.disconnect import while_caller_stays
from surfaces.registry import DESCRIPTIONS, WORKFLOWS

RUN_TIMEOUT = 900.0
"""Most seconds a tool call waits for its run (the run's own deadline is ``LONGDOC_RUN_TIMEOUT``)."""

DOCUMENTS = "documents"
"""The tool that lists the caller's documents (not a workflow: no run)."""

TOOLS = (*WORKFLOWS, DOCUMENTS)
"""Every tool, in the order they are listed."""

RESULT_FIELDS: dict[str, tuple[str, ...]] = {
    "ask": (
        "answer",
        "explanation",
        "sources",
        "quotes",
        "citations",
        "inferred",
        "stopped",
        "read",
        "skipped",
        "calls",
        "doc_id",
        "documents",
    ),
    "chat": ("answer", "asked", "sources", "citations", "turn", "doc_id", "documents", "thread_id"),
}
"""The output fields a tool call returns, for the workflows whose output also serves their internals
(the reading tree and notes of ``ask``, a chat turn's memory report); the others return their output's fields."""

RESULT_REQUIRED: dict[str, tuple[str, ...]] = {
    "ingest": ("chunks", "cached", "documents", "superseded"),
    "ask": ("answer", "citations", "quotes"),
    "summarize": ("summary",),
    "chat": ("answer", "citations", "turn", "thread_id"),
    "route": ("agents", "tools"),
    DOCUMENTS: ("namespace", "documents"),
}
"""The fields every successful call's result holds."""

FIRST = ("doc_id", "question", "query", "request", "requests", "text", "data", "filename", "length", "format")
"""The fields a tool's schema lists first, in this order: which document and what to do with it, the ones an
agent fills on almost every call (a small model fills the fields it sees first, examples and all)."""

REQUIRED: dict[str, tuple[str, ...]] = {"chat": ("question",)}
"""Fields a tool requires though its graph does not (a chat client may send a message instead of a question)."""

THREAD_ID: dict[str, Any] = {
    "type": "string",
    "description": "The conversation to go on with: the thread_id an earlier chat call returned (omit it to start "
    "a new conversation, naming its document by doc_id, or a collection by doc_ids, a folder path or "
    "whole_namespace). A later turn naming none keeps the conversation's documents; one naming others reads those.",
    "examples": ["5f0c7c1e-2b8a-4a59-9a63-2f1d1a2b3c4d"],
    "minLength": 1,
    "maxLength": MAX_THREAD_ID_CHARS,
    "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
}
"""The ``chat`` tool's conversation: in as an argument, out in the result."""

NAMESPACE: dict[str, Any] = {
    "type": "string",
    "description": "Namespace whose documents to list (default: the caller's own; on a server with keys, one of "
    "the key's namespaces).",
    "examples": ["team1"],
    "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$",
}

DOCUMENT_ROW: dict[str, Any] = {
    "type": "object",
    "properties": {
        "doc_id": {"type": "string", "description": "The id to name the document by in ask, summarize and chat."},
        "title": {"type": "string"},
        "words": {"type": "integer"},
        "chunks": {"type": "integer"},
        "ingested_at": {"type": "string", "description": "When it was ingested (UTC, ISO 8601)."},
    },
    "required": ["doc_id", "title"],
}

DOCUMENTS_DESCRIPTION = (
    "List the documents ingested in your namespace: each one's doc_id, title, words, chunks and when it was "
    "ingested. Use it to find the doc_id of a document to ask, summarize or chat about, or the doc_ids of "
    "several to read as one collection (or pass whole_namespace: true for all of them); nothing is read or run."
)

TITLES = {
    "ingest": "Ingest a document or a folder",
    "ask": "Ask a document or a collection",
    "summarize": "Summarize a document or a collection",
    "chat": "Chat about a document or a collection",
    "route": "Route a request to agents and tools",
    DOCUMENTS: "List documents",
}

_READS = types.ToolAnnotations(readOnlyHint=True, openWorldHint=False)
ANNOTATIONS: dict[str, types.ToolAnnotations] = {
    "ingest": types.ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False),
    "ask": _READS,
    "summarize": _READS,
    "chat": types.ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False),
    "route": _READS,
    DOCUMENTS: _READS,
}
"""What each tool does to the caller's world: ``ingest`` adds a document (the same content again adds nothing; a
changed file replaces its earlier version, which is removed),
``chat`` adds a turn to a conversation, the others only read."""

STEPS = {
    "ingest": "document ingested",
    "orderer": "passages ordered",
    "planner": "reading planned",
    "worker": "passages read",
    "manager": "answer written",
    "prepare": "document prepared",
    "overview": "overview read",
    "questions": "questions asked",
    "expert": "passages read by an expert",
    "merge": "answers merged",
    "polish": "summary polished",
    "map_reduce": "parts summarized",
    "refine": "summary refined",
    "fit_length": "length fitted",
    "factcheck": "sentences checked",
    "finish": "summary finished",
    "begin": "message taken",
    "refuse": "message answered",
    "canvas": "map of the document drawn",
    "retrieve": "passages found",
    "answer": "answer written",
    "recall": "earlier turns recalled",
    "offload": "turn put away",
    "register": "registry loaded",
    "route": "agents ranked",
}
"""What a run has done when a node of its graph finishes: the progress notifications' words."""


def product_version() -> str:
    """The installed longdoc's version, which MCP clients are told (``0+unknown`` in a tree not installed)."""
    try:
        return importlib.metadata.version("longdoc")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


server: Server[Any, Any] = Server("longdoc", version=product_version())

Progress = Callable[[str], Awaitable[None]]


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    schema["type"] = "object"
    schema["additionalProperties"] = False
    return schema


@lru_cache(maxsize=8)
def input_schema(tool: str) -> dict[str, Any]:
    """The tool's input JSON schema (a workflow's: its graph's, less the chat transcript), with no other field."""
    from deploy import served

    if tool == DOCUMENTS:
        return _strict({"properties": {"namespace": NAMESPACE}})
    schema = copy.deepcopy(getattr(served, tool).get_input_jsonschema())
    properties = schema.get("properties", {})
    properties.pop("messages", None)
    if tool == "chat":
        properties["thread_id"] = THREAD_ID
    order = [name for name in FIRST if name in properties] + [name for name in properties if name not in FIRST]
    schema["properties"] = {name: properties[name] for name in order}
    if "$defs" in schema and "$ref" not in json.dumps(schema.get("properties", {})):
        schema.pop("$defs")
    required = [*schema.get("required", []), *REQUIRED.get(tool, ())]
    if required:
        schema["required"] = list(dict.fromkeys(required))
    return _strict(dict(schema))


@lru_cache(maxsize=8)
def output_schema(tool: str) -> dict[str, Any]:
    """The tool's result as a JSON schema: the fields of its graph's output it returns (:data:`RESULT_FIELDS`)."""
    from deploy import served

    graph: dict[str, Any] = {}
    if tool == DOCUMENTS:
        documents = {"type": "array", "items": DOCUMENT_ROW, "description": "The documents, oldest first."}
        properties: dict[str, Any] = {"namespace": {"type": "string"}, "documents": documents}
    else:
        graph = getattr(served, tool).get_output_jsonschema()
        properties = {k: v for k, v in graph.get("properties", {}).items() if k != "messages"}
        fields = RESULT_FIELDS.get(tool)
        if fields is not None:
            properties = {k: properties[k] for k in fields if k in properties}
        if tool == "chat":
            properties["thread_id"] = {**THREAD_ID, "description": "The conversation: pass it back to go on."}
    required = [name for name in RESULT_REQUIRED.get(tool, ()) if name in properties]
    schema = {"type": "object", "properties": properties, "required": required}
    if "$defs" in graph and "$ref" in json.dumps(properties):  # the types its fields name (an ingest's documents)
        schema["$defs"] = graph["$defs"]
    return schema


def tools() -> list[types.Tool]:
    """The tools: the workflows in the order of :data:`surfaces.registry.WORKFLOWS`, then ``documents``."""
    return [
        types.Tool(
            name=name,
            title=TITLES[name],
            description=DOCUMENTS_DESCRIPTION if name == DOCUMENTS else DESCRIPTIONS[name],
            inputSchema=input_schema(name),
            outputSchema=output_schema(name),
            annotations=ANNOTATIONS[name],
        )
        for name in TOOLS
    ]


@server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
async def list_tools() -> list[types.Tool]:
    """List the tools this MCP server offers."""
    return tools()


def own_url(scope: Scope) -> str:
    """This instance's address from the socket the request came in on (never from the request's headers)."""
    host, port = scope["server"]
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"


def tool_result(workflow: str, output: Any, thread: str = "") -> dict[str, Any]:
    """What a call of ``workflow`` returns of its run's ``output``: the fields of :func:`output_schema`."""
    if not isinstance(output, dict):
        return {"output": output}
    values = {**output, "thread_id": thread} if workflow == "chat" else output
    return {k: values[k] for k in output_schema(workflow)["properties"] if k in values}


def unknown_arguments(tool: str, arguments: dict[str, Any]) -> str | None:
    """Why a call's arguments are refused when it names one the tool does not take (None when it names none)."""
    if tool not in TOOLS:
        return None
    properties = input_schema(tool)["properties"]
    unknown = [name for name in arguments if name not in properties]
    if not unknown:
        return None
    hint = " (a conversation goes on with thread_id)" if tool == "chat" and "session" in unknown else ""
    return f"{tool} does not take {', '.join(map(repr, unknown))}{hint}; its arguments: {', '.join(properties)}"


def failure(output: Any, run: dict[str, Any]) -> str | None:
    """Why a run failed, as its error says (None when it succeeded).

    ``langgraph dev`` gives a failed run's output as ``{"__error__": {"error": type, "message": reason}}``,
    Aegra its ``error_message``; the reason is what a caller can act on, so it comes first.
    """
    error = output.get("__error__") if isinstance(output, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("error") or "the run failed")
    if run.get("status") not in (None, "success"):
        return str(run.get("error_message") or f"the run ended as {run.get('status')}")
    return None


def progress_message(event: str, data: Any) -> str:
    """What a run's ``updates`` or ``custom`` stream event says it has done ('' for nothing to report)."""
    if not isinstance(data, dict):
        return ""
    if event.startswith("updates"):
        return "; ".join(STEPS[node] for node in data if node in STEPS)
    if event.startswith("custom"):
        return progress_line(data)
    return ""


QUEUED: Literal["enqueue"] = "enqueue"
"""How the tools' runs take their thread: they wait for a run holding it (the guard's ``multitask_strategy``)."""


async def run_workflow(
    scope: Scope,
    headers: dict[str, str],
    assistant: str,
    value: dict[str, Any],
    thread: str = "",
    progress: Progress | None = None,
) -> tuple[str, str, Any]:
    """Run ``assistant`` on ``thread`` (a new one when empty) with the caller's key: thread id, run id, output.

    The run is streamed (``on_disconnect: cancel``), and with ``progress`` each step's news is awaited on it. When
    the caller leaves, the stream is closed and the server stops the run
    (:func:`surfaces.disconnect.while_caller_stays`).
    Raises :class:`Refused` when the server refuses the run and :class:`Failed` when it fails. The run waits for its
    thread (``enqueue``) rather than being refused: a caller going on with a conversation may call again while the
    server still frees the thread from the turn it has just answered.
    """
    from langgraph_sdk import get_client

    client = get_client(url=own_url(scope), api_key=presented_key(headers) or None, timeout=RUN_TIMEOUT)
    try:
        if not thread:
            thread = (await client.threads.create())["thread_id"]
        run_id, output = await while_caller_stays(lambda: stream_run(client, thread, assistant, value, progress))
    except httpx.HTTPStatusError as exc:
        raise Refused(exc.response.status_code, reason(exc.response), thread) from None
    why = failure(output, {})
    if why is not None:
        raise Failed(IngestRoot.from_env().scrub(why), thread, run_id)
    return thread, run_id, output


def run_failed(data: Any, thread: str, run_id: str) -> Failed:
    """What a run's ``error`` stream event says, as :class:`Failed` (server paths scrubbed from its reason)."""
    fields = data if isinstance(data, dict) else {"message": str(data)}
    why = str(fields.get("message") or fields.get("error") or "the run failed")
    return Failed(IngestRoot.from_env().scrub(why), thread, run_id)


async def stream_run(
    client: Any, thread: str, assistant: str, value: dict[str, Any], progress: Progress | None = None
) -> Any:
    """Stream a run on ``thread``, telling ``progress`` (when given) what each step did: its run id and output."""
    run_id, output = "", None
    modes = ["values"] if progress is None else ["updates", "custom", "values"]
    async for part in client.runs.stream(
        thread, assistant, input=value, stream_mode=modes, multitask_strategy=QUEUED, on_disconnect="cancel"
    ):
        if part.event == "metadata":
            run_id = run_id or str((part.data or {}).get("run_id") or "")
        elif part.event == "values":
            output = part.data
        elif part.event == "error":
            raise run_failed(part.data, thread, run_id)
        elif progress is not None:
            said = progress_message(part.event, part.data)
            if said:
                await progress(said)
    return run_id, output


class Refused(Exception):
    """The server refused the run (its HTTP status and reason)."""

    def __init__(self, status: int, why: str, thread: str = "") -> None:
        super().__init__(f"refused ({status}): {why}")
        self.status, self.thread = status, thread


class Failed(Exception):
    """The run started and failed (its reason)."""

    def __init__(self, why: str, thread: str, run_id: str) -> None:
        super().__init__(why)
        self.thread, self.run_id = thread, run_id


def list_documents(headers: dict[str, str], namespace: str) -> dict[str, Any]:
    """The ``documents`` tool: the documents of one of the caller's namespaces (the key's first by default)."""
    from surfaces.access import load_keyring
    from surfaces.listing import served_listing

    tenant = load_keyring().tenant_of(headers)
    if tenant is None:
        raise ValueError("refused (401): a valid API key is required")
    try:
        return served_listing(tenant, namespace)
    except (PermissionError, InputError) as exc:
        status = 403 if isinstance(exc, PermissionError) else 400
        raise ValueError(f"refused ({status}): {exc}") from None


def progress_reporter() -> Progress | None:
    """What sends the current call's progress notifications (None when its request gave no ``progressToken``)."""
    context = server.request_context
    token = context.meta.progressToken if context.meta is not None else None
    if token is None:
        return None
    steps = 0

    async def report(message: str) -> None:
        nonlocal steps
        steps += 1
        await context.session.send_progress_notification(token, steps, None, message, str(context.request_id))

    return report


@server.call_tool()  # type: ignore[untyped-decorator]
async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run workflow ``name`` with the caller's key (a chat on its ``thread_id``): its result, or why it failed."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")
    request = server.request_context.request
    if request is None:
        raise RuntimeError("a tool call needs the HTTP request it came with")
    headers = {k.lower(): v for k, v in request.headers.items()}
    if name == DOCUMENTS:
        return await anyio.to_thread.run_sync(list_documents, headers, str(arguments.get("namespace") or ""))
    value = {k: v for k, v in arguments.items() if k != "thread_id"}
    try:
        thread, _, output = await run_workflow(
            request.scope, headers, name, value, str(arguments.get("thread_id") or ""), progress_reporter()
        )
    except Refused as exc:
        raise ValueError(str(exc)) from None
    except Failed as exc:
        raise ValueError(f"{name} failed: {exc}") from None
    return tool_result(name, output, thread)


_checked_call = server.request_handlers[types.CallToolRequest]


async def _call_with_known_arguments(request: types.CallToolRequest) -> types.ServerResult:
    """A call naming an argument its tool does not take is refused with the tool's arguments, else served.

    The SDK checks arguments against the schema first, but its words for an unknown one do not say what the
    tool takes instead.
    """
    why = unknown_arguments(request.params.name, request.params.arguments or {})
    if why is None:
        return await _checked_call(request)
    return types.ServerResult(types.CallToolResult(content=[types.TextContent(type="text", text=why)], isError=True))


server.request_handlers[types.CallToolRequest] = _call_with_known_arguments


def reason(response: httpx.Response) -> str:
    """The error message of a failed response: its JSON message or detail, else its text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    return str(body.get("message") or body.get("detail") or body) if isinstance(body, dict) else str(body)


def asks_progress(body: bytes) -> bool:
    """Whether a JSON-RPC request body asks for progress notifications (``params._meta.progressToken``)."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


class McpRoute:
    """The ASGI endpoint of ``/mcp``: each request a stateless MCP exchange, as JSON or, for progress, as events.

    The SDK's session manager answers either as JSON or as events for every request; a call that asks for
    progress needs events, any other is one JSON answer, so there is one manager of each.
    """

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None
        self.events: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve MCP while the app runs (its lifespan)."""
        self.manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
        self.events = StreamableHTTPSessionManager(app=server, json_response=False, stateless=True)
        async with self.manager.run(), self.events.run():
            yield
        self.manager = self.events = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one MCP request through the session manager (only while the app runs)."""
        if self.manager is None or self.events is None:
            raise RuntimeError("the MCP route serves requests only while the app runs")
        manager = self.manager
        if scope.get("method") == "POST":
            limit = max_request_bytes()
            body = await read_body(receive, limit)
            if body is None:
                await JSONResponse({"error": "refused", "message": f"request body over {limit} bytes"}, 413)(
                    scope, receive, send
                )
                return
            receive = replay_body(body, receive)
            manager = self.events if asks_progress(body) else self.manager
        await manager.handle_request(scope, receive, send)


route = McpRoute()
