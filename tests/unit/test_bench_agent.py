"""bench.agent's flow with a scripted agent model: the tools it is given, how a call is scored, the journal."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from bench import agent
from doubles.chat import ScriptedChatModel
from surfaces.registry import DESCRIPTIONS


def scripted(calls: dict[str, tuple[str, dict]]) -> ScriptedChatModel:
    """An agent model that calls, for each request, the tool ``calls`` gives it (none for the others)."""

    def reply(messages: Sequence[BaseMessage]) -> AIMessage:
        request = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        if request not in calls:
            return AIMessage(content="I cannot tell which tool fits.")
        name, args = calls[request]
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "call-1"}])

    return ScriptedChatModel(default=reply)


def test_the_agent_is_given_the_served_tools_as_an_mcp_client_loads_them() -> None:
    with agent.served_tools() as socket:
        tools = agent.load_tools(socket)
    assert [t.name for t in tools] == ["ingest", "ask", "summarize", "chat", "route", "documents"]
    assert [t.description for t in tools[:-1]] == list(DESCRIPTIONS.values())
    schema = tools[1].args_schema
    assert isinstance(schema, dict) and schema["properties"]["doc_id"]["pattern"] == "^[0-9a-f]{16}$"
    assert len(agent.REQUESTS) >= 20 and {tool for _, tool, _ in agent.REQUESTS} == set(DESCRIPTIONS)
    assert len(agent.REQUESTS) - len(agent.TUNING) >= 20  # held out from the one change made after a run
    assert "9362242a1b2c3d4e" in agent.system_prompt()


def test_a_call_is_right_with_the_expected_tool_and_arguments(tmp_path: Path) -> None:
    falcon, board = agent.CATALOGUE["falcon"][1], agent.CATALOGUE["board"][1]
    requests = [agent.REQUESTS[i][0] for i in range(4)]
    model = scripted(
        {
            requests[0]: ("ask", {"doc_id": falcon, "question": "Who manages procurement?"}),
            requests[1]: ("ask", {"doc_id": falcon, "question": "When was the budget approved?"}),  # wrong document
            requests[2]: ("summarize", {"doc_id": agent.CATALOGUE["contract"][1]}),  # wrong tool
        }
    )
    lines: list[str] = []
    rows = agent.run(model, range(4), tmp_path / "journal.jsonl", "scripted", lines.append)
    assert [r["right"] for r in rows] == [True, False, False, False]
    assert [r["tool_ok"] for r in rows] == [True, True, False, False]
    assert rows[1]["failed_args"] == ["doc_id"] and rows[3]["calls"] == [] and board not in str(rows[1]["calls"])
    assert lines[0].startswith("[ 0] ok  ask") and "BAD" in lines[3]
    report = agent.summary(rows)
    assert report["n"] == 4 and report["accuracy"] == 0.25 and report["tool_accuracy"] == 0.5
    assert report["tool_calls"] == 3 and report["per_tool"]["ask"]["accuracy"] == 0.25

    # A second sitting reads every finished item back from the journal: no model call.
    again = scripted({})
    assert agent.run(again, range(4), tmp_path / "journal.jsonl", "scripted", lines.append) == rows
    assert again.calls == []


def test_a_call_written_as_json_text_counts_only_in_the_lenient_figure() -> None:
    falcon = agent.CATALOGUE["falcon"][1]
    text = (
        f'```json\n{{"name": "ask", "arguments": {{"doc_id": "{falcon}", "question": "Who does procurement?"}}}}\n```'
    )
    row = {"item": 0, "expected": "ask", "calls": [], "text": text, "seconds": 1.0}
    assert agent.text_calls(text) == [{"name": "ask", "args": {"doc_id": falcon, "question": "Who does procurement?"}}]
    assert agent.text_calls("I would use ask.") == [] and agent.text_calls('{"no": "name"}') == []
    report = agent.summary([row])
    assert report["accuracy"] == 0.0 and report["accuracy_with_text_calls"] == 1.0 and report["tool_calls"] == 0
