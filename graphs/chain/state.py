"""Settings, input, output and state of the Chain-of-Agents graph (the settings' bounds in their metadata)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired

from typing_extensions import TypedDict

from graphs.context import Context, DocumentId, DocumentPath, DocumentText, Namespace, describe, described
from nodes.chain.ordering.orders import ORDERS
from nodes.chain.ordering.traverse import CHILD_ORDERS, ROOT_STRATEGIES
from nodes.chain.reading import DEFAULT_BATCH, DEFAULT_BUDGET, DEFAULT_FLOOR, DEFAULT_HOP, DEFAULT_PASSAGE
from stores.settings import MAX_QUESTION_CHARS
from stores.usage import Usage, merge_usage

CHUNK_TOKENS = 1200
"""Most tokens of one chunk a reader takes (longer chunks are cut)."""


@dataclass(kw_only=True)
class ChainContext(Context):
    """Settings of a Chain-of-Agents run."""

    order: str = field(
        default="best-first", metadata=describe(f"Chunk order: one of {', '.join(ORDERS)}.", choices=ORDERS)
    )
    budget: int = field(
        default=DEFAULT_BUDGET,
        metadata=describe(
            "Tokens of document text each chain may read (0 = no limit); then the manager answers.", min=0
        ),
    )
    batch_tokens: int = field(
        default=DEFAULT_BATCH,
        metadata=describe(
            "best-first: tokens of passages one worker reads (the most relevant, from any chunk).", min=20
        ),
    )
    passage_tokens: int = field(
        default=DEFAULT_PASSAGE,
        metadata=describe("Most tokens of one passage (consecutive sentences of one paragraph).", min=20),
    )
    hop_budget: int = field(
        default=DEFAULT_HOP,
        metadata=describe(
            "Tokens a chain may read past the budget, once, while a worker names a missing piece (0 = never).", min=0
        ),
    )
    floor: float = field(
        default=DEFAULT_FLOOR,
        metadata=describe(
            "Chunks less relevant than this (standard deviations above the mean) are skipped without a call."
        ),
    )
    early_stop: bool = field(default=True, metadata=describe("Stop reading as soon as the notes answer the question."))
    confirm: int = field(
        default=1,
        metadata=describe(
            "Further workers that added a quote and must also find nothing missing before reading stops.", min=0
        ),
    )
    read_all: bool = field(
        default=False, metadata=describe("Read every chunk: no budget, no floor, no early stop (the full chain).")
    )
    tree_weight: float = field(
        default=0.5, metadata=describe("best-first: weight of the tree edge to the chunks read.")
    )
    jump_penalty: float = field(
        default=1.0, metadata=describe("best-first: score a chunk off the tree frontier gives up.")
    )
    root: str = field(
        default="query",
        metadata=describe("Tree root: query (most similar chunk), degree or weight.", choices=ROOT_STRATEGIES),
    )
    children: str = field(
        default="weight",
        metadata=describe("Visit children by edge weight or by question relevance.", choices=CHILD_ORDERS),
    )
    roots: int = field(
        default=1, metadata=describe("Chains to run from different roots (multi-root voting); 1 = one chain.", min=1)
    )
    max_chunks: int = field(
        default=0, metadata=describe("Read at most this many chunks per chain (0 = no limit).", min=0)
    )
    sharpen: float = field(
        default=0.0, metadata=describe("Similarity sharpening temperature T for exp(sim/T); 0 = off.")
    )
    extra_embedders: list[str] = field(
        default_factory=list,
        metadata=describe("Other embedders whose similarities are averaged into the tree weights."),
    )
    seed: int = field(default=0, metadata=describe("Seed of the random order."))
    quotes: int = field(default=6, metadata=describe("Most sentences one worker may quote.", min=1))
    evidence_tokens: int = field(
        default=700, metadata=describe("Tokens of quoted sentences a chain carries at most.", min=50)
    )
    worker_max_tokens: int = field(default=160, metadata=describe("Most tokens a worker may write."))
    manager_max_tokens: int = field(default=200, metadata=describe("Most tokens the manager may write."))
    exact_max: int = field(
        default=2000, metadata=describe("Largest chunk count for the exact dense tree; sparse above.")
    )


class ChainRequest(TypedDict):
    """The input less ``doc_id`` (which the state shares with the output, where it is always set)."""

    question: Annotated[
        str,
        described(
            "The question to answer about the document, in its words or yours; one question per call.",
            example="Who manages procurement, and which supplier did they find?",
            minLength=1,
            maxLength=MAX_QUESTION_CHARS,
        ),
    ]
    path: NotRequired[DocumentPath]
    text: NotRequired[DocumentText]
    namespace: NotRequired[Namespace]


class ChainInput(ChainRequest):
    """A question about one document, named by doc_id (or given as text)."""

    doc_id: NotRequired[DocumentId]


class ChainOutput(TypedDict):
    """The answer and how it was reached."""

    answer: str
    """Short answer."""
    explanation: str
    """One sentence of justification with citations."""
    citations: list[str]
    """Chunk ids that support the answer."""
    quotes: list[str]
    """The quoted sentences the answer rests on, each behind its label ``[c3.2]`` (sentence 2 of chunk c3)."""
    inferred: bool
    """The answer is not stated in its quotes word for word (the manager joined or read between them)."""
    order: list[list[str]]
    """Chunk ids in the order the workers read them, one list per chain."""
    read: list[str]
    """Chunk ids read (wholly or in part) by any chain, in first-read order."""
    passages: list[str]
    """Passages read by any chain, as chunk id and sentence range (``c3.4-7``), in reading order."""
    skipped: list[str]
    """Chunk ids passed over without a model call (relevance below the floor)."""
    stopped: str
    """Why reading ended: complete (a worker found nothing missing), budget, hop-budget (the budget and its
    extension for a missing piece were spent), or end (nothing left worth reading)."""
    tree: list[list[Any]]
    """Chow-Liu tree edges as [chunk id, chunk id, weight]."""
    notes: list[str]
    """The quotes every chain gathered, one ``[label] sentence`` line each."""
    dropped: int
    """Quotes the workers gave that named no sentence they were shown (left out)."""
    usage: Annotated[Usage, merge_usage]
    """Tokens in/out and calls per role."""
    calls: int
    """LLM calls made."""
    doc_id: str
    """Id of the document."""


class ChainState(ChainRequest, ChainOutput, total=False):
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
    """Quotes of the chain being read."""
    missing: str
    """What the current chain's last informative worker said is missing."""
    streak: int
    """Workers in a row that found the notes complete."""
    spent: int
    """Tokens of document text the current chain has read."""
    extended: int
    """Tokens the current chain's budget was extended by for a missing piece."""
    taken: list[int]
    """Passages (document-wide numbers) the current chain has read."""
    batch: list[int]
    """Passages the next worker reads (empty when the chains are done)."""
    relevant: Annotated[list[str], lambda a, b: (a or []) + (b or [])]
    """Chunk ids whose sentences a worker quoted."""
    language: str
    """Prompt language (the document's)."""
