"""Text helpers shared by every workflow: token estimates, language, sentence splitting."""

from __future__ import annotations

import hashlib
import math
import re

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；…])[\"'”’)\]」』]*\s+|(?<=[。！？；])")


def estimate_tokens(text: str) -> float:
    """Additive token estimate: CJK ~1 token a character, other words and symbols ~1.3."""
    if not text:
        return 0.0
    return len(_CJK.findall(text)) + 1.3 * len(_WORD.findall(text))


def count_tokens(text: str) -> int:
    """Estimated token count of ``text`` for budgeting (rounded up)."""
    return math.ceil(estimate_tokens(text) - 1e-9)


def cjk_ratio(text: str) -> float:
    """Share of non-space characters that are CJK."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0.0
    return len(_CJK.findall("".join(chars))) / len(chars)


def detect_language(text: str) -> str:
    """``zh`` when the text is mostly CJK, else ``en``."""
    return "zh" if cjk_ratio(text[:20000]) > 0.2 else "en"


def split_sentences(text: str) -> list[str]:
    """Split into sentences on Western and Chinese end punctuation; keeps the punctuation."""
    parts = [p.strip() for p in _SENTENCE_END.split(text)]
    return [p for p in parts if p]


def content_hash(text: str) -> str:
    """Stable id of a text: sha256 of its normalised form, 16 hex digits."""
    normalised = re.sub(r"\s+", " ", text).strip()
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:16]


def truncate_tokens(text: str, max_tokens: int) -> str:
    """Cut ``text`` to about ``max_tokens`` estimated tokens, on a word boundary where possible."""
    if count_tokens(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    space = cut.rfind(" ")
    if space > lo * 0.8:
        cut = cut[:space]
    return cut.rstrip() + " …"
