"""Settings of the chat workflow (an offloading session) and their rules across fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from nodes.chain.reading import DEFAULT_BUDGET
from nodes.context import Context, describe, prompt_field, validate
from nodes.offload.memory import POLICIES
from stores.errors import InputError
from stores.offload import BACKENDS


@dataclass(kw_only=True)
class OffloadContext(Context):
    """Settings of an offloading session."""

    policy: str = field(
        default="offload_canvas",
        metadata=describe(
            "Memory policy: full (every turn verbatim), last_k (last keep_turns verbatim), "
            "offload (one-line conclusions + offload store), offload_canvas (offload + the document's canvas).",
            choices=POLICIES,
        ),
    )
    keep_turns: int = field(
        default=3, metadata=describe("Recent turns always kept (as conclusions, or verbatim for last_k).", min=0)
    )
    token_budget: int = field(
        default=2500, metadata=describe("Most estimated tokens of one answering prompt; 0 = no budget.", min=0)
    )
    read_budget: int = field(
        default=DEFAULT_BUDGET,
        metadata=describe(
            "Tokens of document text a turn about the documents may read (ask's reading: best-first over the "
            "Chow-Liu tree, workers quoting what bears on the question); 0 = no limit.",
            min=0,
        ),
    )
    canvas_max_nodes: int = field(
        default=8, metadata=describe("Most nodes the canvas writer may draw (1-15).", min=1, max=15)
    )
    canvas_input_tokens: int = field(
        default=1200, metadata=describe("Tokens of chunk excerpts the canvas writer reads.")
    )
    canvas_max_tokens: int = field(default=1000, metadata=describe("Most tokens of the canvas writer's JSON.", min=100))
    canvas_model: str = field(
        default="", metadata=describe("Model for the canvas writer; empty: the offloader's model.")
    )
    history_hits: int = field(
        default=1, metadata=describe("Older offloaded turns brought back as notes when relevant to the question.")
    )
    history_min_score: float = field(
        default=0.8, metadata=describe("Similarity an older offloaded turn needs to come back as a note.")
    )
    large_output_tokens: int = field(
        default=300, metadata=describe("A step output over this many tokens is stored and replaced by a reference.")
    )
    recall_tokens: int = field(default=300, metadata=describe("Tokens kept of each recalled text."))
    conclusion_tokens: int = field(default=40, metadata=describe("Most tokens of one turn's conclusion."))
    max_facts: int = field(default=5, metadata=describe("Confirmed facts kept in the pinned state."))
    answer_max_tokens: int = field(default=200, metadata=describe("Most tokens of one answer (JSON included).", min=20))
    offloader_max_tokens: int = field(default=120, metadata=describe("Most tokens of the offloader's note.", min=20))
    offload_backend: str = field(
        default="chroma", metadata=describe("Offload store: chroma (shared, persistent) or memory.", choices=BACKENDS)
    )
    doc_id: str = field(
        default="",
        metadata=describe(
            "Document of a new session whose first turn names none (a chat client that sends only messages)."
        ),
    )
    canvas_prompt: str = prompt_field("offload/canvas", "canvas writer")
    answer_prompt: str = prompt_field("offload/answer", "answering call (no offloaded turn to recall)")
    answer_recall_prompt: str = prompt_field("offload/answer_recall", "answering call that may recall offloaded turns")
    answer_plain_prompt: str = prompt_field(
        "offload/answer_plain", "answering call's plain-text retry (its JSON reply failed)"
    )
    offloader_prompt: str = prompt_field("offload/offloader", "offloader")


def check_context(ctx: OffloadContext) -> None:
    """Reject settings that cannot work (InputError): each field's bounds, then the rules across fields."""
    validate(ctx)
    if ctx.policy == "last_k" and ctx.keep_turns < 1:
        raise InputError("keep_turns must be at least 1 for last_k")
    if 0 < ctx.token_budget < 200:
        raise InputError("token_budget must be 0 (no budget) or at least 200 tokens")
