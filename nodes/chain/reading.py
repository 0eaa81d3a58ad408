"""Anytime reading: which chunk a chain reads next, and when it stops.

Relevance. How well a chunk matches a text is the mean of its cosine similarity and its BM25
score, each standardised over the document (``z = (s - mean) / std``): the bundled embedder alone
barely separates a chunk that names the missing entity from its neighbours, the exact words do.
A chunk's relevance is the better of its match to the question and to what the notes say is still
missing, so it can earn its turn by answering either the question or the gap the notes left.

Best-first traversal of the Chow-Liu tree. The first chunk is the most relevant one (the query
root). Afterwards the candidates are the unread chunks; a chunk on the frontier (a tree neighbour of
a chunk already read) scores its relevance plus ``tree_weight`` times the standardised weight of its
best edge to the read part, a chunk off the frontier scores its relevance minus ``jump_penalty``. So
the chain follows the tree while the tree leads somewhere relevant and jumps only to a chunk that is
clearly more relevant than anything next to what it has read (a second hop the tree does not link).

Floor. A chunk whose relevance is below ``floor`` is passed over without a model call; when no
chunk above the floor is left, the chain ends. Fixed orders (BFS, document order, relevance...) walk
their planned order with the same floor, budget and stop rule, so comparisons are fair.

Stop rule. The chain stops as ``complete`` when the notes hold facts and a worker says nothing is
missing (``confirm`` more such answers in a row are asked for first), as ``budget`` when the next
chunk would take the chunk text read past ``budget`` tokens, and as ``end`` when nothing above the
floor is left to read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nodes.chain.ordering.tree import ChowLiuTree

STOP_REASONS = ("complete", "budget", "hop-budget", "end")

DEFAULT_BUDGET = 3000
"""Tokens of document text a chain reads at most by default (about three 900-token chunks)."""
DEFAULT_BATCH = 1500
"""Tokens of passages one best-first worker reads by default (two workers fill the default budget)."""
DEFAULT_PASSAGE = 200
"""Most tokens of one passage by default (about one paragraph)."""
DEFAULT_HOP = 0
"""Tokens a chain may read past its budget, once, while a missing piece is named (default: never; the
second batch already answers the first worker's missing piece within the budget)."""
LEAST_BATCH = 0.25
"""Share of ``batch_tokens`` below which what is left of the budget is not read: a worker's prompt and
reply would cost more than the text it reads."""
DEFAULT_SHORTLIST = 32
"""Chunks of a collection shortlisted per query (the question, then each missing piece) by default."""
DEFAULT_WHOLE = 2000
"""Most chunks a run's documents hold to be read whole by default (as many as a tree is built exactly over);
more are read through a shortlist of ``DEFAULT_SHORTLIST`` chunks."""
DEFAULT_FLOOR = -0.5
"""Relevance (standard deviations from the document's mean) below which a chunk is skipped."""

_NOTHING = re.compile(
    r"^\W*(none|nothing|n/?a|no|nil|null|-+|—|无|没有|无需|nothing (else|more|is missing)( needed)?|"
    r"(no|none of the) (more |further |additional )?(information|facts?|details?)"
    r"( (is |are )?(needed|missing|required))?|"
    r"(the )?(question|notes?) (is|are) (fully )?answered|all (facts|information) (found|present|known))\W*$",
    re.IGNORECASE,
)


def nothing_missing(missing: str) -> bool:
    """Whether a worker's ``missing`` text says that nothing is missing (empty, "none", "nothing"...)."""
    return not missing.strip() or bool(_NOTHING.match(missing.strip()))


def standardise(values: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` over the document; all zeros when the values do not vary."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size == 0:
        return x
    std = float(x.std())
    return np.zeros_like(x) if std < 1e-12 else (x - x.mean()) / std


def match(dense: np.ndarray, lexical: np.ndarray | None = None) -> np.ndarray:
    """How well each chunk matches one text: its standardised cosine, averaged with its standardised BM25 score."""
    z = standardise(dense)
    return z if lexical is None else (z + standardise(lexical)) / 2


def relevance(query: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
    """Per chunk: the better of its match to the question and to the missing text (see :func:`match`)."""
    return np.asarray(query, dtype=np.float64) if missing is None else np.maximum(query, missing)


@dataclass(frozen=True)
class ReadingPolicy:
    """Knobs of the best-first choice and of the floor."""

    tree_weight: float = 0.5
    """Weight of the standardised tree-edge weight for chunks on the frontier."""
    jump_penalty: float = 1.0
    """Relevance (in standard deviations) a chunk off the frontier gives up."""
    floor: float | None = DEFAULT_FLOOR
    """Chunks less relevant than this are passed over without a call; None reads everything."""


def edge_scores(tree: ChowLiuTree) -> list[list[tuple[int, float]]]:
    """Neighbour lists with edge weights standardised over the tree's edges."""
    if not tree.edges:
        return [[] for _ in range(tree.n)]
    z = standardise(np.asarray([w for _, _, w in tree.edges]))
    adj: list[list[tuple[int, float]]] = [[] for _ in range(tree.n)]
    for (i, j, _), w in zip(tree.edges, z, strict=True):
        adj[i].append((j, float(w)))
        adj[j].append((i, float(w)))
    return adj


def frontier(adj: Sequence[Sequence[tuple[int, float]]], read: Sequence[int]) -> dict[int, float]:
    """Unread tree neighbours of the chunks read, with their best (standardised) edge to the read part."""
    done = set(read)
    out: dict[int, float] = {}
    for node in read:
        for other, weight in adj[node]:
            if other not in done and weight > out.get(other, -np.inf):
                out[other] = weight
    return out


def best_first(
    tree: ChowLiuTree, read: Sequence[int], rel: np.ndarray, policy: ReadingPolicy = ReadingPolicy()
) -> tuple[int | None, list[int]]:
    """The next chunk of a best-first reading (None when nothing above the floor is left) and the chunks below it.

    ``read`` are the chunks this chain has read, ``rel`` the current relevance of every chunk.
    """
    done = set(read)
    floor = -np.inf if policy.floor is None else policy.floor
    below = [i for i in range(tree.n) if i not in done and rel[i] < floor]
    if not read:
        open_ = [i for i in range(tree.n) if rel[i] >= floor]
        return (max(open_, key=lambda i: (rel[i], -i)) if open_ else None), below
    edges = frontier(edge_scores(tree), read)
    best, best_score = None, -np.inf
    for i in range(tree.n):
        if i in done or rel[i] < floor:
            continue
        score = rel[i] + policy.tree_weight * edges[i] if i in edges else rel[i] - policy.jump_penalty
        if score > best_score:
            best, best_score = i, score
    return best, below


def next_in_plan(
    plan: Sequence[int], start: int, rel: np.ndarray, floor: float | None
) -> tuple[int | None, int, list[int]]:
    """Walk a fixed order from ``start``: the next chunk above the floor, the position after it, the passed-over."""
    passed: list[int] = []
    pos = start
    while pos < len(plan):
        chunk = plan[pos]
        pos += 1
        if floor is None or rel[chunk] >= floor:
            return chunk, pos, passed
        passed.append(chunk)
    return None, pos, passed


def best_first_order(
    tree: ChowLiuTree, query_sim: np.ndarray, policy: ReadingPolicy = ReadingPolicy(), root: int | None = None
) -> list[int]:
    """The whole best-first order when only the question is known (no missing text): every chunk, floor ignored."""
    rel = relevance(standardise(query_sim))
    policy = ReadingPolicy(policy.tree_weight, policy.jump_penalty, None)
    read: list[int] = [] if root is None else [int(root)]
    while len(read) < tree.n:
        nxt, _ = best_first(tree, read, rel, policy)
        if nxt is None:
            break
        read.append(nxt)
    return read


def chunk_bonus(tree: ChowLiuTree, read: Sequence[int], policy: ReadingPolicy) -> np.ndarray:
    """Per chunk, what the tree adds to the relevance of its passages once some chunks are read.

    A chunk already read: 0; a tree neighbour of one: ``tree_weight`` times its best standardised
    edge to them; any other chunk: ``-jump_penalty``. Nothing read yet: 0 everywhere.
    """
    bonus = np.zeros(tree.n, dtype=np.float64)
    if not read:
        return bonus
    bonus -= policy.jump_penalty
    for i, weight in frontier(edge_scores(tree), read).items():
        bonus[i] = policy.tree_weight * weight
    bonus[list(set(read))] = 0.0
    return bonus


def next_batch(
    scores: np.ndarray,
    tokens: Sequence[int],
    taken: Sequence[int],
    room: int,
    floor: float | None,
    *,
    at_least_one: bool = False,
) -> list[int]:
    """The passages a worker reads next: the best-scoring untaken ones above the floor that fit in ``room`` tokens.

    Best first; empty when none fits or none is left above the floor. With ``at_least_one`` the best passage is
    taken even when it alone is larger than ``room``.
    """
    done = set(taken)
    low = -np.inf if floor is None else floor
    batch: list[int] = []
    used = 0
    for i in np.argsort(-scores, kind="stable").tolist():
        if i in done or scores[i] < low:
            continue
        if used + tokens[i] > room and not (at_least_one and not batch):
            continue
        batch.append(i)
        used += tokens[i]
    return batch
