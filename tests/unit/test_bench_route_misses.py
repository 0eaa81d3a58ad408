"""Where routing misses, per candidate list (``bench.route_misses``), on a hash-embedded registry."""

from __future__ import annotations

from typing import Any

from bench.route import Query
from bench.route_misses import _best_rank, per_query, summary


def test_best_rank_walks_tools_to_their_owners() -> None:
    gold = [frozenset({"Maps", "Atlas"})]
    nodes = [(("agent", "Files"), 0.9), (("tool", "Atlas", "route"), 0.8), (("agent", "Maps"), 0.7)]
    assert _best_rank(nodes, gold) == 2
    assert _best_rank(nodes[:1], gold) is None


def _row(qid: str, hit: bool, recall: float, ranks: dict[str, int | None], cjk: bool = False) -> dict[str, Any]:
    return {
        "id": qid,
        "cjk": cjk,
        "default_hit@5": hit,
        "recall@5": recall,
        "request_ms": 10.0,
        "embed_ms": 5.0,
        "rank": ranks,
    }


def test_summary_counts_the_lists_that_had_a_miss_in_their_own_top_5() -> None:
    none: dict[str, int | None] = {"agents": None, "tools": None, "bm25_agents": None, "bm25_tools": None}
    rows = [
        _row("a", True, 1.0, {**none, "agents": 1, "bm25_tools": 2}),
        _row("b", True, 0.5, {**none, "tools": 3}, cjk=True),
        _row("c", False, 0.0, {**none, "tools": 4, "agents": 9}),
    ]
    out = summary(rows)
    assert out["default_hits@5"] == 2 and out["misses"] == ["c"] and out["partly_routed"] == ["b"]
    assert out["agent_recall@5"] == 0.5
    assert out["list_top5_among_misses"] == {"agents": 0, "tools": 1, "bm25_agents": 0, "bm25_tools": 0}
    assert out["list_top5_all"]["tools"] == 2
    assert [q["id"] for q in out["cjk_queries"]] == ["b"]


def test_per_query_reports_the_default_and_each_list_for_a_registered_registry() -> None:
    from nodes.route.manifest import register
    from nodes.route.mcp import parse_registry
    from stores.vectorstore import get_store

    registry = parse_registry(
        [
            {"name": "Maps", "description": "Maps and directions", "tools": [{"name": "route", "description": "x"}]},
            {"name": "Files", "description": "Read and write files", "tools": [{"name": "read", "description": "y"}]},
        ],
        "toy",
    )
    store = get_store("misses", "hash")
    register(registry, store)
    queries = [Query("q1", "directions to the station 地图", [("route", frozenset({"Maps"}))])]
    (row,) = per_query(queries, registry, store)
    assert row["cjk"] and row["default_hit@5"] and row["recall@5"] == 1.0
    assert row["rank"]["bm25_agents"] == 1
    (need,) = row["needs"]
    assert need["servers"] == ["Maps"] and need["hit@5"] and need["fused"] == 1
    assert not need["described_in_chinese"]


def test_the_table_lists_each_missed_need_with_its_rank_in_every_list() -> None:
    from bench.route_misses import miss_table

    need = {"servers": ["Files"], "hit@5": False, "fused": 7, "agents": 12, "tools": None}
    found = {"servers": ["Maps"], "hit@5": True, "fused": 1, "agents": 1, "tools": 1, "bm25_agents": 1}
    rows = [
        {"query": "save | the route", "needs": [found, {**need, "bm25_agents": 3, "bm25_tools": None}]},
        {"query": "fully routed", "needs": [{**found, "bm25_agents": 1, "bm25_tools": 1}]},
    ]
    table = miss_table({"embedders": {"e": {"queries": rows}}}, "e").splitlines()
    assert len(table) == 3
    assert table[2] == "| 1 | save / the route | Files | 7 | 12 | - | 3 | - |"
