from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodes.route.entry import rank_experts, route, route_request, route_to_expert
from nodes.route.fusion import (
    AgentMatch,
    Candidates,
    RouteSettings,
    build_graph,
    fuse,
    fuse_minmax,
    rank,
    rank_tools,
    walk,
)
from nodes.route.indexes import MatrixIndex, StoreIndex, gather_candidates
from nodes.route.manifest import register, register_agents, registered
from nodes.route.mcp import builtin_registry, load_registry, parse_registry
from stores.errors import InputError
from stores.vectorstore import get_store

SERVERS: list[dict[str, Any]] = [
    {
        "name": "Weather Server",
        "description": "Forecasts and current conditions for any city.",
        "category": "Location",
        "tools": [
            {
                "name": "get_forecast",
                "description": "Weather forecast with temperature and rain for the next days in a city.",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {}}},
            },
            {"name": "get_alerts", "description": "Storm and flood alerts for a region."},
        ],
    },
    {
        "name": "Finance Server",
        "description": "Market data.",
        "category": "Finance",
        "tools": [
            {"name": "stock_price", "description": "Current stock price and volume of a ticker symbol."},
            {"name": "exchange_rate", "description": "Currency exchange rate between two currencies."},
        ],
    },
    {
        "name": "Files Server",
        "description": "Read and write files on the local disk.",
        "category": "File Access",
        "tools": [
            {"name": "read_file", "description": "Read the text content of a file at a path."},
            {"name": "write_file", "description": "Write text content into a file at a path."},
        ],
    },
    {
        "name": "八字 Server",
        "description": "根据出生日期和时间计算八字命盘",
        "category": "Leisure",
        "tools": [{"name": "getBazi", "description": "输入出生时间，返回八字详细信息"}],
    },
    {"name": "Helpdesk Agent", "description": "Answers questions about opening hours and holiday closures."},
]


def _registry(name: str = "demo") -> Any:
    return parse_registry(SERVERS, name)


class CountingEmbed:
    """Wraps the store's embedder and counts the texts it embeds."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.store.embedder.embed_documents(texts)


# --- registry reading and validation ------------------------------------------------------------
def test_parse_servers_format_builds_agents_tools_and_parameters() -> None:
    reg = _registry()
    assert [a.name for a in reg.agents][:3] == ["Weather Server", "Finance Server", "Files Server"]
    assert len(reg.tools) == 7
    forecast = reg.agent("Weather Server").tools[0]
    assert forecast.parameters == ("city", "days")
    assert forecast.node == ("tool", "Weather Server", "get_forecast")
    assert forecast.text.startswith("get_forecast: Weather forecast") and forecast.text.endswith(
        "Parameters: city, days."
    )
    assert reg.agent("Helpdesk Agent").tools == ()
    assert reg.warnings == ()
    with pytest.raises(InputError, match="no agent 'Nobody'"):
        reg.agent("Nobody")


def test_graph_is_bipartite_with_ownership_edges() -> None:
    graph = build_graph(_registry())
    assert graph.number_of_nodes() == 5 + 7 and graph.number_of_edges() == 7
    assert list(graph.successors(("tool", "Finance Server", "stock_price"))) == [("agent", "Finance Server")]
    assert graph.in_degree(("agent", "Helpdesk Agent")) == 0


def test_object_format_with_loose_tools_and_missing_owners() -> None:
    data = {
        "name": "ignored-by-parse",
        "agents": [{"name": "A", "description": "alpha"}, {"name": "B", "description": "beta"}],
        "tools": [
            {"name": "t1", "description": "one", "agent": "A"},
            {"name": "t2", "description": "two", "owner": "Ghost"},
            {"name": "t3", "description": "three"},
            "t4",
        ],
    }
    reg = parse_registry(data, "loose")
    assert [t.name for t in reg.agent("A").tools] == ["t1"]
    assert reg.agent("B").tools == ()
    assert any("unknown agent 'Ghost'" in w for w in reg.warnings)
    assert sum("names no owner" in w for w in reg.warnings) == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "has no agents"),
        ({"agents": []}, "has no agents"),
        ({"something": 1}, "needs an 'agents'"),
        ("servers", "is a list of agents"),
        ([{"description": "no name"}], "agent #1 has no name"),
        ([{"name": "   "}], "agent #1 has no name"),
        ([{"name": "A", "tools": "read"}], "'tools' must be a list"),
        ([{"name": "A", "tools": [{"description": "x"}]}], "has no name"),
        ([{"name": "A", "description": 3}], "must be a string"),
        ([{"name": "A", "tools": [{"name": "t", "input_schema": 5}]}], "input schema"),
        ([{"name": "A", "description": "x"}, {"name": "A", "description": "y"}], "two different agents"),
        ([{"name": "A", "tools": [{"name": "t", "description": "1"}, {"name": "t", "description": "2"}]}], "two"),
    ],
)
def test_bad_registries_raise_clear_errors(data: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_registry(data, "bad")


def test_identical_duplicates_are_kept_once_with_a_warning() -> None:
    agent = {"name": "A", "description": "x", "tools": [{"name": "t", "description": "d"}] * 2}
    reg = parse_registry([agent, agent], "dups")
    assert len(reg.agents) == 1 and len(reg.tools) == 1
    assert len(reg.warnings) == 2


def test_same_tool_name_under_two_agents_is_two_nodes() -> None:
    data = [
        {"name": "A", "tools": [{"name": "search", "description": "search the web"}]},
        {"name": "B", "tools": [{"name": "search", "description": "search papers"}]},
    ]
    reg = parse_registry(data, "shared")
    assert {t.node for t in reg.tools} == {("tool", "A", "search"), ("tool", "B", "search")}
    assert reg.agent("A").text == "A: tools search"


def test_load_registry_file_errors_and_names(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_registry(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="not valid JSON"):
        load_registry(bad)
    path = tmp_path / "my servers.json"
    path.write_text(json.dumps(SERVERS), encoding="utf-8")
    assert load_registry(path).name == "my-servers"
    named = tmp_path / "named.json"
    named.write_text(json.dumps({"name": "team-tools", "agents": SERVERS}), encoding="utf-8")
    assert load_registry(named).name == "team-tools"
    assert load_registry(named, "override").name == "override"
    with pytest.raises(InputError, match="invalid registry name"):
        parse_registry(SERVERS, "bad name")


# --- fusion and walk (pure) ------------------------------------------------------------------
def test_fuse_is_type_weighted_rrf() -> None:
    agents = [(("agent", "A"), 0.9), (("agent", "B"), 0.8)]
    tools = [(("tool", "B", "t"), 0.95), (("tool", "A", "u"), 0.5)]
    fused = dict(fuse([(agents, 1.5), (tools, 1.0)], rrf_k=60))
    assert fused[("agent", "A")] == pytest.approx(1.5 / 61)
    assert fused[("agent", "B")] == pytest.approx(1.5 / 62)
    assert fused[("tool", "B", "t")] == pytest.approx(1.0 / 61)
    # a node in two lists sums its contributions; a zero-weight list is ignored
    both = dict(fuse([(agents, 1.0), (agents[:1], 2.0), (tools, 0.0)], rrf_k=10))
    assert both[("agent", "A")] == pytest.approx(1 / 11 + 2 / 11)
    assert ("tool", "B", "t") not in both
    # ties keep the order of first appearance
    order = [n for n, _ in fuse([(agents, 1.0), (tools, 1.0)], rrf_k=60)]
    assert order == [("agent", "A"), ("tool", "B", "t"), ("agent", "B"), ("tool", "A", "u")]


def test_minmax_fusion_scales_each_list_then_sums_weighted() -> None:
    agents = [(("agent", "A"), 0.9), (("agent", "B"), 0.7), (("agent", "C"), 0.5)]
    bm25 = [(("agent", "C"), 12.0), (("agent", "A"), 4.0)]  # another scale: only the spread counts
    fused = dict(fuse_minmax([(agents, 1.0), (bm25, 2.0)]))
    assert fused[("agent", "A")] == pytest.approx(1.0 + 0.0)
    assert fused[("agent", "B")] == pytest.approx(0.5)
    assert fused[("agent", "C")] == pytest.approx(0.0 + 2.0)
    assert next(n for n, _ in fuse_minmax([(agents, 1.0), (bm25, 2.0)])) == ("agent", "C")
    # a list of equal scores counts 1 for each item; a zero-weight list is ignored
    flat = dict(fuse_minmax([([(("tool", "A", "t"), 0.3), (("tool", "B", "u"), 0.3)], 1.0), (bm25, 0.0)]))
    assert flat == {("tool", "A", "t"): 1.0, ("tool", "B", "u"): 1.0}
    # rank() follows the settings' fusion: RRF ranks A first (rank 1 in one list), min-max ranks C first
    reg = parse_registry([{"name": n, "tools": [{"name": n.lower()}]} for n in "ABC"], "mm")
    cands = Candidates(agents=agents, bm25_agents=bm25)
    rrf = rank("q", cands, reg, RouteSettings(k=1, retrieval="hybrid", bm25_weight=1.5, rrf_k=60, aggregate="first"))
    mm = rank(
        "q", cands, reg, RouteSettings(k=1, retrieval="hybrid", bm25_weight=1.5, fusion="minmax", aggregate="first")
    )
    assert [a.name for a in rrf.agents] == ["A"] and [a.name for a in mm.agents] == ["C"]
    with pytest.raises(InputError, match="unknown fusion"):
        RouteSettings(fusion="max").checked()


def test_weights_decide_between_agent_and_tool_evidence() -> None:
    reg = parse_registry(
        [{"name": "A", "tools": [{"name": "a1"}]}, {"name": "B", "tools": [{"name": "b1"}, {"name": "b2"}]}], "w"
    )
    cands = Candidates(
        agents=[(("agent", "A"), 0.9), (("agent", "B"), 0.1)],
        tools=[(("tool", "B", "b1"), 0.9), (("tool", "B", "b2"), 0.8), (("tool", "A", "a1"), 0.1)],
    )
    favour_agents = rank("q", cands, reg, RouteSettings.from_profile("paper", k=1, rrf_k=60, aggregate="first"))
    favour_tools = rank("q", cands, reg, RouteSettings.from_profile("api", k=1, rrf_k=60, aggregate="first"))
    assert [a.name for a in favour_agents.agents] == ["A"]
    assert [a.name for a in favour_tools.agents] == ["B"]
    assert favour_tools.agents[0].tools == ["b1", "b2"] and favour_tools.agents[0].via == "tool"
    tool_only = rank("q", cands, reg, RouteSettings.from_profile("tools", k=2, aggregate="first"))
    assert [a.name for a in tool_only.agents] == ["B", "A"]
    assert all(a.via == "tool" for a in tool_only.agents)
    agent_only = rank("q", cands, reg, RouteSettings.from_profile("agents", k=2))
    assert agent_only.tools == [] and [a.tools for a in agent_only.agents] == [[], []]


def test_walk_stops_at_k_agents_but_keeps_collecting_evidence() -> None:
    reg = parse_registry([{"name": "A", "tools": ["x", "y"]}, {"name": "B", "tools": ["z"]}, {"name": "C"}], "walk")
    fused = [
        (("tool", "A", "x"), 0.9),
        (("agent", "B"), 0.8),
        (("agent", "C"), 0.7),
        (("tool", "B", "z"), 0.6),
        (("tool", "A", "y"), 0.5),
    ]
    graph = build_graph(reg)
    out = walk(fused, graph, k=2, evidence=5)
    # B's tool only shows up after the walk reached K agents: evidence, but B was reached via its node
    assert out == [AgentMatch("A", 0.9, ["x", "y"], "tool"), AgentMatch("B", 0.8, ["z"], "agent")]
    both = walk([(("tool", "A", "x"), 0.9), (("agent", "A"), 0.8), (("agent", "B"), 0.7)], graph, k=2)
    assert [(m.name, m.via) for m in both] == [("A", "both"), ("B", "agent")]
    assert walk(fused, graph, k=2, evidence=1)[0].tools == ["x"]
    with pytest.raises(InputError, match="unknown aggregate"):
        walk(fused, graph, k=2, aggregate="max")


def test_sum_aggregate_adds_an_agents_node_and_its_best_tool() -> None:
    reg = parse_registry([{"name": "A", "tools": ["x", "y"]}, {"name": "B", "tools": ["z"]}, {"name": "C"}], "sum")
    fused = [
        (("agent", "C"), 1.0),
        (("tool", "A", "x"), 0.9),
        (("agent", "B"), 0.8),
        (("tool", "B", "z"), 0.6),
        (("tool", "A", "y"), 0.5),
        (("agent", "A"), 0.2),
    ]
    out = walk(fused, build_graph(reg), k=2, evidence=5, aggregate="sum")
    assert [(m.name, m.via, m.tools) for m in out] == [("B", "both", ["z"]), ("A", "both", ["x", "y"])]
    assert out[0].score == pytest.approx(0.8 + 0.6) and out[1].score == pytest.approx(0.9 + 0.2)
    assert [t.name for t in rank_tools(fused, 2)] == ["x", "z"]
    assert rank_tools(fused, 0) == []


def test_settings_profiles_and_validation() -> None:
    s = RouteSettings.from_profile("workflow", k=3, rrf_k=10, tool_weight=None)
    assert (s.agent_weight, s.tool_weight, s.k, s.rrf_k, s.candidates) == (1.8, 1.0, 3, 10, 30)
    with pytest.raises(InputError, match="unknown weight profile"):
        RouteSettings.from_profile("nope")
    with pytest.raises(InputError, match="k must be at least 1"):
        RouteSettings.from_profile("paper", k=0)
    with pytest.raises(InputError, match="both 0"):
        RouteSettings.from_profile("paper", agent_weight=0.0, tool_weight=0.0)
    with pytest.raises(InputError, match="unknown retrieval"):
        RouteSettings.from_profile("paper", retrieval="magic")
    with pytest.raises(InputError, match="negative"):
        RouteSettings.from_profile("paper", tool_weight=-1.0)


# --- registration in the store ----------------------------------------------------------------
def test_register_is_idempotent_and_incremental() -> None:
    store = get_store("reg")
    reg = _registry()
    counting = CountingEmbed(store)
    first = register(reg, store, embed=counting)
    assert (first.embedded, first.cached, first.agents, first.tools) == (12, False, 5, 7)
    assert store.count(kind="agent") == 5 and store.count(kind="tool") == 7
    again = register(reg, store, embed=counting)
    assert (again.embedded, again.cached) == (0, True) and len(counting.texts) == 12
    # one tool changed, one agent (with its tools) removed: only the change is embedded
    servers = json.loads(json.dumps(SERVERS))
    servers[1]["tools"][0]["description"] = "Live stock quote of a ticker."
    del servers[2]
    changed = register(parse_registry(servers, "demo"), store, embed=counting)
    assert (changed.embedded, changed.deleted, changed.cached) == (1, 3, False)
    assert counting.texts[-1].startswith("stock_price: Live stock quote")
    assert store.count(doc_id="registry-demo") == 9
    assert registered("reg", "demo").agent("Finance Server").tools[0].description == "Live stock quote of a ticker."


def test_lost_records_are_reembedded_even_with_a_matching_manifest() -> None:
    store = get_store("reg")
    reg = _registry()
    register(reg, store)
    store.delete(["registry-demo:tool:Files Server:read_file"])
    again = register(reg, store)
    assert (again.embedded, again.cached) == (1, False)


def test_registries_and_namespaces_are_isolated() -> None:
    register(_registry("one"), get_store("tenant-a"))
    with pytest.raises(InputError, match="no registry named 'one' in namespace 'tenant-b'"):
        registered("tenant-b", "one")
    assert get_store("tenant-b").count() == 0
    assert registered("tenant-b", "longdoc").name == "longdoc"


# --- routing -----------------------------------------------------------------------------------
def _routed(requests: list[str], **settings: Any) -> list[Any]:
    store = get_store("route")
    reg = _registry()
    register(reg, store)
    return route(requests, reg, store, RouteSettings.from_profile(settings.pop("profile", "paper"), **settings))


def test_route_finds_agent_through_its_tools_and_reports_evidence() -> None:
    (result,) = _routed(["current stock price of a ticker symbol"], profile="api", k=2)
    assert result.agents[0].name == "Finance Server"
    assert "stock_price" in result.agents[0].tools
    assert result.tools[0].name == "stock_price" and result.tools[0].agent == "Finance Server"
    assert result.agents[0].score >= result.agents[1].score
    out = result.to_dict()
    assert set(out["agents"][0]) >= {"name", "score", "tools"} and out["request"].startswith("current")


def test_agent_without_tools_is_reached_by_its_description() -> None:
    (result,) = _routed(["opening hours and holiday closures"], profile="agents", k=1)
    assert [a.name for a in result.agents] == ["Helpdesk Agent"]
    assert result.agents[0].tools == []


def test_bm25_and_hybrid_handle_chinese() -> None:
    for retrieval in ("bm25", "hybrid"):
        (result,) = _routed(["计算出生时间的八字"], retrieval=retrieval, k=1)
        assert result.agents[0].name == "八字 Server", retrieval
    (bm25,) = _routed(["completely unrelated zebra"], retrieval="bm25")
    assert bm25.agents == [] and bm25.tools == []


def test_batch_matches_single_requests_and_k_caps_at_registry_size() -> None:
    requests = ["weather forecast rain in a city", "read the text content of a file"]
    batch = _routed(requests, k=50)
    singles = [_routed([r], k=50)[0] for r in requests]
    assert [b.to_dict() for b in batch] == [s.to_dict() for s in singles]
    assert len(batch[0].agents) == 5
    assert batch[0].agents[0].name == "Weather Server" and batch[1].agents[0].name == "Files Server"


@pytest.mark.parametrize("requests", [[""], ["  "], ["ok", ""], []])
def test_empty_requests_are_refused(requests: list[str]) -> None:
    with pytest.raises(InputError):
        _routed(requests)


def test_store_index_and_matrix_index_agree() -> None:
    store = get_store("agree")
    reg = _registry()
    register(reg, store)
    vectors = {n: store.embedder.embed_documents([t])[0] for n, t in _node_texts(reg)}
    settings = RouteSettings.from_profile("balanced", k=5)
    queries = ["stock price", "weather alerts for a region", "write text into a file"]
    qv = [store.embedder.embed_query(q) for q in queries]
    a = gather_candidates(queries, reg, StoreIndex(reg, store), settings, query_vectors=qv)
    b = gather_candidates(queries, reg, MatrixIndex(reg, vectors), settings, query_vectors=qv)
    for ca, cb in zip(a, b, strict=True):
        assert [n for n, _ in ca.agents] == [n for n, _ in cb.agents]
        assert [n for n, _ in ca.tools] == [n for n, _ in cb.tools]
        assert [s for _, s in ca.tools] == pytest.approx([s for _, s in cb.tools], abs=1e-4)
    with pytest.raises(InputError, match="no vector"):
        MatrixIndex(reg, {})


def _node_texts(reg: Any) -> list[tuple[Any, str]]:
    return [(a.node, a.text) for a in reg.agents] + [(t.node, t.text) for t in reg.tools]


def test_route_request_uses_files_and_the_builtin_registry(tmp_path: Path) -> None:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(SERVERS), encoding="utf-8")
    result = route_request("exchange rate between two currencies", path, namespace="rr", profile="api", k=1)
    assert result.agents[0].name == "Finance Server"
    own = route_request("summarize a long meeting transcript", namespace="rr", k=1)
    assert own.agents[0].name == "summarize"
    assert {a.name for a in builtin_registry().agents} == {"ingest", "ask", "summarize", "chat", "route"}


def test_register_agents_adds_only_new_agents() -> None:
    first = register_agents("self", "team", {"worker-1": "reads chunks about budgets and costs"})
    assert first.embedded == 1
    second = register_agents("self", "team", {"worker-2": "reads chunks about people and roles"})
    assert (second.embedded, second.agents) == (1, 2)
    replaced = register_agents("self", "team", {"worker-3": "reads the schedule"}, replace_all=True)
    assert (replaced.agents, replaced.deleted) == (1, 2)


# --- routing editor questions to experts ---------------------------------------------------------
EXPERTS = {
    "budget": "Knows the budget: costs, euros, funding and spending of the project.",
    "team": "Knows the team: who leads engineering, who manages procurement, people and roles.",
    "schedule": "Knows the schedule: field trials, start and end dates, months.",
}


def test_route_to_expert_picks_the_matching_expert_and_embeds_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert route_to_expert("How many euros does the project cost?", EXPERTS, "docs") == "budget"
    assert route_to_expert("Who leads the engineering team?", EXPERTS, "docs") == "team"
    calls: list[int] = []
    store = get_store("docs")
    original = store.embedder.embed_documents
    monkeypatch.setattr(store.embedder, "embed_documents", lambda texts: calls.append(len(texts)) or original(texts))
    assert route_to_expert("When do the field trials start?", EXPERTS, "docs", retrieval="vector") == "schedule"
    assert calls == []
    ranked = rank_experts("When do the field trials start?", EXPERTS, "docs")
    assert ranked[0][0] == "schedule" and len(ranked) == 3


def test_route_to_expert_edge_cases() -> None:
    assert route_to_expert("anything at all", {"only": "the one expert"}, "docs") == "only"
    assert get_store("docs").count() == 0
    with pytest.raises(InputError, match="no experts"):
        route_to_expert("a question", {}, "docs")
    with pytest.raises(InputError, match="empty"):
        route_to_expert("  ", EXPERTS, "docs")
    with pytest.raises(InputError, match="has no name"):
        route_to_expert("a question", {"": "nameless", "b": "named"}, "docs")


def test_memory_index_reads_the_store_once_and_agrees_with_chroma(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodes.route.indexes import memory_index

    store = get_store("memory")
    reg = _registry()
    requests = ["storm and flood alerts", "exchange rate between currencies", "read a file"]
    with pytest.raises(InputError, match="not fully registered"):
        route(requests, reg, store, RouteSettings(index="memory"))
    register(reg, store)
    in_store = route(requests, reg, store, RouteSettings(index="store"))
    in_memory = route(requests, reg, store, RouteSettings(index="memory"))
    assert [[a.name for a in r.agents] for r in in_memory] == [[a.name for a in r.agents] for r in in_store]
    monkeypatch.setattr(store, "get", lambda *a, **k: pytest.fail("the stored vectors were read again"))
    assert memory_index(reg, store) is memory_index(reg, store)
    with pytest.raises(InputError, match="unknown index"):
        RouteSettings(index="disk").checked()
