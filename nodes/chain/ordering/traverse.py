"""Roots and traversals of a Chow-Liu tree: where a chain starts and in which order it walks.

The root and the traversal depend on the question (the tree does not). Root choice and child order
break ties towards the lower chunk index.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
from scipy.sparse.csgraph import shortest_path

from nodes.chain.ordering.tree import ChowLiuTree

ROOT_STRATEGIES = ("query", "degree", "weight")
TRAVERSALS = ("bfs", "dfs")
CHILD_ORDERS = ("weight", "relevance")


def query_vector(query_sim: Any, n: int) -> np.ndarray:
    """``query_sim`` as a finite float64 vector of length ``n``."""
    q = np.asarray(query_sim, dtype=np.float64).reshape(-1)
    if q.shape != (n,):
        raise ValueError(f"query_sim must have one value per chunk ({n}), got {q.shape[0]}")
    if not np.isfinite(q).all():
        raise ValueError("query_sim contains NaN or infinite values")
    return q


def choose_root(tree: ChowLiuTree, *, strategy: str = "query", query_sim: np.ndarray | None = None) -> int:
    """Root chunk: most query-similar ("query"), highest degree, or highest adjacent-weight sum."""
    if strategy not in ROOT_STRATEGIES:
        raise ValueError(f"unknown root strategy {strategy!r}; expected one of {', '.join(ROOT_STRATEGIES)}")
    if strategy == "query" and query_sim is None:
        strategy = "weight"
    if strategy == "query":
        scores = query_vector(query_sim, tree.n)
    elif strategy == "degree":
        scores = tree.degrees().astype(np.float64)
    else:
        scores = tree.weight_sums()
    return int(np.argmax(scores))


def _child_key(children: str, q: np.ndarray | None) -> Any:
    """Sort key over ``(node, weight)`` pairs: best first, lowest index on ties."""
    if children == "weight":
        return lambda item: (-item[1], item[0])
    if children == "relevance":
        if q is None:
            raise ValueError('children="relevance" needs query_sim')
        return lambda item: (-q[item[0]], item[0])
    raise ValueError(f"unknown children order {children!r}; expected one of {', '.join(CHILD_ORDERS)}")


def traverse(
    tree: ChowLiuTree,
    root: int,
    *,
    method: str = "bfs",
    children: str = "weight",
    query_sim: np.ndarray | None = None,
) -> list[int]:
    """Visit order from ``root`` (BFS or pre-order DFS), children by edge weight or query relevance."""
    if method not in TRAVERSALS:
        raise ValueError(f"unknown traversal {method!r}; expected one of {', '.join(TRAVERSALS)}")
    root = int(root)
    if not 0 <= root < tree.n:
        raise ValueError(f"root {root} is not a node of a tree over {tree.n} chunks")
    q = None if query_sim is None else query_vector(query_sim, tree.n)
    key = _child_key(children, q)
    adj = [sorted(nbrs, key=key) for nbrs in tree.adjacency()]
    return _bfs(adj, root) if method == "bfs" else _dfs(adj, root)


def _bfs(adj: list[list[tuple[int, float]]], root: int) -> list[int]:
    """Breadth-first order over sorted neighbour lists."""
    seen = [False] * len(adj)
    seen[root] = True
    out, queue = [], deque([root])
    while queue:
        node = queue.popleft()
        out.append(node)
        for child, _ in adj[node]:
            if not seen[child]:
                seen[child] = True
                queue.append(child)
    return out


def _dfs(adj: list[list[tuple[int, float]]], root: int) -> list[int]:
    """Pre-order depth-first order over sorted neighbour lists."""
    seen = [False] * len(adj)
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        if seen[node]:
            continue
        seen[node] = True
        out.append(node)
        stack.extend(child for child, _ in reversed(adj[node]) if not seen[child])
    return out


def multi_roots(tree: ChowLiuTree, query_sim: np.ndarray, n_roots: int = 3, *, min_hops: int = 2) -> list[int]:
    """Distinct roots for multi-root voting: most query-similar first, at least ``min_hops`` apart."""
    if n_roots < 1:
        raise ValueError("n_roots must be at least 1")
    q = query_vector(query_sim, tree.n)
    ranked = np.argsort(-q, kind="stable").tolist()
    graph = tree.to_csr()
    hops = np.full(tree.n, np.inf)
    chosen: list[int] = []
    for node in ranked:
        if len(chosen) == min(n_roots, tree.n):
            break
        if hops[node] >= min_hops:
            chosen.append(node)
            hops = np.minimum(hops, shortest_path(graph, directed=False, unweighted=True, indices=node))
    chosen += [node for node in ranked if node not in chosen][: min(n_roots, tree.n) - len(chosen)]
    return chosen
