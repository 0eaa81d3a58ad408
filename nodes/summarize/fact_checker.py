"""The fact-checker: every sentence of a summary is checked against the chunks it cites.

A summary is split into sentences (:mod:`nodes.summarize.sentences`), each with the chunk ids it cites
(``[c3]``). A sentence that cites nothing is given the chunks that best match it (hybrid search)
as candidate evidence. The checker model reads, for a batch of sentences, the relevant part of
every cited chunk and says for each sentence whether the evidence supports it, with a corrected
sentence when it does not. The grounding check (:mod:`nodes.summarize.grounding`) needs no model: every
number and name of a sentence, and a share of its content words, must be in the full text of the
chunks it cites (a negation, in a cited passage on the same thing). A sentence is flagged when
either check says no, and keeps which one did. In ``fix`` mode flagged sentences are replaced by a
grounded correction, kept as ``disputed`` (weak flags) or dropped; in ``mark`` mode they are only
labelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

import prompts
from nodes.collection.sources import Sources
from nodes.retrieval import focus_snippet
from nodes.summarize.context import Checks, FactcheckMode, SummarizeContext
from nodes.summarize.expert import bad_output, language_name
from nodes.summarize.grounding import grounding_problems
from nodes.summarize.length import (
    fill_candidates,
    fill_to_length,
    length_bounds,
    total_units,
)
from nodes.summarize.sentences import clean_sentence, coverage, parse_cited_sentences
from nodes.summarize.state import SummarizeState, run_context, state_sources, target_length
from stores.errors import ModelError
from stores.labels import citations_in
from stores.models import LLM, llm_for, messages
from stores.usage import track_usage

Verdict = Literal["supported", "fixed", "dropped", "disputed", "unsupported", "unchecked", "source"]


class SentenceVerdict(BaseModel):
    """The checker's verdict on one numbered sentence."""

    n: int = Field(ge=1, description="Number of the sentence.")
    supported: bool = Field(description="True when the evidence states what the sentence says.")
    fix: str = Field(default="", max_length=500, description="A corrected sentence when not supported, else empty.")


class Verdicts(BaseModel):
    """Verdicts for a batch of sentences."""

    verdicts: list[SentenceVerdict] = Field(max_length=20)


def evidence_for(sources: Sources, batch: Sequence[dict[str, Any]], chunk_tokens: int) -> str:
    """Evidence text for a batch of sentences: each cited chunk of ``sources`` once, cut around the claims citing it."""
    claims: dict[str, list[str]] = {}
    for sentence in batch:
        for cid in sentence["citations"]:
            claims.setdefault(cid, []).append(sentence["text"])
    hits = sources.chunks(list(claims))
    blocks = [f"[{h.chunk_id}] {focus_snippet(h.text, ' '.join(claims[h.chunk_id]), chunk_tokens)}" for h in hits]
    return "\n\n".join(blocks)


def grounded_fix(fix: str, original: str, source: str, threshold: float = 0.6) -> bool:
    """True when a correction is a new sentence whose content words mostly come from the cited chunks."""
    fixed = clean_sentence(fix)
    return bool(fixed) and fixed != clean_sentence(original) and coverage(fixed, source) >= threshold


def retrieve_citations(sources: Sources, sentence: str, k: int, prefer: Sequence[str] = ()) -> list[str]:
    """Chunk labels of ``sources`` for a sentence citing nothing: best matches among ``prefer`` first, else any."""
    hits = sources.search(sentence, max(k, 8) if prefer else k)
    preferred = [h.chunk_id for h in hits if h.chunk_id in set(prefer)]
    return (preferred or [h.chunk_id for h in hits])[:k]


def check_sentences(
    sentences: Sequence[dict[str, Any]],
    *,
    sources: Sources,
    llm: LLM | None,
    lang: str = "en",
    mode: FactcheckMode = "fix",
    checks: Checks = "both",
    batch_size: int = 6,
    chunk_tokens: int = 140,
    max_citations: int = 2,
    prefer: Sequence[str] = (),
    keep_coverage: float = 0.9,
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """Check every sentence against its cited chunks of ``sources``: by the checker model, by grounding, or both.

    The model reads the cited excerpts and judges each sentence; grounding
    (:func:`nodes.summarize.grounding.grounding_problems`) needs every number and name of the sentence, and most of its
    content words, in the full text of the cited chunks. ``both`` flags a sentence when either
    check does. Returns one entry per input sentence: ``{text, citations, verdict, original,
    model_supported, grounding, flagged_by}`` where ``model_supported`` is the model's verdict
    (None when it gave none), ``grounding`` lists the grounding problems, ``flagged_by`` names
    the checks that flagged it, and verdict is ``supported``, ``fixed`` (the model's correction,
    accepted when its content words come from the cited chunks and it passes grounding),
    ``dropped``, ``disputed`` (fix mode, kept and flagged: flagged by the model alone, without a
    usable correction, while at least ``keep_coverage`` of its content words are in the cited
    chunks; or flagged only for weak grounding problems, ``WEAK_PROBLEMS``), ``unsupported`` (mark mode) or
    ``unchecked`` (checking was off, or the model's output stayed invalid: its grounding problems
    are still listed). Sentences citing nothing get the best-matching chunks as citations
    (``cited_by: "retrieval"``), taken from ``prefer`` (e.g. the chunks the draft cited) when
    any of those match. In a collection the chunks are labelled ``2:c3``.
    """
    results: list[dict[str, Any]] = []
    for s in sentences:
        cites = list(s.get("citations", []))[:max_citations]
        entry = {"text": s["text"], "original": s["text"], "citations": cites, "cited_by": "model"}
        if not cites and mode != "off":
            entry["citations"] = retrieve_citations(sources, s["text"], max_citations, prefer)
            entry["cited_by"] = "retrieval"
        entry.update({"verdict": "unchecked", "model_supported": None, "grounding": [], "flagged_by": []})
        results.append(entry)
    if mode == "off":
        return results
    checkable = [r for r in results if r["citations"]]
    cited = dict.fromkeys(c for r in checkable for c in r["citations"])
    texts = {h.chunk_id: h.text for h in sources.chunks(list(cited))}
    if checks != "model":
        for entry in checkable:
            entry["grounding"] = grounding_problems(entry["text"], _source(entry, texts))
    fixes: dict[int, str] = {}
    if checks != "grounding":
        if llm is None:
            raise ValueError("the model check needs a model")
        for start in range(0, len(checkable), batch_size):
            batch = checkable[start : start + batch_size]
            _model_check(batch, fixes, llm, sources, lang, chunk_tokens, system_prompt)
    for entry in checkable:
        _decide(entry, mode, checks, fixes.get(id(entry), ""), _source(entry, texts), keep_coverage)
    return results


def _model_check(
    batch: list[dict[str, Any]],
    fixes: dict[int, str],
    llm: LLM,
    sources: Sources,
    lang: str,
    chunk_tokens: int,
    system_prompt: str | None,
) -> None:
    """Ask the checker model about one batch of sentences: set their ``model_supported`` and collect the fixes."""
    numbered = "\n".join(f"{i}. {r['text']} (cites {', '.join(r['citations'])})" for i, r in enumerate(batch, start=1))
    system = prompts.render("summarize/factcheck", lang, template=system_prompt, language=language_name(lang))
    evidence = evidence_for(sources, batch, chunk_tokens)
    user = prompts.render("summarize/factcheck_user", lang, evidence=evidence, sentences=numbered)
    try:
        reply = llm.structured(messages(system, user), Verdicts, max_tokens=60 * len(batch) + 80)
    except ModelError as exc:
        if not bad_output(exc):
            raise
        for entry in batch:
            entry["error"] = str(exc)[:300]
        return
    by_n = {v.n: v for v in reply.verdicts}
    for i, entry in enumerate(batch, start=1):
        verdict = by_n.get(i)
        if verdict is not None:
            entry["model_supported"] = verdict.supported
            fixes[id(entry)] = verdict.fix


def _source(entry: dict[str, Any], sources: dict[str, str]) -> str:
    return " ".join(sources.get(c, "") for c in entry["citations"])


def _decide(
    entry: dict[str, Any], mode: FactcheckMode, checks: Checks, fix: str, source: str, keep_coverage: float
) -> None:
    """Set the verdict of one checked sentence from the model's judgement and the grounding problems.

    A sentence no check flagged is ``supported`` when the model confirmed it (or grounding was the
    only check), and stays ``unchecked`` when the model gave no verdict. A sentence whose model check
    failed (invalid output) stays ``unchecked`` whatever grounding found: the check did not complete,
    and its grounding problems are still reported.
    """
    model, grounding = entry["model_supported"], entry["grounding"]
    entry["flagged_by"] = [name for name, flagged in (("model", model is False), ("grounding", grounding)) if flagged]
    if "error" in entry:
        return
    if not entry["flagged_by"]:
        if model is True or checks == "grounding":
            entry["verdict"] = "supported"
        return
    if mode == "mark":
        entry["verdict"] = "unsupported"
    elif fix and grounded_fix(fix, entry["text"], source) and not grounding_problems(clean_sentence(fix), source):
        entry["verdict"] = "fixed"
        entry["text"] = clean_sentence(fix)
        entry["citations"] = [c for c in citations_in(fix) if c in entry["citations"]] or entry["citations"]
    elif _weak(entry) and (entry["grounding"] or coverage(entry["text"], source) >= keep_coverage):
        entry["verdict"] = "disputed"
    else:
        entry["verdict"] = "dropped"


WEAK_PROBLEMS = ("negation:", "but not with this claim")
"""Grounding problems that faithful paraphrases also show often: alone, they mark a sentence, never drop it."""


def _weak(entry: dict[str, Any]) -> bool:
    """Whether the flags may be a faithful paraphrase misjudged: the model's alone, or only weak grounding problems."""
    grounding = entry["grounding"]
    if not grounding:
        return True
    return entry["model_supported"] is not False and all(any(w in p for w in WEAK_PROBLEMS) for p in grounding)


def factcheck_stats(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts of verdicts and the share of checked sentences the checker confirmed as written."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    checked = sum(v for k, v in counts.items() if k in ("supported", "fixed", "dropped", "disputed", "unsupported"))
    flagged_by = {"model": 0, "grounding": 0, "both": 0}
    for r in results:
        by = r.get("flagged_by", [])
        for name in by:
            flagged_by[name] += 1
        flagged_by["both"] += len(by) == 2
    confirmed = counts.get("supported", 0) + counts.get("source", 0)
    total = checked + counts.get("source", 0)
    return {
        "sentences": len(results),
        "checked": checked,
        "supported": counts.get("supported", 0),
        "fixed": counts.get("fixed", 0),
        "dropped": counts.get("dropped", 0),
        "disputed": counts.get("disputed", 0),
        "unsupported": counts.get("unsupported", 0),
        "unchecked": counts.get("unchecked", 0),
        "supported_share": round(confirmed / total, 4) if total else None,
        "flagged_by": flagged_by,
    }


REFILLS = 2
"""Times the fact-check refills a summary its drops left short."""


def factcheck(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Check each sentence against the chunks it cites; fix or drop the unsupported ones.

    When dropping leaves the summary short, cited sentences not used yet are checked and added (at most
    ``REFILLS`` times, one checker call each).
    """
    ctx = run_context(state, runtime)
    if state["kind"] == "short":
        labels = state_sources(state, ctx).labels()
        sentences = parse_cited_sentences(state.get("final_text", ""), labels)
        checked = [{**s, "original": s["text"], "verdict": "source", "cited_by": "source"} for s in sentences]
        return {"checked": checked}
    lang, length = state["lang"], target_length(state)
    sources = state_sources(state, ctx)

    def check(sentences: list[dict[str, Any]]) -> list[dict[str, Any]]:
        checked = check_sentences(
            sentences,
            sources=sources,
            llm=llm_for("checker", ctx),
            lang=lang,
            mode=cast(FactcheckMode, ctx.factcheck),  # check_context held it to get_args(FactcheckMode)
            checks=cast(Checks, ctx.factcheck_checks),  # and this to get_args(Checks)
            batch_size=ctx.factcheck_batch,
            prefer=citations_in(state.get("draft", "")),
            system_prompt=ctx.factcheck_prompt,
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
            more = fill_to_length(kept, fill_candidates(state, ctx, used), length, lang)
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
