"""One short expert-editor summarization with the bundled model: cited sentences of real chunks."""

from __future__ import annotations

from pathlib import Path

from graphs.summarize.graph import graph
from stores.documents import get_document
from stores.usage import usage_totals
from tests.unit.test_summarize import assert_whole

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_bundled_model_writes_a_cited_summary() -> None:
    out = graph.invoke(
        {"path": str(FALCON), "length": 50},
        context={"max_rounds": 1, "questions_per_round": 3},
    )
    chunks = get_document("default", out["doc_id"]).chunks
    real_ids = {f"c{i}" for i in range(chunks)}
    assert_whole(out)  # the summary is its sentences, each as checked, in order
    assert all(s["citations"] for s in out["sentences"])
    assert all(set(s["citations"]) <= real_ids for s in out["sentences"])
    assert out["rounds"] == 1 and out["stop_reason"] in ("max_rounds", "editor_satisfied", "draft_unchanged")
    questions = out["log"][0]["questions"]
    assert 1 <= len(questions) <= 3
    assert any(q["status"] == "answered" and set(q["citations"]) <= real_ids for q in questions)
    totals = usage_totals(out["usage"])
    assert totals["calls"] >= 4 and totals["input"] > totals["output"] > 0
    assert out["factcheck"]["checked"] >= 1
