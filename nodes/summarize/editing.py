"""The editor agent: overview, stepwise questions, merging answers into the draft, final polish.

The editor never reads the documents whole. It starts from an overview built from their
headings and first chunks, asks the experts concrete questions each round (schema-enforced JSON),
merges their cited answers into a short draft while judging completeness, accuracy and
coherence, and finally polishes the draft to the requested length, format and language. Its
questions aim first at what the draft does not cover (parts of the focus, topics of the chunks:
:mod:`nodes.summarize.gaps`); length units, trimming and filling are in :mod:`nodes.summarize.length`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from itertools import zip_longest
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

import prompts
from nodes.collection.sources import Sources
from nodes.retrieval import focus_snippet
from nodes.route.entry import route_to_expert
from nodes.summarize.expert import focus_text, language_name, placeholder, question_key
from nodes.summarize.length import length_bounds, length_units, tokens_for, unit_name
from nodes.summarize.sentences import coverage
from stores.documents import get_document
from stores.errors import InputError
from stores.labels import LABEL, chunk_label, citations_in, label_position
from stores.models import LLM, messages
from stores.text import jaccard, split_sentences, truncate_tokens
from stores.vectorstore import Hit

Format = Literal["paragraphs", "bullets"]


# --- output shape: format, language, request ------------------------------------------------
def format_instruction(fmt: str, lang: str) -> str:
    """How the final text must be laid out."""
    if fmt == "bullets":
        return (
            "以“- ”开头的要点列表，每行一个要点"
            if lang == "zh"
            else "a bullet list, one point per line starting with '- '"
        )
    return "一到两段连贯的文字" if lang == "zh" else "one or two coherent paragraphs"


def writing_prompt(name: str, lang: str, *, length: int, fmt: str, template: str | None = None) -> str:
    """The system prompt ``name`` of a step that writes the summary text (length, layout, language).

    ``template`` is the context's field for it (None: the template file in ``lang``).
    """
    return prompts.render(
        name,
        lang,
        template=template,
        length=length,
        unit=unit_name(lang),
        format=format_instruction(fmt, lang),
        language=language_name(lang),
    )


def check_request(length: int, fmt: str, language: str, method: str) -> None:
    """Raise InputError for an impossible summary request."""
    if not isinstance(length, int) or not 10 <= length <= 2000:
        raise InputError(f"length must be between 10 and 2000 words, got {length!r}")
    if fmt not in ("paragraphs", "bullets"):
        raise InputError(f"format must be 'paragraphs' or 'bullets', got {fmt!r}")
    if language not in ("", "en", "zh"):
        raise InputError(f"language must be 'en', 'zh' or empty (the document's), got {language!r}")
    if method not in ("expert-editor", "map-reduce", "refine"):
        raise InputError(f"method must be expert-editor, map-reduce or refine, got {method!r}")


# --- overview -------------------------------------------------------------------------------
def overview_of(
    sources: Sources,
    query: str = "",
    *,
    max_documents: int = 15,
    max_sections: int = 15,
    lead_tokens: int = 60,
    samples: int = 4,
) -> str:
    """The structure of the run's documents the editor starts from, in the run's labels (``c3``, or ``2:c3``).

    A line counting documents and chunks (with how a label names a document's chunk where labels carry tags),
    then each of the first ``max_documents`` documents: its name, chunk count and labels, and its headings with the
    label of the chunk each starts at (``max_sections`` headings shared among the documents). Then the openings of
    up to ``samples`` documents spread over the run (their first chunks taken in turn: one per document, at least
    two, sharing ``2 * lead_tokens`` tokens), ``samples`` chunks spread over those of them without headings, and in
    query mode the chunks best matching the query.
    """
    members = sources.members
    shown = members[:max_documents]
    sampled = members[:: max(1, len(members) // samples)][:samples]
    chunks = {m.doc_id: sources.store.by_doc(m.doc_id) for m in [*shown, *sampled]}
    header = f"Documents: {len(members)} ({sum(m.chunks for m in members)} chunks)"
    example = shown[-1].doc_id
    if sources.tag(example) is not None:
        header += f"; [{sources.label(example, chunk_label(3))}] is chunk c3 of document {sources.tag(example)}"
    lines = [header]
    for m in shown:
        lines += _document_lines(sources, m.doc_id, chunks[m.doc_id], max_sections // len(shown))
    if len(members) > len(shown):
        lines.append(f"(+{len(members) - len(shown)} more documents)")
    openings = [
        (m.doc_id, hit)
        for row in zip_longest(*(chunks[m.doc_id][:2] for m in sampled))
        for m, hit in zip(sampled, row, strict=True)
        if hit is not None
    ][: max(2, len(sampled))]
    leads = [(doc_id, hit, 2 * lead_tokens // len(openings)) for doc_id, hit in openings]
    rests = {  # the chunks after the openings of each document that has no headings
        m.doc_id: chunks[m.doc_id][sum(doc_id == m.doc_id for doc_id, _ in openings) :]
        for m in sampled
        if len(get_document(sources.store.namespace, m.doc_id).sections) <= 1
    }
    spread = {doc_id: rest for doc_id, rest in rests.items() if rest}
    for doc_id, rest in spread.items():
        per = min(len(rest), max(1, samples // len(spread)))
        middles = [(2 * i + 1) * len(rest) // (2 * per) for i in range(per)]  # of ``per`` equal runs of the rest
        leads += [(doc_id, rest[i], lead_tokens // 2) for i in middles]
    for doc_id, hit, tokens in leads:
        lines.append(f"[{sources.label(doc_id, hit.chunk_id)}] {truncate_tokens(' '.join(hit.text.split()), tokens)}")
    if query.strip():
        seen = {sources.label(doc_id, hit.chunk_id) for doc_id, hit in openings}
        for hit in sources.search(query, 3):
            if hit.chunk_id not in seen:
                lines.append(f"[{hit.chunk_id}] {focus_snippet(' '.join(hit.text.split()), query, lead_tokens)}")
    return "\n".join(lines)


def _document_lines(sources: Sources, doc_id: str, chunks: Sequence[Hit], max_sections: int) -> list[str]:
    """A document of the overview: its name, chunks and labels, then up to ``max_sections`` of its headings."""
    first, last = sources.label(doc_id, chunk_label(0)), sources.label(doc_id, chunk_label(max(len(chunks) - 1, 0)))
    lines = [f"Document: {sources.heading(doc_id)}; {len(chunks)} chunks ({first} to {last})"]
    sections = get_document(sources.store.namespace, doc_id).sections
    if sections and max_sections > 0:
        first_chunk: dict[str, str] = {}
        for hit in chunks:
            first_chunk.setdefault(hit.section, sources.label(doc_id, hit.chunk_id))
        listed = "; ".join(f"{s} [{first_chunk[s]}]" if s in first_chunk else s for s in sections[:max_sections])
        more = f" (+{len(sections) - max_sections} more)" if len(sections) > max_sections else ""
        lines.append(f"Sections: {listed}{more}")
    return lines


# --- questions ------------------------------------------------------------------------------
class _QuestionBase(BaseModel):
    question: str = Field(min_length=8, max_length=300, description="One concrete, answerable question.")
    type: Literal["fact", "opinion", "structure", "style"]


def questions_schema(experts: Sequence[str], n: int) -> type[BaseModel]:
    """The editor's question-list schema, with ``target_expert`` limited to ``experts``."""
    names = tuple(experts)
    question = create_model(
        "EditorQuestion",
        __base__=_QuestionBase,
        target_expert=(Literal[names], Field(description="Name of the expert who should answer.")),  # type: ignore[arg-type]
    )
    return create_model(
        "EditorQuestions",
        questions=(list[question], Field(min_length=1, max_length=n)),  # type: ignore[valid-type]
    )


def write_questions(
    llm: LLM,
    *,
    overview: str,
    draft: str,
    asked: Sequence[str],
    missing: str,
    query: str,
    experts: dict[str, str],
    n: int,
    lang: str,
    parts: Sequence[str] = (),
    topics: Sequence[str] = (),
    system_prompt: str | None = None,
) -> list[dict[str, str]]:
    """The editor's next questions (schema-enforced; ModelOutputError after retries).

    ``parts`` are the parts of the focus the draft does not answer yet (:func:`nodes.summarize.gaps.missing_parts`),
    ``topics`` the document's topics it does not cover yet (:func:`nodes.summarize.gaps.uncovered_topics`): the prompt
    asks the editor to aim its questions at them first. ``system_prompt`` is the context's ``questions_prompt``
    (None: the template file in ``lang``).
    """
    schema = questions_schema(list(experts), n)
    expert_lines = "\n".join(f"- {name}: {desc}" for name, desc in experts.items())
    system = prompts.render(
        "summarize/questions", lang, template=system_prompt, n=n, experts=expert_lines, language=language_name(lang)
    )
    asked_lines = "\n".join(f"- {truncate_tokens(q, 30)}" for q in list(asked)[-8:]) or placeholder("none", lang)
    user = prompts.render(
        "summarize/questions_user",
        lang,
        overview=overview,
        query=focus_text(query, lang),
        draft=draft.strip() or placeholder("empty_draft", lang),
        missing=missing.strip() or placeholder("no_notes", lang),
        parts=("、" if lang == "zh" else ", ").join(parts) or placeholder("none", lang),
        topics="\n".join(f"- {t}" for t in topics) or placeholder("none", lang),
        asked=asked_lines,
        n=n,
    )
    reply = llm.structured(messages(system, user), schema, max_tokens=60 * n + 60)
    return list(reply.model_dump()["questions"])  # the questions, each dumped as a dict


def new_questions(
    candidates: Sequence[dict[str, Any]], asked: Sequence[str], threshold: float = 0.8
) -> list[dict[str, Any]]:
    """``candidates`` minus near-duplicates of each other and of questions already asked."""
    seen = [question_key(q) for q in asked]
    out = []
    for cand in candidates:
        key = question_key(cand["question"])
        if not key:
            continue
        if any(jaccard(key, old) >= threshold for old in seen):
            continue
        seen.append(key)
        out.append(dict(cand))
    return out


def choose_expert(question: dict[str, Any], experts: dict[str, str], routing: str, namespace: str) -> str:
    """Which expert answers ``question``: the router's pick, the editor's, or by question type."""
    if routing == "router":
        name = route_to_expert(question["question"], experts, namespace)
        if name in experts:
            return name
    target = str(question.get("target_expert", ""))
    if target in experts:
        return target
    qtype = str(question.get("type", ""))
    if qtype in experts:
        return qtype
    return next(iter(experts))


# --- merging --------------------------------------------------------------------------------
class MergeResult(BaseModel):
    """The editor's merged draft and its judgement of it."""

    draft: str = Field(min_length=1, max_length=4000, description="The updated draft with [chunk_id] citations.")
    completeness: int = Field(ge=1, le=5)
    accuracy: int = Field(ge=1, le=5)
    coherence: int = Field(ge=1, le=5)
    done: bool = Field(description="True when the draft needs no further questions.")
    missing: str = Field(default="", max_length=400, description="What is still missing or unclear.")


def usable_answers(answers: Sequence[dict[str, Any]], threshold: float = 0.8) -> list[dict[str, Any]]:
    """Answered, cited answers: near-duplicates dropped (the more confident kept), in document order.

    Document order is that of an answer's first cited chunk; an answer citing no chunk label comes last.
    """
    ranked = sorted(
        (a for a in answers if a.get("status") == "answered" and a.get("citations")),
        key=lambda a: -float(a.get("confidence", 0.0)),
    )
    kept: list[dict[str, Any]] = []
    keys: list[frozenset[str]] = []
    for ans in ranked:
        key = question_key(re.sub(r"\[[^\]]*\]", " ", ans["answer"]))
        if any(jaccard(key, old) >= threshold for old in keys):
            continue
        keys.append(key)
        kept.append(ans)
    last = (10**9, 0, 0)
    return sorted(
        kept,
        key=lambda a: (min(label_position(c) if LABEL.match(c) else last for c in a["citations"]), a.get("id", "")),
    )


def merge_answers(
    llm: LLM,
    *,
    draft: str,
    answers: Sequence[dict[str, Any]],
    query: str,
    length: int,
    lang: str,
    system_prompt: str | None = None,
) -> MergeResult:
    """The editor folds this round's answers into the draft and judges it (ModelOutputError after retries).

    ``system_prompt`` is the context's ``merge_prompt`` (None: the template file in ``lang``).
    """
    system = prompts.render(
        "summarize/merge",
        lang,
        template=system_prompt,
        length=length,
        unit=unit_name(lang),
        language=language_name(lang),
    )
    lines = [
        f"- Q ({a['expert']}): {truncate_tokens(a['question'], 40)}\n  A (confidence {float(a['confidence']):.1f}): "
        f"{a['answer']}"
        for a in answers
    ]
    user = prompts.render(
        "summarize/merge_user",
        lang,
        query=focus_text(query, lang),
        draft=draft.strip() or placeholder("empty", lang),
        answers="\n".join(lines),
    )
    return llm.structured(messages(system, user), MergeResult, max_tokens=tokens_for(length, lang, 160))


def fallback_merge(draft: str, answers: Sequence[dict[str, Any]], length: int, lang: str) -> str:
    """Merge without the model: the draft followed by the answers' cited sentences, within the length."""
    parts = [draft.strip()] if draft.strip() else []
    for ans in answers:
        for sentence in split_sentences(ans["answer"]):
            if not citations_in(sentence):
                sentence = f"{sentence.rstrip()} [{', '.join(ans['citations'])}]"
            if length_units(" ".join([*parts, sentence]), lang) > 2 * length:
                return " ".join(parts)
            parts.append(sentence)
    return " ".join(parts)


def draft_changed(old: str, new: str, threshold: float = 0.97) -> bool:
    """False when ``new`` is (nearly) the same text as ``old``."""
    if not old.strip():
        return bool(new.strip())
    return difflib.SequenceMatcher(None, " ".join(old.split()), " ".join(new.split())).ratio() < threshold


def unmerged_answers(draft: str, answers: Sequence[dict[str, Any]], threshold: float = 0.5) -> list[dict[str, Any]]:
    """Answers the draft does not carry: less than ``threshold`` of their content words are in it."""
    return [a for a in answers if coverage(re.sub(r"\[[^\]]*\]", " ", a["answer"]), draft) < threshold]


_ADVICE = {
    "long": ("Shorten it: cut repetition and the least important points.", "请缩短：删去重复和最次要的内容。"),
    "short": ("Keep every fact and say each one fully.", "保留每个事实，并把每个事实说完整。"),
    "fits": ("Keep its length.", "保持它的长度。"),
}


def polish(
    llm: LLM, *, draft: str, query: str, length: int, fmt: str, lang: str, system_prompt: str | None = None
) -> str:
    """Rewrite the draft to the requested length, format and language, keeping its citations.

    The prompt gives the draft's current length and the accepted range, and says which way to go.
    ``system_prompt`` is the context's ``polish_prompt`` (None: the template file in ``lang``).
    """
    system = writing_prompt("summarize/polish", lang, length=length, fmt=fmt, template=system_prompt)
    current = length_units(re.sub(r"\[[^\]]*\]", "", draft), lang)
    low, high = length_bounds(length)
    advice = _ADVICE["long" if current > high else "short" if current < low else "fits"][lang == "zh"]
    user = prompts.render(
        "summarize/polish_user",
        lang,
        query=focus_text(query, lang),
        draft=draft,
        current=current,
        low=low,
        high=high,
        length=length,
        unit=unit_name(lang),
        advice=advice,
    )
    return llm.text(messages(system, user), max_tokens=tokens_for(length, lang))


def evidence_block(hits: Sequence[Hit], focus: str, budget: int) -> str:
    """Chunks as ``[c3] text`` lines, each cut to its share of ``budget`` tokens around ``focus``."""
    if not hits:
        return ""
    share = max(60, budget // len(hits))
    return "\n\n".join(f"[{h.chunk_id}] {focus_snippet(h.text, focus, share)}" for h in hits)


def direct_summary(
    llm: LLM, *, evidence: str, query: str, length: int, fmt: str, lang: str, system_prompt: str | None = None
) -> str:
    """Summarize a short document (or a few chunks) in one call, with citations.

    ``system_prompt``: the context's ``direct_prompt``; None: the template file in ``lang``.
    """
    system = writing_prompt("summarize/direct", lang, length=length, fmt=fmt, template=system_prompt)
    user = prompts.render("summarize/direct_user", lang, query=focus_text(query, lang), evidence=evidence)
    return llm.text(messages(system, user), max_tokens=tokens_for(length, lang))
