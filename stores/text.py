"""Text helpers shared by every workflow: token estimates, language, sentences, content words, names."""

from __future__ import annotations

import hashlib
import math
import re

from stores.cache import lru_cache
from stores.errors import InputError

LONG_RUN = 16
"""Characters past which a run without spaces is counted by its characters as well as by its words, and
past which a lexical token (:func:`lexical_tokens`) is cut."""

CHARS_PER_TOKEN = 3
"""Characters per token at most in such a run (digits count one token each, as tokenizers split them)."""

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_TOKEN = re.compile(rf"[a-z0-9]{{1,{LONG_RUN}}}|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；…])[\"'”’)\]」』]*\s+|(?<=[。！？；])")
_LONG_RUN = re.compile(rf"[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{{{LONG_RUN + 1},}}")
_DIGIT = re.compile(r"[0-9]")


def run_floor(run: str) -> float:
    """The fewest tokens a run of ``run``'s characters without spaces may count.

    A third of a token a character, a token a digit (a base64 blob, minified code or a hex dump is one "word" by
    :data:`_WORD`).
    """
    digits = len(_DIGIT.findall(run))
    return digits + (len(run) - digits) / CHARS_PER_TOKEN


def estimate_tokens(text: str) -> float:
    """Additive token estimate: CJK ~1 token a character, other words and symbols ~1.3.

    A run of more than :data:`LONG_RUN` characters without spaces counts at least :func:`run_floor`, so text
    without spaces never passes for a few tokens (``"x" * 3_000_000`` is a million, not 2).
    """
    if not text:
        return 0.0
    total = len(_CJK.findall(text)) + 1.3 * len(_WORD.findall(text))
    if len(text) <= LONG_RUN:
        return total
    for match in _LONG_RUN.finditer(text):
        run = match.group()
        total += max(0.0, run_floor(run) - 1.3 * len(_WORD.findall(run)))
    return total


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


# --- words that carry content -------------------------------------------------------------------
_STOPWORD_TEXT = """
    a an the and or but of in on at to for from by with about as is are was were be been being do does did
    has have had it its this that these those they them their there here i you he she we me my your our his
    her what which who whom whose when where why how can could would should will shall may might must not no
    yes so than then also any all each some more most other such only own same too very just into over under
    after before during up down out if
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""English function words: no content of their own (the one list; BM25 routing keeps ``bm25s``'s)."""


def lexical_tokens(text: str) -> list[str]:
    """Lower-cased word tokens; CJK text becomes single characters plus character bigrams."""
    raw = [t.lower() for t in _TOKEN.findall(text)]
    out: list[str] = []
    prev_cjk: str | None = None
    for tok in raw:
        cjk = len(tok) == 1 and ord(tok) > 0x2FFF
        out.append(tok)
        if cjk and prev_cjk is not None:
            out.append(prev_cjk + tok)
        prev_cjk = tok if cjk else None
    return out


def is_cjk_token(token: str) -> bool:
    """Whether a lexical token is a CJK character or character bigram."""
    return ord(token[0]) > 0x2FFF


def content_words(
    text: str, *, stopwords: frozenset[str] = STOPWORDS, min_chars: int = 1, cjk_chars: bool = True
) -> set[str]:
    """Lexical tokens of ``text`` that carry content.

    Words outside ``stopwords`` of at least ``min_chars`` characters; CJK bigrams always, single CJK
    characters only with ``cjk_chars``.
    """
    out = set()
    for token in lexical_tokens(text):
        if is_cjk_token(token):
            if cjk_chars or len(token) == 2:
                out.add(token)
        elif len(token) >= min_chars and token not in stopwords:
            out.add(token)
    return out


def overlap(words: set[str] | frozenset[str], other: set[str] | frozenset[str], empty: float = 0.0) -> float:
    """Share of ``words`` found in ``other`` (``empty`` when there are no words)."""
    return len(words & other) / len(words) if words else empty


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    """Shared words over all words of ``a`` and ``b`` (0.0 when both are empty)."""
    return len(a & b) / max(1, len(a | b))


# --- names ------------------------------------------------------------------------------------
def check_name(value: object, what: str, *, max_chars: int = 63, marks: str = "_-") -> str:
    """``value`` if it is 1-``max_chars`` letters, digits and ``marks``, starting with a letter or digit.

    Raises ``InputError`` naming ``what`` (``namespace``, ``registry name``, ``session id``...).
    """
    if not isinstance(value, str) or not is_name(value, max_chars=max_chars, marks=marks):
        listed = [f"'{m}'" for m in marks]
        allowed = ", ".join(listed[:-1]) + f" or {listed[-1]}" if len(listed) > 1 else listed[0]
        raise InputError(
            f"invalid {what} {value!r}: use 1-{max_chars} letters, digits, {allowed}, starting with a letter or digit"
        )
    return value


def is_name(value: str, *, max_chars: int = 63, marks: str = "_-") -> bool:
    """Whether ``value`` passes :func:`check_name`."""
    return re.fullmatch(rf"[A-Za-z0-9][A-Za-z0-9{re.escape(marks)}]{{0,{max_chars - 1}}}", value) is not None


@lru_cache(maxsize=1 << 16)
def porter_stem(word: str) -> str:
    """The Porter stem of ``word``, by nltk's stemmer (offline, no data files; WordNet would need a download).

    nltk is imported on the first call, not with this module: importing it takes seconds (it loads scipy.stats).
    """
    from nltk.stem.porter import PorterStemmer

    return str(PorterStemmer().stem(word))


def clean_text(text: str) -> str:
    """``text`` with Unix line ends, no NUL, no spaces at line ends, at most one blank line in a row, stripped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
