"""The summarize graph's ends: ``prepare`` and ``finish``.

``prepare`` checks the request, resolves the document and chooses the path; ``finish`` assembles the output.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from nodes.collection.resolve import run_documents, run_fields, thread_tags
from nodes.collection.sources import Sources
from nodes.summarize.baselines import check_baseline_calls
from nodes.summarize.context import SummarizeContext, check_context
from nodes.summarize.editing import check_request
from nodes.summarize.fact_checker import factcheck_stats
from nodes.summarize.length import length_bounds, length_units, total_units
from nodes.summarize.sentences import render_summary, text_blocks
from nodes.summarize.state import SummarizeState, run_context, state_sources, target_length
from stores.documents import get_document
from stores.errors import InputError
from stores.models import ModelOutputError
from stores.pages import page_fields
from stores.questions import check_question
from stores.text import split_sentences
from stores.vectorstore import get_store


def prepare(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Validate the request, ingest a path if given, and pick the path through the graph."""
    ctx = run_context(state, runtime)
    check_context(ctx)
    length, fmt = target_length(state), state.get("format") or "paragraphs"
    language, method = state.get("language") or "", state.get("method") or "expert-editor"
    check_request(length, fmt, language, method)
    if state.get("query"):
        check_question(state["query"], "query")
    doc_ids = run_documents(state, ctx, runtime.stream_writer)
    doc_id = doc_ids[0]
    infos = [get_document(ctx.namespace, d) for d in doc_ids]
    store = get_store(ctx.namespace, ctx.embedder)
    tags = thread_tags(state.get("tags") or {}, doc_ids)
    sources = Sources(store, doc_ids, tags)
    chunks = sources.hits()
    if not chunks:
        raise InputError(
            f"document {doc_id!r} has no chunks in the {store.space!r} vector space; ingest it with this embedder"
        )
    doc_language = Counter(info.language for info in infos).most_common(1)[0][0]
    lang = language or doc_language
    update: dict[str, Any] = {
        **run_fields(doc_ids),
        "namespace": ctx.namespace,
        "collection": doc_ids,
        "tags": tags,
        "documents": sources.documents(),
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
    total = length_units(" ".join(seen), doc_language)
    if total <= length and lang == doc_language:
        kind, message = "short", "the document is no longer than the summary asked for: it is its own summary"
        update["final_text"] = "\n".join(cited)
        update["stop_reason"] = "document_shorter_than_summary"
    elif len(chunks) == 1 and method == "expert-editor":
        kind, message = "direct", "one-chunk document: summarized in one call"
        update["stop_reason"] = "single_chunk"
    else:
        check_baseline_calls(method, len(chunks), len(infos))
        kind, message = method, f"{method} over {len(chunks)} chunks"
    update["kind"] = kind
    name = infos[0].title or doc_id if len(infos) == 1 else f"{len(infos)} documents"
    runtime.stream_writer({"stage": "summarize", "message": f"{name}: {message}"})
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


def finish(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Assemble the summary, its cited sentences and the question/answer log.

    Each cited sentence comes with the source sentences it rests on.
    """
    ctx = run_context(state, runtime)
    checked = state.get("checked", [])
    kept = [c for c in checked if c["verdict"] != "dropped"]
    sources = state_sources(state, ctx)
    cited = list(dict.fromkeys(cid for c in kept for cid in c["citations"]))
    texts = {hit.chunk_id: hit.text for hit in sources.chunks(cited)}
    sentences = [
        {
            "text": c["text"],
            "citations": c["citations"],
            "sources": sources.supporting(c["text"], c["citations"], texts),
            "verdict": c["verdict"],
            "origin": c.get("origin", "source"),
            **({"flagged_by": c["flagged_by"], "problems": c["grounding"]} if c.get("flagged_by") else {}),
        }
        for c in kept
    ]
    pages = sources.pages([s["label"] for sentence in sentences for s in sentence["sources"]])
    for sentence in sentences:  # a PDF's source sentences name their page
        sentence["sources"] = [{**s, **page_fields(pages.get(s["label"]))} for s in sentence["sources"]]
    lang, length = state["lang"], target_length(state)
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
        "documents": sources.documents(),
        "summary": summary,
        "sentences": sentences,
        "fit": fit,
        "log": log,
        "rounds": state.get("round", 0),
        "stop_reason": stop,
        "factcheck": factcheck_stats(checked),
    }
