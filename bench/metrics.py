"""Question-answering metrics: SQuAD-style exact match and token F1, CJK-aware.

Normalisation follows the SQuAD evaluation script: lower case, punctuation removed, the English
articles "a", "an", "the" removed, whitespace collapsed. Punctuation here is ASCII punctuation plus
every Unicode punctuation character (so Chinese marks such as "，" and "。" go too). Chinese,
Japanese and Korean script has no spaces between words, so each CJK character is its own token;
runs of other characters are split on whitespace as usual ("2018年世界杯" -> "2018", "年", "世",
"界", "杯").
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK = re.compile(
    "([\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u3190-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f])"
)
_ASCII_PUNCT = frozenset(string.punctuation)


def _is_punct(char: str) -> bool:
    """ASCII punctuation or any Unicode punctuation character."""
    return char in _ASCII_PUNCT or unicodedata.category(char).startswith("P")


def normalize_answer(text: str) -> str:
    """Lower case, strip punctuation and English articles, space out CJK characters, collapse spaces."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    text = "".join(" " if _is_punct(ch) else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    text = _CJK.sub(r" \1 ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """Tokens of the normalised answer (CJK characters are single tokens)."""
    return normalize_answer(text).split()


def _as_list(answers: str | Iterable[str]) -> list[str]:
    """Gold answers as a list (a single string is one answer)."""
    return [answers] if isinstance(answers, str) else [str(a) for a in answers]


def exact_match(pred: str, answers: str | Iterable[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer, else 0.0."""
    guess = normalize_answer(pred)
    return float(any(guess == normalize_answer(gold) for gold in _as_list(answers)))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    """Token-overlap F1 between two token lists (1.0 when both are empty)."""
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(pred: str, answers: str | Iterable[str]) -> float:
    """Best token F1 of the prediction against any gold answer (0.0 with no gold answers)."""
    guess = answer_tokens(pred)
    return max((_f1(guess, answer_tokens(gold)) for gold in _as_list(answers)), default=0.0)


def mean_scores(preds: list[str], golds: list[list[str]]) -> dict[str, float]:
    """Mean exact match and token F1 (in %) over paired predictions and gold answer lists."""
    if len(preds) != len(golds):
        raise ValueError(f"{len(preds)} predictions for {len(golds)} gold answer lists")
    if not preds:
        return {"em": 0.0, "f1": 0.0, "n": 0}
    em = sum(exact_match(p, g) for p, g in zip(preds, golds, strict=True)) / len(preds)
    f1 = sum(token_f1(p, g) for p, g in zip(preds, golds, strict=True)) / len(preds)
    return {"em": 100 * em, "f1": 100 * f1, "n": len(preds)}
