"""A summary's sentences: split with the chunk ids they cite, tidied, compared, and written back out.

A summary is split into sentences, each with the chunk ids it cites (``[c3]``); bullet items and
wrapped paragraphs are read as blocks first. Transcript excerpts are tidied (markup, fillers and
stutters removed), near-repeated sentences dropped, and the sentences rendered as prose or bullets,
with or without their citations.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stores.labels import CITED_GROUP, citations_in
from stores.text import content_words, lexical_tokens, overlap, split_sentences

_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、])\s+")

_CITES_NOTE = re.compile(r"\s*[(（](?:cites|引用)[^)）]*[)）]", re.IGNORECASE)


_MARKUP = re.compile(r"\{[a-z]+\}")
_FILLER = re.compile(r",?[ \t]*(?<![\w-])(?:uh|um|mm|hmm|erm|er|ah|eh|uh-huh|mm-hmm)(?![\w-])[,.]?", re.IGNORECASE)
_REPEAT = re.compile(r"\b(\w+)(?:[ \t]+\1\b)+", re.IGNORECASE)


def tidy_excerpt(text: str) -> str:
    """Transcript text without markup (``{disfmarker}``), fillers (uh, um) and stutters ("the the")."""
    text = _REPEAT.sub(r"\1", _FILLER.sub(" ", _MARKUP.sub(" ", text)))
    text = re.sub(r"[ \t]+([,.;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text))
    text = re.sub(r"[ \t]*\n[ \t]*", "\n", text).strip(" ,;")
    return text[:1].upper() + text[1:] if text else text


def content_tokens(text: str) -> set[str]:
    """Words that carry content: no stopwords; for Chinese, character bigrams."""
    return content_words(text, cjk_chars=False)


def coverage(text: str, source: str) -> float:
    """Share of ``text``'s content words that occur in ``source`` (1.0 for a text without any)."""
    return overlap(content_tokens(text), content_tokens(source), empty=1.0)


def clean_sentence(text: str) -> str:
    """A sentence without citation markers, bullet marks or stray spaces."""
    text = _CITES_NOTE.sub("", CITED_GROUP.sub("", _BULLET.sub("", text)))
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
