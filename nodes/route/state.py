"""Input, output and state of the route workflow."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict


class RouteInput(TypedDict):
    """What to route, and over which registry."""

    request: NotRequired[str]
    """One request to route."""
    requests: NotRequired[list[str]]
    """Several requests to route in one batch (instead of ``request``)."""
    registry: NotRequired[str]
    """Registry name: registered earlier in the namespace, or the name to register ``registry_path`` under."""
    registry_path: NotRequired[str]
    """JSON file of agents and tools (MCP servers format) to register and route over."""
    registry_data: NotRequired[Any]
    """The same JSON inline (a list of agents, or an object with ``agents``); dropped once registered."""
    k: NotRequired[int]
    """How many agents to return (default: the context's)."""
    profile: NotRequired[str]
    """Weight profile (default: the context's)."""
    retrieval: NotRequired[str]
    """vector, hybrid or bm25 (default: the context's)."""
    namespace: NotRequired[str]
    """Namespace of the store (default: the context's)."""


class RouteOutput(TypedDict):
    """The routing, and what registration did."""

    agents: list[dict[str, Any]]
    """Top-K agents of a single request: ``{name, score, tools, via}`` (empty for a batch)."""
    tools: list[dict[str, Any]]
    """Top tools of a single request: ``{name, agent, score}`` (empty for a batch)."""
    results: list[dict[str, Any]]
    """One ``{request, agents, tools}`` per request, in input order."""
    registry: NotRequired[str]
    """Name of the registry routed over."""
    registry_hash: str
    """Content hash of that registry."""
    embedded: int
    """How many agent and tool records were embedded by this run (0 when the registry was unchanged)."""
    cached: bool
    """True when the registry was already registered as is."""
    warnings: list[str]
    """Problems found in the registry that were worked around (duplicates kept once, orphan tools left out)."""
    expansion: NotRequired[dict[str, Any]]
    """What writing the tools' examples did (model calls, tokens, entries from the journal), with ``expand``."""
    tasks: NotRequired[list[list[str]]]
    """With ``decompose``: the tasks each request was split into (itself alone when it asks for one thing)."""


class RouteState(RouteInput, RouteOutput, total=False):
    """Private state of the routing graph."""
