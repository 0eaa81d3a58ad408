"""Routing graph (Agent-as-a-Graph): register a registry of agents and tools, then route requests.

``register`` reads the registry (a JSON file, inline JSON, or a name registered earlier in the
namespace; ``longdoc`` is built in), validates it and embeds it into the shared store, embedding
nothing when it is unchanged. ``route`` embeds the requests before it opens the store (a failing
embedder leaves the store untouched), embeds again any of the registry's records the store lost,
then runs vector (and optionally BM25) retrieval over agents and
tools, type-weighted reciprocal rank fusion and the walk to the top-K agents, for one request or a
batch. No chat model is involved unless asked for: with ``expand`` the router model writes a few
requests each tool serves at registration (once per tool, journalled by content hash in the
namespace, see :mod:`nodes.route.expansion`), and with ``decompose`` it splits each request
into its tasks before routing (one call per request), the tasks' agent lists fused with the
request's own.

Input: ``request`` or ``requests``, ``registry`` / ``registry_path`` / ``registry_data``, and
optional per-call ``k``, ``profile``, ``retrieval``, ``namespace``. Output: ``agents`` and
``tools`` (for a single request), ``results`` (one per request), and what registration did.
Progress of the embedding is streamed as custom events (``stream_mode="custom"``).

- :mod:`nodes.route.context`: ``RouteContext`` (the settings); :mod:`nodes.route.state`: the schemas;
- :mod:`nodes.route.router`: the ``register`` and ``route`` nodes;
- this module: the graph, ``register -> route``.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from nodes.route.context import RouteContext
from nodes.route.router import register_registry, route_requests
from nodes.route.state import RouteInput, RouteOutput, RouteState
from stores.models import model_retry

_retry = model_retry()

builder = StateGraph(RouteState, context_schema=RouteContext, input_schema=RouteInput, output_schema=RouteOutput)
builder.add_node("register", register_registry, retry_policy=_retry)
builder.add_node("route", route_requests, retry_policy=_retry)
builder.add_edge(START, "register")
builder.add_edge("register", "route")
builder.add_edge("route", END)

graph = builder.compile()
graph.name = "route"
