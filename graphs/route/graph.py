"""Routing graph (Agent-as-a-Graph): register a registry of agents and tools, then route requests.

``register`` reads the registry (a JSON file, inline JSON, or a name registered earlier in the
namespace; ``longdoc`` is built in), validates it and embeds it into the shared store, embedding
nothing when it is unchanged. ``route`` runs vector (and optionally BM25) retrieval over agents and
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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graphs.context import Context
from nodes.route.entry import check_requests, route
from nodes.route.fusion import AGGREGATES, DEFAULT_PROFILE, PROFILES, RETRIEVALS, RouteSettings
from nodes.route.manifest import register, registered
from nodes.route.mcp import load_registry, parse_registry
from nodes.route.model import BUILTIN_REGISTRY, check_registry_name
from stores.models import model_retry
from stores.settings import InputError, get_settings
from stores.vectorstore import get_store

_DEFAULTS = RouteSettings()


def _describe(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class RouteContext(Context):
    """Settings of a routing run."""

    registry: str = field(
        default_factory=lambda: get_settings().route_registry or BUILTIN_REGISTRY,
        metadata=_describe("Registered registry to route over when the input names none (built in: longdoc)."),
    )
    k: int = field(default=5, metadata=_describe("How many agents to return (K)."))
    candidates_factor: int = field(
        default=10, metadata=_describe("N = candidates_factor x K agents and tools fetched by each retriever.")
    )
    rrf_k: float = field(
        default=_DEFAULTS.rrf_k, metadata=_describe("Smoothing constant k of reciprocal rank fusion (write-up: 60).")
    )
    profile: str = field(
        default_factory=lambda: get_settings().route_profile or DEFAULT_PROFILE,
        metadata=_describe(
            "Named agent:tool weight profile: " + ", ".join(f"{n} {a:g}:{t:g}" for n, (a, t) in PROFILES.items())
        ),
    )
    agent_weight: float | None = field(
        default=None, metadata=_describe("Weight of agent lists in the fusion (empty: the profile's).")
    )
    tool_weight: float | None = field(
        default=None, metadata=_describe("Weight of tool lists in the fusion (empty: the profile's).")
    )
    retrieval: str = field(
        default_factory=lambda: get_settings().route_retrieval or _DEFAULTS.retrieval,
        metadata=_describe("hybrid (vector + BM25 lists fused, BM25 on), vector (BM25 off), or bm25 (BM25 only)."),
    )
    aggregate: str = field(
        default=_DEFAULTS.aggregate,
        metadata=_describe(
            "How an agent is scored: sum (its node plus its best tool node) or first (the first node reaching it "
            "in the fused list, the write-up's walk)."
        ),
    )
    bm25_weight: float = field(
        default=1.0, metadata=_describe("Weight of the BM25 lists relative to the vector lists (hybrid).")
    )
    fusion: str = field(
        default=_DEFAULTS.fusion,
        metadata=_describe(
            "How the candidate lists are fused: rrf (reciprocal ranks, weighted) or minmax (each list's scores "
            "scaled to 0-1, weighted and summed)."
        ),
    )
    entity_weight: float = field(
        default=_DEFAULTS.entity_weight,
        metadata=_describe(
            "Weight of the lists of tools whose input parameters take a kind of value the request carries (a file "
            "path, URL, domain, e-mail address, quantity, date or time, code, repository; 0: off)."
        ),
    )
    clause_weight: float = field(
        default=_DEFAULTS.clause_weight,
        metadata=_describe(
            "Weight of each clause's own retrieval lists when a request has several clauses (sentences, 'then' "
            "joints; one more query embedding per clause; 0: off)."
        ),
    )
    bm25_fields: tuple[float, ...] | None = field(
        default=_DEFAULTS.bm25_fields,
        metadata=_describe(
            "BM25 field weights (name, description, parameter names, examples) scored apart; empty: one joint "
            "document per node."
        ),
    )
    index: str = field(
        default=_DEFAULTS.index,
        metadata=_describe(
            "Where vector search runs: store (Chroma) or memory (the registry's vectors read from Chroma once per "
            "process; faster for large registries in a busy namespace)."
        ),
    )
    evidence_tools: int = field(default=3, metadata=_describe("Matched tools listed per agent as evidence."))
    top_tools: int = field(default=10, metadata=_describe("How many top tools to return."))
    expand: bool = field(
        default_factory=lambda: get_settings().route_expand,
        metadata=_describe(
            "Have the router model write example requests for every tool and agent of a registry given as a file "
            "or inline when it is registered (once per tool: kept by content hash, resumable), embedded as more "
            "vectors of their node."
        ),
    )
    decompose: bool = field(
        default_factory=lambda: get_settings().route_decompose,
        metadata=_describe("Split each request into its tasks with one router-model call, route each, fuse the lists."),
    )


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


def _requests(state: RouteState) -> list[str]:
    if state.get("request") is not None and state.get("requests") is not None:
        raise InputError("give either request or requests, not both")
    if state.get("requests") is not None:
        return check_requests(state["requests"])
    return check_requests([state.get("request") or ""])


def register_registry(state: RouteState, runtime: Runtime[RouteContext]) -> dict[str, Any]:
    """Validate the requests, read the registry and make sure it is embedded in the store."""
    ctx = runtime.context or RouteContext()
    _requests(state)
    namespace = state.get("namespace") or ctx.namespace
    name = state.get("registry")
    if name is not None:
        check_registry_name(name)
    if state.get("registry_path") and state.get("registry_data") is not None:
        raise InputError("give either registry_path or registry_data, not both")
    if state.get("registry_path"):
        registry = load_registry(state["registry_path"], name)
    elif state.get("registry_data") is not None:
        registry = parse_registry(state["registry_data"], name or "inline")
    else:
        registry = registered(namespace, name or ctx.registry)
    update: dict[str, Any] = {}
    if ctx.expand and (state.get("registry_path") or state.get("registry_data") is not None):
        registry, stats = _expand(registry, namespace, ctx, runtime.stream_writer)
        update["expansion"] = stats.to_dict()
    result = register(registry, get_store(namespace, ctx.embedder), progress=runtime.stream_writer)
    runtime.stream_writer(
        {"stage": "registry", "message": f"registry {registry.name}: {result.agents} agents, {result.tools} tools"}
    )
    return {
        "namespace": namespace,
        "registry": registry.name,
        "registry_hash": result.content_hash,
        "registry_data": None,
        "embedded": result.embedded,
        "cached": result.cached,
        "warnings": result.warnings,
        **update,
    }


def _expand(registry: Any, namespace: str, ctx: RouteContext, progress: Any) -> tuple[Any, Any]:
    from nodes.route.expansion import expand_registry, journal_for, model_id
    from stores.models import llm_for

    llm = llm_for("router", ctx)
    return expand_registry(registry, journal_for(namespace), llm, model_id=model_id(llm), progress=progress)


def route_requests(state: RouteState, runtime: Runtime[RouteContext]) -> dict[str, Any]:
    """Retrieve, fuse and walk for every request."""
    ctx = runtime.context or RouteContext()
    requests = _requests(state)
    registry = registered(state["namespace"], state["registry"])
    if registry.content_hash != state.get("registry_hash"):
        raise InputError(f"registry {registry.name!r} changed while routing; run again")
    settings = RouteSettings.from_profile(
        state.get("profile") or ctx.profile,
        k=ctx.k if state.get("k") is None else state["k"],
        candidates_factor=ctx.candidates_factor,
        rrf_k=ctx.rrf_k,
        agent_weight=ctx.agent_weight,
        tool_weight=ctx.tool_weight,
        retrieval=state.get("retrieval") or ctx.retrieval,
        bm25_weight=ctx.bm25_weight,
        evidence=ctx.evidence_tools,
        top_tools=ctx.top_tools,
        aggregate=ctx.aggregate,
        index=ctx.index,
        fusion=ctx.fusion,
        entity_weight=ctx.entity_weight,
        clause_weight=ctx.clause_weight,
        bm25_fields=ctx.bm25_fields,
    )
    store = get_store(state["namespace"], ctx.embedder)
    update: dict[str, Any] = {}
    if ctx.decompose:
        routed, update["tasks"] = _decomposed(requests, registry, store, settings, ctx)
    else:
        routed = route(requests, registry, store, settings)
    results = [r.to_dict() for r in routed]
    single = len(results) == 1 and state.get("requests") is None
    return {
        "results": results,
        "agents": results[0]["agents"] if single else [],
        "tools": results[0]["tools"] if single else [],
        **update,
    }


def _decomposed(
    requests: list[str], registry: Any, store: Any, settings: RouteSettings, ctx: RouteContext
) -> tuple[list[Any], list[list[str]]]:
    """Each request routed with its tasks (one router-model call each), the lists fused."""
    from nodes.route.entry import merge_routes
    from nodes.route.expansion import decompose
    from stores.models import llm_for

    llm = llm_for("router", ctx)
    routed, tasks_of = [], []
    for request in requests:
        tasks = decompose(request, llm)
        tasks = [t for t in tasks if t != request]
        parts = route([request, *tasks], registry, store, settings)
        routed.append(merge_routes(request, parts, settings))
        tasks_of.append(tasks or [request])
    return routed, tasks_of


_retry = model_retry()

builder = StateGraph(RouteState, context_schema=RouteContext, input_schema=RouteInput, output_schema=RouteOutput)
builder.add_node("register", register_registry, retry_policy=_retry)
builder.add_node("route", route_requests, retry_policy=_retry)
builder.add_edge(START, "register")
builder.add_edge("register", "route")
builder.add_edge("route", END)

graph = builder.compile()
graph.name = "route"

__all__ = ["AGGREGATES", "RETRIEVALS", "RouteContext", "RouteInput", "RouteOutput", "builder", "graph"]
