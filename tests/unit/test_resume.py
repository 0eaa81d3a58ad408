"""A run that died half-way: the same input again resumes it, another input rolls it back.

The scripted model fails inside a chosen model call (every attempt, the graph's retry included),
so the run stops there: the in-flight step is not saved, every finished step is.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver

from doubles.chat import ScriptedChatModel
from doubles.replies import offload_reply as scripted_reply
from graphs.offload.graph import builder
from nodes.ingest import ingest
from stores.models import ModelError, use_chat_model
from surfaces import cli
from surfaces.resume import plan
from surfaces.serve import create_app
from tests.fakes import quoting

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"
OFFLOADER = "turn it into a note"
"""A phrase of the offloader's prompt: the last model call of a chat turn."""


class Failing(ScriptedChatModel):
    """The scripted chat model; the next ``down`` calls whose prompt holds ``fail_at`` fail as if the endpoint died."""

    fail_at: str = ""
    down: int = 0

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        if self.down and self.fail_at in "\n".join(str(m.content) for m in messages):
            self.down -= 1
            raise ConnectionError("the endpoint went away")
        return super()._generate(messages, stop, run_manager, **kwargs)


def _model(fail_at: str = OFFLOADER) -> Failing:
    return Failing(default=scripted_reply, fail_at=fail_at)


def _answers(model: ScriptedChatModel) -> int:
    """Calls that answered a question (not the offloader, not the canvas)."""
    return sum(
        1 for call in model.calls if "Question:" in str(call[-1].content) and OFFLOADER not in str(call[0].content)
    )


def _ask(graph: Any, question: str, doc_id: str, thread: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    value, config = plan(graph, {"question": question, "doc_id": doc_id}, config)  # type: ignore[arg-type]
    return graph.invoke(value, config)  # type: ignore[no-any-return]


def test_a_chat_turn_that_died_half_way_resumes_when_asked_again() -> None:
    doc_id = ingest(str(FALCON)).doc_id
    graph = builder.compile(checkpointer=InMemorySaver())
    model = _model()
    with use_chat_model(model):
        assert _ask(graph, "Who leads engineering?", doc_id, "s")["turn"] == 1
        model.down = 2  # the offloader step fails, and so does the graph's retry of it
        with pytest.raises(ModelError):
            _ask(graph, "Who manages procurement?", doc_id, "s")
        answered = _answers(model)
        out = _ask(graph, "Who manages procurement?", doc_id, "s")
        assert out["turn"] == 2
        assert _answers(model) == answered  # the answer was finished before the kill: not asked again
        third = _ask(graph, "When do trials start?", doc_id, "s")
    assert third["turn"] == 3
    history = graph.get_state({"configurable": {"thread_id": "s"}}).values["history"]
    assert [h["turn"] for h in history] == [1, 2, 3]
    assert all(h.get("offload_id") or h.get("answer") for h in history)  # every finished exchange kept once


def test_another_question_after_a_dead_turn_rolls_it_back() -> None:
    doc_id = ingest(str(FALCON)).doc_id
    graph = builder.compile(checkpointer=InMemorySaver())
    model = _model()
    with use_chat_model(model):
        assert _ask(graph, "Who leads engineering?", doc_id, "s")["turn"] == 1
        model.down = 2  # the offloader step fails, and so does the graph's retry of it
        with pytest.raises(ModelError):
            _ask(graph, "Who manages procurement?", doc_id, "s")
        out = _ask(graph, "When do trials start?", doc_id, "s")
        assert out["turn"] == 2  # no skipped turn number
        history = graph.get_state({"configurable": {"thread_id": "s"}}).values["history"]
        assert [h["question"] for h in history] == ["Who leads engineering?", "When do trials start?"]
        model.down, model.fail_at = 2, "Question:"
        with pytest.raises(ModelError):
            _ask(graph, "A first question that dies", doc_id, "fresh")
        assert _ask(graph, "Who leads engineering?", doc_id, "fresh")["turn"] == 1


def test_a_langserve_client_resending_the_same_input_resumes_the_run() -> None:
    doc_id = ingest(str(FALCON)).doc_id
    model = _model()
    body = {"input": {"question": "Who manages procurement?", "doc_id": doc_id}}
    body["config"] = {"configurable": {"thread_id": "web-1"}}
    with TestClient(create_app(chat_model=model)) as client:
        model.down = 2
        assert client.post("/offload/invoke", json=body).status_code == 503
        answered = _answers(model)
        again = client.post("/offload/invoke", json=body)
        assert again.status_code == 200, again.text
        assert again.json()["output"]["turn"] == 1 and _answers(model) == answered
        usage = again.json()["output"]["usage"]
        assert sum(counts["calls"] for counts in usage.values()) == len(model.calls)  # each answered call once


def test_the_chat_command_resumes_a_failed_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "q.json"
    script.write_text(json.dumps(["Who manages procurement?"]), encoding="utf-8")
    model = _model()
    args = ["chat", str(FALCON), "--script", str(script), "--session", "cli-1", "-q"]
    with use_chat_model(model):
        model.down = 2
        assert cli.main(args) == 3
        capsys.readouterr()
        assert cli.main(args) == 0
    turns = [json.loads(line)["turn"] for line in capsys.readouterr().out.splitlines()]
    assert turns == [1]


def _chain_reply(messages: Any) -> str:
    if "manager of a chain" in str(messages[0].content):
        return json.dumps({"answer": "Bob Chen", "evidence": ["c1"], "explanation": "He manages procurement [c1]."})
    return quoting([("procurement", "nothing")], otherwise="who manages procurement")(messages)


def test_the_ask_command_resumes_a_dead_chain_without_asking_finished_workers_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["ask", str(FALCON), "Who manages procurement?", "--read-all", "--json", "-q"]
    reference = Failing(default=_chain_reply)
    with use_chat_model(reference):
        assert cli.main(args) == 0
    expected = json.loads(capsys.readouterr().out)
    model = Failing(default=_chain_reply, fail_at="manager of a chain", down=2)  # the manager, and its retry
    with use_chat_model(model):
        assert cli.main([*args, "--thread-id", "ask-1"]) == 3
        workers = len(model.calls)
        assert workers == len(reference.calls) - 1  # every worker answered before the manager died
        capsys.readouterr()
        assert cli.main([*args, "--thread-id", "ask-1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(model.calls) == workers + 1  # only the manager is asked again
    assert out["calls"] == expected["calls"] == len(reference.calls)  # each call counted once
    assert [out[k] for k in ("answer", "read", "citations")] == [expected[k] for k in ("answer", "read", "citations")]


def test_a_langserve_client_resending_a_dead_chain_resumes_it_and_counts_calls_once() -> None:
    doc_id = ingest(str(FALCON)).doc_id
    body: dict[str, Any] = {
        "input": {"question": "Who manages procurement?", "doc_id": doc_id},
        "config": {"configurable": {"read_all": True}},
    }
    reference = Failing(default=_chain_reply)
    model = Failing(default=_chain_reply, fail_at="manager of a chain", down=2)  # the manager, and its retry
    with TestClient(create_app(chat_model=reference)) as client:
        expected = client.post("/chain/invoke", json=body)
    assert expected.status_code == 200, expected.text
    body["config"]["configurable"]["thread_id"] = "web-chain-1"
    with TestClient(create_app(chat_model=model)) as client:
        assert client.post("/chain/invoke", json=body).status_code == 503
        workers = len(model.calls)
        again = client.post("/chain/invoke", json=body)  # what a LangServe client does: the same input
    assert again.status_code == 200, again.text
    assert len(model.calls) == workers + 1  # only the manager is asked again
    out, want = again.json()["output"], expected.json()["output"]
    assert out["calls"] == want["calls"] == len(reference.calls)  # each call counted once
    assert [out[k] for k in ("answer", "read")] == [want[k] for k in ("answer", "read")]


# --- one run at a time per thread ---------------------------------------------------------------
def test_two_turns_at_once_on_one_served_thread_are_one_turn_and_a_409() -> None:
    """A client resending while its first run still runs gets 409, not a second "turn 2" over the first."""
    import threading

    from doubles.replies import offload_chat_model
    from stores.offload import get_offload_store

    model = offload_chat_model(delay=0.3)
    with TestClient(create_app(chat_model=model)) as client:
        doc_id = client.post("/ingest/invoke", json={"input": {"text": FALCON.read_text(encoding="utf-8")}})
        doc = doc_id.json()["output"]["doc_id"]
        config = {"configurable": {"thread_id": "busy"}}

        def turn(question: str, route: str = "invoke") -> Any:
            return client.post(
                f"/offload/{route}", json={"input": {"question": question, "doc_id": doc}, "config": config}
            )

        assert turn("Who leads engineering?").json()["output"]["turn"] == 1
        replies: list[Any] = []
        racing = [threading.Thread(target=lambda q=q: replies.append(turn(q))) for q in ("Who buys?", "Who pays?")]
        for t in racing:
            t.start()
        for t in racing:
            t.join()
        assert sorted(r.status_code for r in replies) == [200, 409], [r.text for r in replies]
        busy = next(r for r in replies if r.status_code == 409)
        assert "one run at a time" in busy.json()["detail"]
        won = next(r for r in replies if r.status_code == 200).json()["output"]
        assert won["turn"] == 2
        # Once the run has ended the thread takes the next turn; each turn's exchange is stored once, in order.
        third = turn("When do the trials start?").json()["output"]
        assert third["turn"] == 3
        items = get_offload_store("default").list(third["session"])
        assert [i.id for i in items if i.role == "exchange"] == ["o1", "o2", "o3"]
        assert won["answer"] in items[1].text
        # A stream on a thread that is busy is refused before it starts.
        calls = len(model.calls)
        holder = threading.Thread(target=lambda: replies.append(turn("Who buys?")))
        holder.start()
        deadline = time.monotonic() + 30
        while len(model.calls) == calls and time.monotonic() < deadline:  # its run holds the thread once it calls
            time.sleep(0.01)
        stream = turn("And the budget?", "stream")
        holder.join()
        assert stream.status_code == 409, stream.text


def test_a_second_command_on_a_busy_session_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stores.checkpoint import thread_lock

    script = tmp_path / "q.json"
    script.write_text(json.dumps(["Who manages procurement?"]), encoding="utf-8")
    with use_chat_model(_model()):
        with thread_lock("s1"):  # another `longdoc chat --session s1` (a process of its own holds a file lock alike)
            code = cli.main(["chat", str(FALCON), "--script", str(script), "--session", "s1", "-q"])
            assert code == 2 and "one run at a time" in capsys.readouterr().err
            ask = ["ask", str(FALCON), "Who?", "--thread-id", "s1", "-q"]
            assert cli.main(ask) == 2
            assert cli.main(["summarize", str(FALCON), "--thread-id", "s1", "-q"]) == 2
        assert cli.main(["chat", str(FALCON), "--script", str(script), "--session", "s1", "-q", "--json"]) == 0
