"""The summary's checks: ``fit_length`` (within +-25% of the length asked) and ``factcheck`` (every sentence
against the chunks it cites; a summary its drops left short is refilled)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from langgraph.runtime import Runtime

from graphs.summarize.state import SummarizeContext, SummarizeState, run_context, target_length
from nodes.retrieval import hybrid_search
from nodes.summarize.expert import citations_in
from nodes.summarize.fact_checker import Checks, FactcheckMode, check_sentences, factcheck_stats
from nodes.summarize.gaps import chunk_terms, uncovered_chunks
from nodes.summarize.length import (
    answer_sentences,
    excerpt_sentences,
    fill_to_length,
    length_bounds,
    total_units,
    trim_to_length,
    unit_name,
)
from nodes.summarize.sentences import dedupe_sentences, parse_cited_sentences
from stores.documents import get_document
from stores.models import llm_for
from stores.usage import track_usage
from stores.vectorstore import get_store

REFILLS = 2
"""Times the fact-check refills a summary its drops left short."""


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
    ctx = run_context(state, runtime)
    info = get_document(ctx.namespace, state["doc_id"])
    lang, length = state["lang"], target_length(state)
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
    runtime.stream_writer(
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
    ctx = run_context(state, runtime)
    info = get_document(ctx.namespace, state["doc_id"])
    if state["kind"] == "short":
        sentences = parse_cited_sentences(state.get("final_text", ""), _chunk_ids(info.chunks))
        checked = [{**s, "original": s["text"], "verdict": "source", "cited_by": "source"} for s in sentences]
        return {"checked": checked}
    lang, length = state["lang"], target_length(state)
    store = get_store(ctx.namespace, ctx.embedder)

    def check(sentences: list[dict[str, Any]]) -> list[dict[str, Any]]:
        checked = check_sentences(
            sentences,
            store=store,
            doc_id=state["doc_id"],
            llm=llm_for("checker", ctx),
            lang=lang,
            mode=cast(FactcheckMode, ctx.factcheck),  # check_context held it to get_args(FactcheckMode)
            checks=cast(Checks, ctx.factcheck_checks),  # and this to get_args(Checks)
            batch_size=ctx.factcheck_batch,
            prefer=citations_in(state.get("draft", "")),
        )
        kept_keys = [{"origin": s.get("origin", "summary"), "clipped": s.get("clipped", False)} for s in sentences]
        return [{**c, **k} for c, k in zip(checked, kept_keys, strict=True)]

    with track_usage() as usage:
        checked = check(state.get("fitted", []))
        for _ in range(REFILLS if ctx.length_fit == "fill" and ctx.factcheck == "fix" else 0):
            kept = [c for c in checked if c["verdict"] != "dropped"]
            if not kept or total_units(kept, lang) >= length_bounds(length)[0]:
                break
            used = [c["text"] for c in kept] + [c["original"] for c in checked if c["verdict"] == "dropped"]
            more = fill_to_length(kept, _fill_candidates(state, ctx, used), length, lang)
            if not more:
                break
            checked += check(more)
    stats = factcheck_stats(checked)
    runtime.stream_writer(
        {
            "stage": "factcheck",
            "message": f"fact-check: {stats['supported']} supported, {stats['fixed']} fixed, "
            f"{stats['dropped']} dropped, {stats['unsupported']} unsupported of {stats['sentences']}",
        }
    )
    return {"checked": checked, "usage": usage}
