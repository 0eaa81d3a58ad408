"""The routing probes' signals and their nested fold choice (``bench.route_probes``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.route import Query
from bench.route_probes import diverse, neighbour_list, nested_cv, usage_list


def _q(qid: str, *servers: str) -> Query:
    return Query(qid, qid, [(f"t{i}", frozenset({s})) for i, s in enumerate(servers)])


QUERIES = [_q("a", "Files", "Search"), _q("b", "Files"), _q("c", "Maps"), _q("d", "Search", "Files")]


def test_usage_list_counts_only_the_training_queries() -> None:
    assert usage_list(QUERIES, [0, 1, 3]) == [(("agent", "Files"), 3.0), (("agent", "Search"), 2.0)]
    # Query 2 is held out: its agent is unknown to the prior.
    assert ("agent", "Maps") not in dict(usage_list(QUERIES, [0, 1]))


def test_neighbour_list_votes_by_similarity_of_the_nearest_training_queries() -> None:
    sims = [1.0, 0.9, 0.2, 0.5]
    votes = dict(neighbour_list(sims, QUERIES, [1, 2, 3], m=2))
    assert votes == {("agent", "Files"): 1.4, ("agent", "Search"): 0.5}


@dataclass
class _Match:
    name: str
    score: float


def test_diverse_gives_a_near_duplicate_slot_to_the_next_agent() -> None:
    pool = [_Match("Fetch", 0.5), _Match("Fetch2", 0.45), _Match("Files", 0.4)]
    twins = {frozenset({"Fetch", "Fetch2"}): 0.98}

    def sim(a: str, b: str) -> float:
        return twins.get(frozenset({a, b}), 0.1)

    assert [m.name for m in diverse(pool, sim, 0.0, 0.85, 2)] == ["Fetch", "Fetch2"]
    assert [m.name for m in diverse(pool, sim, 1.0, 0.85, 2)] == ["Fetch", "Files"]


def test_nested_cv_learns_only_from_folds_other_than_the_scored_query() -> None:
    fold = [0, 0, 1, 1, 2, 2]
    seen: list[tuple[int, tuple[int, ...]]] = []

    def score(value: int, i: int, train: Sequence[int]) -> float:
        seen.append((i, tuple(train)))
        return float(value == 1)

    out = nested_cv([0, 1], score, fold)
    assert all(fold[i] not in {fold[t] for t in train} for i, train in seen)
    assert out["chosen_per_fold"] == [1, 1, 1] and out["held_out_agent_recall@5"] == 1.0
    assert out["all_queries"] == {"0": 0.0, "1": 1.0}
