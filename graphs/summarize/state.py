"""Settings, input, output and state of the summarize graph, the check of its settings, shared helpers."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import Annotated, Literal, NotRequired, get_args

from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from graphs.context import describe, validate
from nodes.ingest import in_namespace
from nodes.retrieval import Rerank
from nodes.summarize.baselines import BaselineContext
from nodes.summarize.expert import DEFAULT_EXPERTS
from nodes.summarize.fact_checker import Checks, FactcheckMode
from stores.settings import InputError
from stores.usage import merge_usage

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


# --- state ----------------------------------------------------------------------------------
class SummarizeInput(TypedDict):
    """What to summarize and how."""

    doc_id: NotRequired[str]
    """Id of an ingested document; give exactly one of doc_id, path or text."""
    path: NotRequired[str]
    """File to summarize (ingested first, idempotently); or doc_id or text."""
    text: NotRequired[str]
    """Raw text to summarize (ingested first, then cleared from the state); or doc_id or path."""
    namespace: NotRequired[str]
    """Namespace of the document (default: the context's)."""
    query: NotRequired[str]
    """Focus of the summary, e.g. "what was decided about the budget" (empty: the whole document)."""
    length: NotRequired[int]
    """Target length in words (characters for Chinese); default 120."""
    format: NotRequired[Literal["paragraphs", "bullets"]]
    """Layout of the summary; default paragraphs."""
    language: NotRequired[Literal["", "en", "zh"]]
    """Output language; empty: the document's."""
    method: NotRequired[Method]
    """expert-editor (default), map-reduce or refine."""


class SummarizeOutput(TypedDict, total=False):
    """The summary and how it was made (every key is set by the end of a run)."""

    doc_id: str
    """Id of the summarized document."""
    method: Method
    """Method used."""
    summary: str
    """The final summary (citation markers removed)."""
    sentences: list[dict]
    """Sentences of the summary: {text, citations (chunk ids), verdict, origin (summary, answer or excerpt: where
    the length fit took it from)}; a flagged sentence kept (disputed, unsupported) also has flagged_by (model,
    grounding) and problems (what grounding found)."""
    log: list[dict]
    """Questions and answers by round: {round, questions: [...], judgement, stop}."""
    rounds: int
    """Editor rounds used (0 for the baselines)."""
    usage: Annotated[dict, merge_usage]
    """Tokens in/out, calls and cached calls per role."""
    stop_reason: str
    """Why the rounds stopped (max_rounds, editor_satisfied, draft_unchanged, no_new_questions, ...)."""
    factcheck: dict
    """Fact-check counts and the share of checked sentences confirmed."""
    fit: dict
    """Length: {target, units, low, high, within, trimmed, filled: {answer, excerpt}}."""


class SummarizeState(SummarizeInput, SummarizeOutput, total=False):
    """Private state of the summarize graph."""

    lang: str
    """Output language actually used."""
    kind: str
    """Path taken: short (the document is the summary), direct (one chunk), or the method."""
    overview: str
    """The document's structure as the editor sees it."""
    round: int
    """Current editor round (1-based)."""
    questions: list[dict]
    """Questions of the current round: {id, question, type, target_expert, expert}."""
    answers: Annotated[list[dict], operator.add]
    """Every expert answer so far: {id, round, question, expert, status, answer, citations, confidence}."""
    rounds_info: Annotated[list[dict], operator.add]
    """Per round: the editor's judgement and what happened."""
    draft: str
    """The editor's current draft, with [chunk_id] citations."""
    missing: str
    """The editor's note on what the draft still misses."""
    gaps: dict
    """What this round's questions were aimed at: {parts: parts of the focus not answered yet, topics: "[c4] term,
    term" lines of chunks the draft does not cover yet}."""
    final_text: str
    """The polished summary (or the baseline's), with [chunk_id] citations, before the fact-check."""
    fitted: list[dict]
    """Sentences of the summary after the length fit, before the fact-check: {text, citations, origin}."""
    checked: list[dict]
    """Fact-checked sentences: {text, original, citations, verdict, cited_by, origin}."""


class ExpertTask(TypedDict):
    """The payload of one expert task."""

    doc_id: str
    """Document id."""
    namespace: str
    """Namespace of the document (empty: the context's, for runs checkpointed before it was recorded)."""
    lang: str
    """Answer language."""
    round: int
    """Editor round."""
    item: dict
    """The question: {id, question, type, target_expert, expert}."""


def run_context(state: SummarizeState | ExpertTask, runtime: Runtime[SummarizeContext]) -> SummarizeContext:
    """The run's settings, in the namespace the input names (``prepare`` records it in the state)."""
    return in_namespace(runtime.context or SummarizeContext(), state)


def check_context(ctx: SummarizeContext) -> None:
    """Reject settings that cannot work (InputError): each field's bounds, then the experts' names."""
    validate(ctx)
    if not ctx.experts or not all(isinstance(k, str) and re.fullmatch(r"[\w-]{1,40}", k) for k in ctx.experts):
        raise InputError("experts must map 1-40 character names (letters, digits, _ or -) to descriptions")


def target_length(state: SummarizeState) -> int:
    """The summary length asked for (the default when not given; 0 stays 0, to be refused)."""
    length = state.get("length")
    return DEFAULT_LENGTH if length is None else length
