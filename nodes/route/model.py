"""The routing registry: agent and tool nodes, their embedded texts, names and store ids.

A registry is a bipartite graph of agents (name, description, category) and the tools each owns
(name, description, parameter names). These frozen records are what every other routing module
works on; :mod:`nodes.route.mcp` builds them from the MCP servers JSON format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

from stores.cache import ProcessCache
from stores.errors import InputError
from stores.text import check_name, content_hash, truncate_tokens

T = TypeVar("T")

NodeId = tuple[str, ...]
"""``("agent", name)`` or ``("tool", agent, tool)``."""

Ranked = list[tuple[NodeId, float]]
"""Nodes best first, with the score the retriever gave them."""

TEXT_FORMAT = "router-text-v1"
"""Version of the text embedded for each node; part of every hash, so a change re-embeds."""

MAX_EMBED_TOKENS = 480
BUILTIN_REGISTRY = "longdoc"


@dataclass(frozen=True)
class Tool:
    """A tool node: what it does, its parameter names, and the agent that owns it."""

    agent: str
    name: str
    description: str = ""
    parameters: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    """Requests this tool serves, written by the router model at registration (each embedded as
    one more vector of this node, and indexed by BM25 with its text)."""

    @property
    def node(self) -> NodeId:
        """The tool's node id in the registry graph."""
        return ("tool", self.agent, self.name)

    @property
    def text(self) -> str:
        """The text embedded and indexed for this tool."""
        text = f"{self.name}: {self.description}".strip() if self.description else self.name
        if self.parameters:
            text += " Parameters: " + ", ".join(self.parameters) + "."
        return truncate_tokens(text, MAX_EMBED_TOKENS)

    @property
    def search_text(self) -> str:
        """What BM25 indexes: the text and the examples."""
        return " ".join((self.text, *self.examples))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        out: dict[str, Any] = {"name": self.name, "description": self.description, "parameters": list(self.parameters)}
        if self.examples:
            out["examples"] = list(self.examples)
        return out


@dataclass(frozen=True)
class Agent:
    """An agent node and the tools it owns."""

    name: str
    description: str = ""
    category: str = ""
    tools: tuple[Tool, ...] = ()
    examples: tuple[str, ...] = ()
    """Kinds of task this agent owns, written by the router model at registration."""

    @property
    def node(self) -> NodeId:
        """The agent's node id in the registry graph."""
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

    @property
    def search_text(self) -> str:
        """What BM25 indexes: the text and the examples."""
        return " ".join((self.text, *self.examples))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "category": self.category,
            "tools": [t.to_dict() for t in self.tools],
        }
        if self.examples:
            out["examples"] = list(self.examples)
        return out


@dataclass(frozen=True)
class Registry:
    """A validated set of agents and their tools, with the warnings raised while reading it."""

    name: str
    agents: tuple[Agent, ...]
    warnings: tuple[str, ...] = ()

    @cached_property
    def tools(self) -> list[Tool]:
        """Every agent's tools, in order."""
        return [t for a in self.agents for t in a.tools]

    @property
    def entries(self) -> list[Agent | Tool]:
        """Every agent, then every tool."""
        return [*self.agents, *self.tools]

    @cached_property
    def _by_name(self) -> dict[str, Agent]:
        return {a.name: a for a in self.agents}

    def agent(self, name: str) -> Agent:
        """The agent of that name; InputError if the registry has none."""
        if name not in self._by_name:
            raise InputError(f"registry {self.name!r} has no agent {name!r}")
        return self._by_name[name]

    @cached_property
    def content_hash(self) -> str:
        """Hash of everything that is embedded or stored (not the name, not the warnings)."""
        return content_hash(TEXT_FORMAT + json.dumps([a.to_dict() for a in self.agents], sort_keys=True))

    @property
    def doc_id(self) -> str:
        """The registry's document id."""
        return registry_doc_id(self.name)

    @property
    def nodes(self) -> list[NodeId]:
        """Every agent node, then every tool node."""
        return [a.node for a in self.agents] + [t.node for t in self.tools]

    @cached_property
    def record_nodes(self) -> dict[str, NodeId]:
        """Store record id -> node, for every node and every example of a node."""
        out = {record_id(self.doc_id, n): n for n in self.nodes}
        for entry in self.entries:
            for i in range(len(entry.examples)):
                out[example_record_id(self.doc_id, entry.node, i)] = entry.node
        return out

    @property
    def examples(self) -> int:
        """How many examples the registry's nodes carry."""
        return sum(len(e.examples) for e in self.entries)

    def to_json(self) -> dict[str, Any]:
        """The registry in the servers format it can be read back from."""
        return {"name": self.name, "agents": [a.to_dict() for a in self.agents]}

    def __len__(self) -> int:
        return len(self.agents)


def check_registry_name(name: str) -> str:
    """Return ``name`` if it is a valid registry name (like a namespace) or raise ``InputError``."""
    return check_name(name, "registry name")


def registry_name_for(path: str | Path) -> str:
    """A registry name derived from a file name (``my servers.json`` -> ``my-servers``)."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(path).stem).strip("-_")[:63]
    return stem or "registry"


def registry_doc_id(name: str) -> str:
    """The store ``doc_id`` under which the records of registry ``name`` live."""
    return f"registry-{check_registry_name(name)}"


class PerRegistry(Generic[T]):
    """What ``build`` makes of a registry, built once per registry content (at most ``size`` kept)."""

    def __init__(self, build: Callable[[Registry], T], size: int = 16) -> None:
        self.build = build
        self._built: ProcessCache[str, T] = ProcessCache(f"per registry: {build.__name__}", size)

    def __call__(self, registry: Registry) -> T:
        """The value built for the registry, built once per registry content."""
        return self._built.get_or_build(registry.content_hash, lambda: self.build(registry), exclusive=True)


def record_id(doc_id: str, node: NodeId) -> str:
    """Store id of a registry node's record."""
    return f"{doc_id}:" + ":".join(node)


def example_record_id(doc_id: str, node: NodeId, i: int) -> str:
    """Store id of the ``i``-th example of a node (another vector pointing to the same node)."""
    return f"{record_id(doc_id, node)}#x{i}"
