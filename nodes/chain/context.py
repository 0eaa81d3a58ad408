"""Settings of a Chain-of-Agents run (their bounds in their metadata)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodes.chain.ordering.orders import ORDERS
from nodes.chain.ordering.traverse import CHILD_ORDERS, ROOT_STRATEGIES
from nodes.chain.reading import (
    DEFAULT_BATCH,
    DEFAULT_BUDGET,
    DEFAULT_FLOOR,
    DEFAULT_HOP,
    DEFAULT_PASSAGE,
    DEFAULT_SHORTLIST,
    DEFAULT_WHOLE,
)
from nodes.context import Context, describe, prompt_field

BRIDGES = ("shortlist", "always", "never")
"""When a run follows bridges (:func:`nodes.chain.passages.next_hop`, :func:`nodes.chain.passages.bridging`)."""


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
    shortlist: int = field(
        default=DEFAULT_SHORTLIST,
        metadata=describe(
            "Documents of more than whole_max chunks: chunks shortlisted across them for the question, and as many "
            "more for each missing piece a worker names; only these are read.",
            min=1,
            max=2000,
        ),
    )
    whole_max: int = field(
        default=DEFAULT_WHOLE,
        metadata=describe(
            "Most chunks a run's documents may hold to be read whole (best-first over one tree of all their "
            "chunks); more are read through a shortlist.",
            min=0,
        ),
    )
    bridges: str = field(
        default="shortlist",
        metadata=describe(
            "Follow the entity the best quote names: search and read for it beside the missing piece, and quote "
            "the shown sentences that join it to what the question still lacks (when the run reads a shortlist, "
            "always or never).",
            choices=BRIDGES,
        ),
    )
    exact_max: int = field(
        default=2000, metadata=describe("Largest chunk count for the exact dense tree; sparse above.")
    )
    worker_prompt: str = prompt_field("chain/worker", "workers")
    manager_prompt: str = prompt_field("chain/manager", "manager")

    def bridges_on(self, state: Mapping[str, Any]) -> bool:
        """Whether the run of ``state`` follows bridges (:attr:`bridges`).

        ``shortlist``: when the run reads a shortlist (documents of more than :attr:`whole_max` chunks), where the
        entity a bridge names may be in a chunk not read in yet.
        """
        return self.bridges == "always" or (self.bridges == "shortlist" and bool(state.get("shortlisted")))
