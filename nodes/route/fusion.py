"""Fusion and walk (pure): reciprocal rank fusion of the candidate lists, then a walk to the top-K agents.

The fusion is type-weighted; the walk goes from the fused nodes to the top-K agents over the registry's
bipartite graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from nodes.route.model import NodeId, PerRegistry, Ranked, Registry
from stores.errors import InputError
from stores.ranking import minmax_scores, rrf_scores

Retrieval = Literal["vector", "bm25", "hybrid"]
RETRIEVALS: tuple[str, ...] = ("vector", "bm25", "hybrid")
FUSIONS: tuple[str, ...] = ("rrf", "minmax")
"""How the lists are fused: reciprocal ranks, or each list's scores scaled to [0, 1] and summed."""
AGGREGATES: tuple[str, ...] = ("first", "sum")
"""How the walk scores an agent: the first node that reaches it, or its node plus its best tool."""
INDEXES: tuple[str, ...] = ("store", "memory")
"""Where vector search runs: in Chroma, or over the registry's stored vectors loaded in memory."""

PROFILES: dict[str, tuple[float, float]] = {
    "paper": (1.5, 1.0),
    "balanced": (1.0, 1.0),
    "workflow": (1.8, 1.0),
    "api": (1.0, 1.5),
    "agents": (1.0, 0.0),
    "tools": (0.0, 1.0),
}
"""Named ``(agent_weight, tool_weight)`` pairs: ``paper`` is the 1.5:1 of the Agent-as-a-Graph
write-up, ``balanced`` is plain RRF, ``workflow`` favours agent context, ``api`` favours fine-grained
tool matches, ``agents`` / ``tools`` are agent-only / tool-only retrieval."""

DEFAULT_PROFILE = "balanced"
"""The profile used when none is named."""


# ---------------------------------------------------------------------------------------------
# The bipartite graph
# ---------------------------------------------------------------------------------------------
def build_graph(registry: Registry) -> Any:
    """The registry as a networkx ``DiGraph``: agent and tool nodes, ``tool -> agent`` ownership edges."""
    import networkx as nx

    graph = nx.DiGraph(name=registry.name)
    for agent in registry.agents:
        graph.add_node(agent.node, kind="agent", name=agent.name, description=agent.description)
        for tool in agent.tools:
            graph.add_node(tool.node, kind="tool", name=tool.name, description=tool.description)
            graph.add_edge(tool.node, agent.node, relation="owned_by")
    return graph


graph_of: PerRegistry[Any] = PerRegistry(build_graph)
"""The (cached) graph of a registry."""


def owners(graph: Any, node: NodeId) -> list[str]:
    """Names of the agents a node stands for: itself for an agent, its owners for a tool."""
    if node[0] == "agent":
        return [node[1]]
    if node not in graph:
        return []
    return [graph.nodes[a]["name"] for a in graph.successors(node)]


# ---------------------------------------------------------------------------------------------
# Fusion and walk (pure)
# ---------------------------------------------------------------------------------------------
@dataclass
class RouteSettings:
    """Knobs of one routing call.

    The defaults are the best stable region of the LiveMCPBench sweep (``bench/route.py``):
    vector and BM25 lists (hybrid), agent:tool 1:1, ``rrf_k`` 10, agents scored by their own node
    plus their best tool (``sum``), and the lists of tools taking the kinds of entity a request
    carries at weight 1.5 (the value the 5-fold choice picked in every fold). The write-up's
    pipeline is ``profile="paper"`` (1.5:1), ``rrf_k=60``, ``retrieval="vector"``,
    ``aggregate="first"``, ``entity_weight=0``.
    """

    k: int = 5
    candidates_factor: int = 10
    rrf_k: float = 10.0
    agent_weight: float = 1.0
    tool_weight: float = 1.0
    retrieval: str = "hybrid"
    bm25_weight: float = 1.0
    evidence: int = 3
    top_tools: int = 10
    aggregate: str = "sum"
    index: str = "store"
    fusion: str = "rrf"
    entity_weight: float = 1.5
    """Weight of each list of tools taking a kind of entity the request carries (0: off)."""
    clause_weight: float = 0.0
    """Weight of each clause's own lists when a request has several clauses (0: off)."""
    bm25_fields: tuple[float, ...] | None = None
    """BM25 field weights (name, description, parameters, examples) scored apart; ``None``: one joint document."""

    @classmethod
    def from_profile(cls, profile: str = DEFAULT_PROFILE, **overrides: Any) -> RouteSettings:
        """Settings with the weights of a named profile, then ``overrides`` (``None`` values ignored)."""
        if profile not in PROFILES:
            raise InputError(f"unknown weight profile {profile!r}; one of {', '.join(PROFILES)}")
        agent_weight, tool_weight = PROFILES[profile]
        settings = cls(agent_weight=agent_weight, tool_weight=tool_weight)
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None}).checked()

    @property
    def candidates(self) -> int:
        """``N``: how many agents and how many tools each retriever returns."""
        return max(self.k * self.candidates_factor, self.k, self.top_tools)

    def checked(self) -> RouteSettings:
        """Return self if every knob is in range, else raise ``InputError``."""
        if self.k < 1:
            raise InputError(f"k must be at least 1, got {self.k}")
        if self.candidates_factor < 1:
            raise InputError(f"candidates_factor must be at least 1, got {self.candidates_factor}")
        if self.rrf_k < 0:
            raise InputError(f"rrf_k must not be negative, got {self.rrf_k}")
        if min(self.agent_weight, self.tool_weight, self.bm25_weight, self.entity_weight, self.clause_weight) < 0:
            raise InputError("fusion weights must not be negative")
        if self.agent_weight == 0 and self.tool_weight == 0:
            raise InputError("agent_weight and tool_weight are both 0: nothing would be ranked")
        if self.retrieval not in RETRIEVALS:
            raise InputError(f"unknown retrieval {self.retrieval!r}; one of {', '.join(RETRIEVALS)}")
        if self.aggregate not in AGGREGATES:
            raise InputError(f"unknown aggregate {self.aggregate!r}; one of {', '.join(AGGREGATES)}")
        if self.fusion not in FUSIONS:
            raise InputError(f"unknown fusion {self.fusion!r}; one of {', '.join(FUSIONS)}")
        if self.index not in INDEXES:
            raise InputError(f"unknown index {self.index!r}; one of {', '.join(INDEXES)}")
        if self.bm25_fields is not None and (len(self.bm25_fields) != 4 or min(self.bm25_fields) < 0):
            raise InputError(
                "bm25_fields takes 4 weights that are not negative (name, description, parameters, examples)"
            )
        if self.evidence < 0 or self.top_tools < 0:
            raise InputError("evidence and top_tools must not be negative")
        return self


@dataclass
class Candidates:
    """What the retrievers returned for one request, best first per list."""

    agents: Ranked = field(default_factory=list)
    tools: Ranked = field(default_factory=list)
    bm25_agents: Ranked = field(default_factory=list)
    bm25_tools: Ranked = field(default_factory=list)
    entity_tools: list[Ranked] = field(default_factory=list)
    """For each kind of entity the request carries, the tools taking it (``nodes.route.entities``)."""
    clauses: list[Candidates] = field(default_factory=list)
    """The candidates of each of the request's clauses, when it has several."""


@dataclass
class AgentMatch:
    """One routed agent: fused score, matched tools (evidence), and how it was reached."""

    name: str
    score: float
    tools: list[str] = field(default_factory=list)
    via: str = "agent"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {"name": self.name, "score": round(self.score, 6), "tools": list(self.tools), "via": self.via}


@dataclass
class ToolMatch:
    """One ranked tool and its owner agent."""

    name: str
    agent: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {"name": self.name, "agent": self.agent, "score": round(self.score, 6)}


@dataclass
class RouteResult:
    """The routing of one request."""

    request: str
    agents: list[AgentMatch]
    tools: list[ToolMatch]

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {
            "request": self.request,
            "agents": [a.to_dict() for a in self.agents],
            "tools": [t.to_dict() for t in self.tools],
        }


def fuse(lists: Sequence[tuple[Ranked, float]], rrf_k: float = 60.0) -> Ranked:
    """Weighted reciprocal rank fusion: ``sum(weight / (rrf_k + rank))`` over the lists a node is in.

    Lists with weight 0 are ignored. Ties keep the order of first appearance (lists in the order
    given, then rank), so the result is deterministic.
    """
    used = [(ranked, weight) for ranked, weight in lists if weight > 0]
    scores = rrf_scores([[node for node, _score in ranked] for ranked, _w in used], [w for _r, w in used], rrf_k)
    order = {node: i for i, node in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))


def fuse_minmax(lists: Sequence[tuple[Ranked, float]]) -> Ranked:
    """Weighted score fusion of min-max normalised lists (:func:`stores.ranking.minmax_scores`), best first."""
    used = [(ranked, weight) for ranked, weight in lists if weight > 0]
    scores = minmax_scores([ranked for ranked, _w in used], [w for _r, w in used])
    order = {node: i for i, node in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))


def fusion_lists(cands: Candidates, settings: RouteSettings) -> list[tuple[Ranked, float]]:
    """The ranked lists to fuse and their weights, for the settings' retrieval mode."""
    lists: list[tuple[Ranked, float]] = []
    if settings.retrieval in ("vector", "hybrid"):
        lists += [(cands.agents, settings.agent_weight), (cands.tools, settings.tool_weight)]
    if settings.retrieval in ("bm25", "hybrid"):
        bm25 = settings.bm25_weight
        lists += [(cands.bm25_agents, settings.agent_weight * bm25), (cands.bm25_tools, settings.tool_weight * bm25)]
    if settings.entity_weight > 0:
        lists += [(ranked, settings.entity_weight) for ranked in cands.entity_tools]
    if settings.clause_weight > 0:
        for part in cands.clauses:
            lists += [(ranked, weight * settings.clause_weight) for ranked, weight in fusion_lists(part, settings)]
    return lists


def walk(fused: Ranked, graph: Any, k: int, evidence: int = 3, aggregate: str = "first") -> list[AgentMatch]:
    """The top ``k`` agents of a fused list, tools mapped to their owners, with evidence.

    ``first``: read the list best first until ``k`` distinct agents; an agent scores the fused
    score of the node that brought it in, and ``via`` says whether agent or tool nodes (or both)
    reached it up to that point. ``sum``: an agent scores its own node's fused score plus that of
    its best tool node (both terms of the type-weighted formula for the same agent), and the ``k``
    best sums are kept. Either way the whole list is read for evidence: up to ``evidence`` matched
    tools per agent, best first.
    """
    if aggregate == "sum":
        return _walk_sum(fused, graph, k, evidence)
    if aggregate != "first":
        raise InputError(f"unknown aggregate {aggregate!r}; one of {', '.join(AGGREGATES)}")
    chosen: dict[str, AgentMatch] = {}
    complete = False
    for node, score in fused:
        kind = node[0]
        for name in owners(graph, node):
            match = chosen.get(name)
            if match is None:
                if len(chosen) >= k:
                    continue
                match = chosen[name] = AgentMatch(name=name, score=score, via=kind)
            elif not complete and match.via != kind:
                match.via = "both"
            if kind == "tool" and len(match.tools) < evidence:
                match.tools.append(node[2])
        complete = complete or len(chosen) >= k
    return list(chosen.values())


def _walk_sum(fused: Ranked, graph: Any, k: int, evidence: int) -> list[AgentMatch]:
    matches: dict[str, AgentMatch] = {}
    has_tool: set[str] = set()
    for node, score in fused:
        kind = node[0]
        for name in owners(graph, node):
            match = matches.get(name)
            if match is None:
                match = matches[name] = AgentMatch(name=name, score=0.0, via=kind)
            elif match.via != kind:
                match.via = "both"
            if kind == "agent":
                match.score += score
            else:
                if name not in has_tool:
                    has_tool.add(name)
                    match.score += score
                if len(match.tools) < evidence:
                    match.tools.append(node[2])
    order = {name: i for i, name in enumerate(matches)}
    return sorted(matches.values(), key=lambda m: (-m.score, order[m.name]))[:k]


def rank_tools(fused: Ranked, n: int) -> list[ToolMatch]:
    """The ``n`` best tool nodes of a fused list."""
    out: list[ToolMatch] = []
    for node, score in fused:
        if len(out) >= n:
            break
        if node[0] == "tool":
            out.append(ToolMatch(name=node[2], agent=node[1], score=score))
    return out


def rank(request: str, cands: Candidates, registry: Registry, settings: RouteSettings) -> RouteResult:
    """Fuse one request's candidates and walk them into agents and tools."""
    lists = fusion_lists(cands, settings)
    fused = fuse_minmax(lists) if settings.fusion == "minmax" else fuse(lists, settings.rrf_k)
    agents = walk(fused, graph_of(registry), settings.k, settings.evidence, settings.aggregate)
    return RouteResult(request=request, agents=agents, tools=rank_tools(fused, settings.top_tools))
