"""Reading a registry from the MCP servers JSON format, with clear errors; the built-in registry."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from nodes.route.model import BUILTIN_REGISTRY, Agent, Registry, Tool, check_registry_name, registry_name_for
from stores.settings import InputError
from stores.text import is_name


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
        examples=_examples(entry, f"{what} ({name})"),
    )


def _examples(entry: Mapping[str, Any], what: str) -> tuple[str, ...]:
    """Optional ``examples``: requests the entry serves (written by the router model, or by hand)."""
    raw = entry.get("examples") or []
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise InputError(f"{what}: 'examples' must be a list of strings")
    return tuple(x.strip() for x in raw if x.strip())


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
            examples=_examples(entry, f"agent {agent_name!r}"),
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
        name = own if isinstance(own, str) and is_name(own) else registry_name_for(p)
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
        "ask",
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
        "chat",
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
