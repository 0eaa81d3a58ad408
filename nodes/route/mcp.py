"""Reading a registry from the MCP servers JSON format, with clear errors; the built-in registry.

Each entry is validated by a pydantic model (:class:`AgentEntry`, :class:`ToolEntry`, :class:`RegistryEntries`);
the first problem becomes an InputError naming the entry (``agent #2: 'tools' must be a list``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from nodes.route.model import BUILTIN_REGISTRY, Agent, Registry, Tool, check_registry_name, registry_name_for
from stores.errors import InputError
from stores.text import is_name


class _Entry(BaseModel):
    """An entry of the MCP servers format: text fields stripped (missing: empty), unknown keys ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = ""
    description: str = ""
    examples: tuple[str, ...] = ()
    """Requests the entry serves (written by the router model, or by hand)."""

    @field_validator("name", "description", "category", "owner", mode="before", check_fields=False)
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ValueError(f"'{info.field_name}' must be a string, got {type(value).__name__}")
        return value.strip()

    @field_validator("examples", mode="before")
    @classmethod
    def _examples(cls, value: Any) -> tuple[str, ...]:
        raw = value or []
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise ValueError("'examples' must be a list of strings")
        return tuple(x.strip() for x in raw if x.strip())


class ToolEntry(_Entry):
    """A tool: an object with a name, a description and an input schema, or a bare name."""

    parameters: tuple[str, ...] = Field(
        default=(), validation_alias=AliasChoices("input_schema", "inputSchema", "parameters")
    )
    """The input schema's property names (or a list of parameter names)."""
    owner: str = Field(default="", validation_alias=AliasChoices("agent", "owner", "server"))
    """The owner agent of a top-level tool."""

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"name": data}
        if not isinstance(data, Mapping):
            raise ValueError("expected an object with a name and a description")
        return data

    @field_validator("parameters", mode="before")
    @classmethod
    def _parameters(cls, schema: Any) -> tuple[str, ...]:
        if schema is None:
            return ()
        if isinstance(schema, Mapping):
            props = schema.get("properties", {})
            if not isinstance(props, Mapping):
                raise ValueError("'properties' of the input schema must be an object")
            return tuple(str(p) for p in props)
        if isinstance(schema, list) and all(isinstance(p, str) for p in schema):
            return tuple(schema)
        raise ValueError("the input schema must be a JSON schema object or a list of parameter names")


class AgentEntry(_Entry):
    """An agent (an MCP server): name, description, category and its tools (checked one by one)."""

    category: str = ""
    tools: list[Any] = []

    @model_validator(mode="before")
    @classmethod
    def _object(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError("expected an object with a name, a description and tools")
        return data

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ValueError("'tools' must be a list")
        return value


class RegistryEntries(BaseModel):
    """A registry given as an object: its agents (``agents`` or ``servers``) and top-level tools."""

    model_config = ConfigDict(extra="ignore")

    agents: list[Any] | None = Field(default=None, validation_alias=AliasChoices("agents", "servers"))
    tools: list[Any] | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, list):
            raise ValueError("its top-level 'tools' must be a list")
        return value


E = TypeVar("E", bound=BaseModel)


def _checked(model: type[E], data: Any, what: str) -> E:
    """``data`` validated as ``model``; InputError naming ``what`` and the first problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        error = first.get("ctx", {}).get("error")
        raise InputError(f"{what}: {error if error is not None else first['msg']}") from None


def _tool(entry: Any, agent: str, what: str) -> Tool:
    checked = _checked(ToolEntry, entry, what)
    if not checked.name:
        raise InputError(f"{what} has no name")
    return Tool(
        agent=agent,
        name=checked.name,
        description=checked.description,
        parameters=checked.parameters,
        examples=checked.examples,
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
        listed = _checked(RegistryEntries, data, "the registry")
        if listed.agents is None and "tools" not in data:
            raise InputError("a registry object needs an 'agents' (or 'servers') list")
        entries: Any = listed.agents or []
        loose_tools = listed.tools or []
    else:
        entries = data
    if not isinstance(entries, list):
        raise InputError("a registry is a list of agents (MCP servers format) or an object with an 'agents' list")
    warnings: list[str] = []
    agents: dict[str, Agent] = {}
    tools_of: dict[str, list[Tool]] = {}
    for i, entry in enumerate(entries):
        what = f"agent #{i + 1}"
        checked = _checked(AgentEntry, entry, what)
        agent_name = checked.name
        if not agent_name:
            raise InputError(f"{what} has no name")
        agent = Agent(
            name=agent_name, description=checked.description, category=checked.category, examples=checked.examples
        )
        tools = [_tool(t, agent_name, f"tool #{j + 1} of agent {agent_name!r}") for j, t in enumerate(checked.tools)]
        if agent_name in agents:
            if agents[agent_name] != agent or tools_of[agent_name] != tools:
                raise InputError(f"two different agents are named {agent_name!r}; agent names must be unique")
            warnings.append(f"agent {agent_name!r} is listed twice; kept once")
            continue
        agents[agent_name] = agent
        tools_of[agent_name] = tools
    for j, entry in enumerate(loose_tools):
        what = f"top-level tool #{j + 1}"
        owner = _checked(ToolEntry, entry, what).owner
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
