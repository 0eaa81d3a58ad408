"""Nearest-neighbour lists of the sparse tree builder: each chunk's ``k`` most similar chunks.

No ``N x N`` matrix is ever held. The lists are found in row blocks (``block @ emb.T``, then a
per-row top-k), exhaustively up to ``exhaustive_max`` chunks and with an inverted-file search
(spherical k-means cells, each scanned against its nearest cells) above that. The only randomness
is the seeded k-means. Every function takes unit rows (see :func:`nodes.chain.ordering.tree.unit_rows`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.sparse import coo_matrix

_BLOCK_ELEMS = 1 << 22  # similarity entries a blockwise scan holds at once (16 MiB in float32)
_N_PROBE = 8
_ARGMAX_K = 32  # up to this k, top-k is k argmax passes; above it, argpartition
_KMEANS_ITERS = 8
_KMEANS_SAMPLE = 32  # k-means is fitted on this many points per cell at most


def rows_per_block(width: int) -> int:
    """Rows a blockwise scan may take so that a block holds about ``_BLOCK_ELEMS`` entries."""
    return max(1, _BLOCK_ELEMS // max(1, width))


def _top_k(sims: np.ndarray, k: int, cols: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest entries of each row (``sims`` is overwritten), by value desc then column asc."""
    if k > _ARGMAX_K:
        return _top_k_partition(sims, k, cols)
    rows = np.arange(len(sims))
    idx = np.empty((len(sims), k), dtype=np.int64)
    vals = np.empty((len(sims), k), dtype=sims.dtype)
    for t in range(k):
        best = np.argmax(sims, axis=1)
        idx[:, t] = best
        vals[:, t] = sims[rows, best]
        sims[rows, best] = -np.inf
    return (idx if cols is None else cols[idx]), vals


def _top_k_partition(sims: np.ndarray, k: int, cols: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Same as :func:`_top_k` through ``argpartition`` (faster when ``k`` is large)."""
    width = sims.shape[1]
    if k < width:
        idx = np.argpartition(sims, width - k, axis=1)[:, width - k :]
    else:
        idx = np.broadcast_to(np.arange(width), sims.shape).copy()
    vals = np.take_along_axis(sims, idx, axis=1)
    order = np.lexsort((idx, -vals), axis=-1)
    idx, vals = np.take_along_axis(idx, order, axis=1), np.take_along_axis(vals, order, axis=1)
    return (idx if cols is None else cols[idx]), vals


def knn_exhaustive(z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``k`` nearest neighbours of every row (self excluded), scanned in row blocks."""
    n = len(z)
    nbr = np.empty((n, k), dtype=np.int64)
    nsim = np.empty((n, k), dtype=np.float32)
    step = rows_per_block(n)
    for start in range(0, n, step):
        stop = min(n, start + step)
        sims = z[start:stop] @ z.T
        sims[np.arange(stop - start), np.arange(start, stop)] = -np.inf
        nbr[start:stop], nsim[start:stop] = _top_k(sims, k)
    return nbr, nsim


def _assign(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the most similar centroid for every row, in row blocks."""
    out = np.empty(len(x), dtype=np.int64)
    step = rows_per_block(len(centroids))
    for start in range(0, len(x), step):
        out[start : start + step] = np.argmax(x[start : start + step] @ centroids.T, axis=1)
    return out


def _spherical_kmeans(z: np.ndarray, cells: int, seed: int) -> np.ndarray:
    """Unit centroids of a spherical k-means fitted on a seeded sample of the rows."""
    rng = np.random.default_rng(seed)
    size = min(len(z), cells * _KMEANS_SAMPLE)
    sample = z[np.sort(rng.choice(len(z), size=size, replace=False))]
    centroids = sample[rng.choice(size, size=cells, replace=False)].copy()
    for _ in range(_KMEANS_ITERS):
        labels = _assign(sample, centroids)
        onehot = coo_matrix((np.ones(size, np.float32), (labels, np.arange(size))), shape=(cells, size))
        sums = np.asarray(onehot.tocsr() @ sample, dtype=np.float32)
        norms = np.linalg.norm(sums, axis=1)
        keep = norms > 0
        centroids[keep] = sums[keep] / norms[keep, None]
    return centroids


def knn_ivf(z: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Approximate ``k`` nearest neighbours: each k-means cell is scanned against its nearest cells."""
    n = len(z)
    cells = max(2, math.isqrt(n))
    centroids = _spherical_kmeans(z, cells, seed)
    assign = _assign(z, centroids)
    by_cell = np.argsort(assign, kind="stable")
    bounds = np.searchsorted(assign[by_cell], np.arange(cells + 1))
    members = [by_cell[bounds[c] : bounds[c + 1]] for c in range(cells)]
    csim = centroids @ centroids.T
    np.fill_diagonal(csim, np.inf)  # a cell always probes itself first
    probes = _top_k(csim, min(cells, _N_PROBE))[0]
    nbr = np.repeat(np.arange(n, dtype=np.int64)[:, None], k, axis=1)  # padding points at itself
    nsim = np.full((n, k), -np.inf, dtype=np.float32)
    for cell in range(cells):
        own = members[cell]
        cand = np.concatenate([members[p] for p in probes[cell]])
        kk = min(k, len(cand) - 1)
        if len(own) == 0 or kk < 1:
            continue
        zc = z[cand]
        step = rows_per_block(len(cand))
        for start in range(0, len(own), step):
            rows = own[start : start + step]
            sims = z[rows] @ zc.T
            sims[np.arange(len(rows)), np.arange(start, start + len(rows))] = -np.inf
            nbr[rows, :kk], nsim[rows, :kk] = _top_k(sims, kk, cand)
    return nbr, nsim
