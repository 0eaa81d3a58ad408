"""Settings, input, output and state of the Chain-of-Agents graph, and the check of its settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from typing_extensions import TypedDict

from graphs.context import Context
from nodes.ordering.orders import ORDERS
from nodes.ordering.traverse import CHILD_ORDERS, ROOT_STRATEGIES
from nodes.reading import DEFAULT_BUDGET, DEFAULT_FLOOR
from stores.models import Usage, merge_usage
from stores.settings import InputError

CHUNK_TOKENS = 1200
"""Most tokens of one chunk a worker reads (longer chunks are cut)."""


def _d(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class ChainContext(Context):
    """Settings of a Chain-of-Agents run."""

    order: str = field(default="best-first", metadata=_d(f"Chunk order: one of {', '.join(ORDERS)}."))
    budget: int = field(
        default=DEFAULT_BUDGET,
        metadata=_d("Tokens of chunk text each chain may read (0 = no limit); then the manager answers."),
    )
    floor: float = field(
        default=DEFAULT_FLOOR,
        metadata=_d("Chunks less relevant than this (standard deviations above the mean) are skipped without a call."),
    )
    early_stop: bool = field(default=True, metadata=_d("Stop reading as soon as the notes answer the question."))
    confirm: int = field(
        default=1,
        metadata=_d("Further informative workers that must also find the notes complete before reading stops."),
    )
    read_all: bool = field(
        default=False, metadata=_d("Read every chunk: no budget, no floor, no early stop (the full chain).")
    )
    tree_weight: float = field(default=0.5, metadata=_d("best-first: weight of the tree edge to the chunks read."))
    jump_penalty: float = field(default=1.0, metadata=_d("best-first: score a chunk off the tree frontier gives up."))
    root: str = field(default="query", metadata=_d("Tree root: query (most similar chunk), degree or weight."))
    children: str = field(default="weight", metadata=_d("Visit children by edge weight or by question relevance."))
    roots: int = field(default=1, metadata=_d("Chains to run from different roots (multi-root voting); 1 = one chain."))
    max_chunks: int = field(default=0, metadata=_d("Read at most this many chunks per chain (0 = no limit)."))
    sharpen: float = field(default=0.0, metadata=_d("Similarity sharpening temperature T for exp(sim/T); 0 = off."))
    extra_embedders: list[str] = field(
        default_factory=list, metadata=_d("Other embedders whose similarities are averaged into the tree weights.")
    )
    seed: int = field(default=0, metadata=_d("Seed of the random order."))
    note_words: int = field(default=50, metadata=_d("Word budget of each worker's new facts."))
    worker_max_tokens: int = field(default=160, metadata=_d("Most tokens a worker may write."))
    manager_max_tokens: int = field(default=200, metadata=_d("Most tokens the manager may write."))
    exact_max: int = field(default=2000, metadata=_d("Largest chunk count for the exact dense tree; sparse above."))


class ChainInput(TypedDict):
    """A question about a document."""

    question: str
    """The question to answer."""
    doc_id: NotRequired[str]
    """Id of an ingested document; give exactly one of doc_id, path or text."""
    path: NotRequired[str]
    """Path of a document to ingest first (txt, md, pdf, docx, html); or doc_id or text."""
    text: NotRequired[str]
    """Raw text to ingest first (cleared from the state once ingested); or doc_id or path."""
    namespace: NotRequired[str]
    """Namespace of the document (default: the context's)."""


class ChainOutput(TypedDict):
    """The answer and how it was reached."""

    answer: str
    """Short answer."""
    explanation: str
    """One sentence of justification with citations."""
    citations: list[str]
    """Chunk ids that support the answer."""
    order: list[list[str]]
    """Chunk ids in the order the workers read them, one list per chain."""
    read: list[str]
    """Chunk ids read by any chain, in first-read order."""
    skipped: list[str]
    """Chunk ids passed over without a model call (relevance below the floor)."""
    stopped: str
    """Why reading ended: complete (the notes answer the question), budget, or end (nothing left worth reading)."""
    tree: list[list[Any]]
    """Chow-Liu tree edges as [chunk id, chunk id, weight]."""
    notes: list[str]
    """Last notes of every chain."""
    usage: Annotated[Usage, merge_usage]
    """Tokens in/out and calls per role."""
    calls: int
    """LLM calls made."""
    doc_id: str
    """Id of the document."""


class ChainState(ChainInput, ChainOutput, total=False):
    """Private state: where the chains are."""

    chunk_ids: list[str]
    """All chunk ids of the document, in document order."""
    plan: list[list[str]]
    """Per chain: the planned order (fixed orders) or the root (best-first)."""
    stops: list[str]
    """Why each finished chain stopped."""
    chain: int
    """Index of the chain being read."""
    pos: int
    """Position in the current chain's plan (fixed orders)."""
    current: str
    """Notes of the chain being read."""
    missing: str
    """What the current chain's last informative worker said is missing."""
    streak: int
    """Workers in a row that found the notes complete."""
    spent: int
    """Tokens of chunk text the current chain has read."""
    next: str
    """Chunk the next worker reads ("" when the chains are done)."""
    relevant: Annotated[list[str], lambda a, b: (a or []) + (b or [])]
    """Chunk ids whose workers found something relevant."""
    language: str
    """Prompt language (the document's)."""


def check_context(ctx: ChainContext) -> None:
    """Reject settings that cannot work (InputError)."""
    if ctx.order not in ORDERS:
        raise InputError(f"unknown order {ctx.order!r}; choose one of {', '.join(ORDERS)}")
    if ctx.root not in ROOT_STRATEGIES:
        raise InputError(f"unknown root strategy {ctx.root!r}; choose one of {', '.join(ROOT_STRATEGIES)}")
    if ctx.children not in CHILD_ORDERS:
        raise InputError(f"unknown child order {ctx.children!r}; choose one of {', '.join(CHILD_ORDERS)}")
    if ctx.roots < 1:
        raise InputError("roots must be at least 1")
    if ctx.budget < 0 or ctx.max_chunks < 0 or ctx.confirm < 0:
        raise InputError("budget, max_chunks and confirm must not be negative")
