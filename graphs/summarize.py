"""Summarization by an editor agent that questions expert agents, then fact-checks every sentence.

Flow (``method="expert-editor"``): prepare (resolve the document: ``doc_id``, or a ``path`` or ``text`` it
ingests) -> overview (headings and first
chunks) -> each round: the editor writes 3-5 questions (schema-enforced JSON), aimed at the parts of
the focus and the topics of the document the draft does not cover yet -> experts answer in parallel
(``Send``), each from chunks it retrieves (vector + BM25) with ``[chunk_id]`` citations and a
confidence -> the editor merges the answers into the draft (answers it leaves out are appended) and
judges it -> another round (also when the draft is still short), or polish (told the draft's length
and the accepted range) -> fit_length (within +-25% of the length: trim at sentence boundaries, fill
from unused cited answers, then from the chunks' sentences) -> fact-check (the checker model and a
grounding check of numbers, names and content words against the cited chunks) -> finish.
``method="map-reduce"`` and ``method="refine"`` run the baselines of ``graphs.summary_baselines``
instead of the rounds, then the same length fit and fact-check.

The state holds the document id, never its text. Output: ``summary``, ``sentences`` with their
citations, fact-check verdicts and origin, the question/answer ``log`` by round, ``rounds``,
``usage`` (tokens in/out and calls per role), ``stop_reason``, ``factcheck`` counts (with the
sentences each check flagged) and ``fit`` (the length reached against the target). Progress is
streamed as custom events (``stream_mode="custom"``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Overwrite, Send
from typing_extensions import TypedDict

from graphs.context import resolve_context, stream_writer
from graphs.summary_baselines import RETRY, BaselineContext, map_reduce_graph, refine_graph
from nodes.editor import (
    answer_sentences,
    build_overview,
    check_request,
    choose_expert,
    chunk_terms,
    direct_summary,
    draft_changed,
    draft_fits,
    evidence_block,
    excerpt_sentences,
    fallback_merge,
    fill_to_length,
    length_bounds,
    length_units,
    merge_answers,
    missing_parts,
    new_questions,
    polish,
    total_units,
    trim_to_length,
    uncovered_chunks,
    uncovered_topics,
    unit_name,
    unmerged_answers,
    usable_answers,
    write_questions,
)
from nodes.expert import (
    DEFAULT_EXPERTS,
    AnswerCache,
    answer_question,
    bad_output,
    citations_in,
    expert_prompt_version,
    question_key,
)
from nodes.factcheck import (
    check_sentences,
    coverage,
    dedupe_sentences,
    factcheck_stats,
    parse_cited_sentences,
    render_summary,
    text_blocks,
)
from nodes.ingest import in_namespace, resolve_document
from nodes.retrieval import hybrid_search
from stores.documents import get_document, index_identity
from stores.models import LLM, ModelOutputError, Usage, llm_for, merge_usage, relabel_usage, resolve_role
from stores.settings import InputError, ModelError, check_question
from stores.text import split_sentences
from stores.vectorstore import get_store

Method = Literal["expert-editor", "map-reduce", "refine"]
DEFAULT_LENGTH = 120
REFILLS = 2
"""Times the fact-check refills a summary its drops left short."""


def _describe(text: str) -> dict[str, str]:
    return {"description": text}


@dataclass(kw_only=True)
class SummarizeContext(BaselineContext):
    """Knobs of the summarize workflow (plus the shared ones and the baselines')."""

    max_rounds: int = field(default=2, metadata=_describe("Most question rounds of the editor (1-10)."))
    min_rounds: int = field(
        default=1, metadata=_describe("Rounds to run before the editor may stop because it is satisfied.")
    )
    questions_per_round: int = field(
        default=4, metadata=_describe("Questions the editor writes per round (3-5 recommended, 1-8 allowed).")
    )
    experts: dict[str, str] = field(
        default_factory=lambda: dict(DEFAULT_EXPERTS),
        metadata=_describe(
            "Experts as name -> description of their speciality (default: fact, opinion, structure, style)."
        ),
    )
    expert_routing: str = field(
        default="fixed",
        metadata=_describe(
            "fixed: the editor's target_expert, else by question type; router: nodes.routing.entry.route_to_expert."
        ),
    )
    expert_k: int = field(default=3, metadata=_describe("Chunks each expert retrieves per question."))
    expert_chunk_tokens: int = field(
        default=160, metadata=_describe("Tokens kept of each retrieved chunk (the sentences nearest the question).")
    )
    expert_max_tokens: int = field(default=160, metadata=_describe("Max tokens of one expert answer (JSON included)."))
    rerank: str = field(
        default="none", metadata=_describe("Rerank of the fused candidates: none, or sentence (best sentence cosine).")
    )
    answer_cache: bool = field(
        default=True, metadata=_describe("Reuse an expert's earlier answer to the same question on the same document.")
    )
    question_model: str = field(
        default="", metadata=_describe("Model for the editor's questions (a cheaper one); empty: the editor's model.")
    )
    checker_model: str = field(default="", metadata=_describe("Model for the fact-checker; empty: the default model."))
    factcheck: str = field(
        default="fix",
        metadata=_describe("fix: fix or drop unsupported sentences; mark: only label them; off: no check."),
    )
    factcheck_checks: str = field(
        default="both",
        metadata=_describe(
            "model: the checker model's verdict; grounding: numbers, names and most content words of a sentence "
            "must be in the chunks it cites (no model call); both: flagged when either check flags it."
        ),
    )
    factcheck_batch: int = field(default=6, metadata=_describe("Sentences checked per fact-check call."))
    direct_tokens: int = field(
        default=700, metadata=_describe("Evidence tokens for a one-chunk document summarized in one call.")
    )
    length_fit: str = field(
        default="fill",
        metadata=_describe(
            "fill: trim a long summary at sentence boundaries and fill a short one from unused cited expert "
            "answers, then from the retrieved chunks' sentences (to within +-25% of length); trim: only trim; "
            "off: neither."
        ),
    )
    fill_chunks: int = field(default=6, metadata=_describe("Chunks whose sentences may fill a short summary."))


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


# --- helpers --------------------------------------------------------------------------------
def _context(state: SummarizeState | ExpertTask, runtime: Runtime[SummarizeContext]) -> SummarizeContext:
    """The run's settings, in the namespace the input names (``prepare`` records it in the state)."""
    return in_namespace(resolve_context(runtime, SummarizeContext), state)


def _check_context(ctx: SummarizeContext) -> None:
    if not 1 <= ctx.max_rounds <= 10:
        raise InputError(f"max_rounds must be between 1 and 10, got {ctx.max_rounds}")
    if not 1 <= ctx.questions_per_round <= 8:
        raise InputError(f"questions_per_round must be between 1 and 8, got {ctx.questions_per_round}")
    if not ctx.experts or not all(isinstance(k, str) and re.fullmatch(r"[\w-]{1,40}", k) for k in ctx.experts):
        raise InputError("experts must map 1-40 character names (letters, digits, _ or -) to descriptions")
    if ctx.expert_routing not in ("fixed", "router"):
        raise InputError(f"expert_routing must be 'fixed' or 'router', got {ctx.expert_routing!r}")
    if ctx.factcheck not in ("fix", "mark", "off"):
        raise InputError(f"factcheck must be 'fix', 'mark' or 'off', got {ctx.factcheck!r}")
    if ctx.rerank not in ("none", "sentence"):
        raise InputError(f"rerank must be 'none' or 'sentence', got {ctx.rerank!r}")
    if ctx.factcheck_checks not in ("model", "grounding", "both"):
        raise InputError(f"factcheck_checks must be 'model', 'grounding' or 'both', got {ctx.factcheck_checks!r}")
    if ctx.length_fit not in ("fill", "trim", "off"):
        raise InputError(f"length_fit must be 'fill', 'trim' or 'off', got {ctx.length_fit!r}")
    if ctx.expert_k < 1 or ctx.expert_chunk_tokens < 20 or ctx.factcheck_batch < 1 or ctx.fill_chunks < 0:
        raise InputError(
            "expert_k, factcheck_batch must be positive, fill_chunks not negative and expert_chunk_tokens at least 20"
        )


def question_llm(ctx: SummarizeContext) -> LLM:
    """The editor's model for writing questions (``question_model`` when set)."""
    llm = llm_for("editor", ctx)
    if ctx.question_model:
        llm.overrides["editor_model"] = ctx.question_model
    return llm


def _length(state: SummarizeState) -> int:
    length = state.get("length")
    return DEFAULT_LENGTH if length is None else length


# --- nodes ----------------------------------------------------------------------------------
def prepare(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Validate the request, ingest a path if given, and pick the path through the graph."""
    ctx = _context(state, runtime)
    _check_context(ctx)
    length, fmt = _length(state), state.get("format") or "paragraphs"
    language, method = state.get("language") or "", state.get("method") or "expert-editor"
    check_request(length, fmt, language, method)
    if state.get("query"):
        check_question(state["query"], "query")
    doc_id = resolve_document(state, ctx, stream_writer())
    info = get_document(ctx.namespace, doc_id)
    store = get_store(ctx.namespace, ctx.embedder)
    chunks = store.by_doc(doc_id)
    if not chunks:
        raise InputError(
            f"document {doc_id!r} has no chunks in the {store.space!r} vector space; ingest it with this embedder"
        )
    lang = language or info.language
    update: dict[str, Any] = {
        "path": "",
        "text": "",
        "namespace": ctx.namespace,
        "doc_id": doc_id,
        "length": length,
        "format": fmt,
        "method": method,
        "lang": lang,
        "round": 0,
        "draft": "",
        "missing": "",
        "questions": [],
        "final_text": "",
        "fitted": [],
        "stop_reason": "",
        "answers": Overwrite([]),
        "rounds_info": Overwrite([]),
        "usage": Overwrite({}),
    }
    seen: dict[str, str] = {}
    for hit in chunks:
        for block in text_blocks(hit.text):
            for sentence in split_sentences(block):
                seen.setdefault(sentence, hit.chunk_id)
    cited = [f"{sentence} [{cid}]" for sentence, cid in seen.items()]
    total = length_units(" ".join(seen), info.language)
    if total <= length and lang == info.language:
        kind, message = "short", "the document is no longer than the summary asked for: it is its own summary"
        update["final_text"] = "\n".join(cited)
        update["stop_reason"] = "document_shorter_than_summary"
    elif len(chunks) == 1 and method == "expert-editor":
        kind, message = "direct", "one-chunk document: summarized in one call"
        update["stop_reason"] = "single_chunk"
    else:
        kind, message = method, f"{method} over {len(chunks)} chunks"
    update["kind"] = kind
    stream_writer()({"stage": "summarize", "message": f"{info.title or doc_id}: {message}"})
    return update


def route_method(state: SummarizeState) -> Literal["overview", "polish", "map_reduce", "refine", "factcheck"]:
    """Short documents go straight to the check; one-chunk ones to polish; else the method."""
    kind = state["kind"]
    if kind == "short":
        return "factcheck"
    if kind == "direct":
        return "polish"
    if kind == "map-reduce":
        return "map_reduce"
    if kind == "refine":
        return "refine"
    return "overview"


def overview(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """The document's structure from its headings and first chunks (and query hits)."""
    ctx = _context(state, runtime)
    info = get_document(ctx.namespace, state["doc_id"])
    text = build_overview(get_store(ctx.namespace, ctx.embedder), info, state.get("query", ""))
    return {"overview": text}


def questions(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """The editor reads the draft and writes this round's questions."""
    ctx = _context(state, runtime)
    rnd = state.get("round", 0) + 1
    asked = [a["question"] for a in state.get("answers", [])]
    emit = stream_writer()
    emit({"stage": "rounds", "done": rnd - 1, "total": ctx.max_rounds})
    draft, query, lang = state.get("draft", ""), state.get("query", ""), state["lang"]
    store = get_store(ctx.namespace, ctx.embedder)
    focus = [h.chunk_id for h in hybrid_search(store, state["doc_id"], query, 6)] if query.strip() else []
    topics = uncovered_topics(store.by_doc(state["doc_id"]), draft, focus=focus)
    parts = missing_parts(draft, lang)
    try:
        raw, usage = write_questions(
            question_llm(ctx),
            overview=state.get("overview", ""),
            draft=draft,
            asked=asked,
            missing=state.get("missing", ""),
            query=query,
            experts=ctx.experts,
            n=ctx.questions_per_round,
            lang=lang,
            parts=parts,
            topics=topics,
        )
    except ModelError as exc:
        if not bad_output(exc):
            raise
        emit({"stage": "editor", "message": f"round {rnd}: the editor's questions stayed invalid; stopping ({exc})"})
        info = {"round": rnd, "questions": 0, "error": str(exc), "stop": "editor_output_invalid"}
        return {"round": rnd, "questions": [], "stop_reason": "editor_output_invalid", "rounds_info": [info]}
    fresh = new_questions(raw, asked)[: ctx.questions_per_round]
    items = [
        {"id": f"r{rnd}q{i}", **q, "expert": choose_expert(q, ctx.experts, ctx.expert_routing, ctx.namespace)}
        for i, q in enumerate(fresh, start=1)
    ]
    update: dict[str, Any] = {"round": rnd, "questions": items, "usage": relabel_usage(usage, "questioner")}
    update["gaps"] = {"parts": parts, "topics": topics}
    if not items:
        update["stop_reason"] = "no_new_questions"
        update["rounds_info"] = [{"round": rnd, "questions": 0, "stop": "no_new_questions"}]
    emit({"stage": "editor", "message": f"round {rnd}: {len(items)} questions ({len(raw) - len(items)} repeated)"})
    return update


def send_questions(state: SummarizeState) -> list[Send] | Literal["polish"]:
    """One expert task per question, in parallel; no questions ends the rounds."""
    items = state.get("questions", [])
    if not items or state.get("stop_reason"):
        return "polish"
    return [
        Send(
            "expert",
            {
                "doc_id": state["doc_id"],
                "namespace": state.get("namespace", ""),
                "lang": state["lang"],
                "round": state["round"],
                "item": item,
            },
        )
        for item in items
    ]


def expert(state: ExpertTask, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """One expert answers one question from the chunks it retrieves (failed on a model error)."""
    ctx = _context(state, runtime)
    item, lang = state["item"], state["lang"]
    name = item["expert"]
    llm = llm_for("expert", ctx)
    cache = AnswerCache.for_document(ctx.namespace, state["doc_id"]) if ctx.answer_cache else None
    spec = resolve_role("expert", llm.overrides)
    key = AnswerCache.key(
        question=sorted(question_key(item["question"])),
        expert=name,
        description=ctx.experts[name],
        lang=lang,
        k=ctx.expert_k,
        chunk_tokens=ctx.expert_chunk_tokens,
        rerank=ctx.rerank,
        model=[spec.model, spec.base_url, spec.temperature],
        embedder=ctx.embedder,
        index=index_identity(get_document(ctx.namespace, state["doc_id"])),
        prompts=expert_prompt_version(lang),
    )
    hit = cache.get(key) if cache else None
    usage: Usage = {}
    if hit is not None:
        result = {**hit, "cached": True}
    else:
        try:
            result, usage = answer_question(
                item["question"],
                name,
                ctx.experts[name],
                store=get_store(ctx.namespace, ctx.embedder),
                doc_id=state["doc_id"],
                llm=llm,
                lang=lang,
                k=ctx.expert_k,
                chunk_tokens=ctx.expert_chunk_tokens,
                max_tokens=ctx.expert_max_tokens,
                rerank=ctx.rerank,  # type: ignore[arg-type]
            )
        except ModelError as exc:
            result = {
                "status": "failed",
                "answer": "",
                "citations": [],
                "confidence": 0.0,
                "chunks": [],
                "error": str(exc),
            }
        if cache is not None and result["status"] != "failed":
            cache.put(key, result)
        result = {**result, "cached": False}
    record = {**item, "round": state["round"], **result}
    cites = f" [{', '.join(result['citations'])}]" if result["citations"] else ""
    stream_writer()(
        {
            "stage": "experts",
            "message": f"round {state['round']} · {name}: {result['status']} ({result['confidence']:.2f}){cites}",
        }
    )
    return {"answers": [record], "usage": usage}


def merge(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """The editor merges this round's answers into the draft, judges it and decides whether to go on."""
    ctx = _context(state, runtime)
    rnd, lang, length = state["round"], state["lang"], _length(state)
    this_round = [a for a in state.get("answers", []) if a["round"] == rnd]
    usable = usable_answers(this_round, _positions(this_round))
    draft = state.get("draft", "")
    info: dict[str, Any] = {
        "round": rnd,
        "questions": len(this_round),
        "answered": sum(a["status"] == "answered" for a in this_round),
        "not_found": sum(a["status"] == "not_found" for a in this_round),
        "failed": sum(a["status"] == "failed" for a in this_round),
        "merged": len(usable),
        "aimed_at": state.get("gaps", {}),
    }
    update: dict[str, Any] = {}
    new_draft, judgement = draft, None
    if usable:
        try:
            result, usage = merge_answers(
                llm_for("editor", ctx),
                draft=draft,
                answers=usable,
                query=state.get("query", ""),
                length=length,
                lang=lang,
            )
            new_draft = result.draft.strip()
            judgement = result.model_dump(exclude={"draft"})
            sources = " ".join([draft, *(a["answer"] for a in usable)])
            if coverage(new_draft, sources) < 0.5:
                info["merge_error"] = "the merged draft says little that the draft or the answers say"
                new_draft = fallback_merge(draft, usable, length, lang)
            left_out = unmerged_answers(new_draft, usable)
            if left_out:
                new_draft = fallback_merge(new_draft, left_out, length, lang)
            info["appended"] = len(left_out) - len(unmerged_answers(new_draft, usable))
            update["usage"] = usage
            update["missing"] = result.missing
        except ModelError as exc:
            if not bad_output(exc):
                raise
            new_draft = fallback_merge(draft, usable, length, lang)
            info["merge_error"] = str(exc)
    changed = draft_changed(draft, new_draft)
    info.update({"judgement": judgement, "draft_changed": changed})
    short = length_units(re.sub(r"\[[^\]]*\]", "", new_draft), lang) < length_bounds(length)[0]
    if rnd >= ctx.max_rounds:
        stop = "max_rounds"
    elif judgement and judgement["done"] and rnd >= ctx.min_rounds and new_draft and not short:
        stop = "editor_satisfied"
    elif draft and not changed and not short:
        stop = "draft_unchanged"
    else:
        stop = ""
    info["stop"] = stop
    stream_writer()({"stage": "rounds", "done": rnd, "total": ctx.max_rounds})
    verdict = "no judgement"
    if judgement:
        verdict = ", ".join(f"{k} {judgement[k]}" for k in ("completeness", "accuracy", "coherence"))
    stream_writer()(
        {"stage": "editor", "message": f"round {rnd}: merged {len(usable)} answers; {verdict}; {stop or 'next round'}"}
    )
    return {**update, "draft": new_draft, "stop_reason": stop, "rounds_info": [info]}


def _positions(answers: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for ans in answers:
        for cid in ans.get("citations", []):
            if cid[1:].isdigit():
                out[cid] = int(cid[1:])
    return out


def after_merge(state: SummarizeState) -> Literal["questions", "polish"]:
    """Another round unless the editor stopped."""
    return "polish" if state.get("stop_reason") else "questions"


def polish_node(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Final polish to the requested length, format and language (one call for a one-chunk document)."""
    ctx = _context(state, runtime)
    lang, length, fmt, query = state["lang"], _length(state), state.get("format", "paragraphs"), state.get("query", "")
    draft = state.get("draft", "").strip()
    emit = stream_writer()
    if state["kind"] == "direct" or not draft:
        store = get_store(ctx.namespace, ctx.embedder)
        hits = hybrid_search(store, state["doc_id"], query, 3) if query.strip() else store.by_doc(state["doc_id"])[:3]
        focus = query or get_document(ctx.namespace, state["doc_id"]).title
        evidence = evidence_block(hits, focus, ctx.direct_tokens)
        text, usage = direct_summary(
            llm_for("editor", ctx), evidence=evidence, query=query, length=length, fmt=fmt, lang=lang
        )
        emit({"stage": "polish", "message": f"summarized {len(hits)} chunks in one call"})
        return {"final_text": text, "usage": usage}
    if draft_fits(draft, length, fmt, lang):
        emit({"stage": "polish", "message": "the draft already has the requested length, format and language"})
        return {"final_text": draft}
    text, usage = polish(llm_for("editor", ctx), draft=draft, query=query, length=length, fmt=fmt, lang=lang)
    if not parse_cited_sentences(text) or coverage(text, draft) < 0.5:
        emit({"stage": "polish", "message": "the polished text strays from the draft; keeping the draft"})
        return {"final_text": draft, "usage": usage}
    emit({"stage": "polish", "message": f"polished to {length_units(text, lang)} units"})
    return {"final_text": text, "usage": usage}


def _fill_candidates(state: SummarizeState, ctx: SummarizeContext, used: Sequence[str]) -> list[dict[str, Any]]:
    """Cited sentences a short summary may take, best first: expert answers, then the chunks' own sentences.

    The chunks: those matching the query (else the ones the experts cited), then those whose topics
    the summary so far (``used``) covers least.
    """
    query = state.get("query", "")
    candidates = answer_sentences(state.get("answers", []), query)
    if ctx.fill_chunks:
        store = get_store(ctx.namespace, ctx.embedder)
        doc_id = state["doc_id"]
        chunks = store.by_doc(doc_id)
        if query.strip():
            first = [h.chunk_id for h in hybrid_search(store, doc_id, query, ctx.fill_chunks)]
        else:
            first = [c for a in state.get("answers", []) for c in a.get("citations", [])]
        gaps = [cid for cid, _ in uncovered_chunks(chunks, " ".join(used))]
        order = list(dict.fromkeys([*first[: ctx.fill_chunks], *gaps[: ctx.fill_chunks]]))
        by_id = {h.chunk_id: h for h in chunks}
        hits = [by_id[c] for c in order if c in by_id]
        candidates += excerpt_sentences(hits, query, state["lang"], terms=chunk_terms(chunks, 6))
    return [c for c in candidates if c["text"] not in set(used)]


def fit_length(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Bring the summary within +-25% of the requested length: trim a long one at sentence boundaries,
    fill a short one from the cited expert answers it does not use yet, then from the chunks' sentences."""
    ctx = _context(state, runtime)
    info = get_document(ctx.namespace, state["doc_id"])
    lang, length = state["lang"], _length(state)
    sentences = dedupe_sentences(parse_cited_sentences(state.get("final_text", ""), _chunk_ids(info.chunks)))
    sentences = [{**s, "origin": "summary"} for s in sentences]
    if ctx.length_fit == "off":
        return {"fitted": sentences}
    before = total_units(sentences, lang)
    fitted = trim_to_length(sentences, length, lang)
    if ctx.length_fit == "fill" and fitted and total_units(fitted, lang) < length_bounds(length)[0]:
        fitted += fill_to_length(fitted, _fill_candidates(state, ctx, [s["text"] for s in fitted]), length, lang)
    after = total_units(fitted, lang)
    added = sum(s["origin"] != "summary" for s in fitted)
    stream_writer()(
        {
            "stage": "length",
            "message": f"length {before} -> {after} {unit_name(lang)} (target {length})"
            + (f"; {added} sentences added from answers and chunks" if added else ""),
        }
    )
    return {"fitted": fitted}


def _chunk_ids(count: int) -> list[str]:
    return [f"c{i}" for i in range(count)]


def factcheck(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Check each sentence against the chunks it cites; fix or drop the unsupported ones.

    When dropping leaves the summary short, cited sentences not used yet are checked and added (at most
    ``REFILLS`` times, one checker call each).
    """
    ctx = _context(state, runtime)
    info = get_document(ctx.namespace, state["doc_id"])
    if state["kind"] == "short":
        sentences = parse_cited_sentences(state.get("final_text", ""), _chunk_ids(info.chunks))
        checked = [{**s, "original": s["text"], "verdict": "source", "cited_by": "source"} for s in sentences]
        return {"checked": checked}
    lang, length = state["lang"], _length(state)
    store = get_store(ctx.namespace, ctx.embedder)

    def check(sentences: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Usage]:
        checked, usage = check_sentences(
            sentences,
            store=store,
            doc_id=state["doc_id"],
            llm=llm_for("checker", ctx),
            lang=lang,
            mode=ctx.factcheck,  # type: ignore[arg-type]
            checks=ctx.factcheck_checks,  # type: ignore[arg-type]
            batch_size=ctx.factcheck_batch,
            prefer=citations_in(state.get("draft", "")),
        )
        kept_keys = [{"origin": s.get("origin", "summary"), "clipped": s.get("clipped", False)} for s in sentences]
        return [{**c, **k} for c, k in zip(checked, kept_keys, strict=True)], usage

    checked, usage = check(state.get("fitted", []))
    for _ in range(REFILLS if ctx.length_fit == "fill" and ctx.factcheck == "fix" else 0):
        kept = [c for c in checked if c["verdict"] != "dropped"]
        if not kept or total_units(kept, lang) >= length_bounds(length)[0]:
            break
        used = [c["text"] for c in kept] + [c["original"] for c in checked if c["verdict"] == "dropped"]
        more = fill_to_length(kept, _fill_candidates(state, ctx, used), length, lang)
        if not more:
            break
        extra, used_more = check(more)
        checked += extra
        usage = merge_usage(usage, used_more)
    stats = factcheck_stats(checked)
    stream_writer()(
        {
            "stage": "factcheck",
            "message": f"fact-check: {stats['supported']} supported, {stats['fixed']} fixed, "
            f"{stats['dropped']} dropped, {stats['unsupported']} unsupported of {stats['sentences']}",
        }
    )
    return {"checked": checked, "usage": usage}


def finish(state: SummarizeState) -> dict[str, Any]:
    """Assemble the summary, its cited sentences and the question/answer log."""
    checked = state.get("checked", [])
    kept = [c for c in checked if c["verdict"] != "dropped"]
    sentences = [
        {
            "text": c["text"],
            "citations": c["citations"],
            "verdict": c["verdict"],
            "origin": c.get("origin", "source"),
            **({"flagged_by": c["flagged_by"], "problems": c["grounding"]} if c.get("flagged_by") else {}),
        }
        for c in kept
    ]
    lang, length = state["lang"], _length(state)
    log = []
    for info in state.get("rounds_info", []):
        answers = [
            {
                k: a.get(k)
                for k in (
                    "id",
                    "question",
                    "type",
                    "expert",
                    "status",
                    "answer",
                    "citations",
                    "confidence",
                    "cached",
                    "error",
                )
                if k in a
            }
            for a in state.get("answers", [])
            if a["round"] == info["round"]
        ]
        log.append({**info, "questions": answers})
    stop = state.get("stop_reason") or ("" if state["kind"] == "expert-editor" else "baseline")
    summary = render_summary(sentences, state.get("format", "paragraphs"), lang)
    if not summary.strip():
        why = "the fact-check dropped every sentence" if checked else "the model wrote no usable sentence"
        raise ModelOutputError(f"the summary came out empty: {why}")
    low, high = length_bounds(length)
    units = total_units(sentences, lang)  # bullet marks are not words
    filled = {o: sum(s["origin"] == o for s in sentences) for o in ("answer", "excerpt")}
    fit: dict[str, Any] = {"target": length, "units": units, "low": low, "high": high, "within": low <= units <= high}
    fit.update({"trimmed": any(c.get("clipped") for c in checked), "filled": filled})
    return {
        "summary": summary,
        "sentences": sentences,
        "fit": fit,
        "log": log,
        "rounds": state.get("round", 0),
        "stop_reason": stop,
        "factcheck": factcheck_stats(checked),
    }


builder = StateGraph(
    SummarizeState, context_schema=SummarizeContext, input_schema=SummarizeInput, output_schema=SummarizeOutput
)
builder.add_node("prepare", prepare)
builder.add_node("overview", overview)
builder.add_node("questions", questions, retry_policy=RETRY)
builder.add_node("expert", expert)
builder.add_node("merge", merge, retry_policy=RETRY)
builder.add_node("polish", polish_node, retry_policy=RETRY)
builder.add_node("map_reduce", map_reduce_graph())
builder.add_node("refine", refine_graph())
builder.add_node("fit_length", fit_length)
builder.add_node("factcheck", factcheck, retry_policy=RETRY)
builder.add_node("finish", finish)
builder.add_edge(START, "prepare")
builder.add_conditional_edges("prepare", route_method, ["overview", "polish", "map_reduce", "refine", "factcheck"])
builder.add_edge("overview", "questions")
builder.add_conditional_edges("questions", send_questions, ["expert", "polish"])
builder.add_edge("expert", "merge")
builder.add_conditional_edges("merge", after_merge, ["questions", "polish"])
builder.add_edge("polish", "fit_length")
builder.add_edge("map_reduce", "fit_length")
builder.add_edge("refine", "fit_length")
builder.add_edge("fit_length", "factcheck")
builder.add_edge("factcheck", "finish")
builder.add_edge("finish", END)

graph = builder.compile()
graph.name = "summarize"
