"""Settings of the summarize workflow (and of its map-reduce and refine baselines), and their checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, get_args

from nodes.context import Context, describe, prompt_field, validate
from nodes.retrieval import Rerank
from stores.errors import InputError

DEFAULT_EXPERTS: dict[str, str] = {
    "fact": "concrete facts: events, figures, names, dates, places and decisions.",
    "opinion": "the positions, arguments and disagreements of the author or the speakers.",
    "structure": "how the document is organised: its parts and topics, their order and how they connect.",
    "style": "tone, register, genre and how the text is written.",
}
"""Default experts: name -> description (the question types of the editor have the same names)."""


FactcheckMode = Literal["fix", "mark", "off"]


Checks = Literal["model", "grounding", "both"]


def _describe(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class BaselineContext(Context):
    """Knobs of the map-reduce and refine baselines."""

    collapse_token_limit: int = field(
        default=1200,
        metadata=_describe("Map-reduce: collapse the chunk notes while they are longer than this many tokens."),
    )
    max_collapses: int = field(default=3, metadata=_describe("Map-reduce: most collapse passes before reducing."))
    map_max_tokens: int = field(default=110, metadata=_describe("Map-reduce: max tokens of one chunk's note."))
    map_prompt: str = prompt_field("summarize/map", "map-reduce baseline's map step (one chunk's notes)")
    collapse_prompt: str = prompt_field("summarize/collapse", "map-reduce baseline's collapse step")
    reduce_prompt: str = prompt_field("summarize/reduce", "map-reduce baseline's reduce step (the summary)")
    refine_prompt: str = prompt_field("summarize/refine", "refine baseline")


Method = Literal["expert-editor", "map-reduce", "refine"]


DEFAULT_LENGTH = 120


@dataclass(kw_only=True)
class SummarizeContext(BaselineContext):
    """Knobs of the summarize workflow (plus the shared ones and the baselines')."""

    max_rounds: int = field(default=2, metadata=describe("Most question rounds of the editor (1-10).", min=1, max=10))
    min_rounds: int = field(
        default=1, metadata=describe("Rounds to run before the editor may stop because it is satisfied.")
    )
    questions_per_round: int = field(
        default=4,
        metadata=describe("Questions the editor writes per round (3-5 recommended, 1-8 allowed).", min=1, max=8),
    )
    experts: dict[str, str] = field(
        default_factory=lambda: dict(DEFAULT_EXPERTS),
        metadata=describe(
            "Experts as name -> description of their speciality (default: fact, opinion, structure, style)."
        ),
    )
    expert_routing: str = field(
        default="fixed",
        metadata=describe(
            "fixed: the editor's target_expert, else by question type; router: nodes.route.entry.route_to_expert.",
            choices=("fixed", "router"),
        ),
    )
    expert_k: int = field(default=3, metadata=describe("Chunks each expert retrieves per question.", min=1))
    expert_chunk_tokens: int = field(
        default=160,
        metadata=describe("Tokens kept of each retrieved chunk (the sentences nearest the question).", min=20),
    )
    expert_max_tokens: int = field(default=160, metadata=describe("Max tokens of one expert answer (JSON included)."))
    rerank: str = field(
        default="none",
        metadata=describe(
            "Rerank of the fused candidates: none, or sentence (best sentence cosine).", choices=get_args(Rerank)
        ),
    )
    answer_cache: bool = field(
        default=True, metadata=describe("Reuse an expert's earlier answer to the same question on the same document.")
    )
    question_model: str = field(
        default="", metadata=describe("Model for the editor's questions (a cheaper one); empty: the editor's model.")
    )
    checker_model: str = field(default="", metadata=describe("Model for the fact-checker; empty: the default model."))
    factcheck: str = field(
        default="fix",
        metadata=describe(
            "fix: fix or drop unsupported sentences; mark: only label them; off: no check.",
            choices=get_args(FactcheckMode),
        ),
    )
    factcheck_checks: str = field(
        default="both",
        metadata=describe(
            "model: the checker model's verdict; grounding: numbers, names and most content words of a sentence "
            "must be in the chunks it cites (no model call); both: flagged when either check flags it.",
            choices=get_args(Checks),
        ),
    )
    factcheck_batch: int = field(default=6, metadata=describe("Sentences checked per fact-check call.", min=1))
    direct_tokens: int = field(
        default=700, metadata=describe("Evidence tokens for a one-chunk document summarized in one call.")
    )
    length_fit: str = field(
        default="fill",
        metadata=describe(
            "fill: trim a long summary at sentence boundaries and fill a short one from unused cited expert "
            "answers, then from the retrieved chunks' sentences (to within +-25% of length); trim: only trim; "
            "off: neither.",
            choices=("fill", "trim", "off"),
        ),
    )
    fill_chunks: int = field(default=6, metadata=describe("Chunks whose sentences may fill a short summary.", min=0))
    questions_prompt: str = prompt_field("summarize/questions", "editor's questions")
    expert_prompt: str = prompt_field("summarize/expert", "experts")
    merge_prompt: str = prompt_field("summarize/merge", "editor's merge of the answers into the draft")
    polish_prompt: str = prompt_field("summarize/polish", "editor's polish of the draft")
    direct_prompt: str = prompt_field("summarize/direct", "one-call summary of a one-chunk document")
    factcheck_prompt: str = prompt_field("summarize/factcheck", "fact-checker")


def check_context(ctx: SummarizeContext) -> None:
    """Reject settings that cannot work (InputError): each field's bounds, then the experts' names."""
    validate(ctx)
    if not ctx.experts or not all(isinstance(k, str) and re.fullmatch(r"[\w-]{1,40}", k) for k in ctx.experts):
        raise InputError("experts must map 1-40 character names (letters, digits, _ or -) to descriptions")
