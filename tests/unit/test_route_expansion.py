"""Model-written tool examples (expansion), multi-vector retrieval, and request decomposition."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from doubles.chat import ScriptedChatModel
from nodes.route.entry import merge_routes, route
from nodes.route.expansion import ExpansionJournal, decompose, expand_registry, model_id
from nodes.route.fusion import AgentMatch, RouteResult, RouteSettings, ToolMatch
from nodes.route.indexes import BM25Index, MatrixIndex, StoreIndex
from nodes.route.manifest import register, registered
from nodes.route.mcp import parse_registry
from nodes.route.model import example_record_id, record_id
from stores.errors import InputError
from stores.models import LLM, ModelError, use_chat_model
from stores.usage import track_usage
from stores.vectorstore import get_store
from tests.unit.test_router import SERVERS


def _tools_in(messages: Sequence[BaseMessage]) -> list[str]:
    user = str(messages[-1].content)
    return re.findall(r"^\d+\. ([^:\n]+):", user, flags=re.M)


def _reply(messages: Sequence[BaseMessage]) -> str:
    """Two requests per tool shown, naming the tool so tests can tell them apart."""
    names = _tools_in(messages)
    return json.dumps(
        {
            "agent_tasks": ["tasks of " + str(messages[-1].content).split("\n")[0]],
            "tools": [{"tool": n, "requests": [f"please {n} for me", f"I need {n} now"]} for n in names],
        }
    )


def _expand(registry: Any, journal: ExpansionJournal, model: ScriptedChatModel) -> tuple[Any, Any]:
    with use_chat_model(model):
        llm = LLM("router", cache=False)
        return expand_registry(registry, journal, llm, model_id=model_id(llm))


def test_every_tool_and_agent_gets_examples_once(tmp_path: Path) -> None:
    reg = parse_registry(SERVERS, "demo")
    journal = ExpansionJournal(tmp_path / "x.jsonl")
    model = ScriptedChatModel(default=_reply)
    expanded, stats = _expand(reg, journal, model)
    # One call per agent here (each has at most BATCH tools), all tools answered.
    assert len(model.calls) == len(reg.agents) and not stats.failed
    tool = next(t for t in expanded.tools if t.name == "get_forecast")
    assert tool.examples == ("please get_forecast for me", "I need get_forecast now")
    assert all(a.examples for a in expanded.agents)
    assert stats.tools_written == len(reg.tools) and stats.agents_written == len(reg.agents)
    # The same registry again: every entry comes from the journal, no model call.
    again_model = ScriptedChatModel(default=_reply)
    again, stats2 = _expand(reg, ExpansionJournal(tmp_path / "x.jsonl"), again_model)
    assert again_model.calls == [] and again == expanded
    assert stats2.tools_cached == len(reg.tools) and stats2.calls == 0
    # A changed tool description is written again; its neighbours are not.
    data = json.loads(json.dumps(SERVERS))
    data[0]["tools"][1]["description"] = "Severe weather warnings for a county."
    changed = parse_registry(data, "demo")
    third = ScriptedChatModel(default=_reply)
    _, stats3 = _expand(changed, ExpansionJournal(tmp_path / "x.jsonl"), third)
    assert len(third.calls) == 1 and stats3.tools_written == 1
    assert _tools_in(third.calls[0]) == ["get_alerts"]


def test_a_run_killed_halfway_resumes_where_it_stopped(tmp_path: Path) -> None:
    reg = parse_registry(SERVERS, "demo")
    path = tmp_path / "x.jsonl"
    # The endpoint dies when it reaches the Files Server: the two agents before it are journalled.
    dying = ScriptedChatModel(default=_reply, fail_on="Tool provider: Files Server")
    with pytest.raises(ModelError):
        _expand(reg, ExpansionJournal(path), dying)
    assert len(ExpansionJournal(path)) == 6  # 4 tools + 2 agents
    # A torn last line (killed mid-write) is skipped, and its entry written again.
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "trunc')
    model = ScriptedChatModel(default=_reply)
    expanded, stats = _expand(reg, ExpansionJournal(path), model)
    assert [str(c[-1].content).split("\n")[0] for c in model.calls] == [
        "Tool provider: Files Server",
        "Tool provider: 八字 Server",
        "Tool provider: Helpdesk Agent",
    ]
    assert stats.tools_cached == 4 and all(t.examples for t in expanded.tools)


def test_a_tool_the_reply_missed_is_asked_again_alone(tmp_path: Path) -> None:
    reg = parse_registry(SERVERS[:1], "one")

    def forgetful(messages: Sequence[BaseMessage]) -> str:
        names = _tools_in(messages)
        keep = names if len(names) == 1 else names[:1]
        return json.dumps({"agent_tasks": ["weather"], "tools": [{"tool": n, "requests": [f"do {n}"]} for n in keep]})

    model = ScriptedChatModel(default=forgetful)
    expanded, stats = _expand(reg, ExpansionJournal(tmp_path / "x.jsonl"), model)
    assert len(model.calls) == 2 and _tools_in(model.calls[1]) == ["get_alerts"]
    assert [t.examples for t in expanded.tools] == [("do get_forecast",), ("do get_alerts",)]
    assert stats.tools_written == 2


def test_a_reply_that_never_fits_leaves_the_tools_bare_and_is_retried_next_time(tmp_path: Path) -> None:
    reg = parse_registry(SERVERS[:1], "one")
    path = tmp_path / "x.jsonl"
    expanded, stats = _expand(reg, ExpansionJournal(path), ScriptedChatModel(default="no json here"))
    assert stats.failed and all(t.examples == () for t in expanded.tools)
    assert len(ExpansionJournal(path)) == 0
    model = ScriptedChatModel(default=_reply)
    expanded, _ = _expand(reg, ExpansionJournal(path), model)
    assert len(model.calls) == 1 and all(t.examples for t in expanded.tools)


def test_examples_are_more_vectors_of_their_node_and_survive_the_manifest(tmp_path: Path) -> None:
    reg = parse_registry(SERVERS, "demo")
    expanded, _ = _expand(reg, ExpansionJournal(tmp_path / "x.jsonl"), ScriptedChatModel(default=_reply))
    store = get_store("default")
    first = register(expanded, store)
    assert first.embedded == len(reg.nodes) + expanded.examples
    node = ("tool", "Weather Server", "get_forecast")
    hits = store.get([example_record_id(expanded.doc_id, node, 0)])
    assert hits and hits[0].text == "please get_forecast for me"
    assert expanded.record_nodes[example_record_id(expanded.doc_id, node, 1)] == node
    # The registered copy keeps the examples, so routing by name sees the same registry.
    back = registered("default", "demo")
    assert back == expanded and back.content_hash == expanded.content_hash
    assert register(back, store).cached
    # Registering the plain registry under the same name drops the example records.
    plain = register(reg, store)
    assert plain.deleted == expanded.examples and plain.embedded == 0
    assert store.get([example_record_id(expanded.doc_id, node, 0)]) == []
    assert [hit.id for hit in store.get([record_id(expanded.doc_id, node)])] == [record_id(expanded.doc_id, node)]


def test_a_node_found_through_several_vectors_is_listed_once_at_its_best() -> None:
    reg = parse_registry(SERVERS[:2], "two")
    forecast, alerts = ("tool", "Weather Server", "get_forecast"), ("tool", "Weather Server", "get_alerts")
    price, rate = ("tool", "Finance Server", "stock_price"), ("tool", "Finance Server", "exchange_rate")
    vectors = {
        ("agent", "Weather Server"): [1.0, 0.0, 0.0],
        ("agent", "Finance Server"): [0.0, 1.0, 0.0],
        forecast: [[0.0, 0.0, 1.0], [0.9, 0.1, 0.0], [0.8, 0.0, 0.2]],
        alerts: [0.5, 0.5, 0.0],
        price: [[0.0, 1.0, 0.0], [0.1, 0.9, 0.0]],
        rate: [0.0, 0.7, 0.7],
    }
    ((agents, tools),) = MatrixIndex(reg, vectors).search([[1.0, 0.0, 0.0]], 3)
    assert [n for n, _ in tools] == [forecast, alerts, price]
    assert tools[0][1] == pytest.approx(0.9 / (0.81 + 0.01) ** 0.5, rel=1e-5)
    assert [n for n, _ in agents] == [("agent", "Weather Server"), ("agent", "Finance Server")]


def test_store_search_returns_distinct_nodes_even_when_examples_crowd_the_top(tmp_path: Path) -> None:
    reg = parse_registry(SERVERS, "demo")
    expanded, _ = _expand(reg, ExpansionJournal(tmp_path / "x.jsonl"), ScriptedChatModel(default=_reply))
    store = get_store("default")
    register(expanded, store)
    vector = store.embedder.embed_query("please get_forecast for me")
    ((agents, tools),) = StoreIndex(expanded, store).search([vector], 3)
    assert len({n for n, _ in tools}) == len(tools) == 3
    assert tools[0][0] == ("tool", "Weather Server", "get_forecast")
    assert len(agents) == 3 and len({n for n, _ in agents}) == 3


def test_bm25_reads_the_examples() -> None:
    reg = parse_registry(SERVERS, "demo")
    data = json.loads(json.dumps(SERVERS))
    data[1]["tools"][0]["examples"] = ["how much is one share of ACME worth today"]
    with_examples = parse_registry(data, "demo")
    assert BM25Index(reg).search("share of ACME worth", 5) == ([], [])
    _agents, tools = BM25Index(with_examples).search("share of ACME worth", 5)
    assert tools[0][0] == ("tool", "Finance Server", "stock_price")


def test_examples_must_be_strings() -> None:
    data = json.loads(json.dumps(SERVERS))
    data[0]["tools"][0]["examples"] = [{"not": "text"}]
    with pytest.raises(Exception, match="examples"):
        parse_registry(data, "demo")


def test_decompose_splits_and_falls_back_to_the_whole_request() -> None:
    reply = json.dumps({"tasks": ["read the sales sheet", "plot it as a bar chart", "email the chart to Ann"]})
    with use_chat_model(ScriptedChatModel(default=reply)), track_usage() as usage:
        tasks = decompose("read the sales sheet, plot it and email it to Ann", LLM("router", cache=False))
    assert tasks == ["read the sales sheet", "plot it as a bar chart", "email the chart to Ann"]
    assert usage["router"]["calls"] == 1
    with use_chat_model(ScriptedChatModel(default="I cannot")):
        tasks = decompose("what is the weather", LLM("router", cache=False, max_retries=1))
    assert tasks == ["what is the weather"]


def test_merged_routes_keep_an_agent_that_only_one_task_needs() -> None:
    settings = RouteSettings(k=3, top_tools=3, rrf_k=10.0)

    def result(names: list[str]) -> RouteResult:
        return RouteResult(
            "r",
            [AgentMatch(n, 1.0 / (i + 1)) for i, n in enumerate(names)],
            [ToolMatch(f"{n}_tool", n, 1.0) for n in names],
        )

    whole = result(["Files", "Search", "Maps", "Mail"])
    plot = result(["Charts", "Maps", "Files"])
    # best rank first: Files and Charts are first somewhere (Files also summed higher), then Maps
    # (second in both) before Search (second once).
    merged = merge_routes("r", [whole, plot], settings)
    assert [a.name for a in merged.agents] == ["Files", "Charts", "Maps"]
    assert [t.agent for t in merged.tools] == ["Files", "Charts", "Maps"]
    # summed: Maps (1/12 + 1/13) overtakes Charts (1/11).
    summed = merge_routes("r", [whole, plot], settings, how="sum")
    assert [a.name for a in summed.agents] == ["Files", "Maps", "Charts"]
    assert merge_routes("r", [whole], settings).agents == whole.agents
    with pytest.raises(InputError):
        merge_routes("r", [whole, plot], settings, how="max")


def test_routing_an_expanded_registry_finds_a_tool_through_its_example(tmp_path: Path) -> None:
    reg = parse_registry(SERVERS, "demo")
    expanded, _ = _expand(reg, ExpansionJournal(tmp_path / "x.jsonl"), ScriptedChatModel(default=_reply))
    store = get_store("default")
    register(expanded, store)
    settings = RouteSettings.from_profile("balanced", k=2, retrieval="vector")
    result = route(["I need exchange_rate now"], expanded, store, settings)[0]
    assert result.tools[0].name == "exchange_rate" and result.agents[0].name == "Finance Server"
