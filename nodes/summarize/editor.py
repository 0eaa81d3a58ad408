"""The editor's side of the summarize graph: ``overview``, ``questions``, ``merge`` and ``polish``.

The document's ``overview``, each round's ``questions``, the ``merge`` of the experts' answers into the draft
(and whether to go on), and the final ``polish``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from langgraph.runtime import Runtime

from nodes.summarize.context import SummarizeContext
from nodes.summarize.editing import (
    choose_expert,
    direct_summary,
    draft_changed,
    evidence_block,
    fallback_merge,
    merge_answers,
    new_questions,
    overview_of,
    polish,
    unmerged_answers,
    usable_answers,
    write_questions,
)
from nodes.summarize.expert import bad_output
from nodes.summarize.gaps import missing_parts, uncovered_topics
from nodes.summarize.length import draft_fits, length_bounds, length_units
from nodes.summarize.sentences import coverage, parse_cited_sentences
from nodes.summarize.state import SummarizeState, run_context, state_sources, target_length
from stores.documents import get_document
from stores.errors import ModelError
from stores.models import llm_for
from stores.usage import relabel_usage, track_usage


def overview(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """The document's structure from its headings and first chunks (and query hits)."""
    ctx = run_context(state, runtime)
    return {"overview": overview_of(state_sources(state, ctx), state.get("query", ""))}


def questions(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """The editor reads the draft and writes this round's questions."""
    ctx = run_context(state, runtime)
    rnd = state.get("round", 0) + 1
    asked = [a["question"] for a in state.get("answers", [])]
    emit = runtime.stream_writer
    emit({"stage": "rounds", "done": rnd - 1, "total": ctx.max_rounds})
    draft, query, lang = state.get("draft", ""), state.get("query", ""), state["lang"]
    sources = state_sources(state, ctx)
    focus = [h.chunk_id for h in sources.search(query, 6)] if query.strip() else []
    topics = uncovered_topics(sources.hits(), draft, focus=focus)
    parts = missing_parts(draft, lang)
    with track_usage() as usage:
        try:
            raw = write_questions(
                llm_for("editor", ctx, model=ctx.question_model),
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
                system_prompt=ctx.questions_prompt,
            )
        except ModelError as exc:
            if not bad_output(exc):
                raise
            why = f"round {rnd}: the editor's questions stayed invalid; stopping ({exc})"
            emit({"stage": "editor", "message": why})
            info = {"round": rnd, "questions": 0, "error": str(exc), "stop": "editor_output_invalid"}
            return {
                "round": rnd,
                "questions": [],
                "stop_reason": "editor_output_invalid",
                "rounds_info": [info],
                "usage": relabel_usage(usage, "questioner"),
            }
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


def merge(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """The editor merges this round's answers into the draft, judges it and decides whether to go on."""
    ctx = run_context(state, runtime)
    rnd, lang, length = state["round"], state["lang"], target_length(state)
    this_round = [a for a in state.get("answers", []) if a["round"] == rnd]
    usable = usable_answers(this_round)
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
            with track_usage() as update["usage"]:
                result = merge_answers(
                    llm_for("editor", ctx),
                    draft=draft,
                    answers=usable,
                    query=state.get("query", ""),
                    length=length,
                    lang=lang,
                    system_prompt=ctx.merge_prompt,
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
    runtime.stream_writer({"stage": "rounds", "done": rnd, "total": ctx.max_rounds})
    verdict = "no judgement"
    if judgement:
        verdict = ", ".join(f"{k} {judgement[k]}" for k in ("completeness", "accuracy", "coherence"))
    runtime.stream_writer(
        {"stage": "editor", "message": f"round {rnd}: merged {len(usable)} answers; {verdict}; {stop or 'next round'}"}
    )
    return {**update, "draft": new_draft, "stop_reason": stop, "rounds_info": [info]}


def after_merge(state: SummarizeState) -> Literal["questions", "polish"]:
    """Another round unless the editor stopped."""
    return "polish" if state.get("stop_reason") else "questions"


def polish_node(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Final polish to the requested length, format and language (one call for a one-chunk document)."""
    ctx = run_context(state, runtime)
    lang, length, query = state["lang"], target_length(state), state.get("query", "")
    fmt = state.get("format", "paragraphs")
    draft = state.get("draft", "").strip()
    asked: dict[str, Any] = {"query": query, "length": length, "fmt": fmt, "lang": lang}  # what the summary must be
    emit = runtime.stream_writer
    if state["kind"] == "direct" or not draft:
        sources = state_sources(state, ctx)
        hits = sources.search(query, 3) if query.strip() else sources.hits()[:3]
        focus = query or get_document(ctx.namespace, state["doc_id"]).title
        evidence = evidence_block(hits, focus, ctx.direct_tokens)
        with track_usage() as usage:
            text = direct_summary(llm_for("editor", ctx), evidence=evidence, system_prompt=ctx.direct_prompt, **asked)
        emit({"stage": "polish", "message": f"summarized {len(hits)} chunks in one call"})
        return {"final_text": text, "usage": usage}
    if draft_fits(draft, length, fmt, lang):
        emit({"stage": "polish", "message": "the draft already has the requested length, format and language"})
        return {"final_text": draft}
    with track_usage() as usage:
        text = polish(llm_for("editor", ctx), draft=draft, system_prompt=ctx.polish_prompt, **asked)
    if not parse_cited_sentences(text) or coverage(text, draft) < 0.5:
        emit({"stage": "polish", "message": "the polished text strays from the draft; keeping the draft"})
        return {"final_text": draft, "usage": usage}
    emit({"stage": "polish", "message": f"polished to {length_units(text, lang)} units"})
    return {"final_text": text, "usage": usage}
