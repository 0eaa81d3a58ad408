"""The routing benchmark's metrics and synthetic registry (``bench.route``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.route import Query, agent_gains, evaluate, synthetic_registry_data, tool_gains
from bench.route import _score as score_at
from nodes.route.entry import route
from nodes.route.fusion import RouteSettings
from nodes.route.manifest import register
from nodes.route.mcp import parse_registry
from stores.vectorstore import get_store
from tests.unit.test_router import SERVERS


def _registry(name: str = "demo") -> object:
    return parse_registry(SERVERS, name)


def test_gains_count_each_gold_item_once_and_any_owner() -> None:
    gold_servers = [frozenset({"A", "B"}), frozenset({"C"})]
    assert agent_gains(["B", "A", "X", "C"], gold_servers) == [1, 0, 0, 1]
    recall, ndcg = score_at([1, 0, 0, 1], 2, 5)
    assert recall == 1.0 and ndcg == pytest.approx((1 + 1 / 2.321928) / (1 + 1 / 1.584963), rel=1e-4)
    assert score_at([0, 1], 2, 1) == (0.0, 0.0)
    gold = [("search", frozenset({"A", "B"})), ("read", frozenset({"C"}))]
    assert tool_gains([("B", "search"), ("A", "search"), ("C", "write"), ("C", "read")], gold) == [1, 0, 0, 1]


def test_evaluate_and_synthetic_registry() -> None:
    reg = _registry()
    data = synthetic_registry_data(45, tools_per_agent=20)
    assert data == synthetic_registry_data(45, tools_per_agent=20)
    assert sum(len(a["tools"]) for a in data) == 45 and len(data) == 3
    synthetic = parse_registry(data, "synthetic")
    assert len(synthetic.tools) == 45 and synthetic.warnings == ()
    store = get_store("bench")
    register(reg, store)
    queries = [Query("q1", "stock price of a ticker", [("stock_price", frozenset({"Finance Server"}))])]
    results = route([q.query for q in queries], reg, store, RouteSettings.from_profile("balanced", k=5))
    metrics = evaluate(results, queries)
    assert metrics["agent_recall@5"] == 1.0 and metrics["tool_recall@10"] == 1.0
    assert evaluate(results, queries, tools_ranked=False)["tool_recall@5"] is None


def test_folds_are_balanced_and_seeded() -> None:
    from bench.route import folds_of

    fold = folds_of(45, 5)
    assert sorted(fold.count(f) for f in range(5)) == [9] * 5
    assert fold == folds_of(45, 5) and fold != folds_of(45, 5, seed=1)


def test_cross_validation_scores_each_query_under_a_choice_made_without_it() -> None:
    from bench.route import cross_validate

    # "lucky" is best on folds 1-2 only; "steady" is good everywhere.
    fold = [0, 0, 1, 1, 2, 2]
    scores = {"steady": [0.5, 0.5, 0.5, 0.5, 0.5, 0.5], "lucky": [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]}
    out = cross_validate(scores, fold, prefer="steady")
    chosen = [f["chosen"] for f in out["per_fold"]]
    # Without fold 0, "lucky" looks perfect and is chosen, then scores 0 on fold 0.
    assert chosen == ["lucky", "steady", "steady"]
    assert out["held_out_agent_recall@5"] == pytest.approx((0 + 0 + 0.5 * 4) / 6, abs=1e-4)
    assert out["chosen_most"] == "steady"
    # Ties go to the preferred setting.
    tie = cross_validate({"a": [1.0, 0.0], "b": [1.0, 0.0]}, [0, 1], prefer="b")
    assert {f["chosen"] for f in tie["per_fold"]} == {"b"}


def test_per_option_folds_choose_one_option_with_the_rest_at_the_default() -> None:
    from bench.route import _per_option, setting_label

    default = {
        "fusion": "rrf",
        "retrieval": "hybrid",
        "aggregate": "sum",
        "rrf_k": 10.0,
        "agent_weight": 1.0,
        "bm25_weight": 1.0,
        "entity_weight": 0.0,
        "clause_weight": 0.0,
        "bm25_fields": None,
    }
    fold = [0, 0, 1, 1]
    on = setting_label("plain", {**default, "entity_weight": 1.5})
    off = setting_label("plain", default)
    other = setting_label("plain", {**default, "agent_weight": 2.0, "entity_weight": 1.5})
    assert on == off + " entities=1.5"
    scores = {off: [0.0, 0.5, 0.0, 0.5], on: [1.0, 0.5, 1.0, 0.5], other: [1.0, 1.0, 1.0, 1.0]}
    out = _per_option(scores, fold, ["plain"], default)
    entity = out["plain entity_weight"]
    # Only the entity weight varies: the better-everywhere setting with another a:t is not a candidate.
    assert entity["chosen"] == [on, on]
    assert entity["held_out_agent_recall@5"] == 0.75 and entity["default_recall@5"] == 0.25
    # Options with no grid point besides the default choose the default.
    assert out["plain clause_weight"]["chosen"] == [off, off]


def test_every_grid_label_names_exactly_the_options_its_settings_use() -> None:
    from bench.route import _grid, setting_label

    labels = set()
    for spec in _grid():
        label = setting_label("plain", spec)
        settings = RouteSettings(**spec).checked()
        assert ("entities=" in label) == (settings.entity_weight > 0), label
        assert ("clauses=" in label) == (settings.clause_weight > 0), label
        assert ("fields=" in label) == (settings.bm25_fields is not None), label
        labels.add(label)
    assert len(labels) == len(_grid())  # no two grid points share a label


def test_decompositions_write_beside_out_and_never_to_the_shipped_journal(tmp_path: Path) -> None:
    import json

    import prompts
    from bench.route import decompositions, written_journal
    from doubles.chat import ScriptedChatModel
    from stores.models import use_chat_model
    from stores.text import content_hash

    version = content_hash(prompts.load("route/decompose").template + prompts.load("route/decompose_user").template)
    shipped = tmp_path / "shipped.jsonl"
    shipped.write_text(json.dumps({"id": "q1", "prompt": version, "tasks": ["a", "b"]}) + "\n", encoding="utf-8")
    before = shipped.read_bytes()
    written = written_journal(tmp_path / "out" / "route.json", "decompositions")
    assert written == tmp_path / "out" / "route_decompositions.jsonl"
    queries = [Query("q1", "do a then b", []), Query("q2", "fetch it then save it", [])]
    model = ScriptedChatModel(default=json.dumps({"tasks": ["fetch it", "save it"]}))
    with use_chat_model(model):
        done = decompositions(queries, shipped, written)
    assert shipped.read_bytes() == before  # the shipped journal is only read
    assert done["q1"]["tasks"] == ["a", "b"] and done["q2"]["tasks"] == ["fetch it", "save it"]
    assert [json.loads(line)["id"] for line in written.read_text(encoding="utf-8").splitlines()] == ["q2"]
    with use_chat_model(ScriptedChatModel(default="unused")):
        again = decompositions(queries, shipped, written)  # both journals answer: no model call
    assert again["q2"]["tasks"] == ["fetch it", "save it"] and len(written.read_text().splitlines()) == 1
