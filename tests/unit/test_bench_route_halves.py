"""Fusion weights chosen on one half of the queries and scored on the other (``bench.route_halves``)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bench.route import Query
from bench.route_halves import DEFAULT_WEIGHTS, coordinate_ascent, halves, recall_at5, split_halves

NAMES = "ABCDEFGHIJK"


def _graph() -> Any:
    from nodes.route.fusion import graph_of
    from nodes.route.mcp import parse_registry

    servers = [
        {"name": name, "description": name, "tools": [{"name": f"{name.lower()}_tool", "description": "x"}]}
        for name in NAMES
    ]
    return graph_of(parse_registry(servers, "toy"))


def _agents(*names: str) -> list[Any]:
    return [(("agent", n), 1.0 / (i + 1)) for i, n in enumerate(names)]


def _lists(good: str) -> dict[str, list[Any]]:
    """The vector agent list has the gold agent 4th, BM25 six others: at 1:1 the gold agent is 7th."""
    others = [n for n in NAMES if n != good]
    return {
        "agents": [_agents(*others[:3], good)],
        "tools": [[]],
        "bm25_agents": [_agents(*others[3:9])],
        "bm25_tools": [[]],
        "entities": [],
    }


def test_recall_reads_the_fused_top_5_of_the_weighted_lists() -> None:
    graph = _graph()
    lists = _lists("A")
    gold = [frozenset({"A"})]
    assert recall_at5(lists, {"agents": 1.0, "bm25_agents": 0.0}, graph, gold) == 1.0
    assert recall_at5(lists, {"agents": 1.0, "bm25_agents": 1.0}, graph, gold) == 0.0
    assert recall_at5(lists, {"agents": 0.0, "bm25_agents": 1.0}, graph, gold) == 0.0
    assert recall_at5(lists, {}, graph, gold) == 0.0


def test_coordinate_ascent_drops_a_list_that_hurts_the_tuning_queries() -> None:
    graph = _graph()
    per_query = [_lists(g) for g in "ACDE"]
    golds = [[frozenset({g})] for g in "ACDE"]
    names = ["agents", "tools", "bm25_agents", "bm25_tools", "entities"]
    start = dict(DEFAULT_WEIGHTS)
    weights, best, passes = coordinate_ascent(per_query, golds, [0, 1], names, graph, start, values=(0.0, 1.0, 3.0))
    assert best == 1.0 and passes >= 1
    assert weights["agents"] > weights["bm25_agents"]


def test_halves_score_each_half_with_weights_chosen_on_the_other() -> None:
    graph = _graph()
    queries = [Query(f"q{i}", "x", [("t", frozenset({g}))]) for i, g in enumerate("ACDEAC")]
    per_query = [_lists(g) for g in "ACDEAC"]
    out = halves(per_query, queries, ["agents", "tools", "bm25_agents", "bm25_tools", "entities"], graph, tune=3)
    assert [r["tuned_on"] for r in out["runs"]] == ["queries 1-3", "queries 4-6"]
    assert [r["scored_on"] for r in out["runs"]] == ["queries 4-6", "queries 1-3"]
    assert out["default_all"] == 0.0 and out["held_out_all"] == 1.0
    assert all(r["held_out_half"] == 1.0 for r in out["runs"])


def test_the_halves_are_checked() -> None:
    assert split_halves(5, 2) == ([0, 1], [2, 3, 4])
    with pytest.raises(ValueError, match="--tune"):
        split_halves(5, 5)


def test_a_seed_deals_the_halves_from_a_shuffle_of_the_same_queries() -> None:
    graph = _graph()
    queries = [Query(f"q{i}", "x", [("t", frozenset({g}))]) for i, g in enumerate("ACDEAC")]
    per_query = [_lists(g) for g in "ACDEAC"]
    per_query[0]["agents"] = [_agents("B", "C", "D", "E", "F", "G")]  # no list holds query 0's gold agent
    names = ["agents", "tools", "bm25_agents", "bm25_tools", "entities"]
    plain = halves(per_query, queries, names, graph, tune=3)
    shuffled = halves(per_query, queries, names, graph, tune=3, seed=1)
    assert shuffled["seed"] == 1 and plain["seed"] is None
    assert shuffled["held_out_all"] == plain["held_out_all"] == round(5 / 6, 4)
    order = list(range(6))
    random.Random(1).shuffle(order)
    in_first = order.index(0) < 3
    scored = {r["scored_on"]: r["held_out_half"] for r in shuffled["runs"]}
    assert scored == {"queries 1-3": 0.6667 if in_first else 1.0, "queries 4-6": 1.0 if in_first else 0.6667}
    assert {r["scored_on"]: r["held_out_half"] for r in plain["runs"]} == {"queries 1-3": 0.6667, "queries 4-6": 1.0}
