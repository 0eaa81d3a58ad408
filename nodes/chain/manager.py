"""The manager: writes the answer, with citations, from the quotes of every chain.

Its answer cites sentence labels (``c3.2``) or chunk ids; the citations kept are the chunks that
were read, the quotes returned those the answer rests on, and an answer whose words are not all in
its quotes is marked inferred.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

import prompts
from nodes.chain.context import ChainContext
from nodes.chain.passages import hop_first
from nodes.chain.state import ChainState
from nodes.collection.sources import Sources, quote_sources
from stores.labels import CITED, QUOTE_LINE, chunk_of
from stores.models import LLM, llm_for, messages
from stores.text import content_words
from stores.usage import merge_usage, track_usage, usage_totals
from stores.vectorstore import get_store


class Answer(BaseModel):
    """What the manager (or a single reader) returns."""

    answer: str = Field(description="shortest complete answer, or 'unknown'")
    evidence: list[str] = Field(default_factory=list, description="ids of supporting pieces, e.g. c3")
    explanation: str = Field(default="", description="one sentence citing the ids in brackets")


def manager(state: ChainState, runtime: Runtime[ChainContext]) -> dict[str, Any]:
    """Write the final answer with citations from the chains' last notes."""
    ctx = runtime.context or ChainContext()
    notes = state.get("notes") or [""]
    shown = notes
    if ctx.bridges_on(state):  # the hop first: anchor, then the quotes that bridge it
        shown = [hop_first(state["question"], n) for n in notes]
    with track_usage() as usage:
        answer = manager_answer(
            llm_for("manager", ctx),
            question=state["question"],
            chain_notes=shown,
            lang=state.get("language", "en"),
            max_tokens=ctx.manager_max_tokens,
            system_prompt=ctx.manager_prompt,
        )
    known = list(state.get("read", []))
    total_usage = merge_usage(state.get("usage"), usage)
    quotes = supporting_quotes(answer, notes)
    return {
        "answer": answer.answer.strip(),
        "explanation": answer.explanation.strip(),
        "quotes": quotes,
        "sources": cited_quotes(state, ctx, quotes),
        "inferred": is_inferred(answer.answer, quotes),
        "dropped": state.get("dropped", 0),
        "citations": valid_citations(answer, known, notes),
        "usage": usage,
        "calls": usage_totals(total_usage)["calls"],
    }


def cited_quotes(state: ChainState, ctx: ChainContext, quotes: Sequence[str]) -> list[dict[str, Any]]:
    """What each quote cites (:func:`~nodes.collection.sources.quote_sources`): its section, and page in a PDF."""
    if not quotes:
        return []
    doc_ids = [str(d["doc_id"]) for d in state.get("documents") or []] or [state.get("doc_id", "")]
    sources = Sources(get_store(state.get("namespace") or ctx.namespace, ctx.embedder), doc_ids, state.get("tags"))
    return quote_sources(sources, quotes)


def manager_answer(
    llm: LLM,
    *,
    question: str,
    chain_notes: Sequence[str],
    lang: str,
    max_tokens: int = 200,
    system_prompt: str | None = None,
) -> Answer:
    """The manager's answer from the quotes every chain gathered.

    ``system_prompt``: the context's ``manager_prompt``; None: the template file in ``lang``.
    """
    if len(chain_notes) == 1:
        body = "Quotes:\n" + (chain_notes[0] or "(the readers quoted nothing)")
        reconcile = ""
    else:
        body = "\n\n".join(f"Quotes of chain {i}:\n{n or '(nothing quoted)'}" for i, n in enumerate(chain_notes, 1))
        reconcile = prompts.render("chain/manager_reconcile", lang)
    system = prompts.render("chain/manager", lang, template=system_prompt, reconcile=reconcile)
    user = prompts.render("chain/manager_user", lang, question=question, notes=body)
    return llm.structured(messages(system, user), Answer, max_tokens=max_tokens)


def valid_citations(answer: Answer, known: Sequence[str], notes: Sequence[str] = ()) -> list[str]:
    """Cited chunk ids that were read, from the evidence list and the explanation, in first-seen order.

    Sentence labels (``c3.2``) count for their chunk. An answer that cites nothing (and is not
    "unknown") is credited to every chunk its chains quoted.
    """
    allowed = set(known)
    found: list[str] = []
    for ref in [*answer.evidence, *CITED.findall(answer.explanation)]:
        cid = chunk_of(ref.strip().strip("[]"))
        if cid in allowed and cid not in found:
            found.append(cid)
    if not found and not is_unknown(answer.answer):
        for label in quoted_labels(notes):
            cid = chunk_of(label)
            if cid in allowed and cid not in found:
                found.append(cid)
    return found


def quoted_labels(notes: Sequence[str]) -> list[str]:
    """Labels of every quote in the chains' evidence, first-seen order."""
    out: list[str] = []
    for text in notes:
        for line in text.splitlines():
            m = QUOTE_LINE.match(line)
            if m and m.group(1) not in out:
                out.append(m.group(1))
    return out


def supporting_quotes(answer: Answer, notes: Sequence[str]) -> list[str]:
    """The quote lines (``[label] sentence``) the answer rests on: those it cites, else all of them."""
    lines = {m.group(1): ln for text in notes for ln in text.splitlines() if (m := QUOTE_LINE.match(ln))}
    cited = [ref.strip().strip("[]") for ref in [*answer.evidence, *CITED.findall(answer.explanation)]]
    chosen = [lines[label] for label in dict.fromkeys(cited) if label in lines]
    if not chosen and not is_unknown(answer.answer):
        chosen = list(lines.values())
    return chosen


def is_unknown(answer: str) -> bool:
    """Whether an answer says it does not know."""
    return answer.strip().strip(".").lower() in {"unknown", "未知", ""}


def is_inferred(answer: str, quotes: Sequence[str]) -> bool:
    """Whether an answer is not stated in its quotes: some of its content words appear in none of them."""
    if is_unknown(answer):
        return False
    words = content_words(answer)
    if not words:
        return False
    stated = set().union(*(content_words(q) for q in quotes)) if quotes else set()
    return not words <= stated
