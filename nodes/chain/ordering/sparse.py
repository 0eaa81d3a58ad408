"""The sparse tree builder: a maximum spanning tree grown by Boruvka over neighbour lists.

Each chunk's ``k`` nearest neighbours come from :mod:`nodes.chain.ordering.neighbours`. The tree is grown
with Boruvka's algorithm: in every round each component takes its best edge to another component,
and components are merged (union-find, so no cycle can form). For a row, the first listed neighbour
outside its component is its best outside edge, because the lists are sorted; a row whose whole list
lies inside its own component may still hold a better outside edge, but only one no better than its
``k``-th listed similarity. Exactly those rows whose ``k``-th similarity reaches the component's best
known edge are rescanned against all chunks (in row blocks). With exhaustive lists every chosen edge
is therefore the true best edge of its component, and the result is a maximum spanning tree of the
full similarity graph for any ``k`` (``certified=True``). With inverted-file lists the result is a
maximum spanning tree of the approximate neighbour graph, where a component whose lists hold no
outside neighbour is joined through an exhaustive scan of up to ``_FALLBACK_ROWS`` of its rows
(``certified=False``). In both cases the result has ``N - 1`` edges and spans all chunks, including
zero vectors (similarity 0 with everything) and duplicates.
"""

from __future__ import annotations

import numpy as np

from nodes.chain.ordering.neighbours import knn_exhaustive, knn_ivf, rows_per_block

EXHAUSTIVE_MAX = 20_000
"""Largest N whose sparse neighbour lists are computed exhaustively (certified tree)."""

_FALLBACK_ROWS = 64


def _best_outside(z: np.ndarray, comp: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact best edge from each given row to a chunk of another component (row-block scan)."""
    best_sim = np.full(len(rows), -np.inf, dtype=np.float32)
    best_j = np.full(len(rows), -1, dtype=np.int64)
    step = rows_per_block(len(z))
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        sims = z[part] @ z.T
        sims[comp[part][:, None] == comp[None, :]] = -np.inf
        j = np.argmax(sims, axis=1)
        best_sim[start : start + step] = sims[np.arange(len(part)), j]
        best_j[start : start + step] = j
    best_j[~np.isfinite(best_sim)] = -1
    return best_sim, best_j


def _listed_outside(comp: np.ndarray, nbr: np.ndarray, nsim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the first listed neighbour in another component (-1 / -inf when there is none)."""
    outside = (comp[nbr] != comp[:, None]) & np.isfinite(nsim)
    has = outside.any(axis=1)
    first = outside.argmax(axis=1)
    rows = np.arange(len(comp))
    cand_j = np.where(has, nbr[rows, first], -1)
    cand_sim = np.where(has, nsim[rows, first], -np.inf).astype(np.float32)
    return cand_sim, cand_j


def _component_max(comp: np.ndarray, ncomp: int, values: np.ndarray) -> np.ndarray:
    """Maximum of ``values`` per component."""
    best = np.full(ncomp, -np.inf, dtype=np.float64)
    np.maximum.at(best, comp, values.astype(np.float64))
    return best


def _rows_to_rescan(
    comp: np.ndarray, ncomp: int, cand_j: np.ndarray, cand_sim: np.ndarray, bound: np.ndarray, certify: bool
) -> np.ndarray:
    """Rows whose best outside edge must be found by an exhaustive scan."""
    best = _component_max(comp, ncomp, cand_sim)
    unresolved = cand_j < 0
    if certify:
        return np.flatnonzero(unresolved & (bound >= best[comp]))
    stuck = unresolved & ~np.isfinite(best[comp])
    rows = np.flatnonzero(stuck)
    if len(rows) == 0:
        return rows
    rows = rows[np.lexsort((rows, -bound[rows].astype(np.float64), comp[rows]))]
    group = comp[rows]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    rank = np.arange(len(rows)) - np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
    return np.sort(rows[rank < _FALLBACK_ROWS])


def _component_choices(comp: np.ndarray, cand_j: np.ndarray, cand_sim: np.ndarray) -> np.ndarray:
    """Per component, the row holding its best outside edge (similarity desc, then lowest pair)."""
    rows = np.arange(len(comp))
    lo, hi = np.minimum(rows, cand_j), np.maximum(rows, cand_j)
    order = np.lexsort((hi, lo, -cand_sim.astype(np.float64), comp))
    group = comp[order]
    chosen = order[np.r_[True, group[1:] != group[:-1]]]
    return chosen[cand_j[chosen] >= 0]


def _merge(
    comp: np.ndarray, ncomp: int, rows: np.ndarray, cand_j: np.ndarray, cand_sim: np.ndarray
) -> tuple[np.ndarray, int, list[tuple[int, int]]]:
    """Add the chosen edges best first, skipping any that would close a cycle; relabel components."""
    parent = list(range(ncomp))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    js = cand_j[rows]
    lo, hi = np.minimum(rows, js), np.maximum(rows, js)
    order = np.lexsort((hi, lo, -cand_sim[rows].astype(np.float64)))
    added: list[tuple[int, int]] = []
    for a, b in zip(lo[order].tolist(), hi[order].tolist(), strict=True):
        ra, rb = find(int(comp[a])), find(int(comp[b]))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
            added.append((a, b))
    roots = np.asarray([find(c) for c in range(ncomp)], dtype=np.int64)
    _, relabel = np.unique(roots, return_inverse=True)
    return relabel[comp], int(relabel.max()) + 1, added


def _boruvka(z: np.ndarray, nbr: np.ndarray, nsim: np.ndarray, *, certify: bool) -> np.ndarray:
    """Spanning-tree edges (``N - 1`` x 2) grown by Boruvka rounds over the neighbour lists."""
    n = len(z)
    complete = nbr.shape[1] >= n - 1
    bound = np.full(n, -np.inf, dtype=np.float32) if complete else nsim[:, -1].copy()
    comp = np.arange(n, dtype=np.int64)
    ncomp = n
    edges: list[tuple[int, int]] = []
    while ncomp > 1:
        cand_sim, cand_j = _listed_outside(comp, nbr, nsim)
        rescan = _rows_to_rescan(comp, ncomp, cand_j, cand_sim, bound, certify)
        if len(rescan):
            cand_sim[rescan], cand_j[rescan] = _best_outside(z, comp, rescan)
        chosen = _component_choices(comp, cand_j, cand_sim)
        comp, ncomp, added = _merge(comp, ncomp, chosen, cand_j, cand_sim)
        edges.extend(added)
    return np.asarray(edges, dtype=np.int64).reshape(-1, 2)


def default_k(n: int) -> int:
    """Neighbour-list length used by the sparse path when ``k`` is not given."""
    return max(1, min(n - 1, 16))


def sparse_edges(z: np.ndarray, k: int | None, exhaustive_max: int, seed: int) -> tuple[np.ndarray, bool]:
    """Spanning-tree edges (``N - 1`` x 2) of unit rows ``z``, and whether the tree is certified maximal."""
    n = len(z)
    k = default_k(n) if k is None else max(1, min(int(k), n - 1))
    certify = n <= exhaustive_max
    nbr, nsim = knn_exhaustive(z, k) if certify else knn_ivf(z, k, seed)
    return _boruvka(z, nbr, nsim, certify=certify), certify
