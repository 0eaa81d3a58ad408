"""A summary's length: counted in the user's units, bounded, trimmed to fit and filled when short.

Length is words for English and characters for Chinese; a summary is accepted within
``LENGTH_TOLERANCE`` of the length asked. A long summary is trimmed to whole sentences (the first
one that overflows cut at a clause break when that leaves it short); a short one is filled from
the cited sentences of the experts' answers, then from tidied sentences of the chunks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from nodes.summarize.context import SummarizeContext
from nodes.summarize.gaps import chunk_terms, uncovered_chunks
from nodes.summarize.sentences import clean_sentence, dedupe_sentences, parse_cited_sentences, text_blocks, tidy_excerpt
from nodes.summarize.state import SummarizeState, run_context, state_sources, target_length
from stores.labels import label_position
from stores.text import LONG_RUN, cjk_ratio, content_words, overlap, split_sentences
from stores.vectorstore import Hit

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def length_units(text: str, lang: str) -> int:
    """Length as the user counts it: words for English, characters for Chinese.

    A "word" of more than :data:`~stores.text.LONG_RUN` characters (text without spaces: a base64 blob, a
    hex dump) counts one unit per that many characters, so it never passes for one word.
    """
    if lang == "zh":
        return len(_CJK.findall(text)) + _words(re.findall(r"[A-Za-z0-9]+", text))
    return _words(re.findall(r"\S+", text))


def _words(runs: Sequence[str]) -> int:
    return sum(max(1, math.ceil(len(run) / LONG_RUN)) for run in runs)


def unit_name(lang: str) -> str:
    """The unit of ``length`` in prompts."""
    return "个汉字" if lang == "zh" else "words"


def tokens_for(length: int, lang: str, extra: int = 40) -> int:
    """A ``max_tokens`` budget for a text of ``length`` units."""
    per_unit = 1.3 if lang == "zh" else 1.7
    return int(length * per_unit) + extra


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


def trim_to_length(sentences: Sequence[dict[str, Any]], length: int, lang: str) -> list[dict[str, Any]]:
    """Whole sentences, in order, while they fit in the longest accepted length.

    A sentence that would overflow is skipped. When that leaves the summary short, the first skipped sentence is
    cut at a clause break to fill the gap, in its place and with its citations.
    """
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
    out: list[tuple[tuple[float, float, tuple[int, int, int]], dict[str, Any]]] = []
    for ans in answers:
        if ans.get("status") != "answered" or not ans.get("citations"):
            continue
        for sentence in parse_cited_sentences(ans["answer"]):
            cites = [c for c in sentence["citations"] if c in ans["citations"]] or list(ans["citations"])
            first = min((label_position(c) for c in cites), default=(10**9, 0, 0))
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
    """Sentences of chunks, tidied (:func:`~nodes.summarize.sentences.tidy_excerpt`), cited: the last source of a fill.

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


def fill_candidates(state: SummarizeState, ctx: SummarizeContext, used: Sequence[str]) -> list[dict[str, Any]]:
    """Cited sentences a short summary may take, best first: expert answers, then the chunks' own sentences.

    The chunks: those matching the query (else the ones the experts cited), then those whose topics
    the summary so far (``used``) covers least.
    """
    query = state.get("query", "")
    candidates = answer_sentences(state.get("answers", []), query)
    if ctx.fill_chunks:
        sources = state_sources(state, ctx)
        chunks = sources.hits()
        if query.strip():
            first = [h.chunk_id for h in sources.search(query, ctx.fill_chunks)]
        else:
            first = [c for a in state.get("answers", []) for c in a.get("citations", [])]
        gaps = [cid for cid, _ in uncovered_chunks(chunks, " ".join(used))]
        order = list(dict.fromkeys([*first[: ctx.fill_chunks], *gaps[: ctx.fill_chunks]]))
        by_id = {h.chunk_id: h for h in chunks}
        hits = [by_id[c] for c in order if c in by_id]
        candidates += excerpt_sentences(hits, query, state["lang"], terms=chunk_terms(chunks, 6))
    return [c for c in candidates if c["text"] not in set(used)]


def fit_length(state: SummarizeState, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """Bring the summary within +-25% of the requested length.

    Trim a long one at sentence boundaries, fill a short one from the cited expert answers it does not use yet,
    then from the chunks' sentences.
    """
    ctx = run_context(state, runtime)
    labels = state_sources(state, ctx).labels()
    lang, length = state["lang"], target_length(state)
    sentences = dedupe_sentences(parse_cited_sentences(state.get("final_text", ""), labels))
    sentences = [{**s, "origin": "summary"} for s in sentences]
    if ctx.length_fit == "off":
        return {"fitted": sentences}
    before = total_units(sentences, lang)
    fitted = trim_to_length(sentences, length, lang)
    if ctx.length_fit == "fill" and fitted and total_units(fitted, lang) < length_bounds(length)[0]:
        fitted += fill_to_length(fitted, fill_candidates(state, ctx, [s["text"] for s in fitted]), length, lang)
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
