"""Agent-as-a-Graph routing: pick the right agent, and the tools that justify it, for a request.

The registry is a bipartite graph: agent nodes (name, description) and tool nodes (name,
description, parameters), each tool owned by one agent (``tool -> agent`` edges). A tool name
shared by several agents is one tool node per owner. Agents and tools are embedded into the shared
vector store (kinds ``agent`` and ``tool``) of a namespace, under the document id
``registry-<name>``; a registry's content hash (and each record's own hash) makes re-registering an
unchanged registry embed nothing, and a changed one embed only what changed.

Routing a request:

1. Candidates: the top ``N`` agents and, separately, the top ``N`` tools by vector similarity
   (``N = candidates_factor x K``); with BM25 on, the top ``N`` agents and tools by BM25 as well.
2. Type-weighted reciprocal rank fusion: a node's score is the sum, over the lists it appears in,
   of ``weight / (rrf_k + rank)`` (rank from 1), where ``weight`` is ``agent_weight`` for agent
   lists and ``tool_weight`` for tool lists, times ``bm25_weight`` for the BM25 lists. A list
   whose weight is 0 is not used (weights ``1:0`` are agent-only retrieval, ``0:1`` tool-only).
3. Walk: the fused list is read best first; an agent node contributes itself, a tool node its
   owner. With ``aggregate="first"`` (the write-up's walk) it stops at ``K`` distinct agents and an
   agent scores the fused score of the node that brought it in; with ``aggregate="sum"`` (the
   default) an agent scores its own node plus its best tool node, i.e. both terms of
   ``a_agent / (k + rank_agent) + a_tool / (k + rank_tool)`` for the same agent, and the ``K``
   best are kept. An agent's evidence is the list of its tools among the candidates, best first.
   The top tools are the tool nodes of the fused list, best first.

With separate agent and tool lists each node sits in one list only, so with ``rrf_k`` 60 and
1.5:1 the first walk reads about the 30 best agents before the best tool: it is agent-only
retrieval in all but name. The defaults (``RouteSettings``) come from the LiveMCPBench sweep.

Everything here except :func:`register` and the store-backed index is a pure function of its
arguments, so fusion and walking can be tested and benchmarked without a store.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np

from stores.settings import InputError, check_question
from stores.text import content_hash, truncate_tokens

NodeId = tuple[str, ...]
"""``("agent", name)`` or ``("tool", agent, tool)``."""

Ranked = list[tuple[NodeId, float]]
"""Nodes best first, with the score the retriever gave them."""

Retrieval = Literal["vector", "bm25", "hybrid"]
RETRIEVALS: tuple[str, ...] = ("vector", "bm25", "hybrid")
AGGREGATES: tuple[str, ...] = ("first", "sum")
INDEXES: tuple[str, ...] = ("store", "memory")
"""Where vector search runs: in Chroma, or over the registry's stored vectors loaded in memory."""
"""How the walk scores an agent: the first node that reaches it, or its node plus its best tool."""

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

TEXT_FORMAT = "router-text-v1"
"""Version of the text embedded for each node; part of every hash, so a change re-embeds."""

MAX_EMBED_TOKENS = 480
BUILTIN_REGISTRY = "longdoc"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


# ---------------------------------------------------------------------------------------------
# Registry model
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tool:
    """A tool node: what it does, its parameter names, and the agent that owns it."""

    agent: str
    name: str
    description: str = ""
    parameters: tuple[str, ...] = ()

    @property
    def node(self) -> NodeId:
        return ("tool", self.agent, self.name)

    @property
    def text(self) -> str:
        """The text embedded and indexed for this tool."""
        text = f"{self.name}: {self.description}".strip() if self.description else self.name
        if self.parameters:
            text += " Parameters: " + ", ".join(self.parameters) + "."
        return truncate_tokens(text, MAX_EMBED_TOKENS)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": list(self.parameters)}


@dataclass(frozen=True)
class Agent:
    """An agent node and the tools it owns."""

    name: str
    description: str = ""
    category: str = ""
    tools: tuple[Tool, ...] = ()

    @property
    def node(self) -> NodeId:
        return ("agent", self.name)

    @property
    def text(self) -> str:
        """The text embedded and indexed for this agent (its tool names when it has no description)."""
        if self.description:
            text = f"{self.name}: {self.description}"
        elif self.tools:
            text = f"{self.name}: tools " + ", ".join(t.name for t in self.tools)
        else:
            text = self.name
        return truncate_tokens(text, MAX_EMBED_TOKENS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "category": self.category,
            "tools": [t.to_dict() for t in self.tools],
        }


@dataclass(frozen=True)
class Registry:
    """A validated set of agents and their tools, with the warnings raised while reading it."""

    name: str
    agents: tuple[Agent, ...]
    warnings: tuple[str, ...] = ()

    @cached_property
    def tools(self) -> list[Tool]:
        return [t for a in self.agents for t in a.tools]

    @cached_property
    def _by_name(self) -> dict[str, Agent]:
        return {a.name: a for a in self.agents}

    def agent(self, name: str) -> Agent:
        if name not in self._by_name:
            raise InputError(f"registry {self.name!r} has no agent {name!r}")
        return self._by_name[name]

    @cached_property
    def content_hash(self) -> str:
        """Hash of everything that is embedded or stored (not the name, not the warnings)."""
        return content_hash(TEXT_FORMAT + json.dumps([a.to_dict() for a in self.agents], sort_keys=True))

    @property
    def doc_id(self) -> str:
        return registry_doc_id(self.name)

    @property
    def nodes(self) -> list[NodeId]:
        """Every agent node, then every tool node."""
        return [a.node for a in self.agents] + [t.node for t in self.tools]

    @cached_property
    def record_nodes(self) -> dict[str, NodeId]:
        """Store record id -> node, for every node."""
        return {record_id(self.doc_id, n): n for n in self.nodes}

    def to_json(self) -> dict[str, Any]:
        """The registry in the servers format it can be read back from."""
        return {"name": self.name, "agents": [a.to_dict() for a in self.agents]}

    def __len__(self) -> int:
        return len(self.agents)


def check_registry_name(name: str) -> str:
    """Return ``name`` if it is a valid registry name (like a namespace) or raise ``InputError``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(
            f"invalid registry name {name!r}: use 1-63 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return name


def registry_name_for(path: str | Path) -> str:
    """A registry name derived from a file name (``my servers.json`` -> ``my-servers``)."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(path).stem).strip("-_")[:63]
    return stem or "registry"


def registry_doc_id(name: str) -> str:
    """The store ``doc_id`` under which the records of registry ``name`` live."""
    return f"registry-{check_registry_name(name)}"


def _text_field(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    return value.strip()


def _parameters(entry: Mapping[str, Any], what: str) -> tuple[str, ...]:
    schema = entry.get("input_schema", entry.get("inputSchema", entry.get("parameters")))
    if schema is None:
        return ()
    if isinstance(schema, Mapping):
        props = schema.get("properties", {})
        if not isinstance(props, Mapping):
            raise InputError(f"{what}: 'properties' of the input schema must be an object")
        return tuple(str(p) for p in props)
    if isinstance(schema, list) and all(isinstance(p, str) for p in schema):
        return tuple(schema)
    raise InputError(f"{what}: the input schema must be a JSON schema object or a list of parameter names")


def _tool(entry: Any, agent: str, what: str) -> Tool:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, Mapping):
        raise InputError(f"{what}: expected an object with a name and a description")
    name = _text_field(entry.get("name"), f"{what} name")
    if not name:
        raise InputError(f"{what} has no name")
    return Tool(
        agent=agent,
        name=name,
        description=_text_field(entry.get("description"), f"{what} ({name}) description"),
        parameters=_parameters(entry, f"{what} ({name})"),
    )


def _dedupe_tools(agent: str, tools: list[Tool], warnings: list[str]) -> tuple[Tool, ...]:
    seen: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in seen:
            if seen[tool.name] != tool:
                raise InputError(
                    f"agent {agent!r} has two different tools named {tool.name!r}; tool names must be unique per agent"
                )
            warnings.append(f"agent {agent!r} lists tool {tool.name!r} twice; kept once")
            continue
        seen[tool.name] = tool
    return tuple(seen.values())


def parse_registry(data: Any, name: str = "registry") -> Registry:
    """Validate a registry given as parsed JSON.

    Accepted shapes: a list of agents in the MCP servers format (``[{name, description, category,
    tools: [{name, description, input_schema}]}]``), or an object with ``agents`` (or ``servers``)
    in that format and optionally a top-level ``tools`` list whose entries name their owner in
    ``agent`` (or ``owner`` / ``server``). Tool entries may be bare names.

    Raises ``InputError`` for an empty registry, nameless or conflicting duplicate entries and
    wrong types. Identical duplicates are kept once; tools whose owner is missing or unknown are
    left out; both are reported in ``Registry.warnings``. An agent without tools is valid: it can
    only be reached through its own description.
    """
    check_registry_name(name)
    loose_tools: list[Any] = []
    if isinstance(data, Mapping):
        entries = data.get("agents", data.get("servers"))
        if entries is None and "tools" not in data:
            raise InputError("a registry object needs an 'agents' (or 'servers') list")
        entries = entries or []
        loose_tools = data.get("tools") or []
        if not isinstance(loose_tools, list):
            raise InputError("the top-level 'tools' of a registry must be a list")
    else:
        entries = data
    if not isinstance(entries, list):
        raise InputError("a registry is a list of agents (MCP servers format) or an object with an 'agents' list")
    warnings: list[str] = []
    agents: dict[str, Agent] = {}
    tools_of: dict[str, list[Tool]] = {}
    for i, entry in enumerate(entries):
        what = f"agent #{i + 1}"
        if not isinstance(entry, Mapping):
            raise InputError(f"{what}: expected an object with a name, a description and tools")
        agent_name = _text_field(entry.get("name"), f"{what} name")
        if not agent_name:
            raise InputError(f"{what} has no name")
        raw_tools = entry.get("tools") or []
        if not isinstance(raw_tools, list):
            raise InputError(f"agent {agent_name!r}: 'tools' must be a list")
        agent = Agent(
            name=agent_name,
            description=_text_field(entry.get("description"), f"agent {agent_name!r} description"),
            category=_text_field(entry.get("category"), f"agent {agent_name!r} category"),
        )
        tools = [_tool(t, agent_name, f"tool #{j + 1} of agent {agent_name!r}") for j, t in enumerate(raw_tools)]
        if agent_name in agents:
            if agents[agent_name] != agent or tools_of[agent_name] != tools:
                raise InputError(f"two different agents are named {agent_name!r}; agent names must be unique")
            warnings.append(f"agent {agent_name!r} is listed twice; kept once")
            continue
        agents[agent_name] = agent
        tools_of[agent_name] = tools
    for j, entry in enumerate(loose_tools):
        what = f"top-level tool #{j + 1}"
        owner = entry.get("agent", entry.get("owner", entry.get("server"))) if isinstance(entry, Mapping) else None
        owner = _text_field(owner, f"{what} owner") if owner is not None else ""
        tool = _tool(entry, owner, what)
        if not owner:
            warnings.append(f"tool {tool.name!r} names no owner agent; left out")
        elif owner not in agents:
            warnings.append(f"tool {tool.name!r} belongs to unknown agent {owner!r}; left out")
        else:
            tools_of[owner].append(tool)
    if not agents:
        raise InputError(f"registry {name!r} has no agents")
    built = tuple(replace(a, tools=_dedupe_tools(a.name, tools_of[a.name], warnings)) for a in agents.values())
    return Registry(name=name, agents=built, warnings=tuple(warnings))


def load_registry(path: str | Path, name: str | None = None) -> Registry:
    """Read and validate a registry JSON file (see :func:`parse_registry`)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"registry file not found: {p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"registry {p} is not valid JSON: {exc}") from exc
    if name is None:
        own = data.get("name") if isinstance(data, Mapping) else None
        name = own if isinstance(own, str) and _NAME.match(own) else registry_name_for(p)
    return parse_registry(data, name)


def registry_from_agents(name: str, agents: Mapping[str, str] | Iterable[Agent]) -> Registry:
    """A registry of tool-less agents given as ``{name: description}`` (or of ready ``Agent`` objects)."""
    if isinstance(agents, Mapping):
        entries: list[Any] = [{"name": n, "description": d} for n, d in agents.items()]
    else:
        entries = [a.to_dict() for a in agents]
    return parse_registry(entries, name)


_BUILTIN: tuple[tuple[str, str, str, tuple[tuple[str, str, tuple[str, ...]], ...]], ...] = (
    (
        "ingest",
        "Documents",
        "Reads a document (txt, md, pdf, docx, html), splits it into chunks and embeds them once, so every "
        "other workflow can work on it.",
        (("ingest", "Chunk and embed a document file into the store.", ("path", "namespace")),),
    ),
    (
        "chain",
        "Question answering",
        "Answers questions about a document far longer than the model's context: worker agents read the chunks "
        "in a Chow-Liu tree order and a manager writes the answer.",
        (("ask", "Answer a question about a long document.", ("question", "path")),),
    ),
    (
        "summarize",
        "Summarization",
        "Summarizes a long document or meeting transcript: an editor agent questions expert agents that each "
        "know one part, then fact-checks the summary.",
        (("summarize", "Write a checked summary of a long document.", ("path", "query")),),
    ),
    (
        "offload",
        "Chat",
        "Keeps a long multi-turn conversation about a document within a small working memory by offloading old "
        "turns and drawing the document as a Mermaid canvas.",
        (
            ("chat", "Multi-turn chat about a document with bounded working memory.", ("message", "path")),
            ("canvas", "Draw the structure of a document as a Mermaid diagram.", ("path",)),
        ),
    ),
    (
        "route",
        "Routing",
        "Finds the right agent and tool for a request among hundreds of registered agents and MCP servers.",
        (("route", "Rank agents and tools for a request.", ("request", "registry")),),
    ),
)


def builtin_registry() -> Registry:
    """This product's own workflows as agents, their commands as tools (registry ``longdoc``)."""
    agents = [
        {
            "name": name,
            "category": category,
            "description": description,
            "tools": [{"name": t, "description": d, "input_schema": list(params)} for t, d, params in tools],
        }
        for name, category, description, tools in _BUILTIN
    ]
    return parse_registry(agents, BUILTIN_REGISTRY)


# ---------------------------------------------------------------------------------------------
# The bipartite graph
# ---------------------------------------------------------------------------------------------
_graphs: dict[str, Any] = {}
_graphs_lock = threading.Lock()


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


def graph_of(registry: Registry) -> Any:
    """The (cached) graph of ``registry``."""
    key = registry.content_hash
    with _graphs_lock:
        if key not in _graphs:
            if len(_graphs) > 16:
                _graphs.clear()
            _graphs[key] = build_graph(registry)
        return _graphs[key]


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
    plus their best tool (``sum``). The write-up's pipeline is ``profile="paper"`` (1.5:1),
    ``rrf_k=60``, ``retrieval="vector"``, ``aggregate="first"``.
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
        if min(self.agent_weight, self.tool_weight, self.bm25_weight) < 0:
            raise InputError("fusion weights must not be negative")
        if self.agent_weight == 0 and self.tool_weight == 0:
            raise InputError("agent_weight and tool_weight are both 0: nothing would be ranked")
        if self.retrieval not in RETRIEVALS:
            raise InputError(f"unknown retrieval {self.retrieval!r}; one of {', '.join(RETRIEVALS)}")
        if self.aggregate not in AGGREGATES:
            raise InputError(f"unknown aggregate {self.aggregate!r}; one of {', '.join(AGGREGATES)}")
        if self.index not in INDEXES:
            raise InputError(f"unknown index {self.index!r}; one of {', '.join(INDEXES)}")
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


@dataclass
class AgentMatch:
    """One routed agent: fused score, matched tools (evidence), and how it was reached."""

    name: str
    score: float
    tools: list[str] = field(default_factory=list)
    via: str = "agent"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "score": round(self.score, 6), "tools": list(self.tools), "via": self.via}


@dataclass
class ToolMatch:
    """One ranked tool and its owner agent."""

    name: str
    agent: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.agent, "score": round(self.score, 6)}


@dataclass
class RouteResult:
    """The routing of one request."""

    request: str
    agents: list[AgentMatch]
    tools: list[ToolMatch]

    def to_dict(self) -> dict[str, Any]:
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
    scores: dict[NodeId, float] = {}
    for ranked, weight in lists:
        if weight <= 0:
            continue
        for rank, (node, _score) in enumerate(ranked, start=1):
            scores[node] = scores.get(node, 0.0) + weight / (rrf_k + rank)
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
    fused = fuse(fusion_lists(cands, settings), settings.rrf_k)
    agents = walk(fused, graph_of(registry), settings.k, settings.evidence, settings.aggregate)
    return RouteResult(request=request, agents=agents, tools=rank_tools(fused, settings.top_tools))


# ---------------------------------------------------------------------------------------------
# Retrievers
# ---------------------------------------------------------------------------------------------
class BM25Index:
    """BM25 over the agent texts and, separately, the tool texts of a registry (CJK-aware tokens)."""

    def __init__(self, registry: Registry) -> None:
        import bm25s

        self.agent_nodes = [a.node for a in registry.agents]
        self.tool_nodes = [t.node for t in registry.tools]
        self._agents = self._index(bm25s, [a.text for a in registry.agents])
        self._tools = self._index(bm25s, [t.text for t in registry.tools])

    @staticmethod
    def tokens(text: str) -> list[str]:
        """BM25 terms: words and CJK characters/bigrams, without English stopwords."""
        from bm25s.stopwords import STOPWORDS_EN

        from stores.embedders import lexical_tokens

        return [t for t in lexical_tokens(text) if t not in STOPWORDS_EN]

    def _index(self, bm25s: Any, texts: list[str]) -> Any:
        if not texts:
            return None
        index = bm25s.BM25()
        index.index([self.tokens(t) or ["\x00"] for t in texts], show_progress=False)
        return index

    @staticmethod
    def _top(index: Any, nodes: list[NodeId], tokens: list[str], n: int) -> Ranked:
        if index is None or not tokens or n <= 0:
            return []
        scores = np.asarray(index.get_scores(tokens), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[:n]
        return [(nodes[i], float(scores[i])) for i in order if scores[i] > 0]

    def search(self, request: str, n: int) -> tuple[Ranked, Ranked]:
        """Top ``n`` agents and top ``n`` tools for ``request`` (only those sharing a term with it)."""
        tokens = self.tokens(request)
        return self._top(self._agents, self.agent_nodes, tokens, n), self._top(self._tools, self.tool_nodes, tokens, n)


_bm25: dict[str, BM25Index] = {}
_bm25_lock = threading.Lock()


def bm25_index(registry: Registry) -> BM25Index:
    """The (cached) BM25 index of ``registry``."""
    key = registry.content_hash
    with _bm25_lock:
        if key not in _bm25:
            if len(_bm25) > 16:
                _bm25.clear()
            _bm25[key] = BM25Index(registry)
        return _bm25[key]


class MatrixIndex:
    """Exact cosine search over in-memory agent and tool vectors (benchmarks, tests)."""

    def __init__(self, registry: Registry, vectors: Mapping[NodeId, Sequence[float]]) -> None:
        self.agent_nodes = [a.node for a in registry.agents]
        self.tool_nodes = [t.node for t in registry.tools]
        missing = [n for n in self.agent_nodes + self.tool_nodes if n not in vectors]
        if missing:
            raise InputError(f"no vector for {len(missing)} registry nodes, e.g. {missing[0]}")
        self._agents = self._matrix([vectors[n] for n in self.agent_nodes])
        self._tools = self._matrix([vectors[n] for n in self.tool_nodes])

    @staticmethod
    def _matrix(rows: list[Sequence[float]]) -> np.ndarray:
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        m = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return m / norms

    @staticmethod
    def _top(matrix: np.ndarray, nodes: list[NodeId], q: np.ndarray, n: int) -> list[Ranked]:
        if not nodes or n <= 0:
            return [[] for _ in range(len(q))]
        sims = q @ matrix.T
        n = min(n, len(nodes))
        out = []
        for row in sims:
            idx = np.argpartition(-row, n - 1)[:n] if n < len(nodes) else np.arange(len(nodes))
            idx = idx[np.lexsort((idx, -row[idx]))]
            out.append([(nodes[i], float(row[i])) for i in idx])
        return out

    def search(self, vectors: Sequence[Sequence[float]], n: int) -> list[tuple[Ranked, Ranked]]:
        """Top ``n`` agents and top ``n`` tools for each query vector."""
        q = self._matrix(list(vectors)) if len(vectors) else np.zeros((0, 1), dtype=np.float32)
        agents = self._top(self._agents, self.agent_nodes, q, n)
        tools = self._top(self._tools, self.tool_nodes, q, n)
        return list(zip(agents, tools, strict=True))


class StoreIndex:
    """Vector search over a registry's agent and tool records in the shared Chroma store."""

    def __init__(self, registry: Registry, store: Any) -> None:
        self.registry = registry
        self.store = store
        self.nodes = registry.record_nodes
        self.counts = {"agent": len(registry.agents), "tool": len(registry.tools)}

    def _query(self, vectors: Sequence[Sequence[float]], kind: str, n: int) -> list[Ranked]:
        n = min(n, self.counts[kind])
        if n <= 0 or not vectors:
            return [[] for _ in vectors]
        res = self.store.collection.query(
            query_embeddings=[np.asarray(v, dtype=np.float32) for v in vectors],
            n_results=n,
            where={"$and": [{"kind": kind}, {"doc_id": self.registry.doc_id}]},
            include=["distances"],
        )
        out = []
        for ids, dists in zip(res["ids"], res["distances"], strict=True):
            out.append([(self.nodes[i], 1.0 - float(d)) for i, d in zip(ids, dists, strict=True) if i in self.nodes])
        return out

    def search(self, vectors: Sequence[Sequence[float]], n: int) -> list[tuple[Ranked, Ranked]]:
        """Top ``n`` agents and top ``n`` tools for each query vector (one store query per kind)."""
        agents = self._query(vectors, "agent", n)
        tools = self._query(vectors, "tool", n)
        return list(zip(agents, tools, strict=True))


_memory: dict[tuple[str, str, str], MatrixIndex] = {}
_memory_lock = threading.Lock()


def memory_index(registry: Registry, store: Any) -> MatrixIndex:
    """Exact in-memory search over the registry's vectors as stored in ``store`` (read once per process).

    Chroma filters by metadata before its vector search, which costs about 0.1 s per query once a
    namespace holds some 10,000 records; this index costs a matrix product instead.
    """
    key = (store.namespace, store.collection_name, registry.content_hash)
    with _memory_lock:
        if key in _memory:
            return _memory[key]
    ids = list(registry.record_nodes)
    vectors: dict[NodeId, Sequence[float]] = {}
    for start in range(0, len(ids), 2000):
        for hit in store.get(ids[start : start + 2000], with_embeddings=True):
            if hit.embedding is not None:
                vectors[registry.record_nodes[hit.id]] = hit.embedding
    if len(vectors) != len(ids):
        raise InputError(f"registry {registry.name!r} is not fully registered in namespace {store.namespace!r}")
    index = MatrixIndex(registry, vectors)
    with _memory_lock:
        if len(_memory) > 8:
            _memory.clear()
        _memory[key] = index
    return index


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


def gather_candidates(
    requests: Sequence[str],
    registry: Registry,
    index: StoreIndex | MatrixIndex | None,
    settings: RouteSettings,
    *,
    embed_query: Callable[[str], Sequence[float]] | None = None,
    query_vectors: Sequence[Sequence[float]] | None = None,
) -> list[Candidates]:
    """Run the retrievers the settings call for, for every request (vector search batched)."""
    n = settings.candidates
    out = [Candidates() for _ in requests]
    if settings.retrieval in ("vector", "hybrid"):
        if index is None:
            raise InputError("vector retrieval needs an index")
        if query_vectors is None:
            if embed_query is None:
                raise InputError("vector retrieval needs query vectors or an embed_query function")
            query_vectors = [embed_query(r) for r in requests]
        for cands, (agents, tools) in zip(out, index.search(query_vectors, n), strict=True):
            cands.agents, cands.tools = agents, tools
    if settings.retrieval in ("bm25", "hybrid"):
        bm25 = bm25_index(registry)
        for cands, request in zip(out, requests, strict=True):
            cands.bm25_agents, cands.bm25_tools = bm25.search(request, n)
    return out


# ---------------------------------------------------------------------------------------------
# Registration in the store
# ---------------------------------------------------------------------------------------------
@dataclass
class RegisterResult:
    """What registering a registry did."""

    name: str
    content_hash: str
    agents: int
    tools: int
    embedded: int
    deleted: int
    cached: bool
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "registry": self.name,
            "hash": self.content_hash,
            "agents": self.agents,
            "tools": self.tools,
            "embedded": self.embedded,
            "deleted": self.deleted,
            "cached": self.cached,
            "warnings": list(self.warnings),
        }


def record_id(doc_id: str, node: NodeId) -> str:
    """Store id of a registry node's record."""
    return f"{doc_id}:" + ":".join(node)


def _record_plan(registry: Registry) -> list[tuple[str, NodeId, Any]]:
    """``(record_id, node, Record)`` for every agent and tool of ``registry``."""
    from stores.vectorstore import Record

    doc = registry.doc_id
    plan = []
    for i, agent in enumerate(registry.agents):
        rid = record_id(doc, agent.node)
        rec = Record(
            id=rid,
            text=agent.text,
            kind="agent",
            doc_id=doc,
            chunk_id=agent.name,
            position=i,
            section=agent.category,
            extra={"agent": agent.name, "tool": "", "hash": content_hash(TEXT_FORMAT + rid + agent.text)},
        )
        plan.append((rid, agent.node, rec))
    for i, tool in enumerate(registry.tools):
        rid = record_id(doc, tool.node)
        rec = Record(
            id=rid,
            text=tool.text,
            kind="tool",
            doc_id=doc,
            chunk_id=tool.name,
            position=i,
            section=registry.agent(tool.agent).category,
            extra={"agent": tool.agent, "tool": tool.name, "hash": content_hash(TEXT_FORMAT + rid + tool.text)},
        )
        plan.append((rid, tool.node, rec))
    return plan


def manifest_path(namespace: str, name: str) -> Path:
    """Where the registered copy of registry ``name`` of ``namespace`` is kept."""
    from stores.documents import namespace_dir

    return namespace_dir(namespace) / "registries" / f"{check_registry_name(name)}.json"


def _read_manifest(namespace: str, name: str) -> dict[str, Any] | None:
    path = manifest_path(namespace, name)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"the registered copy of registry {name!r} is damaged ({path}): {exc}") from exc
    return data if isinstance(data, dict) else None


_register_lock = threading.Lock()


def register(
    registry: Registry,
    store: Any,
    *,
    embed: Callable[[list[str]], Sequence[Sequence[float]]] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    batch_size: int = 32,
) -> RegisterResult:
    """Embed ``registry`` into ``store`` (namespace and vector space of the store) and record it.

    Idempotent: when the registered copy has the same content hash for this vector space and the
    store holds the expected number of records, nothing is read or embedded. Otherwise only records
    whose own hash changed are embedded, and records no longer in the registry are deleted.
    ``embed`` replaces the store's embedder (benchmarks pass a cached one).
    """
    from stores.documents import write_atomic

    namespace = store.namespace
    plan = _record_plan(registry)
    total = len(plan)
    digest = registry.content_hash
    with _register_lock:
        manifest = _read_manifest(namespace, registry.name) or {}
        spaces = dict(manifest.get("spaces") or {})
        if spaces.get(store.space) == digest and store.count(doc_id=registry.doc_id) == total:
            return RegisterResult(
                registry.name, digest, len(registry.agents), len(registry.tools), 0, 0, True, list(registry.warnings)
            )
        existing = store.collection.get(where={"doc_id": registry.doc_id}, include=["metadatas"])
        have = {rid: (meta or {}).get("hash") for rid, meta in zip(existing["ids"], existing["metadatas"], strict=True)}
        todo = [rec for rid, _node, rec in plan if have.get(rid) != rec.extra["hash"]]
        stale = sorted(set(have) - {rid for rid, _n, _r in plan})
        if stale:
            store.delete(stale)
        embed_fn = embed or store.embedder.embed_documents
        done = 0
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            vectors = embed_fn([r.text for r in batch])
            store.add(batch, embeddings=vectors)
            done += len(batch)
            if progress is not None:
                progress({"stage": "embed registry", "done": done, "total": len(todo)})
        if manifest.get("hash") != digest:
            spaces = {space: h for space, h in spaces.items() if h == digest}
        spaces[store.space] = digest
        write_atomic(
            manifest_path(namespace, registry.name),
            json.dumps({"name": registry.name, "hash": digest, "spaces": spaces, **registry.to_json()}),
        )
        _registered.pop((namespace, registry.name), None)
    return RegisterResult(
        registry.name, digest, len(registry.agents), len(registry.tools), len(todo), len(stale), False,
        list(registry.warnings),
    )  # fmt: skip


_registered: dict[tuple[str, str], tuple[float, Registry]] = {}


def registered(namespace: str, name: str) -> Registry:
    """Registry ``name`` as last registered in ``namespace`` (``longdoc`` is built in)."""
    path = manifest_path(namespace, name)
    if not path.is_file():
        if name == BUILTIN_REGISTRY:
            return builtin_registry()
        raise InputError(f"no registry named {name!r} in namespace {namespace!r}; give a registry file first")
    mtime = path.stat().st_mtime
    cached = _registered.get((namespace, name))
    if cached is not None and cached[0] == mtime:
        return cached[1]
    data = _read_manifest(namespace, name) or {}
    registry = parse_registry(data.get("agents") or [], name)
    _registered[(namespace, name)] = (mtime, registry)
    return registry


def register_agents(
    namespace: str,
    registry_name: str,
    agents: Mapping[str, str] | Iterable[Agent],
    *,
    embedder: str | None = None,
    replace_all: bool = False,
) -> RegisterResult:
    """Add (or update) agents in registered registry ``registry_name``; only the changed ones are embedded.

    This is how the product's own agents register themselves: ``{name: description}`` for tool-less
    agents, or ``Agent`` objects with their tools. With ``replace_all`` the registry becomes exactly
    these agents.
    """
    from stores.vectorstore import get_store

    new = registry_from_agents(registry_name, agents)
    if not replace_all:
        try:
            old = registered(namespace, registry_name)
        except InputError:
            old = None
        if old is not None:
            names = {a.name for a in new.agents}
            merged = [a for a in old.agents if a.name not in names] + list(new.agents)
            new = Registry(name=registry_name, agents=tuple(merged), warnings=new.warnings)
    return register(new, get_store(namespace, embedder))


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------
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
    index: StoreIndex | MatrixIndex | None = None
    if settings.retrieval != "bm25":
        index = memory_index(registry, store) if settings.index == "memory" else StoreIndex(registry, store)
    cands = gather_candidates(
        requests, registry, index, settings, embed_query=store.embedder.embed_query, query_vectors=query_vectors
    )
    return [rank(r, c, registry, settings) for r, c in zip(requests, cands, strict=True)]


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
