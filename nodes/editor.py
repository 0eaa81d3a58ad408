"""The editor agent: overview, stepwise questions, merging answers into the draft, final polish.

The editor never reads the whole document. It starts from an overview built from the document's
headings and first chunks, asks the experts concrete questions each round (schema-enforced JSON),
merges their cited answers into a short draft while judging completeness, accuracy and
coherence, and finally polishes the draft to the requested length, format and language. Its
questions aim first at what the draft does not cover (parts of the focus, topics of the chunks);
the helpers here also trim a summary to the accepted length and fill a short one from cited
sentences.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

import prompts
from nodes.expert import citations_in, focus_text, language_name, placeholder, question_key
from nodes.factcheck import clean_sentence, coverage, parse_cited_sentences, text_blocks, tidy_excerpt
from nodes.retrieval import focus_snippet, hybrid_search
from nodes.routing.entry import route_to_expert
from stores.documents import DocumentInfo
from stores.models import LLM, Usage, messages
from stores.settings import InputError
from stores.text import (
    STOPWORDS,
    cjk_ratio,
    content_words,
    is_cjk_token,
    jaccard,
    lexical_tokens,
    overlap,
    split_sentences,
    truncate_tokens,
)
from stores.vectorstore import Hit, VectorStore

Format = Literal["paragraphs", "bullets"]
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


# --- output shape: length, format, language ---------------------------------------------------
def length_units(text: str, lang: str) -> int:
    """Length as the user counts it: words for English, characters for Chinese."""
    if lang == "zh":
        return len(_CJK.findall(text)) + len(re.findall(r"[A-Za-z0-9]+", text))
    return len(re.findall(r"\S+", text))


def unit_name(lang: str) -> str:
    """The unit of ``length`` in prompts."""
    return "个汉字" if lang == "zh" else "words"


def tokens_for(length: int, lang: str, extra: int = 40) -> int:
    """A ``max_tokens`` budget for a text of ``length`` units."""
    per_unit = 1.3 if lang == "zh" else 1.7
    return int(length * per_unit) + extra


def format_instruction(fmt: str, lang: str) -> str:
    """How the final text must be laid out."""
    if fmt == "bullets":
        return (
            "以“- ”开头的要点列表，每行一个要点"
            if lang == "zh"
            else "a bullet list, one point per line starting with '- '"
        )
    return "一到两段连贯的文字" if lang == "zh" else "one or two coherent paragraphs"


def writing_prompt(name: str, lang: str, *, length: int, fmt: str) -> str:
    """The system prompt ``name`` of a step that writes the summary text (length, layout, language)."""
    return prompts.render(
        name,
        lang,
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
def build_overview(
    store: VectorStore,
    info: DocumentInfo,
    query: str = "",
    *,
    max_sections: int = 15,
    lead_tokens: int = 60,
    samples: int = 4,
) -> str:
    """The document's structure from its headings and first chunks (plus query hits in query mode).

    A document without headings gets the openings of a few chunks spread over it instead.
    """
    chunks = store.by_doc(info.doc_id)
    lines = [f"Title: {info.title}", f"Chunks: {len(chunks)} (c0 to c{max(len(chunks) - 1, 0)})"]
    if info.sections:
        shown = info.sections[:max_sections]
        more = f" (+{len(info.sections) - len(shown)} more)" if len(info.sections) > len(shown) else ""
        first_chunk: dict[str, str] = {}
        for hit in chunks:
            first_chunk.setdefault(hit.section, hit.chunk_id)
        sections = "; ".join(f"{s} [{first_chunk[s]}]" if s in first_chunk else s for s in shown)
        lines.append(f"Sections: {sections}{more}")
    for hit in chunks[:2]:
        lines.append(f"[{hit.chunk_id}] {truncate_tokens(' '.join(hit.text.split()), lead_tokens)}")
    if len(info.sections) <= 1 and len(chunks) > 2:
        rest = chunks[2:]
        step = max(1, len(rest) // samples)
        for hit in rest[::step][:samples]:
            lines.append(f"[{hit.chunk_id}] {truncate_tokens(' '.join(hit.text.split()), lead_tokens // 2)}")
    if query.strip() and chunks:
        for hit in hybrid_search(store, info.doc_id, query, 3):
            if hit.chunk_id not in {c.chunk_id for c in chunks[:2]}:
                lines.append(f"[{hit.chunk_id}] {focus_snippet(' '.join(hit.text.split()), query, lead_tokens)}")
    return "\n".join(lines)


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
        target_expert=(Literal[names], Field(description="Name of the expert who should answer.")),  # type: ignore[valid-type,arg-type]
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
) -> tuple[list[dict[str, str]], Usage]:
    """The editor's next questions (schema-enforced; ModelOutputError after retries).

    ``parts`` are the parts of the focus the draft does not answer yet (:func:`missing_parts`),
    ``topics`` the document's topics it does not cover yet (:func:`uncovered_topics`): the prompt
    asks the editor to aim its questions at them first.
    """
    schema = questions_schema(list(experts), n)
    expert_lines = "\n".join(f"- {name}: {desc}" for name, desc in experts.items())
    system = prompts.render("summarize/questions", lang, n=n, experts=expert_lines, language=language_name(lang))
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
    reply, usage = llm.structured(messages(system, user), schema, max_tokens=60 * n + 60)
    return [q.model_dump() for q in reply.questions], usage  # type: ignore[attr-defined]


_PART_CUES: dict[str, dict[str, str | None]] = {
    "en": {
        "who": None,
        "what was decided": r"\b(?:decid|agree|chose|choos|conclu|approv|reject|settl|select|accept|opt)",
        "why": r"\b(?:because|since|due to|so that|in order to|reason|as a result|therefore)\b",
        "what next": r"\b(?:will|next|plan|later|follow|going to|action|deadline|todo|to do)\b",
    },
    "zh": {
        "谁": r"[他她]|经理|设计师|负责人|成员|团队|小组",
        "决定了什么": r"决定|同意|通过|选择|确定|否决|拒绝",
        "为什么": r"因为|由于|为了|原因|所以|因此",
        "下一步": r"将|下一步|计划|之后|接下来|下次|任务",
    },
}


def missing_parts(draft: str, lang: str) -> list[str]:
    """Parts of a summary's focus (who, what was decided, why, what next) the draft has no words for yet."""
    from nodes.factcheck import names_in

    out = []
    for part, cue in _PART_CUES["zh" if lang == "zh" else "en"].items():
        present = bool(names_in(draft)) if cue is None else re.search(cue, draft, re.IGNORECASE) is not None
        if not present:
            out.append(part)
    return out


def _terms(text: str) -> list[str]:
    """Terms that can name a topic: content words of four letters or more, and CJK character bigrams."""
    out = []
    for t in lexical_tokens(text):
        if is_cjk_token(t):
            if len(t) == 2:
                out.append(t)
        elif len(t) >= 4 and not t.isdigit() and t not in STOPWORDS:
            out.append(t)
    return out


def chunk_terms(chunks: Sequence[Hit], words: int = 4) -> dict[str, list[str]]:
    """Each chunk's ``words`` most distinctive terms: frequent in it, rare in the other chunks (tf-idf).

    Stdlib counting: a document has a few dozen to a few hundred chunks.
    """
    counts = [Counter(_terms(h.text)) for h in chunks]
    df = Counter(t for c in counts for t in c)
    n = len(chunks)
    return {
        hit.chunk_id: sorted(tf, key=lambda t: (-tf[t] * math.log((1 + n) / df[t]), t))[:words]
        for hit, tf in zip(chunks, counts, strict=True)
    }


def uncovered_chunks(
    chunks: Sequence[Hit], draft: str, *, focus: Sequence[str] = (), words: int = 4
) -> list[tuple[str, list[str]]]:
    """``(chunk_id, terms the draft lacks)`` of the chunks whose distinctive terms the draft mostly lacks,
    least covered first (then in document order); ``focus`` limits them to those ids."""
    said = set(_terms(draft))
    rows = []
    for position, (cid, top) in enumerate(chunk_terms(chunks, words).items()):
        if focus and cid not in focus:
            continue
        missing = [t for t in top if t not in said]
        if top and len(missing) * 2 > len(top):
            rows.append((-len(missing) / len(top), position, cid, missing))
    return [(cid, missing) for *_, cid, missing in sorted(rows)]


def uncovered_topics(
    chunks: Sequence[Hit], draft: str, *, focus: Sequence[str] = (), limit: int = 5, words: int = 4
) -> list[str]:
    """Topics of the document the draft does not cover yet, as ``[c4] term, term`` lines, least covered first.

    A chunk's topic is its ``words`` most distinctive terms (:func:`chunk_terms`); a chunk is listed
    when the draft has fewer than half of them. ``focus`` limits the chunks to those ids (e.g. the
    ones that match the query).
    """
    rows = uncovered_chunks(chunks, draft, focus=focus, words=words)[:limit]
    return [f"[{cid}] {', '.join(missing)}" for cid, missing in rows]


def new_questions(candidates: Sequence[dict[str, Any]], asked: Sequence[str], threshold: float = 0.8) -> list[dict]:
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


def usable_answers(answers: Sequence[dict[str, Any]], position: dict[str, int], threshold: float = 0.8) -> list[dict]:
    """Answered, cited answers: near-duplicates dropped (the more confident kept), in document order."""
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
    return sorted(kept, key=lambda a: (min(position.get(c, 10**9) for c in a["citations"]), a.get("id", "")))


def merge_answers(
    llm: LLM, *, draft: str, answers: Sequence[dict[str, Any]], query: str, length: int, lang: str
) -> tuple[MergeResult, Usage]:
    """The editor folds this round's answers into the draft and judges it (ModelOutputError after retries)."""
    system = prompts.render("summarize/merge", lang, length=length, unit=unit_name(lang), language=language_name(lang))
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


# --- length ---------------------------------------------------------------------------------
LENGTH_TOLERANCE = 0.25
"""A summary is the requested length when it is within this share of it either way."""


def length_bounds(length: int, tolerance: float = LENGTH_TOLERANCE) -> tuple[int, int]:
    """The shortest and longest accepted summary for a target of ``length`` units."""
    return math.ceil((1 - tolerance) * length), math.floor((1 + tolerance) * length)


def total_units(sentences: Sequence[dict[str, Any]], lang: str) -> int:
    """Length of a list of ``{"text"}`` sentences in the user's units."""
    return sum(length_units(s["text"], lang) for s in sentences)


def draft_fits(draft: str, length: int, fmt: str, lang: str) -> bool:
    """True when the draft needs no polish call: paragraphs in the requested language, not too long.

    A draft shorter than asked is kept as well: polishing cannot add facts; the fill step adds them.
    """
    units = length_units(re.sub(r"\[[^\]]*\]", "", draft), lang)
    same_language = (lang == "zh") == (cjk_ratio(draft) > 0.2)
    return fmt == "paragraphs" and units <= length_bounds(length)[1] and same_language


def clip_sentence(text: str, max_units: int, lang: str) -> str:
    """``text`` cut to at most ``max_units`` units, at the last clause break that fits (else a word break)."""
    if length_units(text, lang) <= max_units:
        return text
    if lang == "zh":
        pieces = re.split(r"(?<=[，；、：,;:])", text)
    else:
        pieces = re.split(r"(?<=[,;:])\s+|\s+(?=(?:and|but|while|because|which|so)\s)", text)
    out = ""
    for piece in pieces:
        joined = f"{out}{piece}" if lang == "zh" else f"{out} {piece}".strip()
        if length_units(joined, lang) > max_units:
            break
        out = joined
    if not out:
        words = text.split() if lang != "zh" else list(text)
        out = ("" if lang == "zh" else " ").join(words[:max_units])
        while length_units(out, lang) > max_units and out:
            out = out[:-1]
    out = out.rstrip(" ,;:，；、：")
    return out + ("。" if lang == "zh" else ".") if out and not re.search(r"[.!?。！？]$", out) else out


def trim_to_length(sentences: Sequence[dict[str, Any]], length: int, lang: str) -> list[dict]:
    """Whole sentences, in order, while they fit in the longest accepted length; a sentence that would
    overflow is skipped. When that leaves the summary short, the first skipped sentence is cut at a
    clause break to fill the gap, in its place and with its citations."""
    low, high = length_bounds(length)
    kept: list[tuple[int, dict[str, Any]]] = []
    skipped: list[int] = []
    used = 0
    for i, sentence in enumerate(sentences):
        units = length_units(sentence["text"], lang)
        if used + units <= high:
            kept.append((i, dict(sentence)))
            used += units
        else:
            skipped.append(i)
    if used < low and skipped:
        first = skipped[0]
        clipped = clip_sentence(sentences[first]["text"], max(1, length - used), lang)
        if clipped:
            kept.append((first, {**sentences[first], "text": clipped, "clipped": True}))
    return [s for _, s in sorted(kept, key=lambda pair: pair[0])]


def answer_sentences(answers: Sequence[dict[str, Any]], query: str = "") -> list[dict[str, Any]]:
    """Cited sentences of the answered expert answers: most on-focus and confident first, then in document order.

    A sentence without its own citation carries the citations of its answer.
    """
    focus = content_words(query)
    out: list[tuple[tuple[float, float, int], dict[str, Any]]] = []
    for ans in answers:
        if ans.get("status") != "answered" or not ans.get("citations"):
            continue
        for sentence in parse_cited_sentences(ans["answer"]):
            cites = [c for c in sentence["citations"] if c in ans["citations"]] or list(ans["citations"])
            first = min(int(c[1:]) for c in cites if c[1:].isdigit()) if cites else 10**9
            rank = (-overlap(focus, content_words(sentence["text"])), -float(ans.get("confidence", 0.0)), first)
            out.append((rank, {"text": sentence["text"], "citations": cites, "origin": "answer"}))
    return [s for _, s in sorted(out, key=lambda pair: pair[0])]


def excerpt_sentences(
    hits: Sequence[Hit],
    query: str,
    lang: str,
    *,
    terms: dict[str, list[str]] | None = None,
    min_words: int = 5,
    max_units: int = 60,
) -> list[dict[str, Any]]:
    """Sentences of chunks, tidied (:func:`tidy_excerpt`) and cited: the last source of a fill.

    Best first: those sharing most words with the query plus most of their chunk's distinctive
    ``terms`` (its topic), then by the order of ``hits``; sentences with fewer than ``min_words``
    content words (chatter) are left out.
    """
    focus = content_words(query)
    terms = terms or {}
    out: list[tuple[tuple[float, int], dict[str, Any]]] = []
    for rank, hit in enumerate(hits):
        topic = set(terms.get(hit.chunk_id, []))
        for block in text_blocks(hit.text):
            for sentence in split_sentences(block):
                text = tidy_excerpt(clean_sentence(sentence))
                words = content_words(text, cjk_chars=False)
                if len(words) < min_words or length_units(text, lang) > max_units:
                    continue
                score = overlap(focus, words) + (len(topic & words) / len(topic) if topic else 0.0)
                out.append(((-score, rank), {"text": text, "citations": [hit.chunk_id], "origin": "excerpt"}))
    return [s for _, s in sorted(out, key=lambda pair: pair[0])]


def fill_to_length(
    sentences: Sequence[dict[str, Any]],
    candidates: Sequence[dict[str, Any]],
    length: int,
    lang: str,
    repeat: float = 0.6,
) -> list[dict[str, Any]]:
    """``sentences`` followed by ``candidates`` that say something new, until the summary reaches ``length``.

    A candidate is skipped when ``repeat`` of its content words are already in the summary, or when
    it would make the summary longer than accepted. Returns the added sentences only.
    """
    _low, high = length_bounds(length)
    used = total_units(sentences, lang)
    said = set().union(*(content_words(s["text"], cjk_chars=False) for s in sentences)) if sentences else set()
    added: list[dict[str, Any]] = []
    for cand in candidates:
        if used >= length:
            break
        units = length_units(cand["text"], lang)
        words = content_words(cand["text"], cjk_chars=False)
        if used + units > high or overlap(words, said, empty=1.0) >= repeat:
            continue
        added.append(dict(cand))
        said |= words
        used += units
    return added


def unmerged_answers(draft: str, answers: Sequence[dict[str, Any]], threshold: float = 0.5) -> list[dict]:
    """Answers the draft does not carry: less than ``threshold`` of their content words are in it."""
    return [a for a in answers if coverage(re.sub(r"\[[^\]]*\]", " ", a["answer"]), draft) < threshold]


_ADVICE = {
    "long": ("Shorten it: cut repetition and the least important points.", "请缩短：删去重复和最次要的内容。"),
    "short": ("Keep every fact and say each one fully.", "保留每个事实，并把每个事实说完整。"),
    "fits": ("Keep its length.", "保持它的长度。"),
}


def polish(llm: LLM, *, draft: str, query: str, length: int, fmt: str, lang: str) -> tuple[str, Usage]:
    """Rewrite the draft to the requested length, format and language, keeping its citations.

    The prompt gives the draft's current length and the accepted range, and says which way to go.
    """
    system = writing_prompt("summarize/polish", lang, length=length, fmt=fmt)
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


def direct_summary(llm: LLM, *, evidence: str, query: str, length: int, fmt: str, lang: str) -> tuple[str, Usage]:
    """Summarize a short document (or a few chunks) in one call, with citations."""
    system = writing_prompt("summarize/direct", lang, length=length, fmt=fmt)
    user = prompts.render("summarize/direct_user", lang, query=focus_text(query, lang), evidence=evidence)
    return llm.text(messages(system, user), max_tokens=tokens_for(length, lang))
