"""What a draft does not cover yet: parts of the summary's focus, and topics of the document's chunks.

The editor aims its questions at these gaps first; the fill step uses the chunks' topics to pick
sentences that add something new.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from nodes.summarize.grounding import names_in
from stores.text import STOPWORDS, is_cjk_token, lexical_tokens
from stores.vectorstore import Hit

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
    """``(chunk_id, terms the draft lacks)`` of the chunks whose distinctive terms the draft mostly lacks.

    Least covered first (then in document order); ``focus`` limits them to those ids.
    """
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
