"""Rank fusion (reciprocal rank fusion, min-max normalised score fusion) and the BM25 index texts are read by.

Reciprocal rank fusion is shared by the chunk retrieval (``nodes.retrieval``) and the router
(``nodes.route.fusion``); min-max normalised score fusion is the router's ``fusion="minmax"``. The BM25
index (:func:`bm25_index`, :func:`bm25_scores`) serves a document's chunks and the chain's passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from stores.errors import InputError

RRF_K = 60
"""The usual smoothing constant ``k`` of reciprocal rank fusion."""

Key = TypeVar("Key")


def bm25_index(corpus: Sequence[Sequence[str]]) -> Any | None:
    """A BM25 index (bm25s, which has no type hints) over token lists; None when no list holds a token."""
    if not any(corpus):
        return None
    import bm25s

    index = bm25s.BM25()
    index.index([list(tokens) for tokens in corpus], show_progress=False)
    return index


def bm25_scores(index: Any | None, tokens: Sequence[str], size: int) -> np.ndarray:
    """The BM25 score of each of the ``size`` indexed texts for the query ``tokens`` (zeros when none is shared)."""
    if index is None or not tokens:
        return np.zeros(size, dtype=np.float64)
    return np.asarray(index.get_scores(list(tokens)), dtype=np.float64)


def rrf_scores(
    rankings: Sequence[Sequence[Key]], weights: Sequence[float] | None = None, k: float = RRF_K
) -> dict[Key, float]:
    """Reciprocal rank fusion: ``sum(weight / (k + rank))`` per item over the rankings it is in (rank from 1).

    The items come in the order they first appear (rankings in the order given, then rank), so
    callers can break ties deterministically.
    """
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise InputError("one weight per ranking is needed")
    scores: dict[Key, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return scores


def minmax_scores(
    lists: Sequence[Sequence[tuple[Key, float]]], weights: Sequence[float] | None = None
) -> dict[Key, float]:
    """Score fusion: each list's scores scaled to [0, 1] (best 1, worst 0), then ``sum(weight * scaled)``.

    A list whose scores are all equal counts 1 for each of its items. The items come in the order
    they first appear, like :func:`rrf_scores`.
    """
    weights = list(weights) if weights is not None else [1.0] * len(lists)
    if len(weights) != len(lists):
        raise InputError("one weight per list is needed")
    scores: dict[Key, float] = {}
    for scored, weight in zip(lists, weights, strict=True):
        if not scored:
            continue
        values = [float(v) for _item, v in scored]
        low, high = min(values), max(values)
        for (item, _v), value in zip(scored, values, strict=True):
            scaled = (value - low) / (high - low) if high > low else 1.0
            scores[item] = scores.get(item, 0.0) + weight * scaled
    return scores
