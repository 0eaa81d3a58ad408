"""The five workflows as MCP tools on the scale-out deployment (``/mcp``, streamable HTTP), behind the tenant guard.

Aegra 0.6 has no MCP route, so :mod:`deploy.app` mounts this one: the ``mcp`` SDK's low-level
server, served statelessly with JSON responses (one request, one answer: any number of
instances behind a load balancer). Tools are the built-in assistants, their input schemas those
of the graphs. A tool call is a run on a new thread of this instance, made over its own loopback
address with the caller's key, so it passes the same checks as any run: :class:`deploy.app.TenantGuard`
(a key-less request gets 401 before it reaches this module; a foreign namespace 403, a server
file outside ``LONGDOC_INGEST_ROOT`` 400) and Aegra's per-tenant threads. A refused or failed run
is a tool error (``isError``) with the reason, never a result.
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
from surfaces.access import presented_key

DESCRIPTIONS = {
    "ingest": "Ingest a document (text, or base64 data with its filename) into your namespace; returns its doc_id.",
    "chain": "Answer a question about an ingested document (doc_id) with a chain of worker agents; a cited answer.",
    "summarize": "Summarize an ingested document (doc_id) with an editor questioning expert agents; cited.",
    "offload": "Ask one question about an ingested document (doc_id) in a chat session with a small working memory.",
    "route": "Pick the agents and tools that fit a request among those of a registry.",
}
"""The tools, in the order they are listed."""

RUN_TIMEOUT = 900.0
"""Most seconds a tool call waits for its run (the run's own deadline is ``LONGDOC_RUN_TIMEOUT``)."""

server: Server[Any, Any] = Server("longdoc")


@lru_cache(maxsize=8)
def input_schema(workflow: str) -> dict[str, Any]:
    """The workflow's input JSON schema as a tool's ``inputSchema`` (the chat transcript left to chat clients)."""
    from deploy import served

    schema = copy.deepcopy(getattr(served, workflow).get_input_jsonschema())
    schema.get("properties", {}).pop("messages", None)
    if "$defs" in schema and "$ref" not in json.dumps(schema.get("properties", {})):
        schema.pop("$defs")
    schema["type"] = "object"
    return dict(schema)


@server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
async def list_tools() -> list[types.Tool]:
    return [
        types.Tool(name=name, description=text, inputSchema=input_schema(name)) for name, text in DESCRIPTIONS.items()
    ]


def own_url(scope: Scope) -> str:
    """This instance's address from the socket the request came in on (never from the request's headers)."""
    host, port = scope["server"]
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"


@server.call_tool()  # type: ignore[untyped-decorator]
async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run workflow ``name`` on a new thread with the caller's key; its output, or the reason it failed."""
    from langgraph_sdk import get_client

    if name not in DESCRIPTIONS:
        raise ValueError(f"unknown tool {name!r}; tools: {', '.join(DESCRIPTIONS)}")
    request = server.request_context.request
    if request is None:
        raise RuntimeError("a tool call needs the HTTP request it came with")
    headers = {k.lower(): v for k, v in request.headers.items()}
    client = get_client(url=own_url(request.scope), api_key=presented_key(headers), timeout=RUN_TIMEOUT)
    try:
        thread = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread, name, input=arguments)
        output = await client.runs.join(thread, run["run_id"])
        done = await client.runs.get(thread, run["run_id"])
    except httpx.HTTPStatusError as exc:
        raise ValueError(f"refused ({exc.response.status_code}): {reason(exc.response)}") from None
    if done.get("status") != "success":
        raise ValueError(f"{name} failed: {done.get('error_message') or done.get('status')}")
    return dict(output) if isinstance(output, dict) else {"output": output}


def reason(response: httpx.Response) -> str:
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
        if self.manager is None:
            raise RuntimeError("the MCP route serves requests only while the app runs")
        await self.manager.handle_request(scope, receive, send)


route = McpRoute()
