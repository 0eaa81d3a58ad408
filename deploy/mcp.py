"""The five workflows as MCP tools (``/mcp``, streamable HTTP), on the scale-out deployment and on ``langgraph dev``.

Aegra 0.6 has no MCP route, so :mod:`deploy.app` mounts this one; ``langgraph dev`` has one whose
tool results are Python ``repr`` text and whose errors name the exception's type only, so
:mod:`deploy.dev` mounts this one there in its place (a custom route of ``langgraph.json`` comes
before the server's own). It is the ``mcp`` SDK's low-level server, served statelessly with JSON
responses (one request, one answer: any number of instances behind a load balancer).

- **Tools** are the workflows by the names users call them (:data:`surfaces.registry.WORKFLOWS`), each
  described by what it does and when to use it (:data:`surfaces.registry.DESCRIPTIONS`), its input
  schema the graph's, every field with its description, bounds and example. The SDK checks a call's
  arguments against it first ("Input validation error: ...").
- **A call** is a run on a new thread, made over this instance's own loopback address with the
  caller's key, so it passes the same checks as any run: on Aegra :class:`deploy.app.TenantGuard`
  (a key-less request gets 401 before it reaches this module; a foreign namespace 403, a server
  file outside ``LONGDOC_INGEST_ROOT`` 400) and Aegra's per-tenant threads.
- **The result** is JSON (structured content, and the same as text): the workflow's output, less what
  only its internals need (:data:`RESULT_FIELDS`). A refused or failed run is a tool error
  (``isError``) whose text is the reason, never a result.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from stores.cache import lru_cache
from stores.files import IngestRoot
from surfaces.access import presented_key
from surfaces.registry import DESCRIPTIONS, WORKFLOWS

RUN_TIMEOUT = 900.0
"""Most seconds a tool call waits for its run (the run's own deadline is ``LONGDOC_RUN_TIMEOUT``)."""

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
    ),
    "chat": ("answer", "sources", "citations", "turn", "doc_id", "session"),
}
"""The output fields a tool call returns, for the workflows whose output also serves their internals
(the reading tree and notes of ``ask``, a chat turn's memory report); the others return their whole output."""

FIRST = ("doc_id", "question", "query", "request", "requests", "text", "data", "filename", "length", "format")
"""The fields a tool's schema lists first, in this order: which document and what to do with it, the ones an
agent fills on almost every call (a small model fills the fields it sees first, examples and all)."""

REQUIRED: dict[str, tuple[str, ...]] = {"chat": ("question",)}
"""Fields a tool requires though its graph does not (a chat client may send a message instead of a question)."""

server: Server[Any, Any] = Server("longdoc")


@lru_cache(maxsize=8)
def input_schema(workflow: str) -> dict[str, Any]:
    """The workflow's input JSON schema as a tool's ``inputSchema`` (the chat transcript left to chat clients)."""
    from deploy import served

    schema = copy.deepcopy(getattr(served, workflow).get_input_jsonschema())
    properties = schema.get("properties", {})
    properties.pop("messages", None)
    order = [name for name in FIRST if name in properties] + [name for name in properties if name not in FIRST]
    schema["properties"] = {name: properties[name] for name in order}
    if "$defs" in schema and "$ref" not in json.dumps(schema.get("properties", {})):
        schema.pop("$defs")
    required = [*schema.get("required", []), *REQUIRED.get(workflow, ())]
    if required:
        schema["required"] = list(dict.fromkeys(required))
    schema["type"] = "object"
    return dict(schema)


def tools() -> list[types.Tool]:
    """The tools, in the order of :data:`surfaces.registry.WORKFLOWS`."""
    return [
        types.Tool(name=name, title=name, description=DESCRIPTIONS[name], inputSchema=input_schema(name))
        for name in WORKFLOWS
    ]


@server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
async def list_tools() -> list[types.Tool]:
    """List the tools this MCP server offers."""
    return tools()


def own_url(scope: Scope) -> str:
    """This instance's address from the socket the request came in on (never from the request's headers)."""
    host, port = scope["server"]
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"


def tool_result(workflow: str, output: Any) -> dict[str, Any]:
    """What a call of ``workflow`` returns of its run's ``output`` (:data:`RESULT_FIELDS`)."""
    if not isinstance(output, dict):
        return {"output": output}
    fields = RESULT_FIELDS.get(workflow)
    return dict(output) if fields is None else {k: output[k] for k in fields if k in output}


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


async def run_workflow(
    scope: Scope, headers: dict[str, str], assistant: str, value: dict[str, Any], thread: str = ""
) -> tuple[str, str, Any]:
    """Run ``assistant`` on ``thread`` (a new one when empty) with the caller's key: thread id, run id, output.

    Raises :class:`Refused` when the server refuses the run and :class:`Failed` when it fails.
    """
    from langgraph_sdk import get_client

    client = get_client(url=own_url(scope), api_key=presented_key(headers) or None, timeout=RUN_TIMEOUT)
    run_id = ""
    try:
        if not thread:
            thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, assistant, input=value)
        run_id = run["run_id"]
        output = await client.runs.join(thread, run_id)
        done = await client.runs.get(thread, run_id)
    except httpx.HTTPStatusError as exc:
        raise Refused(exc.response.status_code, reason(exc.response), thread) from None
    why = failure(output, dict(done))
    if why is not None:
        raise Failed(IngestRoot.from_env().scrub(why), thread, run_id)
    return thread, run_id, output


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


@server.call_tool()  # type: ignore[untyped-decorator]
async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run workflow ``name`` on a new thread with the caller's key: its result, or the reason it failed."""
    if name not in WORKFLOWS:
        raise ValueError(f"unknown tool {name!r}; tools: {', '.join(WORKFLOWS)}")
    request = server.request_context.request
    if request is None:
        raise RuntimeError("a tool call needs the HTTP request it came with")
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        _, _, output = await run_workflow(request.scope, headers, name, arguments)
    except Refused as exc:
        raise ValueError(str(exc)) from None
    except Failed as exc:
        raise ValueError(f"{name} failed: {exc}") from None
    return tool_result(name, output)


def reason(response: httpx.Response) -> str:
    """The error message of a failed response: its JSON message or detail, else its text."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    return str(body.get("message") or body.get("detail") or body) if isinstance(body, dict) else str(body)


class McpRoute:
    """The ASGI endpoint of ``/mcp``: each request is a stateless MCP exchange answered as JSON."""

    def __init__(self) -> None:
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve MCP while the app runs (its lifespan)."""
        self.manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
        async with self.manager.run():
            yield
        self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one MCP request through the session manager (only while the app runs)."""
        if self.manager is None:
            raise RuntimeError("the MCP route serves requests only while the app runs")
        await self.manager.handle_request(scope, receive, send)


route = McpRoute()
