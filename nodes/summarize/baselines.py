"""Baseline summarizers on the same store and models: LangGraph map-reduce and refine.

- **map-reduce**: every chunk is summarized in parallel (``Send`` fan-out); while the notes are
  longer than ``collapse_token_limit`` tokens, consecutive notes are grouped under the limit and
  each group collapsed into one note; a final reduce writes the summary.
- **refine**: the chunks are read in order; each step rewrites the running summary with the next
  chunk.

Both cite chunk ids ``[c3]`` (map notes always carry their chunk's id) and write to the
requested length, format and language.
They are wired in :mod:`graphs.summarize.baselines`.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Send

import prompts
from nodes.context import validate
from nodes.ingest import in_namespace
from nodes.summarize.context import BaselineContext
from nodes.summarize.editing import writing_prompt
from nodes.summarize.expert import focus_text, language_name, placeholder
from nodes.summarize.length import tokens_for
from nodes.summarize.state import MapReduceState, MapTask, RefineState, run_doc_ids, run_documents, state_sources
from stores.labels import citations_in
from stores.models import llm_for, messages
from stores.text import count_tokens, split_sentences, truncate_tokens
from stores.usage import check_calls, track_usage

NONE_MARKERS = ("NONE", "无")


def cite_chunk(note: str, chunk_id: str) -> str:
    """``note`` with ``[chunk_id]`` after every sentence that cites nothing."""
    out = []
    for sentence in split_sentences(note.strip()):
        out.append(sentence if citations_in(sentence) else f"{sentence} [{chunk_id}]")
    return " ".join(out)


def is_none(text: str) -> bool:
    """True when a map note says the chunk holds nothing relevant."""
    head = text.strip().strip(".。").upper()
    return not head or head in NONE_MARKERS or head.startswith("NONE")


LEAST_CALLS = {"map-reduce": 1, "refine": 0}
"""Model calls a baseline makes besides one per chunk: map-reduce's reduce (refine has none)."""


def check_baseline_calls(method: str, chunks: int, documents: int) -> None:
    """Refuse a map-reduce or refine run the request's bound on model calls cannot finish, before its first call.

    Both make at least one call per chunk (``LONGDOC_MAX_MODEL_CALLS``, :func:`stores.usage.check_calls`).
    """
    if method in LEAST_CALLS:
        what = f"{method} over {chunks:,} chunks" + (f" of {documents:,} documents" if documents > 1 else "")
        check_calls(chunks + LEAST_CALLS[method], what, "name fewer documents or use method expert-editor")


# --- map-reduce -----------------------------------------------------------------------------


def plan_chunks(state: MapReduceState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    """List the document's chunk ids."""
    ctx = in_namespace(runtime.context or BaselineContext(), state)
    validate(ctx)
    hits = state_sources(state, ctx).hits()
    check_baseline_calls("map-reduce", len(hits), len(run_doc_ids(state)))
    runtime.stream_writer(
        {"stage": "map", "done": 0, "total": len(hits), "message": f"map-reduce over {len(hits)} chunks"}
    )
    return {"chunk_ids": [h.chunk_id for h in hits], "collapses": 0}


def fan_out(state: MapReduceState) -> list[Send]:
    """One map task per chunk."""
    return [
        Send(
            "map_chunk",
            {
                **run_documents(state),
                "chunk_id": cid,
                "position": i,
                "lang": state.get("lang", "en"),
                "query": state.get("query", ""),
            },
        )
        for i, cid in enumerate(state["chunk_ids"])
    ]


def map_chunk(state: MapTask, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    """Summarize one chunk into a short cited note (or nothing when it is irrelevant)."""
    ctx = in_namespace(runtime.context or BaselineContext(), state)
    hit = state_sources(state, ctx).chunks([state["chunk_id"]])[0]
    lang = state["lang"]
    system = prompts.render("summarize/map", lang, template=ctx.map_prompt, language=language_name(lang))
    user = prompts.render(
        "summarize/map_user", lang, chunk_id=hit.chunk_id, text=hit.text, query=focus_text(state["query"], lang)
    )
    with track_usage() as usage:
        text = llm_for("worker", ctx).text(messages(system, user), max_tokens=ctx.map_max_tokens)
    runtime.stream_writer({"stage": "map", "message": f"map {hit.chunk_id}: {len(text.split())} words"})
    if is_none(text):
        return {"usage": usage}
    note = {"position": state["position"], "chunk_id": hit.chunk_id, "text": cite_chunk(text, hit.chunk_id)}
    return {"notes": [note], "usage": usage}


def collect_notes(state: MapReduceState) -> dict[str, Any]:
    """Order the map notes by chunk position."""
    notes = sorted(state.get("notes", []), key=lambda n: n["position"])
    return {"collapsed": [n["text"] for n in notes]}


def group_notes(notes: list[str], limit: int) -> list[list[str]]:
    """Consecutive notes grouped so that each group stays within ``limit`` tokens."""
    groups: list[list[str]] = []
    size = 0
    for note in notes:
        cost = count_tokens(note)
        if groups and size + cost <= limit:
            groups[-1].append(note)
            size += cost
        else:
            groups.append([note])
            size = cost
    return groups


def needs_collapse(state: MapReduceState, runtime: Runtime[BaselineContext]) -> Literal["collapse", "reduce"]:
    """Collapse again while the notes are over the token limit (and passes remain)."""
    ctx = runtime.context or BaselineContext()
    notes = state.get("collapsed", [])
    total = sum(count_tokens(n) for n in notes)
    if total > ctx.collapse_token_limit and len(notes) > 1 and state.get("collapses", 0) < ctx.max_collapses:
        return "collapse"
    return "reduce"


def collapse(state: MapReduceState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    """Merge each group of consecutive notes into one shorter cited note."""
    ctx = runtime.context or BaselineContext()
    lang = state.get("lang", "en")
    llm = llm_for("manager", ctx)
    groups = group_notes(state["collapsed"], max(ctx.collapse_token_limit // 2, 100))
    if len(groups) == len(state["collapsed"]):
        groups = [state["collapsed"][i : i + 2] for i in range(0, len(state["collapsed"]), 2)]
    out: list[str] = []
    budget = max(60, ctx.collapse_token_limit // (2 * max(1, len(groups))))
    with track_usage() as usage:
        for group in groups:
            if len(group) == 1:
                out.append(group[0])
                continue
            system = prompts.render(
                "summarize/collapse", lang, template=ctx.collapse_prompt, language=language_name(lang), tokens=budget
            )
            user = prompts.render(
                "summarize/collapse_user", lang, notes="\n".join(group), query=focus_text(state.get("query", ""), lang)
            )
            out.append(llm.text(messages(system, user), max_tokens=budget + 40).strip())
    n = state.get("collapses", 0) + 1
    runtime.stream_writer(
        {"stage": "collapse", "message": f"collapse pass {n}: {len(state['collapsed'])} -> {len(out)} notes"}
    )
    return {"collapsed": out, "collapses": n, "usage": usage}


def reduce_notes(state: MapReduceState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    """Write the summary from the (collapsed) notes."""
    ctx = runtime.context or BaselineContext()
    notes = state.get("collapsed", [])
    if not notes:
        return {"final_text": ""}
    lang, length = state.get("lang", "en"), int(state.get("length", 120))
    fmt = state.get("format", "paragraphs")
    system = writing_prompt("summarize/reduce", lang, length=length, fmt=fmt, template=ctx.reduce_prompt)
    joined = truncate_tokens("\n".join(f"- {n}" for n in notes), max(ctx.collapse_token_limit, 400) * 2)
    user = prompts.render("summarize/reduce_user", lang, notes=joined, query=focus_text(state.get("query", ""), lang))
    with track_usage() as usage:
        text = llm_for("manager", ctx).text(messages(system, user), max_tokens=tokens_for(length, lang))
    runtime.stream_writer({"stage": "reduce", "message": f"reduce: {len(text.split())} words"})
    return {"final_text": text.strip(), "usage": usage}


# --- refine ---------------------------------------------------------------------------------


def plan_refine(state: RefineState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    """List the document's chunk ids and start with an empty summary."""
    ctx = in_namespace(runtime.context or BaselineContext(), state)
    validate(ctx)
    hits = state_sources(state, ctx).hits()
    check_baseline_calls("refine", len(hits), len(run_doc_ids(state)))
    return {"chunk_ids": [h.chunk_id for h in hits], "index": 0, "final_text": ""}


def refine_step(state: RefineState, runtime: Runtime[BaselineContext]) -> dict[str, Any]:
    """Rewrite the running summary with the next chunk."""
    ctx = in_namespace(runtime.context or BaselineContext(), state)
    i = state["index"]
    cid = state["chunk_ids"][i]
    hit = state_sources(state, ctx).chunks([cid])[0]
    lang, length = state.get("lang", "en"), int(state.get("length", 120))
    fmt = state.get("format", "paragraphs")
    system = writing_prompt("summarize/refine", lang, length=length, fmt=fmt, template=ctx.refine_prompt)
    user = prompts.render(
        "summarize/refine_user",
        lang,
        summary=state.get("final_text", "").strip() or placeholder("none_yet", lang),
        chunk_id=cid,
        text=hit.text,
        query=focus_text(state.get("query", ""), lang),
    )
    with track_usage() as usage:
        text = llm_for("worker", ctx).text(messages(system, user), max_tokens=tokens_for(length, lang)).strip()
    if is_none(text):
        text = state.get("final_text", "")
    total = len(state["chunk_ids"])
    runtime.stream_writer(
        {"stage": "refine", "done": i + 1, "total": total, "message": f"refine {cid} ({i + 1}/{total})"}
    )
    return {"final_text": text, "index": i + 1, "usage": usage}


def more_chunks(state: RefineState) -> Literal["refine_step", "__end__"]:
    """Continue while chunks remain."""
    return "refine_step" if state.get("index", 0) < len(state.get("chunk_ids", [])) else "__end__"
