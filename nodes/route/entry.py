"""Entry points: route requests, register-and-route one request, and rank a workflow's experts.

Requests are routed over a registered registry; a workflow's experts are ranked for a question.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nodes.route.fusion import DEFAULT_PROFILE, RouteResult, RouteSettings, rank
from nodes.route.indexes import MatrixIndex, StoreIndex, gather_candidates, memory_index
from nodes.route.manifest import register, registered
from nodes.route.mcp import load_registry, registry_from_agents
from nodes.route.model import BUILTIN_REGISTRY, Registry
from stores.errors import InputError
from stores.questions import check_question
from stores.text import content_hash


def check_requests(requests: Sequence[str]) -> list[str]:
    """Stripped requests, or ``InputError`` for none or an empty one."""
    if isinstance(requests, str) or not isinstance(requests, Sequence):
        raise InputError("requests must be a list of strings")
    if not requests:
        raise InputError("no request given")
    out = []
    for i, r in enumerate(requests):
        if not isinstance(r, str) or not r.strip():
            raise InputError(f"request #{i + 1} is empty" if len(requests) > 1 else "the request is empty")
        out.append(check_question(r, f"request #{i + 1}" if len(requests) > 1 else "request"))
    return out


def embed_requests(requests: Sequence[str], store: Any, settings: RouteSettings) -> list[list[float]] | None:
    """The requests' vectors in the store's space (None for BM25 alone), from its embedder; the store stays closed."""
    if settings.retrieval == "bm25":
        return None
    return [list(store.embedder.embed_query(r)) for r in requests]


def route(
    requests: Sequence[str],
    registry: Registry,
    store: Any,
    settings: RouteSettings | None = None,
    *,
    query_vectors: Sequence[Sequence[float]] | None = None,
) -> list[RouteResult]:
    """Route each request over a registry registered in ``store``.

    Vector search runs in Chroma (``settings.index == "store"``) or, with ``"memory"``, over the
    registry's vectors read back from Chroma once per process. ``query_vectors`` (one per request,
    in the store's vector space) skips embedding the requests.
    """
    settings = (settings or RouteSettings()).checked()
    requests = check_requests(requests)
    if query_vectors is not None and len(query_vectors) != len(requests):
        raise InputError("give one query vector per request")
    if query_vectors is None:
        query_vectors = embed_requests(requests, store, settings)  # before the index is opened
    index: StoreIndex | MatrixIndex | None = None
    if settings.retrieval != "bm25":
        index = memory_index(registry, store) if settings.index == "memory" else StoreIndex(registry, store)
    cands = gather_candidates(
        requests, registry, index, settings, embed_query=store.embedder.embed_query, query_vectors=query_vectors
    )
    return [rank(r, c, registry, settings) for r, c in zip(requests, cands, strict=True)]


MERGES = ("best", "sum")
"""How the routings of a compound request's parts are merged: by each agent's best rank in any
part (every task's first agent comes first), or by reciprocal rank summed over the parts."""


def merge_routes(request: str, parts: Sequence[RouteResult], settings: RouteSettings, how: str = "best") -> RouteResult:
    """One routing of a compound request from the routings of its parts (the whole request first).

    ``best``: agents (and tools) ordered by their best rank in any part, ties broken by reciprocal
    rank summed over the parts (``settings.rrf_k``); ``sum``: by that sum alone. Either way an agent
    that only one task needs can reach the top ``k``; ``best`` makes sure each task's first does.
    """
    from nodes.route.fusion import AgentMatch, ToolMatch
    from stores.ranking import rrf_scores

    if how not in MERGES:
        raise InputError(f"unknown merge {how!r}; one of {', '.join(MERGES)}")
    if len(parts) == 1:
        return RouteResult(request=request, agents=parts[0].agents, tools=parts[0].tools)

    def order(rankings: list[list[Any]]) -> list[tuple[Any, float]]:
        summed = rrf_scores(rankings, [1.0] * len(rankings), settings.rrf_k)
        best: dict[Any, int] = {}
        for ranking in rankings:
            for rank_, key in enumerate(ranking):
                best[key] = min(best.get(key, rank_), rank_)
        if how == "sum":
            return sorted(summed.items(), key=lambda kv: -kv[1])
        return sorted(summed.items(), key=lambda kv: (best[kv[0]], -kv[1]))

    first: dict[str, AgentMatch] = {}
    for part in parts:
        for a in part.agents:
            first.setdefault(a.name, a)
    agents = [
        AgentMatch(name=name, score=score, tools=list(first[name].tools), via=first[name].via)
        for name, score in order([[a.name for a in p.agents] for p in parts])[: settings.k]
    ]
    tools = [
        ToolMatch(name=name, agent=agent, score=score)
        for (agent, name), score in order([[(t.agent, t.name) for t in p.tools] for p in parts])[: settings.top_tools]
    ]
    return RouteResult(request=request, agents=agents, tools=tools)


def route_request(
    request: str,
    registry: str | Path | Registry = BUILTIN_REGISTRY,
    *,
    namespace: str = "default",
    embedder: str | None = None,
    profile: str = DEFAULT_PROFILE,
    **settings: Any,
) -> RouteResult:
    """Register (if needed) and route one request; ``registry`` is a file, a registered name or a ``Registry``."""
    from stores.vectorstore import get_store

    store = get_store(namespace, embedder)
    reg = resolve_registry(registry, namespace)
    register(reg, store)
    return route([request], reg, store, RouteSettings.from_profile(profile, **settings))[0]


def resolve_registry(registry: str | Path | Registry, namespace: str = "default") -> Registry:
    """A ``Registry`` from a registry object, a JSON file path or a registered name."""
    if isinstance(registry, Registry):
        return registry
    text = str(registry)
    if isinstance(registry, Path) or text.endswith(".json") or Path(text).is_file():
        return load_registry(text)
    return registered(namespace, text)


def rank_experts(
    question: str,
    experts: Mapping[str, str],
    namespace: str = "default",
    *,
    embedder: str | None = None,
    retrieval: str = "hybrid",
    k: int | None = None,
) -> list[tuple[str, float]]:
    """Experts ``{name: description}`` ranked for ``question`` by the router, best first, with scores.

    The experts are registered as tool-less agents of a registry named after their content hash
    (``experts-<hash>``), so the same set of experts is embedded once per namespace and two sets
    never interfere.
    """
    from stores.vectorstore import get_store

    if not isinstance(question, str) or not question.strip():
        raise InputError("the question to route is empty")
    if not experts:
        raise InputError("no experts to route the question to")
    digest = content_hash(json.dumps(sorted(experts.items())))
    registry = registry_from_agents(f"experts-{digest}", experts)
    if len(registry.agents) == 1:
        return [(registry.agents[0].name, 1.0)]
    store = get_store(namespace, embedder)
    register(registry, store)
    settings = RouteSettings.from_profile("agents", k=k or len(registry.agents), retrieval=retrieval, top_tools=0)
    result = route([question], registry, store, settings)[0]
    ranked = [(a.name, a.score) for a in result.agents]
    seen = {name for name, _ in ranked}
    ranked += [(a.name, 0.0) for a in registry.agents if a.name not in seen][: settings.k - len(ranked)]
    return ranked


def route_to_expert(
    question: str,
    experts: Mapping[str, str],
    namespace: str = "default",
    *,
    embedder: str | None = None,
    retrieval: str = "hybrid",
) -> str:
    """The name of the expert (among ``{name: description}``) best suited to answer ``question``."""
    return rank_experts(question, experts, namespace, embedder=embedder, retrieval=retrieval, k=1)[0][0]
