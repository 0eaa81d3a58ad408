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

NAMING = (
    "Name one document by doc_id (from ingest) or give its text, or name several as one collection: doc_ids "
    "(a list of ids), a folder path under the server's ingest root, or whole_namespace: true (every document "
    "of the namespace). Over a collection a label carries the document's tag ([2:c3.1] is sentence 1 of "
    "chunk c3 of document 2) and documents maps each tag to its title and file."
)
"""How every reading workflow's input names its documents: the end of their descriptions."""

DESCRIPTIONS: dict[str, str] = {
    "ingest": (
        "Add a document to your namespace so that ask, summarize and chat can read it: PDF, DOCX, HTML, Markdown "
        "or plain text, given as text or as base64 data with its filename. Returns its doc_id (16 hex digits); "
        "the same content ingested again returns the same doc_id at no cost. A folder path under the server's "
        "ingest root adds every document in it (a collection: each one's doc_id is in documents); a file "
        "changed since it was last ingested replaces its earlier version (superseded). Use it first when you "
        "hold a document that is not ingested yet."
    ),
    "ask": (
        "Answer one question about a long document or a collection of documents, citing the sentences the "
        "answer rests on (quoted, each with its label such as [c3.2]). Worker agents read the passages most "
        "relevant to the question, in the order a Chow-Liu tree over the document's chunks suggests, within a "
        "fixed token budget; a manager writes the answer. Use it for a specific fact, name, date or figure, or a "
        "question whose answer is spread across the document. " + NAMING
    ),
    "summarize": (
        "Summarize a long document or a collection, or what it says about one topic (query), at a target length "
        "in words. An editor agent questions expert agents round by round, then polishes the summary and "
        "fact-checks every sentence against the chunks it cites. Use it for overviews, minutes, 'what does it "
        "say about ...' as a whole; for one fact use ask. " + NAMING
    ),
    "chat": (
        "Hold a conversation about one document or a collection, turn by turn, with a small working memory: a "
        "map of the documents in every prompt, earlier turns compressed and recalled when needed. Each call is "
        "one turn; a chat client continues the conversation on the same thread, an MCP call by passing back the "
        "thread_id the previous turn returned (for a single question, ask reads more). On the first turn "
        + NAMING.replace("Name ", "name ", 1)
        + " A chat client may attach the files to the message instead."
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

COLLECTION_EXAMPLES = (
    "(with three reports attached) Which of these reports mention the pump budget, and what do they say?",
    '(with the data part {"path": "team"}) Who leads each project in the team folder?',
    '(with the data part {"whole_namespace": true}) Which documents disagree about the start of the field trials?',
    '(with the data part {"doc_ids": ["9362242a1b2c3d4e", "a41c07be5d2f9e10"]}) Compare the two budgets.',
)
"""What people say to the chat about several documents: the A2A collection skill's examples."""


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
