"""The workflows this product serves, by the names users call them, and how to compile them with a checkpointer.

The names are the same everywhere: the ``longdoc`` commands, ``langgraph.json`` and ``aegra.json``,
the LangServe paths, the MCP tools and the A2A agent. Two workflows had other ids before
(:data:`ALIASES`); those ids still name the same graphs wherever something stored may hold them.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

WORKFLOWS: dict[str, str] = {
    "ingest": "graphs.ingest",
    "ask": "graphs.chain.graph",
    "summarize": "graphs.summarize.graph",
    "chat": "graphs.offload.graph",
    "route": "graphs.route.graph",
}
"""Workflow name -> module exposing ``builder`` (a StateGraph) and ``graph`` (compiled, no checkpointer)."""

ALIASES: dict[str, str] = {"chain": "ask", "offload": "chat"}
"""Former graph ids -> the workflow they name: assistants, threads and clients made under them keep working."""

DESCRIPTIONS: dict[str, str] = {
    "ingest": (
        "Add a document to your namespace so that ask, summarize and chat can read it: PDF, DOCX, HTML, Markdown "
        "or plain text, given as text or as base64 data with its filename. Returns its doc_id (16 hex digits); "
        "the same content ingested again returns the same doc_id at no cost. Use it first when you hold a "
        "document that is not ingested yet."
    ),
    "ask": (
        "Answer one question about a long document, citing the sentences the answer rests on (quoted, each with "
        "its label such as [c3.2]). Worker agents read the passages most relevant to the question, in the order "
        "a Chow-Liu tree over the document's chunks suggests, within a fixed token budget; a manager writes the "
        "answer. Use it for a specific fact, name, date or figure, or a question whose answer is spread across "
        "the document. Name the document by doc_id (from ingest), or give its text."
    ),
    "summarize": (
        "Summarize a long document, or what it says about one topic (query), at a target length in words. An "
        "editor agent questions expert agents round by round, then polishes the summary and fact-checks every "
        "sentence against the chunks it cites. Use it for overviews, minutes, 'what does it say about ...' as a "
        "whole; for one fact use ask. Name the document by doc_id (from ingest), or give its text."
    ),
    "chat": (
        "Hold a conversation about one document, turn by turn, with a small working memory: a map of the "
        "document in every prompt, earlier turns compressed and recalled when needed. Each call is one turn; "
        "a chat client continues the conversation on the same thread, an MCP call by passing back the "
        "thread_id the previous turn returned (for a single question, ask reads more). Name the document by "
        "doc_id or text on the first turn, or attach the file to the message in a chat client."
    ),
    "route": (
        "Choose, among the agents and tools of a registry (MCP servers and their tools), the agents that fit a "
        "request, ranked, with the tools that matched. Use it for 'which tool or agent should I use to ...'; it "
        "does not run them. The registry 'longdoc' holds this server's own tools."
    ),
}
"""What each workflow does and when to use it: the MCP tools' and the graphs' descriptions (``langgraph.json``)."""

CHAT_EXAMPLES = (
    "(with a PDF attached) What does this report conclude about the budget?",
    "Who manages procurement, and which supplier did they find?",
    "And when do the field trials start?",
    "Summarize what we discussed so far in two sentences.",
)
"""What people say to the chat: the A2A skill's examples."""


def canonical(name: str) -> str:
    """The workflow ``name`` or a former id names; KeyError for anything else."""
    name = ALIASES.get(name, name)
    if name not in WORKFLOWS:
        raise KeyError(f"unknown workflow {name!r}; one of {', '.join(WORKFLOWS)}")
    return name


def available() -> list[str]:
    """Names of the workflows whose module is present."""
    return [name for name, module in WORKFLOWS.items() if importlib.util.find_spec(module) is not None]


def compile_with(name: str, checkpointer: BaseCheckpointSaver[Any] | None) -> Any:
    """Workflow ``name`` (or a former id) compiled with ``checkpointer`` (for Python and LangServe callers).

    Ingest is never compiled with one.
    """
    name = canonical(name)
    module = importlib.import_module(WORKFLOWS[name])
    # An ingest is one idempotent step: a checkpoint would only keep the caller's document.
    graph = module.builder.compile(checkpointer=None if name == "ingest" else checkpointer)
    limit = getattr(module, "RECURSION_LIMIT", None)
    if limit:
        graph = graph.with_config(recursion_limit=limit)
    graph.name = name
    return graph


def context_schema(name: str) -> Any:
    """The context class of workflow ``name`` or its former id (None when it has none or is not a workflow)."""
    name = ALIASES.get(name, name)
    if name not in WORKFLOWS:  # a graph served outside the registry (a test's or an embedder's own)
        return None
    return getattr(importlib.import_module(WORKFLOWS[name]).builder, "context_schema", None)
