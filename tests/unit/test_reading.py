from __future__ import annotations

import numpy as np
import pytest

from nodes.chain.ordering.orders import order_chunks
from nodes.chain.ordering.tree import ChowLiuTree
from nodes.chain.reading import (
    ReadingPolicy,
    best_first,
    best_first_order,
    edge_scores,
    frontier,
    match,
    next_in_plan,
    nothing_missing,
    relevance,
    standardise,
)

# a path 0 - 1 - 2 - 3 - 4 with one weak link (2 - 3)
PATH = ChowLiuTree(5, [(0, 1, 0.9), (1, 2, 0.8), (2, 3, 0.1), (3, 4, 0.7)])


@pytest.mark.parametrize(
    "text", ["", "  ", "none", "Nothing.", "N/A", "-", "nothing is missing", "无", "No further information needed"]
)
def test_nothing_missing(text: str) -> None:
    assert nothing_missing(text)


@pytest.mark.parametrize(
    "text", ["the date", "Nothing about the budget yet, need the amount", "who leads it", "nonexistent"]
)
def test_something_missing(text: str) -> None:
    assert not nothing_missing(text)


def test_standardise_and_match() -> None:
    z = standardise(np.array([1.0, 2.0, 3.0]))
    assert np.allclose(z, [-1.2247, 0.0, 1.2247], atol=1e-4)
    assert np.all(standardise(np.array([0.5, 0.5])) == 0)
    both = match(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0]))
    assert np.allclose(both, 0)  # dense and lexical disagree exactly: no preference
    assert np.allclose(relevance(np.array([0.0, 1.0]), np.array([2.0, -1.0])), [2.0, 1.0])


def test_first_chunk_is_the_most_relevant() -> None:
    rel = np.array([0.1, 0.0, 2.0, -0.2, 0.3])
    assert best_first(PATH, [], rel, ReadingPolicy(floor=None)) == (2, [])


def test_best_first_prefers_the_frontier_and_jumps_only_for_a_clearly_better_chunk() -> None:
    policy = ReadingPolicy(tree_weight=0.5, jump_penalty=1.0, floor=None)
    # after reading 2, chunks 1 and 3 are on the frontier; 4 is not
    rel = np.array([0.0, 0.3, 0.0, 0.2, 0.9])
    nxt, _ = best_first(PATH, [2], rel, policy)
    assert nxt == 1  # strong edge 1-2 beats the weak edge 2-3 and the jump to 4 (0.9 - 1.0)
    rel_far = np.array([0.0, 0.3, 0.0, 0.2, 3.0])
    assert best_first(PATH, [2], rel_far, policy)[0] == 4  # far more relevant: worth the jump


def test_floor_skips_and_ends() -> None:
    rel = np.array([-1.0, 0.5, -2.0, 0.2, -0.7])
    policy = ReadingPolicy(floor=0.0)
    nxt, below = best_first(PATH, [1], rel, policy)
    assert nxt == 3 and below == [0, 2, 4]
    assert best_first(PATH, [1, 3], rel, policy) == (None, [0, 2, 4])
    assert next_in_plan([0, 1, 2, 3], 0, rel, 0.0) == (1, 2, [0])
    assert next_in_plan([0, 1, 2, 3], 2, rel, 0.0) == (3, 4, [2])
    assert next_in_plan([0, 2], 0, rel, 0.0) == (None, 2, [0, 2])
    assert next_in_plan([0, 2], 0, rel, None) == (0, 1, [])


def test_frontier_keeps_the_best_edge() -> None:
    adj = edge_scores(PATH)
    edges = frontier(adj, [1, 3])
    assert set(edges) == {0, 2, 4}
    assert edges[2] == max(w for n, w in adj[2] if n in (1, 3))


def test_best_first_order_is_a_permutation_and_an_order() -> None:
    sims = np.array([0.2, 0.1, 0.9, 0.3, 0.8])
    order = best_first_order(PATH, sims)
    assert sorted(order) == list(range(5)) and order[0] == 2
    assert order_chunks("best-first", n=5, tree=PATH, query_sim=sims) == order
    assert order_chunks("best-first", n=5, tree=PATH, query_sim=sims, root=4)[0] == 4
    with pytest.raises(ValueError, match="query_sim"):
        order_chunks("best-first", n=5, tree=PATH)
