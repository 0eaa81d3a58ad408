"""Agent check: does a LangGraph agent given longdoc's MCP tools pick the right tool and arguments?

The tools come from the project's own MCP route (:mod:`deploy.mcp`, served here on a unix socket from
:mod:`deploy.dev`) through ``langchain-mcp-adapters``, as any agent loads them: their names,
descriptions and input schemas are all the agent knows of them. The agent is a LangGraph graph
(model -> tools, the model bound to the tools) stopped before its tools run: what is measured is the
first tool call it makes for each of :data:`REQUESTS`, varied requests a user of an agent would send
("what does report X say about ...", "summarize ...", "which tool should I use to ...", "keep this
note ..."), with a catalogue of the user's documents in the system prompt.

A request counts as right when the call names the expected tool and its arguments pass every check
of the item (the document's id, the words the question or focus must carry, a length near the one
asked, ...); the tool alone is reported too. Every run is journalled
(``bench/results/agent_journal.jsonl``), so a killed run resumes; nothing was tuned on these items
(the descriptions and the prompt were written before the first run).

    flock /tmp/longdoc-model.lock .venv/bin/python -m bench.agent            # the bundled model
    .venv/bin/python -m bench.agent --items 0:5 --out /tmp/agent.json        # a part
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool

import prompts
from bench import journal

RESULTS = Path(__file__).resolve().parent / "results"

CATALOGUE = {
    "falcon": ("Project Falcon status report", "9362242a1b2c3d4e"),
    "board": ("Q3 board meeting transcript", "5be1c0ffee123456"),
    "contract": ("Supplier contract with Sunpump Ltd (PDF)", "0a1b2c3d4e5f6071"),
}
"""The documents the user has ingested, as the agent is told: name and doc_id."""

Check = Callable[[Any], bool]


def words(*options: str) -> Check:
    """The argument is a text holding at least one of ``options`` (any case)."""
    return lambda value: isinstance(value, str) and any(o.lower() in value.lower() for o in options)


def doc(name: str) -> Check:
    """The argument is the doc_id of catalogue document ``name``."""
    return lambda value: value == CATALOGUE[name][1]


def near(number: int, tolerance: int = 20) -> Check:
    """The argument is a number within ``tolerance`` of ``number``."""
    return lambda value: isinstance(value, int | float) and abs(value - number) <= tolerance


def equals(expected: Any) -> Check:
    return lambda value: value == expected


REQUESTS: list[tuple[str, str, dict[str, Check]]] = [
    # ask: one fact or question about a named document
    (
        "What does the Project Falcon report say about who manages procurement?",
        "ask",
        {"doc_id": doc("falcon"), "question": words("procurement")},
    ),
    (
        "In the Q3 board meeting, when was the budget approved?",
        "ask",
        {"doc_id": doc("board"), "question": words("budget")},
    ),
    (
        "Who signed the supplier contract, and how long does it run?",
        "ask",
        {"doc_id": doc("contract"), "question": words("sign", "long", "run", "term")},
    ),
    (
        "According to the Falcon report, when do the field trials start?",
        "ask",
        {"doc_id": doc("falcon"), "question": words("trial")},
    ),
    (
        "Find what Maria said about hiring in the board meeting.",
        "ask",
        {"doc_id": doc("board"), "question": words("hiring", "hire")},
    ),
    (
        "What penalty does the Sunpump contract set for late delivery?",
        "ask",
        {"doc_id": doc("contract"), "question": words("penalt", "late")},
    ),
    (
        "Does the Falcon status report mention any risk from dust?",
        "ask",
        {"doc_id": doc("falcon"), "question": words("dust")},
    ),
    (
        "How much money is the supplier contract worth in total?",
        "ask",
        {"doc_id": doc("contract"), "question": words("worth", "total", "money", "amount", "value")},
    ),
    # summarize: the whole document, or what it says about a topic, at a length
    ("Summarize the Q3 board meeting transcript.", "summarize", {"doc_id": doc("board")}),
    (
        "Give me an overview of the Project Falcon report in about 50 words.",
        "summarize",
        {"doc_id": doc("falcon"), "length": near(50)},
    ),
    (
        "Summarize what the board meeting decided about the budget.",
        "summarize",
        {"doc_id": doc("board"), "query": words("budget")},
    ),
    (
        "Write a bullet-point summary of the supplier contract.",
        "summarize",
        {"doc_id": doc("contract"), "format": equals("bullets")},
    ),
    ("What are the main points of the Falcon report, overall?", "summarize", {"doc_id": doc("falcon")}),
    (
        "Summarize the supplier's obligations in the Sunpump contract in 80 words.",
        "summarize",
        {"doc_id": doc("contract"), "query": words("obligation"), "length": near(80)},
    ),
    # ingest: a document given in the request
    (
        "Please add this to my documents: 'Meeting notes, 4 May: the pump passed the pressure test.'",
        "ingest",
        {"text": words("pressure test")},
    ),
    (
        "Keep this memo so I can ask about it later: 'From June, all field reports go to Ana Ruiz.'",
        "ingest",
        {"text": words("Ana Ruiz")},
    ),
    (
        "Index the following document under the title 'Site visit': The site has three wells and one pump house.",
        "ingest",
        {"text": words("three wells"), "title": words("site visit")},
    ),
    # route: which tool or agent fits a task (among a registry of MCP servers)
    ("Which tool should I use to plot monthly sales from an Excel file?", "route", {"request": words("excel", "plot")}),
    ("Which agent can translate a PDF into Spanish?", "route", {"request": words("translat")}),
    ("I need to post a message to my team's Slack channel: which tool fits?", "route", {"request": words("slack")}),
    ("What tool would search GitHub issues for a crash report?", "route", {"request": words("github")}),
    # chat: a conversation over several turns
    (
        "Let's talk about the Falcon report over a few questions. First: what is the project's goal?",
        "chat",
        {"doc_id": doc("falcon"), "question": words("goal")},
    ),
    (
        "Start a conversation about the board meeting transcript; to begin, who attended?",
        "chat",
        {"doc_id": doc("board"), "question": words("attend")},
    ),
    (
        "I'd like to discuss the supplier contract with you step by step. Who are the parties?",
        "chat",
        {"doc_id": doc("contract"), "question": words("part")},
    ),
    # added with the MCP schemas' field order (items 0-8 had been seen): held out like 9-23
    (
        "Does the Sunpump contract allow either side to end it early?",
        "ask",
        {"doc_id": doc("contract"), "question": words("end", "termin")},
    ),
    (
        "In the Falcon report, who leads the engineering team?",
        "ask",
        {"doc_id": doc("falcon"), "question": words("engineer", "lead")},
    ),
    ("Summarize the supplier contract in three sentences for my manager.", "summarize", {"doc_id": doc("contract")}),
    (
        "Give me a 100-word summary of what the Falcon report says about the budget.",
        "summarize",
        {"doc_id": doc("falcon"), "query": words("budget"), "length": near(100)},
    ),
    (
        "Save this as a document: 'Pump test on 9 May: flow rate 40 litres per minute.'",
        "ingest",
        {"text": words("flow rate")},
    ),
    ("Which tool can turn an audio recording into text?", "route", {"request": words("audio", "transcri")}),
    ("Is there an agent that books meeting rooms in Outlook?", "route", {"request": words("outlook", "meeting")}),
    (
        "I want to talk with you about the board meeting; first, what was the main decision?",
        "chat",
        {"doc_id": doc("board"), "question": words("decision", "decide")},
    ),
]
"""(request, the tool that fits it, checks of its arguments): 10 ask, 8 summarize, 4 ingest, 6 route, 4 chat.

Items 0-8 were the tuning part: seen with the first schemas, after which the MCP tools list the document and
the request first (:data:`deploy.mcp.FIRST`); items 9-31 are held out."""

TUNING = range(0, 9)
"""The items seen before the one change made after a run (the order of the MCP schemas' fields)."""


def system_prompt(catalogue: dict[str, tuple[str, str]] | None = None) -> str:
    """The agent's system prompt naming the documents of ``catalogue`` (:data:`CATALOGUE` by default)."""
    documents = "\n".join(f"- {title}: doc_id {doc_id}" for title, doc_id in (catalogue or CATALOGUE).values())
    return prompts.render("agent/system", "en", documents=documents)


@contextlib.contextmanager
def served_tools() -> Iterator[Path]:
    """The project's MCP route (:mod:`deploy.dev`) served on a unix socket for the life of the block."""
    import uvicorn

    from deploy.dev import app

    with tempfile.TemporaryDirectory(prefix="longdoc-mcp-") as folder:
        socket = Path(folder) / "mcp.sock"
        # The asyncio loop, not uvloop: uvloop keeps the socket class of the moment it is first imported, and a
        # test run imports it here with sockets blocked, which would then refuse every later loopback server.
        config = uvicorn.Config(app, uds=str(socket), log_level="warning", lifespan="on", loop="asyncio")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="mcp-server", daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the MCP route did not start")
            time.sleep(0.05)
        try:
            yield socket
        finally:
            server.should_exit = True
            thread.join(timeout=30)


def load_tools(socket: Path) -> list[BaseTool]:
    """The served tools through ``langchain-mcp-adapters``, as an agent loads them."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    def client(
        headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None, auth: httpx.Auth | None = None
    ) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(uds=str(socket))
        return httpx.AsyncClient(transport=transport, headers=headers, timeout=timeout or 60, auth=auth)

    server = {"url": "http://localhost/mcp", "transport": "streamable_http", "httpx_client_factory": client}
    return asyncio.run(MultiServerMCPClient({"longdoc": server}).get_tools())  # type: ignore[dict-item]


def agent_graph(model: BaseChatModel, tools: Sequence[BaseTool], stop_before_tools: bool = True) -> Any:
    """A tool-calling agent (model -> tools -> model ...), compiled to stop before its tools run (by default)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver(), interrupt_before=["tools"] if stop_before_tools else None)


def first_call(graph: Any, request: str, thread: str) -> dict[str, Any]:
    """The agent's first reply to ``request``: its tool calls (name and arguments) and its text."""
    value = {"messages": [SystemMessage(system_prompt()), HumanMessage(request)]}
    out = graph.invoke(value, {"configurable": {"thread_id": thread}})
    reply = out["messages"][-1]
    calls = [{"name": c["name"], "args": c["args"]} for c in getattr(reply, "tool_calls", [])]
    text = reply.content if isinstance(reply, AIMessage) and isinstance(reply.content, str) else ""
    return {"calls": calls, "text": text[:2000]}


def text_calls(text: str) -> list[dict[str, Any]]:
    """A tool call the model wrote as JSON in its text (``{"name": ..., "arguments": {...}}``, in a code block or
    not) instead of as a tool call: what an agent that reads calls from text would run."""
    from langchain_core.utils.json import parse_json_markdown

    try:
        value = parse_json_markdown(text)
    except (ValueError, TypeError):
        return []
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return []
    args: dict[str, Any] = next(
        (value[k] for k in ("arguments", "args", "parameters") if isinstance(value.get(k), dict)), {}
    )
    return [{"name": value["name"], "args": args}]


def score(item: int, reply: dict[str, Any], *, from_text: bool = False) -> dict[str, Any]:
    """Whether the first call of ``reply`` is the expected tool, with arguments that pass the item's checks
    (``from_text``: a call written as JSON in the reply's text counts too, when it made none)."""
    _, tool, checks = REQUESTS[item]
    calls = reply["calls"] or (text_calls(reply.get("text", "")) if from_text else [])
    call: dict[str, Any] = calls[0] if calls else {"name": "", "args": {}}
    failed = [key for key, check in checks.items() if not check(call["args"].get(key))]
    tool_ok = call["name"] == tool
    return {"tool_ok": tool_ok, "right": tool_ok and not failed, "failed_args": failed if tool_ok else []}


def setup_digest(tools: Sequence[BaseTool], model_name: str) -> str:
    """What a run depends on besides its item: the prompt, the tools as served, the model."""
    shown = [{"name": t.name, "description": t.description, "schema": t.args_schema} for t in tools]
    return journal.digest([system_prompt(), json.dumps(shown, sort_keys=True, default=str), model_name])


def run(
    model: BaseChatModel, items: Sequence[int], journal_path: Path, model_name: str, log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Each item's row (read back from the journal when it holds one for this setup)."""
    with served_tools() as socket:
        tools = load_tools(socket)
    graph = agent_graph(model, tools)
    setup = setup_digest(tools, model_name)
    done = journal.read(journal_path)
    rows = []
    for item in items:
        key = f"{item}:{setup}"
        row = done.get(key)
        if row is None:
            started = time.monotonic()
            reply = first_call(graph, REQUESTS[item][0], f"agent-{item}")
            row = {
                "key": key,
                "item": item,
                "request": REQUESTS[item][0],
                "expected": REQUESTS[item][1],
                **reply,
                **score(item, reply),
                "seconds": round(time.monotonic() - started, 1),
            }
            journal.append(journal_path, row)
        rows.append(row)
        got = row["calls"][0]["name"] if row["calls"] else "(no call)"
        log(f"[{item:2d}] {'ok ' if row['right'] else 'BAD'} {row['expected']:9s} <- {got:9s} {row['request'][:60]}")
    return rows


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy over ``rows`` (scored again from each row's reply), overall and per expected tool; and the same
    counting calls the model wrote as JSON in its text."""
    strict = [score(r["item"], r) for r in rows]
    lenient = [score(r["item"], r, from_text=True) for r in rows]
    by_tool: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_tool.setdefault(row["expected"], []).append(i)

    def share(scores: Sequence[dict[str, Any]], key: str, part: Sequence[int] | None = None) -> float:
        chosen = [scores[i] for i in (range(len(scores)) if part is None else part)]
        return round(sum(s[key] for s in chosen) / len(chosen), 3) if chosen else 0.0

    return {
        "n": len(rows),
        "accuracy": share(strict, "right"),
        "tool_accuracy": share(strict, "tool_ok"),
        "tool_calls": sum(bool(r["calls"]) for r in rows),
        "accuracy_with_text_calls": share(lenient, "right"),
        "tool_accuracy_with_text_calls": share(lenient, "tool_ok"),
        "per_tool": {
            t: {
                "n": len(part),
                "accuracy": share(strict, "right", part),
                "accuracy_with_text_calls": share(lenient, "right", part),
                "tool_accuracy_with_text_calls": share(lenient, "tool_ok", part),
            }
            for t, part in sorted(by_tool.items())
        },
        "median_seconds": sorted(r["seconds"] for r in rows)[len(rows) // 2] if rows else 0.0,
    }


def transcript(model: BaseChatModel, url: str, request: str, document: str) -> str:
    """The agent run to its end against a server's MCP tools (``url``, e.g. ``make dev``): the conversation as
    Markdown, every tool result as the JSON it came as. ``document`` is ingested first, as the catalogue's
    Falcon report."""
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langgraph_sdk import get_sync_client

    ingested: Any = get_sync_client(url=url).runs.wait(None, "ingest", input={"text": document})
    doc_id = str(ingested["doc_id"])
    catalogue = {**CATALOGUE, "falcon": (CATALOGUE["falcon"][0], doc_id)}
    server = {"url": f"{url}/mcp", "transport": "streamable_http"}
    tools = asyncio.run(MultiServerMCPClient({"longdoc": server}).get_tools())  # type: ignore[dict-item]
    graph = agent_graph(model, tools, stop_before_tools=False)
    value = {"messages": [SystemMessage(system_prompt(catalogue)), HumanMessage(request)]}
    out = asyncio.run(graph.ainvoke(value, {"configurable": {"thread_id": "transcript"}}))  # MCP tools run async
    lines = []
    for message in out["messages"][1:]:
        content = (
            message.content
            if isinstance(message.content, str)
            else "".join(str(b.get("text", "")) for b in message.content if isinstance(b, dict))
        )
        if message.type == "tool":
            lines.append(f"**tool {message.name}** returned:\n\n```json\n{content}\n```")
        elif getattr(message, "tool_calls", None):
            calls = "; ".join(f"`{c['name']}({json.dumps(c['args'], ensure_ascii=False)})`" for c in message.tool_calls)
            lines.append(f"**agent** calls {calls}")
        else:
            lines.append(f"**{'user' if message.type == 'human' else 'agent'}**: {content}")
    return "\n\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent", description=__doc__.splitlines()[0])
    parser.add_argument("--items", default=f"0:{len(REQUESTS)}", help="items to run, as start:end")
    parser.add_argument("--journal", type=Path, default=RESULTS / "agent_journal.jsonl")
    parser.add_argument("--out", type=Path, default=RESULTS / "agent.json")
    parser.add_argument("--max-tokens", type=int, default=400, help="most tokens of the agent's reply")
    parser.add_argument("--transcript", metavar="URL", help="run item --items' first to its end on this server")
    args = parser.parse_args(argv)
    start, end = (int(x) for x in args.items.split(":"))
    # llama.cpp sends no progress while it reads a tool-calling request (the tools' schemas make a
    # prompt of a few thousand tokens): wait for the reply as long as that takes on 2 cores
    os.environ.setdefault("LONGDOC_READ_TIMEOUT", "600")
    from stores.models import chat_model, resolve_role

    model_name = resolve_role("router").model
    model = chat_model("router", max_tokens=args.max_tokens)
    if args.transcript:
        document = (Path(__file__).resolve().parents[1] / "notebooks" / "data" / "falcon.md").read_text("utf-8")
        print(transcript(model, args.transcript, REQUESTS[start][0], document))
        return 0
    rows = run(model, range(start, min(end, len(REQUESTS))), args.journal, model_name)
    held_out = [r for r in rows if r["item"] not in TUNING]
    tuning = [r for r in rows if r["item"] in TUNING]
    report = {
        "benchmark": "agent",
        "model": model_name,
        "items": f"{start}:{end}",
        "held_out": summary(held_out),
        "tuning": summary(tuning),
        "all": summary(rows),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
