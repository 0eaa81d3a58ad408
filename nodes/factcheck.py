"""The fact-checker: every sentence of a summary is checked against the chunks it cites.

A summary is split into sentences, each with the chunk ids it cites (``[c3]``). A sentence that
cites nothing is given the chunks that best match it (hybrid search) as candidate evidence. The
checker model reads, for a batch of sentences, the relevant part of every cited chunk and says
for each sentence whether the evidence supports it, with a corrected sentence when it does not.
In ``fix`` mode unsupported sentences are replaced by their correction or dropped; in ``mark``
mode they are only labelled.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

import prompts
from nodes.expert import CITATION, bad_output, citations_in, language_name
from nodes.retrieval import focus_snippet, hybrid_search
from stores.models import LLM, Usage, merge_usage, messages
from stores.settings import ModelError
from stores.text import content_words, lexical_tokens, overlap, split_sentences
from stores.vectorstore import VectorStore

FactcheckMode = Literal["fix", "mark", "off"]
Verdict = Literal["supported", "fixed", "dropped", "disputed", "unsupported", "unchecked", "source"]
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、])\s+")


class SentenceVerdict(BaseModel):
    """The checker's verdict on one numbered sentence."""

    n: int = Field(ge=1, description="Number of the sentence.")
    supported: bool = Field(description="True when the evidence states what the sentence says.")
    fix: str = Field(default="", max_length=500, description="A corrected sentence when not supported, else empty.")


class Verdicts(BaseModel):
    """Verdicts for a batch of sentences."""

    verdicts: list[SentenceVerdict] = Field(max_length=20)


_CITES_NOTE = re.compile(r"\s*[(（](?:cites|引用)[^)）]*[)）]", re.IGNORECASE)


def content_tokens(text: str) -> set[str]:
    """Words that carry content: no stopwords; for Chinese, character bigrams."""
    return content_words(text, cjk_chars=False)


def coverage(text: str, source: str) -> float:
    """Share of ``text``'s content words that occur in ``source`` (1.0 for a text without any)."""
    return overlap(content_tokens(text), content_tokens(source), empty=1.0)


def clean_sentence(text: str) -> str:
    """A sentence without citation markers, bullet marks or stray spaces."""
    text = _CITES_NOTE.sub("", CITATION.sub("", _BULLET.sub("", text)))
    text = re.sub(r"\s+([,.;:!?，。；：！？])", r"\1", text)
    return re.sub(r"\s{2,}", " ", text).strip()


def parse_cited_sentences(text: str, valid_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Split a summary into ``[{"text", "citations"}]``; citations outside ``valid_ids`` are dropped.

    Bullet items are split into sentences too. Citations written after the sentence's full stop
    (``... euros. [c1]``) belong to the sentence before them.
    """
    valid = set(valid_ids) if valid_ids is not None else None
    out: list[dict[str, Any]] = []
    for block in text_blocks(text):
        for piece in split_sentences(block):
            lead = re.match(r"^((?:\s*\[[^\]]*\])+)", piece)
            if lead and out:
                out[-1]["citations"] = _merge_ids(out[-1]["citations"], citations_in(lead.group(1)), valid)
                piece = piece[lead.end() :]
            sentence = clean_sentence(piece)
            if not re.search(r"\w", sentence):
                continue
            out.append({"text": sentence, "citations": _merge_ids([], citations_in(piece), valid)})
    return out


def text_blocks(text: str) -> list[str]:
    """Paragraphs and bullet items of ``text``, each on one line (wrapped lines joined; headings left out)."""
    blocks: list[list[str]] = []
    open_block = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or re.fullmatch(r"#{1,6}\s.*|[-=*_]{3,}", line):
            open_block = False
            continue
        if _BULLET.match(line):
            blocks.append([_BULLET.sub("", line)])
            open_block = True
        elif open_block:
            blocks[-1].append(line)
        else:
            blocks.append([line])
            open_block = True
    return [" ".join(block) for block in blocks]


def dedupe_sentences(sentences: Sequence[dict[str, Any]], threshold: float = 0.8) -> list[dict[str, Any]]:
    """Sentences minus those whose words mostly repeat an earlier (or later, longer) sentence."""
    keys = [set(lexical_tokens(s["text"])) for s in sentences]
    keep: list[int] = []
    for i, key in enumerate(keys):
        if not key:
            continue
        repeated = False
        for j in list(keep):
            overlap = len(key & keys[j]) / min(len(key), len(keys[j]))
            if overlap >= threshold:
                if len(key) > len(keys[j]):
                    keep.remove(j)
                else:
                    repeated = True
                break
        if not repeated:
            keep.append(i)
    return [dict(sentences[i]) for i in sorted(keep)]


def _merge_ids(old: list[str], new: Sequence[str], valid: set[str] | None) -> list[str]:
    out = list(old)
    for cid in new:
        if (valid is None or cid in valid) and cid not in out:
            out.append(cid)
    return out


def render_summary(sentences: Sequence[dict[str, Any]], fmt: str, lang: str = "en") -> str:
    """The summary text (no citation markers): prose paragraphs or one bullet per sentence."""
    texts = [s["text"] for s in sentences]
    if fmt == "bullets":
        return "\n".join(f"- {t}" for t in texts)
    return ("" if lang == "zh" else " ").join(texts)


def with_citations(sentences: Sequence[dict[str, Any]], fmt: str, lang: str = "en") -> str:
    """The summary with each sentence's citations appended as ``[c1, c3]``."""
    marked = [
        {"text": f"{s['text']} [{', '.join(s['citations'])}]" if s.get("citations") else s["text"]} for s in sentences
    ]
    return render_summary(marked, fmt, lang)


def evidence_for(store: VectorStore, doc_id: str, batch: Sequence[dict[str, Any]], chunk_tokens: int) -> str:
    """Evidence text for a batch of sentences: each cited chunk once, cut around the claims citing it."""
    claims: dict[str, list[str]] = {}
    for sentence in batch:
        for cid in sentence["citations"]:
            claims.setdefault(cid, []).append(sentence["text"])
    hits = store.get([f"{doc_id}:{cid}" for cid in claims])
    blocks = [f"[{h.chunk_id}] {focus_snippet(h.text, ' '.join(claims[h.chunk_id]), chunk_tokens)}" for h in hits]
    return "\n\n".join(blocks)


def grounded_fix(fix: str, original: str, source: str, threshold: float = 0.6) -> bool:
    """True when a correction is a new sentence whose content words mostly come from the cited chunks."""
    fixed = clean_sentence(fix)
    return bool(fixed) and fixed != clean_sentence(original) and coverage(fixed, source) >= threshold


def retrieve_citations(store: VectorStore, doc_id: str, sentence: str, k: int, prefer: Sequence[str] = ()) -> list[str]:
    """Chunk ids for a sentence that cites nothing: best matches among ``prefer`` first, else overall."""
    hits = hybrid_search(store, doc_id, sentence, max(k, 8) if prefer else k)
    preferred = [h.chunk_id for h in hits if h.chunk_id in set(prefer)]
    return (preferred or [h.chunk_id for h in hits])[:k]


def check_sentences(
    sentences: Sequence[dict[str, Any]],
    *,
    store: VectorStore,
    doc_id: str,
    llm: LLM,
    lang: str = "en",
    mode: FactcheckMode = "fix",
    batch_size: int = 6,
    chunk_tokens: int = 140,
    max_citations: int = 2,
    prefer: Sequence[str] = (),
    keep_coverage: float = 0.9,
) -> tuple[list[dict[str, Any]], Usage]:
    """Check every sentence against its cited chunks.

    Returns one entry per input sentence: ``{text, citations, verdict, original}`` where verdict
    is ``supported``, ``fixed`` (the checker's correction, accepted when its content words come
    from the cited chunks), ``dropped``, ``disputed`` (fix mode: judged unsupported without a usable
    correction, but at least ``keep_coverage`` of its content words are in the cited chunks, so it
    is kept and flagged), ``unsupported`` (mark mode) or ``unchecked`` (checking was off, or the
    checker's output stayed invalid). Sentences citing
    nothing get the best-matching chunks as citations (``cited_by: "retrieval"``), taken from
    ``prefer`` (e.g. the chunks the draft cited) when any of those match.
    """
    results: list[dict[str, Any]] = []
    for s in sentences:
        cites = list(s.get("citations", []))[:max_citations]
        entry = {"text": s["text"], "original": s["text"], "citations": cites, "cited_by": "model"}
        if not cites and mode != "off":
            entry["citations"] = retrieve_citations(store, doc_id, s["text"], max_citations, prefer)
            entry["cited_by"] = "retrieval"
        entry["verdict"] = "unchecked"
        results.append(entry)
    if mode == "off":
        return results, {}
    usage: Usage = {}
    checkable = [r for r in results if r["citations"]]
    for start in range(0, len(checkable), batch_size):
        batch = checkable[start : start + batch_size]
        evidence = evidence_for(store, doc_id, batch, chunk_tokens)
        cited = dict.fromkeys(f"{doc_id}:{c}" for r in batch for c in r["citations"])
        sources = {h.chunk_id: h.text for h in store.get(list(cited))}
        numbered = "\n".join(
            f"{i}. {r['text']} (cites {', '.join(r['citations'])})" for i, r in enumerate(batch, start=1)
        )
        system = prompts.render("summarize/factcheck", lang, language=language_name(lang))
        user = prompts.render("summarize/factcheck_user", lang, evidence=evidence, sentences=numbered)
        try:
            reply, used = llm.structured(messages(system, user), Verdicts, max_tokens=60 * len(batch) + 80)
        except ModelError as exc:
            if not bad_output(exc):
                raise
            for entry in batch:
                entry["error"] = str(exc)[:300]
            continue
        usage = merge_usage(usage, used)
        by_n = {v.n: v for v in reply.verdicts}
        for i, entry in enumerate(batch, start=1):
            verdict = by_n.get(i)
            if verdict is None:
                continue
            source = " ".join(sources.get(c, "") for c in entry["citations"])
            if verdict.supported:
                entry["verdict"] = "supported"
            elif mode == "mark":
                entry["verdict"] = "unsupported"
            elif grounded_fix(verdict.fix, entry["text"], source):
                entry["verdict"] = "fixed"
                entry["text"] = clean_sentence(verdict.fix)
                fixed_cites = [c for c in citations_in(verdict.fix) if c in entry["citations"]]
                entry["citations"] = fixed_cites or entry["citations"]
            elif coverage(entry["text"], source) >= keep_coverage:
                entry["verdict"] = "disputed"
            else:
                entry["verdict"] = "dropped"
    return results, usage


def factcheck_stats(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts of verdicts and the share of checked sentences the checker confirmed as written."""
    counts: dict[str, int] = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    checked = sum(v for k, v in counts.items() if k in ("supported", "fixed", "dropped", "disputed", "unsupported"))
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
    }
