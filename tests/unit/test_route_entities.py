"""Entity-aware routing: typed entities matched to parameter kinds, clause lists, field-weighted BM25."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.route.entities import KindIndex, clauses, parameter_kinds, request_formats, request_kinds
from nodes.route.fusion import Candidates, RouteSettings, fusion_lists, rank
from nodes.route.indexes import BM25Index, gather_candidates
from nodes.route.mcp import parse_registry
from stores.errors import InputError


def _schema(*names: str) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}}


SERVERS: list[dict[str, Any]] = [
    {
        "name": "Metals Server",
        "description": "Prices of gold, silver and other metals.",
        "tools": [
            {
                "name": "metal_price",
                "description": "Current price of a metal per gram.",
                "input_schema": _schema("metal"),
            },
            {"name": "metal_news", "description": "News about gold and silver markets.", "input_schema": _schema("q")},
        ],
    },
    {
        "name": "Calculator",
        "description": "Evaluates arithmetic.",
        "tools": [
            {
                "name": "calculate",
                "description": "Evaluates the given expression.",
                "input_schema": _schema("expression"),
            }
        ],
    },
    {
        "name": "Clock",
        "description": "Tells the hour.",
        "tools": [
            {"name": "get_current_time", "description": "Hour in a zone.", "input_schema": _schema("timezone")},
        ],
    },
    {
        "name": "Disk",
        "description": "Local storage.",
        "tools": [
            {"name": "write_file", "description": "Write content.", "input_schema": _schema("path", "content")},
            {"name": "list_directory", "description": "List entries.", "input_schema": _schema("path")},
        ],
    },
    {
        "name": "Slides",
        "description": "Presentations.",
        "tools": [
            {
                "name": "open_deck",
                "description": "Open a pptx deck.",
                "input_schema": _schema("pptx_path", "slide", "theme", "title"),
            },
        ],
    },
    {
        "name": "Audio",
        "description": "Sound analysis.",
        "tools": [
            {
                "name": "tempo",
                "description": "Beats per minute.",
                "input_schema": _schema("path_audio_time_series_y", "timeout_ms"),
            },
        ],
    },
]


@pytest.fixture(scope="module")
def registry() -> Any:
    return parse_registry(SERVERS, "entities")


def test_parameter_kinds_read_the_head_word_of_the_name() -> None:
    assert parameter_kinds("fileAbsolutePath") == {"path"}
    assert parameter_kinds("outputDir") == {"path"}
    assert parameter_kinds("source_timezone") == {"time"}
    assert parameter_kinds("expression") == {"quantity"}
    assert parameter_kinds("url") == {"url"}
    assert parameter_kinds("domain") == {"domain"}
    # Compounds are what their last word says: an audio series is not a time, a timeout is not a time.
    assert parameter_kinds("path_audio_time_series_y") == set()
    assert parameter_kinds("timeout_ms") == set()
    assert parameter_kinds("query") == set()


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("Make a web page saved at /root/html/ai.html.", {"path"}),
        ("Summarize https://www.youtube.com/watch?v=x for me", {"url"}),
        ("Is amaz0n.com the official Amazon site?", {"domain"}),
        ("Mail the notes to ann@example.org", {"email"}),
        ("I have 18.9g silver, what is it worth", {"quantity"}),
        ("Find homestays in Paris, I want to stay tomorrow", {"time"}),
        ("Born on August 8, 2008 at 11:00 am", {"time"}),
        ("Tell me a joke about cats", set()),
    ],
)
def test_request_kinds(text: str, kinds: set[str]) -> None:
    assert request_kinds(text) == kinds


def test_request_formats_are_the_extensions_of_its_paths() -> None:
    assert request_formats("summarize it in /root/ppt/apple.pptx and notes.md") == {"pptx", "md"}
    assert request_formats("no files here, v1.2 of it") == set()


def test_kind_index_lists_the_tools_taking_each_kind_the_request_carries(registry: Any) -> None:
    index = KindIndex(registry)
    lists = index.search("I have 18.9g silver, estimate it for today", [], 10)
    tops = sorted(ranked[0][0][2] for ranked in lists)
    assert tops == ["calculate", "get_current_time"]
    # The audio tool's compound parameters take neither a path nor a time.
    assert all(node[2] != "tempo" for ranked in lists for node, _ in ranked)
    assert index.search("Tell me a joke about cats", [], 10) == []


def test_kind_index_ranks_format_match_then_share_of_parameters_then_retrieval(registry: Any) -> None:
    index = KindIndex(registry)
    (deck,) = index.search("Summarize it in a deck at /root/ppt/apple.pptx", [], 10)
    assert deck[0][0][2] == "open_deck" and deck[0][1] == 2.0  # the request's format is the tool's
    (md,) = index.search("Save the report at /root/markdown/report.md", [], 10)
    # No tool names markdown: the tool whose one parameter is a path first, the deck tool (1 of 4) last.
    assert [n[2] for n, _ in md] == ["list_directory", "write_file", "open_deck"]
    (again,) = index.search("Save the report at /root/markdown/report.md", [("tool", "Disk", "write_file")], 10)
    assert again[0][0][2] == "list_directory"  # share of parameters outranks the request's own retrieval


def test_entity_lists_bring_an_implicit_tool_into_the_routing(registry: Any) -> None:
    request = "I have 18.9g silver, please estimate its value based on the price of silver"
    off = RouteSettings(k=2, retrieval="bm25", entity_weight=0.0)
    on = RouteSettings(k=2, retrieval="bm25", entity_weight=1.0)
    (plain,) = gather_candidates([request], registry, None, off)
    assert plain.entity_tools == []
    assert "Calculator" not in [a.name for a in rank(request, plain, registry, off).agents]
    (cands,) = gather_candidates([request], registry, None, on)
    assert [n[2] for n, _ in cands.entity_tools[0]][:1] == ["calculate"]
    assert [a.name for a in rank(request, cands, registry, on).agents] == ["Metals Server", "Calculator"]


def test_clauses_cut_sentences_and_then_joints() -> None:
    text = (
        "Read all the articles in the /root/pdf directory. Compare their similarities and differences, then write "
        "a report. Save it as a Markdown file at /root/markdown/report.md."
    )
    assert clauses(text) == [
        "Read all the articles in the /root/pdf directory",
        "Compare their similarities and differences",
        "write a report",
        "Save it as a Markdown file at /root/markdown/report.md",
    ]
    assert clauses("Draw a flowchart of a sorting algorithm using Mermaid.") == []
    # A piece under three words joins its neighbour instead of standing alone.
    assert clauses("Find the trending repositories. Then, draft an intro.") == [
        "Find the trending repositories",
        "draft an intro",
    ]


def test_clause_lists_are_searched_apart_and_fused_with_their_weight(registry: Any) -> None:
    request = "List the directory entries, then tell me the hour in Tokyo"
    settings = RouteSettings(k=3, retrieval="bm25", clause_weight=0.5, entity_weight=0.0)
    (cands,) = gather_candidates([request], registry, None, settings)
    assert len(cands.clauses) == 2
    assert cands.clauses[0].bm25_tools[0][0][2] == "list_directory"
    assert cands.clauses[1].bm25_agents[0][0][1] == "Clock"
    lists = fusion_lists(cands, settings)
    assert len(lists) == 2 + 2 * 2 and {w for _r, w in lists[2:]} == {0.5}
    assert fusion_lists(cands, RouteSettings(k=3, retrieval="bm25", entity_weight=0.0)) == lists[:2]


def test_field_weighted_bm25_scores_each_field_apart() -> None:
    reg = parse_registry(
        [
            {
                "name": "A",
                "tools": [
                    {"name": "weather_lookup", "description": "Gives conditions."},
                    {"name": "forecast", "description": "Gives conditions.", "examples": ["what is the weather"]},
                ],
            }
        ],
        "fields",
    )
    index = BM25Index(reg)
    _agents, joint = index.search("weather", 5)
    assert {n[2] for n, _ in joint} == {"weather_lookup", "forecast"}
    _agents, by_name = index.search("weather", 5, (1.0, 0.0, 0.0, 0.0))
    assert [n[2] for n, _ in by_name] == ["weather_lookup"]
    _agents, by_examples = index.search("weather", 5, (0.0, 0.0, 0.0, 1.0))
    assert [n[2] for n, _ in by_examples] == ["forecast"]
    with pytest.raises(InputError, match="field weight"):
        index.search("weather", 5, (1.0, 1.0))


def test_new_settings_are_validated() -> None:
    with pytest.raises(InputError, match="negative"):
        RouteSettings(entity_weight=-1.0).checked()
    with pytest.raises(InputError, match="negative"):
        RouteSettings(clause_weight=-0.5).checked()
    with pytest.raises(InputError, match="bm25_fields"):
        RouteSettings(bm25_fields=(1.0, 1.0)).checked()
    assert Candidates().entity_tools == [] and Candidates().clauses == []
