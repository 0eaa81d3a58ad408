"""A thread's runs: each input names its documents afresh, and every output lists them (tag, id, title, source).

Sources are shown relative to the server's ingest root; a document keeps its tag for the life of a thread.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver

from nodes.ingest import ingest
from stores.documents import find_document
from stores.errors import InputError
from stores.models import use_chat_model
from surfaces import registry
from tests.unit.test_collection import _chain_model, write_docs
from tests.unit.test_scaleout_chat import Runs, a2a_turn, deployed, loopback, tool_call  # noqa: F401 - fixtures

QUESTION = "How many urchins did sea otter 7 eat?"
CONTEXT = {"chunk_size": 120, "chunk_overlap": 20}


def _model(workflow: str) -> Any:
    from doubles.replies import offload_chat_model, summarize_chat_model

    if workflow == "ask":
        return _chain_model("c1.3")
    return summarize_chat_model() if workflow == "summarize" else offload_chat_model()


def _request(workflow: str) -> dict[str, Any]:
    """What a run of ``workflow`` is asked, less the documents."""
    return {"length": 40, "query": "sea otters"} if workflow == "summarize" else {"question": QUESTION}


def _context(workflow: str) -> dict[str, Any]:
    return {**CONTEXT, "max_rounds": 1} if workflow == "summarize" else dict(CONTEXT)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ingest root holding folder ``team`` (otters, pumps) and ``notes/budget.md``."""
    root = tmp_path / "root"
    write_docs(root / "team", ("otters.md", "pumps.md"))
    write_docs(root / "notes", ("budget.md",))
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(root))
    return root


NAMINGS = {"file": ["Otters"], "folder": ["Otters", "Pumps"], "doc_ids": ["Otters", "Pumps"]}
NAMINGS["whole_namespace"] = NAMINGS["folder"]
"""How an input names its documents, and the titles of those it names."""


def _named(naming: str, root: Path) -> dict[str, Any]:
    """The input fields naming the documents (paths relative to ``root``: the servers resolve them)."""
    if naming in ("file", "folder"):
        return {"path": "team/otters.md" if naming == "file" else "team"}
    ids = [ingest(str(root / "team" / name), **CONTEXT).doc_id for name in ("pumps.md", "otters.md")]
    return {"doc_ids": ids} if naming == "doc_ids" else {"whole_namespace": True}


def _check_documents(out: dict[str, Any], titles: list[str], root: Path) -> None:
    """``out`` lists the documents named by ``titles``, sources relative to ``root``; ``doc_id`` only for one."""
    documents = out["documents"]
    assert sorted(d["title"] for d in documents) == titles
    assert all(d["source"] == f"team/{d['title'].lower()}.md" for d in documents), documents
    assert sorted(d["tag"] for d in documents) == list(range(1, len(titles) + 1))
    assert out["doc_id"] == (documents[0]["doc_id"] if len(titles) == 1 else "")


# --- a second input on one thread ---------------------------------------------------------------------
@pytest.mark.parametrize("naming", list(NAMINGS))
@pytest.mark.parametrize("workflow", ["ask", "summarize", "chat"])
def test_a_thread_takes_a_second_input_naming_its_documents_over_langserve(
    root: Path, workflow: str, naming: str
) -> None:
    from surfaces.serve import create_app

    named, titles = _named(naming, root), NAMINGS[naming]
    body = {
        "input": {**_request(workflow), **named},
        "config": {"configurable": {"thread_id": f"t-{workflow}-{naming}", **_context(workflow)}},
    }
    with TestClient(create_app(chat_model=_model(workflow))) as client:
        first = client.post(f"/{workflow}/invoke", json=body)
        second = client.post(f"/{workflow}/invoke", json=body)
    assert first.status_code == 200, first.text
    assert second.status_code == 200, second.text
    for response in (first, second):
        _check_documents(response.json()["output"], titles, root)
        assert str(root) not in response.text
    assert second.json()["output"]["documents"] == first.json()["output"]["documents"]


@pytest.mark.parametrize("workflow", ["ask", "summarize", "chat"])
def test_each_run_of_a_thread_reads_what_its_input_names_and_tags_stay(root: Path, workflow: str) -> None:
    graph = registry.compile_with(workflow, InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    budget = ingest(str(root / "notes" / "budget.md"), **CONTEXT).doc_id

    def run(**named: Any) -> dict[str, Any]:
        with use_chat_model(_model(workflow)):
            return dict(graph.invoke({**_request(workflow), **named}, config, context=_context(workflow)))

    folder = run(path=str(root / "team"))
    tags = {d["doc_id"]: d["tag"] for d in folder["documents"]}
    assert sorted(d["title"] for d in folder["documents"]) == ["Otters", "Pumps"] and folder["doc_id"] == ""
    again = run(path=str(root / "team"))
    assert {d["doc_id"]: d["tag"] for d in again["documents"]} == tags
    otters = next(d for d in folder["documents"] if d["title"] == "Otters")
    one = run(path=str(root / "team" / "otters.md"))
    assert one["doc_id"] == otters["doc_id"] and one["documents"] == [otters]
    assert all(c.startswith("c") for c in (one.get("citations") or []))  # one document: plain labels
    same = run()  # naming nothing: the thread's last documents
    assert same["doc_id"] == otters["doc_id"] and same["documents"] == [otters]
    mixed = run(doc_ids=[budget, otters["doc_id"]])
    assert {d["doc_id"]: d["tag"] for d in mixed["documents"]} == {budget: 3, otters["doc_id"]: otters["tag"]}
    assert mixed["doc_id"] == ""
    with pytest.raises(InputError, match="give exactly one of"):
        run(doc_id=budget, path=str(root / "team"))  # two names in one input are still refused


@pytest.mark.parametrize("naming", ["file", "folder"])
def test_a_chat_keeps_its_documents_until_an_input_names_others(root: Path, naming: str) -> None:
    graph = registry.compile_with("chat", InMemorySaver())
    config = {"configurable": {"thread_id": "c1"}}
    path = str(root / ("team/otters.md" if naming == "file" else "team"))
    outs = []
    with use_chat_model(_model("chat")):
        for named in ({"path": path}, {"path": path}, {}):  # the third turn names nothing: the session's documents
            outs.append(graph.invoke({"question": QUESTION, **named}, config, context=CONTEXT))
        other = graph.invoke({"question": QUESTION, "path": str(root / "notes")}, config, context=CONTEXT)
    assert [o["turn"] for o in outs] == [1, 2, 3] and other["turn"] == 4
    assert [(d["title"], d["tag"]) for d in other["documents"]] == [("Budget", len(NAMINGS[naming]) + 1)]
    assert outs[0]["documents"] == outs[1]["documents"] == outs[2]["documents"]
    for out in outs:
        _check_documents(out, NAMINGS[naming], root)
        assert out["messages"][-1].additional_kwargs["longdoc"]["documents"] == outs[0]["documents"]


@pytest.mark.parametrize("surface", ["langserve", "graph"])
def test_a_chat_turn_naming_another_file_answers_from_it(root: Path, surface: str) -> None:
    from surfaces.serve import create_app

    turns = [
        {"question": QUESTION, "path": "team/otters.md"},
        {"question": "What did the board approve for batch 5?", "path": "notes/budget.md"},
    ]
    if surface == "langserve":
        config = {"configurable": {"thread_id": "t-chat-two-files", **CONTEXT}}
        with TestClient(create_app(chat_model=_model("chat"))) as client:
            answers = [client.post("/chat/invoke", json={"input": t, "config": config}) for t in turns]
        assert all(r.status_code == 200 for r in answers), answers[-1].text
        outs = [r.json()["output"] for r in answers]
        sources = [o["messages"][-1]["additional_kwargs"]["longdoc"]["sources"] for o in outs]
    else:
        graph = registry.compile_with("chat", InMemorySaver())
        with use_chat_model(_model("chat")):
            outs = [
                graph.invoke(
                    {**t, "path": str(root / t["path"])}, {"configurable": {"thread_id": "c2"}}, context=CONTEXT
                )
                for t in turns
            ]
        sources = [o["messages"][-1].additional_kwargs["longdoc"]["sources"] for o in outs]
    otters, budget = (find_document("default", o["doc_id"]) for o in outs)
    assert otters is not None and budget is not None and otters.title == "Otters" and budget.title == "Budget"
    assert [d["tag"] for o in outs for d in o["documents"]] == [1, 2] and outs[1]["turn"] == 2
    assert outs[1]["citations"] and {s["doc_id"] for s in sources[1]} == {budget.doc_id}
    assert all("board approved" in s["quote"] for s in sources[1])


def test_a_file_dropped_into_a_langserve_chat_mid_conversation_is_read(root: Path) -> None:
    from surfaces.serve import create_app

    config = {"configurable": {"thread_id": "t-chat-dropped", **CONTEXT}}
    dropped = {"type": "text-plain", "text": "Herons wade in shallow water.", "mime_type": "text/plain"}
    words = {"type": "text", "text": "Where do herons wade?"}
    turns = [
        {"question": QUESTION, "path": "team/otters.md"},
        {"messages": [{"type": "human", "content": [words, dropped]}]},
    ]
    with TestClient(create_app(chat_model=_model("chat"))) as client:
        answers = [client.post("/chat/invoke", json={"input": t, "config": config}) for t in turns]
    assert all(r.status_code == 200 for r in answers), answers[-1].text
    out = answers[1].json()["output"]
    herons = find_document("default", out["doc_id"])
    assert herons is not None and out["turn"] == 2 and [d["tag"] for d in out["documents"]] == [2]
    sources = out["messages"][-1]["additional_kwargs"]["longdoc"]["sources"]
    assert sources and {s["doc_id"] for s in sources} == {herons.doc_id} and "Herons wade" in sources[0]["quote"]


# --- the outputs of every surface ---------------------------------------------------------------------
@pytest.mark.parametrize("naming", ["file", "folder"])
@pytest.mark.parametrize("command", ["ask", "summarize", "chat"])
def test_the_command_lines_json_lists_the_documents(
    root: Path, command: str, naming: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from surfaces.cli import main

    path = str(root / ("team/otters.md" if naming == "file" else "team"))
    script = root / "questions.txt"
    script.write_text(QUESTION + "\n", encoding="utf-8")
    words = {"ask": [path, QUESTION], "summarize": [path, "--length", "40"], "chat": [path, "--script", str(script)]}
    with use_chat_model(_model(command)):
        assert main([command, *words[command], "--json", "-q"]) == 0
    printed = capsys.readouterr().out
    out = json.loads(printed.strip().splitlines()[-1])
    titles = NAMINGS[naming]
    assert sorted(d["title"] for d in out["documents"]) == titles
    assert all(d["source"] == f"team/{d['title'].lower()}.md" for d in out["documents"])
    assert str(root) not in printed


def test_mcp_and_a2a_results_list_the_documents_with_their_tags(
    root: Path,
    deployed: tuple[TestClient, Runs],  # noqa: F811 - the fixture (after the root: the door reads it)
) -> None:
    http, runs = deployed
    results = []
    for tool in ("ask", "chat"):
        runs.model = (lambda: _chain_model("1:c1.3")) if tool == "ask" else (lambda: _model("chat"))
        result = tool_call(http, tool, {"question": QUESTION, "path": "team"})
        assert result["isError"] is False, result["content"][0]["text"]
        results.append(result)
    ask, chat = (r["structuredContent"] for r in results)
    for out in (ask, chat):
        assert sorted(d["title"] for d in out["documents"]) == ["Otters", "Pumps"]
        assert all(d["source"] == f"team/{d['title'].lower()}.md" for d in out["documents"])
        assert all(find_document("team-b", d["doc_id"]) is not None for d in out["documents"])
    tags = {d["tag"]: d["doc_id"] for d in ask["documents"]}
    assert ask["doc_id"] == "" and ask["citations"] and all(int(c.split(":")[0]) in tags for c in ask["citations"])
    task = a2a_turn(http, [{"text": QUESTION}, {"data": {"path": "team"}}])
    data = task["artifacts"][0]["parts"][-1]["data"]
    assert sorted(d["title"] for d in data["documents"]) == ["Otters", "Pumps"]
    listed = http.get("/documents", headers={"X-API-Key": "key-b"}).json()["documents"]
    assert sorted(d["source"] for d in listed) == ["team/otters.md", "team/pumps.md"]
    thread = {"configurable": {"thread_id": chat["thread_id"]}}
    state = registry.compile_with("chat", runs.saver).get_state(thread).values
    assert state["documents"] == chat["documents"]
    everything = json.dumps([results, task, listed, state], default=str)
    assert str(root) not in everything


def test_a_source_is_shown_relative_to_the_ingest_root_and_a_file_outside_it_by_its_name(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stores.files import shown_source

    assert shown_source(str(root / "team" / "otters.md")) == "team/otters.md"
    assert shown_source(str(root.parent / "elsewhere" / "secret.md")) == "secret.md"
    assert shown_source("text") == "text"
    monkeypatch.delenv("LONGDOC_INGEST_ROOT")  # a local run: the caller's own files, as recorded
    assert shown_source(str(root / "team" / "otters.md")) == str(root / "team" / "otters.md")
