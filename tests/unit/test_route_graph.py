from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from graphs.route.graph import builder, graph
from nodes.context import field_descriptions
from nodes.route.context import RouteContext
from nodes.route.fusion import RouteSettings
from stores.errors import InputError
from surfaces.cli import EXIT_INPUT, EXIT_OK, main

SERVERS: list[dict[str, Any]] = [
    {
        "name": "Weather Server",
        "description": "Forecasts for any city.",
        "tools": [
            {"name": "get_forecast", "description": "Weather forecast, temperature and rain for a city."},
            {"name": "get_alerts", "description": "Storm and flood alerts for a region."},
        ],
    },
    {
        "name": "Finance Server",
        "description": "Market data.",
        "tools": [{"name": "stock_price", "description": "Current stock price of a ticker symbol."}],
    },
    {
        "name": "Files Server",
        "description": "Read and write files on the local disk.",
        "tools": [{"name": "read_file", "description": "Read the text content of a file at a path."}],
    },
]


@pytest.fixture
def registry_file(tmp_path: Path) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(SERVERS), encoding="utf-8")
    return path


def test_graph_registers_once_and_routes(registry_file: Path) -> None:
    request = {"request": "stock price of a ticker symbol", "registry_path": str(registry_file), "profile": "api"}
    out = graph.invoke(request, context=RouteContext(k=2))
    assert set(out) == {"agents", "tools", "results", "registry", "registry_hash", "embedded", "cached", "warnings"}
    assert out["registry"] == "servers" and out["embedded"] == 7 and out["cached"] is False
    assert out["agents"][0]["name"] == "Finance Server" and len(out["agents"]) == 2
    assert out["agents"][0]["tools"] == ["stock_price"]
    assert out["tools"][0] == {"name": "stock_price", "agent": "Finance Server", "score": out["tools"][0]["score"]}
    assert out["results"][0]["agents"] == out["agents"]
    again = graph.invoke(request, context=RouteContext(k=2))
    assert (again["embedded"], again["cached"]) == (0, True)
    assert again["agents"] == out["agents"]
    # now registered: the name alone is enough
    by_name = graph.invoke({"request": "read a file", "registry": "servers"}, context=RouteContext(k=1))
    assert by_name["cached"] is True and by_name["agents"][0]["name"] == "Files Server"


def test_records_lost_from_the_store_are_embedded_again_after_the_request(registry_file: Path) -> None:
    """The register step takes an unchanged registered copy at its word; routing checks the records."""
    from stores.vectorstore import get_store

    request = {"request": "read a file at a path", "registry_path": str(registry_file)}
    graph.invoke(request, context=RouteContext(k=1))
    get_store("default").delete(["registry-servers:tool:Files Server:read_file"])
    again = graph.invoke(request, context=RouteContext(k=1))
    assert (again["embedded"], again["cached"]) == (1, False)
    assert again["agents"][0]["name"] == "Files Server" and again["agents"][0]["tools"] == ["read_file"]
    assert get_store("default").count(doc_id="registry-servers") == 7


def test_batch_requests_with_a_dict_context(registry_file: Path) -> None:
    out = graph.invoke(
        {"requests": ["weather forecast rain", "read a file at a path"], "registry_path": str(registry_file)},
        context={"k": 1, "namespace": "served", "profile": "balanced", "top_tools": 2},
    )
    assert out["agents"] == [] and out["tools"] == []
    assert [r["request"] for r in out["results"]] == ["weather forecast rain", "read a file at a path"]
    assert [len(r["agents"]) for r in out["results"]] == [1, 1]
    assert all(len(r["tools"]) == 2 for r in out["results"])
    assert out["results"][1]["agents"][0]["name"] == "Files Server"


def test_inline_registry_and_warnings() -> None:
    data = {"agents": SERVERS, "tools": [{"name": "orphan", "description": "nobody owns me", "agent": "Ghost"}]}
    out = graph.invoke(
        {"request": "storm and flood alerts", "registry_data": data, "registry": "inline-team", "retrieval": "hybrid"}
    )
    assert out["registry"] == "inline-team"
    assert out["warnings"] == ["tool 'orphan' belongs to unknown agent 'Ghost'; left out"]
    assert out["agents"][0]["name"] == "Weather Server"


def test_builtin_registry_is_the_default() -> None:
    out = graph.invoke({"request": "summarize a long meeting transcript"}, context=RouteContext(k=1))
    assert out["registry"] == "longdoc" and out["agents"][0]["name"] == "summarize"


def test_progress_events_are_streamed(registry_file: Path) -> None:
    events = [
        chunk
        for chunk in graph.stream({"request": "weather", "registry_path": str(registry_file)}, stream_mode="custom")
    ]
    embed = [e for e in events if e.get("stage") == "embed registry"]
    assert embed and embed[-1]["done"] == embed[-1]["total"] == 7


@pytest.mark.parametrize(
    ("graph_input", "message"),
    [
        ({"request": ""}, "the request is empty"),
        ({"requests": []}, "no request given"),
        ({"requests": ["ok", " "]}, "request #2 is empty"),
        ({"request": "a", "requests": ["b"]}, "not both"),
        ({"request": "a", "registry": "never-registered"}, "no registry named"),
        ({"request": "a", "registry": "bad name"}, "invalid registry name"),
        ({"request": "a", "registry_data": []}, "has no agents"),
        ({"request": "a", "profile": "nope"}, "unknown weight profile"),
        ({"request": "a", "k": 0}, "k must be at least 1"),
    ],
)
def test_bad_input_raises_input_error(graph_input: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        graph.invoke(graph_input)


def test_context_fields_are_described_and_graph_is_named() -> None:
    descriptions = field_descriptions(RouteContext)
    assert all(descriptions[f.name] for f in fields(RouteContext))
    assert {"k", "candidates_factor", "rrf_k", "profile", "retrieval", "bm25_weight"} <= set(descriptions)
    assert graph.name == "route"
    assert set(builder.nodes) == {"register", "route"}


def test_cli_route_json_text_and_errors(registry_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["route", "stock price of a ticker", "--registry", str(registry_file), "--k", "2", "--json", "-q"]
    assert main([*args, "--profile", "api"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"agents", "tools"}
    assert out["agents"][0]["name"] == "Finance Server" and set(out["agents"][0]) >= {"name", "score", "tools"}
    assert main(["route", "weather", "read a file", "--registry", "servers", "--json", "-q"]) == EXIT_OK
    batch = json.loads(capsys.readouterr().out)
    assert [r["request"] for r in batch["results"]] == ["weather", "read a file"]
    assert main(["route", "read a file", "--registry", "servers", "-q", "--k", "1", "--index", "memory"]) == EXIT_OK
    text = capsys.readouterr().out
    assert "registry servers (already registered)" in text and " 1. Files Server" in text
    first = ["--aggregate", "first", "--rrf-k", "60", "--retrieval", "vector", "--tools", "1"]
    assert main(["route", "read a file", "--registry", "servers", "--json", "-q", *first]) == EXIT_OK
    assert len(json.loads(capsys.readouterr().out)["tools"]) == 1
    assert main(["route", "", "-q"]) == EXIT_INPUT
    assert "the request is empty" in capsys.readouterr().err
    assert main(["route", "x", "--registry", str(registry_file.with_name("missing.json")), "-q"]) == EXIT_INPUT
    assert "registry file not found" in capsys.readouterr().err


def test_cli_reports_registry_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dups.json"
    path.write_text(json.dumps([SERVERS[0], SERVERS[0], {"name": "Lonely"}]), encoding="utf-8")
    assert main(["route", "weather", "--registry", str(path), "--json", "-q"]) == EXIT_OK
    captured = capsys.readouterr()
    assert "agent 'Weather Server' is listed twice" in captured.err
    assert {a["name"] for a in json.loads(captured.out)["agents"]} == {"Weather Server", "Lonely"}


def test_langserve_route_endpoint() -> None:
    from fastapi.testclient import TestClient

    from surfaces.serve import create_app

    payload = {
        "input": {"request": "storm and flood alerts", "registry_data": SERVERS, "registry": "served"},
        "config": {"configurable": {"namespace": "api", "k": 2}},
    }
    with TestClient(create_app()) as client:
        assert "route" in client.get("/health").json()["workflows"]
        response = client.post("/route/invoke", json=payload)
        assert response.status_code == 200, response.text
        out = response.json()["output"]
        assert out["registry"] == "served" and len(out["agents"]) == 2
        assert out["agents"][0]["name"] == "Weather Server"
        bad = client.post("/route/invoke", json={"input": {"request": " "}})
        assert bad.status_code == 400 and "empty" in bad.json()["detail"]


def _examples_reply(messages: Any) -> str:
    import re

    names = re.findall(r"^\d+\. ([^:\n]+):", str(messages[-1].content), flags=re.M)
    requests = {"stock_price": ["what is ACME trading at"], "read_file": ["open my notes.txt"]}
    return json.dumps(
        {"agent_tasks": ["stuff"], "tools": [{"tool": n, "requests": requests.get(n, [f"use {n}"])} for n in names]}
    )


def test_expand_writes_examples_once_and_routes_through_them(registry_file: Path) -> None:
    from doubles.chat import ScriptedChatModel
    from stores.models import use_chat_model

    model = ScriptedChatModel(default=_examples_reply)
    request = {"request": "what is ACME trading at", "registry_path": str(registry_file)}
    with use_chat_model(model):
        out = graph.invoke(request, context=RouteContext(k=1, expand=True, retrieval="vector"))
        assert len(model.calls) == 3 and out["expansion"]["tools_written"] == 4
        assert out["embedded"] == 7 + 4 + 3  # nodes, tool examples, agent task kinds
        assert out["agents"][0]["name"] == "Finance Server"
        # The registry registered by name keeps its examples; the file again writes nothing new.
        by_name = graph.invoke({"request": "open my notes.txt", "registry": "servers"}, context=RouteContext(k=1))
        assert by_name["cached"] and by_name["agents"][0]["name"] == "Files Server"
        again = graph.invoke(request, context=RouteContext(k=1, expand=True))
    assert len(model.calls) == 3 and again["cached"] and again["expansion"]["tools_cached"] == 4
    # Without expand the plain registry is registered: the examples' records go.
    plain = graph.invoke(request, context=RouteContext(k=1))
    assert "expansion" not in plain and plain["embedded"] == 0 and not plain["cached"]


def test_decompose_routes_each_task_and_reports_them(registry_file: Path) -> None:
    from doubles.chat import ScriptedChatModel
    from stores.models import use_chat_model

    tasks = {"tasks": ["read the file prices.txt", "get the stock price of ACME"]}
    model = ScriptedChatModel(default=json.dumps(tasks))
    request = {"request": "read prices.txt then check ACME", "registry_path": str(registry_file)}
    with use_chat_model(model):
        out = graph.invoke(request, context=RouteContext(k=2, decompose=True))
    assert len(model.calls) == 1 and out["tasks"] == [tasks["tasks"]]
    assert {a["name"] for a in out["agents"]} == {"Files Server", "Finance Server"}
    with use_chat_model(ScriptedChatModel(default=json.dumps({"tasks": ["read prices.txt then check ACME"]}))):
        single = graph.invoke(request, context=RouteContext(k=2, decompose=True))
    assert single["tasks"] == [["read prices.txt then check ACME"]]


def test_route_settings_come_from_the_context_field_by_field() -> None:
    from nodes.route.fusion import RouteSettings
    from nodes.route.router import route_settings

    values: dict[str, Any] = {
        "k": 7,
        "candidates_factor": 3,
        "rrf_k": 42.0,
        "agent_weight": 2.0,
        "tool_weight": 0.5,
        "retrieval": "bm25",
        "bm25_weight": 0.25,
        "evidence_tools": 1,
        "top_tools": 4,
        "aggregate": "first",
        "index": "memory",
        "fusion": "minmax",
        "entity_weight": 0.0,
        "clause_weight": 0.75,
        "bm25_fields": (1.0, 2.0, 0.0, 1.0),
    }
    ctx = RouteContext(**values)
    settings = route_settings(ctx)
    expected = {f.name: getattr(ctx, f.name) for f in fields(RouteSettings) if f.name != "evidence"}
    assert {f.name: getattr(settings, f.name) for f in fields(RouteSettings) if f.name != "evidence"} == expected
    assert settings.evidence == 1
    # weights left empty come from the profile; the call's own profile, k and retrieval win
    called = route_settings(RouteContext(), "paper", k=2, retrieval="vector")
    assert (called.agent_weight, called.tool_weight, called.k, called.retrieval) == (1.5, 1.0, 2, "vector")


def test_the_route_context_takes_the_routers_defaults() -> None:
    ctx, router = RouteContext(), RouteSettings()
    shared = {f.name for f in fields(RouteSettings)} & {f.name for f in fields(RouteContext)}
    assert {"k", "candidates_factor", "bm25_weight", "top_tools", "rrf_k"} <= shared
    for name in shared - {"agent_weight", "tool_weight"}:  # the context leaves those to its profile
        assert getattr(ctx, name) == getattr(router, name), name
    assert ctx.evidence_tools == router.evidence
