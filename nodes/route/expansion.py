"""Model-written example requests for a registry's tools and agents, and request decomposition.

A tool's description says what it does in its author's words; a user asks for a task in theirs.
At registration the router model writes, once per tool, a few short requests that tool serves
(and, per agent, the kinds of task it owns). They are kept in an expansion journal keyed by the
content hash of the entry they were written for (prompt, agent, tool text), so re-registering an
unchanged registry calls no model, and a run killed halfway resumes where it stopped: every
answered call is appended (one JSON line) before the next is sent.

The expanded registry carries the examples on its ``Tool`` and ``Agent`` records; registration
embeds each example as one more vector of the node it was written for, and BM25 indexes them as
part of the node's text (see :mod:`nodes.route.manifest` and :mod:`nodes.route.indexes`).

``decompose`` is the optional per-request step: one short call that splits a compound request
into the tasks it asks for, each routed on its own and the agent lists fused.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

import prompts
from nodes.route.model import Agent, Registry, Tool
from stores.cache import lru_cache
from stores.models import LLM, messages
from stores.text import content_hash, truncate_tokens
from stores.usage import Usage, merge_usage, track_usage, usage_totals

EXPANSION_VERSION = "expand-v1"
"""Version of the expansion step; part of every journal key, so a change writes new examples."""
PER_TOOL = 2
PER_AGENT = 3
BATCH = 6
"""Tools per model call (an agent's tools are sent together, in batches of this size)."""
DESCRIPTION_TOKENS = 120
"""Each description shown to the model is cut to about this many tokens."""
MAX_EXAMPLE_CHARS = 200
MAX_INTENTS = 4

# The three reply schemas below have no class docstring on purpose: pydantic would send it to the model as the
# schema's description, and the routing figures were measured with the schemas as they are.


class ToolRequests(BaseModel):  # noqa: D101
    tool: str = Field(description="the tool's name, as shown")
    requests: list[str] = Field(description="short user requests this tool serves")


class ExpansionReply(BaseModel):  # noqa: D101
    agent_tasks: list[str] = Field(default_factory=list, description="kinds of task the provider handles")
    tools: list[ToolRequests] = Field(default_factory=list)


class DecomposeReply(BaseModel):  # noqa: D101
    tasks: list[str] = Field(description="the separate tasks of the request, in order")


@dataclass
class ExpansionStats:
    """What one expansion did: model calls, tokens, seconds, and how much came from the journal."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    tools_written: int = 0
    tools_cached: int = 0
    agents_written: int = 0
    agents_cached: int = 0
    failed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready fields."""
        return {
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "seconds": round(self.seconds, 2),
            "tools_written": self.tools_written,
            "tools_cached": self.tools_cached,
            "agents_written": self.agents_written,
            "agents_cached": self.agents_cached,
            "failed": list(self.failed),
        }


class ExpansionJournal:
    """Append-only JSON-lines file of written examples, keyed by entry hash (last line of a key wins).

    A JSON-lines journal rather than the response cache: it is keyed by what was expanded, not by
    the exact prompt of a batch, so a tool keeps its examples when its neighbours in a batch change.
    ``shipped`` is a journal read first and never written (one kept with the code, for benchmarks).
    """

    def __init__(self, path: str | Path, shipped: str | Path | None = None) -> None:
        self.path = Path(path)
        self.shipped = Path(shipped) if shipped is not None else None
        self._lock = threading.Lock()
        self._rows: dict[str, list[str]] | None = None

    def _load(self) -> dict[str, list[str]]:
        if self._rows is None:
            rows: dict[str, list[str]] = {}
            for file in (self.shipped, self.path):
                if file is None or not file.is_file():
                    continue
                for line in file.read_text(encoding="utf-8").splitlines():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut by a kill mid-write: that entry is written again
                    if isinstance(row, dict) and isinstance(row.get("key"), str):
                        rows[row["key"]] = [str(x) for x in row.get("examples") or []]
            self._rows = rows
        return self._rows

    def get(self, key: str) -> list[str] | None:
        """The stored expansions for the key, or None."""
        with self._lock:
            return self._load().get(key)

    def put_many(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append rows (``key``, ``examples`` and any labels), flushed to disk before returning."""
        rows = list(rows)
        if not rows:
            return
        with self._lock:
            known = self._load()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            for row in rows:
                known[row["key"]] = list(row["examples"])

    def __len__(self) -> int:
        with self._lock:
            return len(self._load())


class SharedExpansionJournal:
    """The same journal kept in the Chroma server (one small record per entry), for every instance."""

    def __init__(self, namespace: str) -> None:
        from stores.shared_files import SharedFiles

        self.files = SharedFiles(namespace)

    def get(self, key: str) -> list[str] | None:
        """The stored expansions for the key, or None."""
        text = self.files.get("expansions", key)
        return None if text is None else [str(x) for x in json.loads(text).get("examples") or []]

    def put_many(self, rows: Iterable[dict[str, Any]]) -> None:
        """Store each row's expansions under its key."""
        for row in rows:
            self.files.put("expansions", row["key"], json.dumps(row, ensure_ascii=False, sort_keys=True))


def journal_for(namespace: str) -> ExpansionJournal | SharedExpansionJournal:
    """The namespace's expansion journal: in the Chroma server when one is set, else a file in its folder."""
    from stores.documents import namespace_dir
    from stores.shared_files import shared_files

    if shared_files(namespace) is not None:
        return SharedExpansionJournal(namespace)
    return ExpansionJournal(namespace_dir(namespace) / "registries" / "expansions.jsonl")


@lru_cache(maxsize=8)
def _prompt_id(system_prompt: str | None = None) -> str:
    return content_hash(
        EXPANSION_VERSION
        + prompts.chosen("route/expand", "en", system_prompt).template
        + prompts.load("route/expand_user").template
        + f"{PER_TOOL}/{PER_AGENT}/{DESCRIPTION_TOKENS}"
    )


def tool_key(agent: Agent, tool: Tool, model_id: str, system_prompt: str | None = None) -> str:
    """Journal key of a tool's examples: prompt version, model, the agent's and the tool's texts."""
    version = _prompt_id(system_prompt)
    return content_hash(json.dumps(["tool", version, model_id, agent.name, agent.description, tool.text]))


def agent_key(agent: Agent, model_id: str, system_prompt: str | None = None) -> str:
    """Journal key of an agent's task kinds: prompt version, model, its description and tool names."""
    names = sorted(t.name for t in agent.tools)
    version = _prompt_id(system_prompt)
    return content_hash(json.dumps(["agent", version, model_id, agent.name, agent.description, names]))


def clean_examples(values: Iterable[Any], limit: int) -> list[str]:
    """Distinct, non-empty, single-line examples, each cut to a sane length, at most ``limit``."""
    out: list[str] = []
    seen: set[str] = set()
    for value in values:
        text = " ".join(str(value).split())[:MAX_EXAMPLE_CHARS].strip()
        if len(text) < 3 or text.lower() in seen:
            continue
        seen.add(text.lower())
        out.append(text)
        if len(out) >= limit:
            break
    return out


def _tool_lines(tools: Sequence[Tool]) -> str:
    lines = []
    for i, tool in enumerate(tools, 1):
        about = truncate_tokens(tool.description or "(no description)", DESCRIPTION_TOKENS)
        params = f" Parameters: {', '.join(tool.parameters)}." if tool.parameters else ""
        lines.append(f"{i}. {tool.name}: {about}{params}")
    return "\n".join(lines)


def _batches(tools: Sequence[Tool], size: int) -> list[list[Tool]]:
    return [list(tools[i : i + size]) for i in range(0, len(tools), size)]


def _match(reply: ExpansionReply, batch: Sequence[Tool]) -> dict[str, list[str]]:
    """Requests per tool name of the batch: by name, else by position when the names were mangled."""
    by_name = {t.name: t for t in batch}
    out: dict[str, list[str]] = {}
    for entry in reply.tools:
        if entry.tool in by_name and entry.tool not in out:
            out[entry.tool] = entry.requests
    if len(out) < len(batch) and len(reply.tools) == len(batch):
        for tool, entry in zip(batch, reply.tools, strict=True):
            out.setdefault(tool.name, entry.requests)
    return out


def _tool_rows(
    agent: Agent,
    batch: Sequence[Tool],
    reply: ExpansionReply,
    missing: list[Tool],
    retried: set[str],
    written: dict[str, list[str]],
    stats: ExpansionStats,
    model_id: str,
    system_prompt: str | None,
) -> tuple[list[dict[str, Any]], list[Tool]]:
    """The journal rows of the batch's tools ``reply`` wrote examples for, and the tools to ask about once more."""
    rows: list[dict[str, Any]] = []
    matched = _match(reply, batch)
    missed = []
    for tool in batch:
        if tool not in missing:
            continue
        examples = clean_examples(matched.get(tool.name, ()), PER_TOOL)
        if not examples and tool.name not in retried:
            missed.append(tool)  # asked once more, on its own batch, before it is left bare
            continue
        written[tool.name] = examples
        key = tool_key(agent, tool, model_id, system_prompt)
        rows.append({"key": key, "node": list(tool.node), "examples": examples})
        stats.tools_written += 1
    return rows, missed


def expand_registry(
    registry: Registry,
    journal: ExpansionJournal | SharedExpansionJournal,
    llm: LLM,
    *,
    model_id: str,
    progress: Callable[[dict[str, Any]], None] | None = None,
    system_prompt: str | None = None,
) -> tuple[Registry, ExpansionStats]:
    """``registry`` with model-written examples on every tool and agent the model answered for.

    Entries already in ``journal`` call no model. A batch whose reply fails (the model layer's own
    schema retries spent) is recorded in ``stats.failed`` and its tools keep their description
    only; it is tried again on the next expansion. ``model_id`` names the model in the journal
    keys, so examples written by another model are not reused; ``system_prompt`` (the context's
    ``expand_prompt``; None: the template file) is in them too.
    """
    import time

    stats = ExpansionStats()
    usage: Usage = {}
    start = time.perf_counter()
    agents: list[Agent] = []
    for n, agent in enumerate(registry.agents):
        written: dict[str, list[str]] = {}
        missing = []
        for tool in agent.tools:
            hit = journal.get(tool_key(agent, tool, model_id, system_prompt))
            if hit is None:
                missing.append(tool)
            else:
                written[tool.name] = hit
                stats.tools_cached += 1
        akey = agent_key(agent, model_id, system_prompt)
        agent_tasks = journal.get(akey)
        if agent_tasks is not None:
            stats.agents_cached += 1
        # An agent whose tools are all written but whose tasks are not is sent with its first tools.
        batches = _batches(missing, BATCH) or ([list(agent.tools[:BATCH])] if agent_tasks is None else [])
        retried: set[str] = set()
        while batches:
            batch = batches.pop(0)
            started = time.perf_counter()
            with track_usage() as used:
                reply = _ask(llm, agent, batch, system_prompt)
            usage = merge_usage(usage, used)
            cost = {**usage_totals(used), "seconds": round(time.perf_counter() - started, 2)}
            if reply is None:
                stats.failed.append(f"{agent.name}: {', '.join(t.name for t in batch) or '(agent only)'}")
                continue
            rows, missed = _tool_rows(agent, batch, reply, missing, retried, written, stats, model_id, system_prompt)
            if missed:
                batches.append(missed)
                retried.update(t.name for t in missed)
            if agent_tasks is None:
                agent_tasks = clean_examples(reply.agent_tasks, PER_AGENT)
                rows.append({"key": akey, "node": list(agent.node), "examples": agent_tasks})
                stats.agents_written += 1
            if rows:
                rows[0]["cost"] = cost  # what the call that wrote these rows spent (the one-time cost)
            journal.put_many(rows)
        tools = tuple(replace(t, examples=tuple(written.get(t.name, ()))) for t in agent.tools)
        agents.append(replace(agent, tools=tools, examples=tuple(agent_tasks or ())))
        if progress is not None:
            progress({"stage": "expand registry", "done": n + 1, "total": len(registry.agents)})
    totals = usage_totals(usage)
    stats.calls = totals.get("calls", 0) - totals.get("cached", 0)
    stats.tokens_in = totals.get("input", 0)
    stats.tokens_out = totals.get("output", 0)
    stats.seconds = time.perf_counter() - start
    return replace(registry, agents=tuple(agents)), stats


def _ask(llm: LLM, agent: Agent, batch: Sequence[Tool], system_prompt: str | None = None) -> ExpansionReply | None:
    from stores.models import ModelOutputError

    system = prompts.render("route/expand", template=system_prompt, per_tool=PER_TOOL, per_agent=PER_AGENT)
    user = prompts.render(
        "route/expand_user",
        agent=agent.name,
        description=truncate_tokens(agent.description or "(no description)", DESCRIPTION_TOKENS),
        tools=_tool_lines(batch) if batch else "(none listed)",
        per_tool=PER_TOOL,
        per_agent=PER_AGENT,
    )
    budget = 80 + 70 * PER_TOOL * max(1, len(batch))
    try:
        return llm.structured(messages(system, user), ExpansionReply, max_tokens=budget)
    except ModelOutputError:
        return None


def decompose(request: str, llm: LLM, system_prompt: str | None = None) -> list[str]:
    """The separate tasks of ``request`` (itself alone when it asks for one thing or the reply fails).

    ``system_prompt`` is the context's ``decompose_prompt`` (None: the template file).
    """
    from stores.models import ModelOutputError

    system = prompts.render("route/decompose", template=system_prompt, max=MAX_INTENTS)
    user = prompts.render("route/decompose_user", request=request)
    try:
        reply = llm.structured(messages(system, user), DecomposeReply, max_tokens=60 * MAX_INTENTS)
    except ModelOutputError:
        return [request]
    return clean_examples(reply.tasks, MAX_INTENTS) or [request]


def model_id(llm: LLM) -> str:
    """The model an ``LLM`` writes with, as named in journal keys (its endpoint's model name)."""
    from stores.models import model_overridden, resolve_role

    if model_overridden():
        return "scripted"
    spec = resolve_role(llm.role, llm.overrides)
    return f"{spec.model}@{spec.temperature}"
