"""The offload graph end to end with a scripted model: sessions, policies, recall, budget, canvas, resume."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from doubles.chat import ScriptedChatModel
from doubles.replies import offload_reply as scripted_reply
from graphs.offload.graph import OffloadContext, builder, graph
from nodes.ingest import ingest
from stores.cache import reset_caches
from stores.checkpoint import open_checkpointer
from stores.errors import InputError
from stores.models import use_chat_model
from stores.offload import get_offload_store
from stores.text import count_tokens
from stores.vectorstore import get_store

QUESTIONS = [
    "Who manages procurement?",
    "What budget did the committee approve?",
    "When do the field trials start?",
    "Who leads the engineering team?",
    "Where are the field trials?",
]
ANSWER = "Bob Chen manages procurement. [c2.2]"
"""The scripted model's answer to the first question: the quote that shares most words with it, cited by label."""
BASE = {"history_min_score": 2.0, "keep_turns": 2}


def prompt_of(messages: Sequence[BaseMessage]) -> tuple[str, str]:
    return str(messages[0].content), str(messages[-1].content)


def is_answer(messages: Sequence[BaseMessage]) -> bool:
    return '"answer"' in prompt_of(messages)[0]


class Model:
    """The scripted offload model with hooks: ``answer(messages)`` may replace answering replies."""

    def __init__(self, answer: Callable[[Sequence[BaseMessage]], str | None] | None = None) -> None:
        self.hook = answer
        self.chat = ScriptedChatModel(default=self.reply)

    def reply(self, messages: Sequence[BaseMessage]) -> str:
        if self.hook is not None and is_answer(messages):
            custom = self.hook(messages)
            if custom is not None:
                return custom
        return scripted_reply(messages)

    def answers(self) -> list[tuple[str, str]]:
        return [prompt_of(m) for m in self.chat.calls if is_answer(m)]


@pytest.fixture
def doc_id(sample_markdown: Path) -> str:
    return ingest(str(sample_markdown), chunk_size=60, chunk_overlap=0).doc_id


def session(
    model: Model, doc: str, questions: Sequence[str], context: dict[str, Any], thread: str = "t1", saver: Any = None
) -> list[dict[str, Any]]:
    compiled = builder.compile(checkpointer=saver or InMemorySaver())
    config = {"configurable": {"thread_id": thread}}
    outs = []
    with use_chat_model(model.chat):
        for i, question in enumerate(questions):
            request: dict[str, Any] = {"question": question}
            if i == 0:
                request["doc_id"] = doc
            outs.append(compiled.invoke(request, config=config, context={**BASE, **context}))
    return outs


def test_offload_session_keeps_conclusions_and_moves_raw_turns_out(doc_id: str) -> None:
    model = Model()
    outs = session(model, doc_id, QUESTIONS[:4], {"policy": "offload"})
    assert [o["turn"] for o in outs] == [1, 2, 3, 4]
    first = outs[0]
    # The reading quotes the team's sentences (the passage's first, then the one on procurement); the scripted
    # model answers with the quote that shares most words with the question.
    assert first["answer"] == ANSWER and first["citations"] == ["c2"] and first["asked"] == QUESTIONS[0]
    assert [(s["label"], s["quote"], s["cited"]) for s in first["sources"]] == [
        ("c2.2", "Bob Chen manages procurement.", True)
    ]
    assert [o["offloaded"][0]["id"] for o in outs] == ["o1", "o2", "o3", "o4"]
    assert [c["step"] for c in first["calls"]] == ["read", "answer", "offloader"]
    assert set(outs[-1]["usage"]) == {"worker", "answer", "offloader"} and outs[-1]["usage"]["answer"]["calls"] == 4

    prompts = model.answers()
    quotes = "Quotes from the documents:\n[c2.1] Alice Moreau leads the engineering team.\n[c2.2] Bob Chen manages"
    assert quotes in prompts[0][1]
    # the model's own usage: the input tokens reported are those of the prompt it was sent
    assert first["input_tokens"] == count_tokens(prompts[0][0] + "\n" + prompts[0][1])
    last = prompts[3][1]
    assert "Older turns offloaded (ask to recall by id): o1" in last
    assert "[o2] What budget did the committee approve? → " in last and "[o3] When do the field trials" in last
    assert outs[0]["answer"] not in last  # turn 1's raw answer left the prompt
    assert "Pinned state:" in last and "40,000 euros" in last  # the offloader pinned the budget fact

    store = get_offload_store("default")
    raw = store.get(outs[0]["session"], ["o1"])[0]
    assert outs[0]["answer"] in raw.text and raw.summary == outs[0]["offloaded"][0]["summary"]
    assert raw.doc_id == doc_id and raw.turn == 1
    assert get_store("default").count(doc_id=doc_id, kind="offload") == 4


def test_state_keeps_ids_and_short_texts(doc_id: str) -> None:
    saver = InMemorySaver()
    session(Model(), doc_id, QUESTIONS[:2], {"policy": "offload"}, saver=saver)
    state = builder.compile(checkpointer=saver).get_state({"configurable": {"thread_id": "t1"}}).values
    assert [sorted(t) for t in state["history"]] == [
        ["citations", "conclusion", "details", "offload_id", "question", "quotes", "turn"]
    ] * 2
    text = json.dumps(state, default=str)
    chunks = get_store("default").by_doc(doc_id)
    assert not any(len(c.text) > 40 and c.text in text for c in chunks)
    assert len(text) < 6000


def test_policies_compare_on_the_same_session(doc_id: str) -> None:
    tokens, prompts = {}, {}
    for policy in ("full", "last_k", "offload", "offload_canvas"):
        model = Model()
        outs = session(model, doc_id, QUESTIONS, {"policy": policy}, thread=policy)
        tokens[policy] = [o["input_tokens"] for o in outs]
        prompts[policy] = model.answers()[-1][1]
    # the first turn has no history: full, last_k and offload send the same prompt
    assert tokens["full"][0] == tokens["last_k"][0] == tokens["offload"][0]
    assert tokens["full"][-1] > max(tokens["last_k"][-1], tokens["offload"][-1])
    assert tokens["offload_canvas"][0] > tokens["offload"][0]  # the map is in every prompt
    assert tokens["full"] == sorted(tokens["full"])
    # verbatim history grows each turn; offloaded history grows by a one-line note at most
    growth = {p: tokens[p][-1] - tokens[p][2] for p in tokens}
    assert growth["full"] > 2 * max(growth["offload"], growth["offload_canvas"])
    assert prompts["full"].count("\nQ: ") == 4 and prompts["last_k"].count("\nQ: ") == 2
    assert "Turn 1\n" in prompts["full"] and "Turn 1\n" not in prompts["last_k"]
    assert "Map of the document" in prompts["offload_canvas"] and "Map of the document" not in prompts["offload"]
    assert "Pinned state" not in prompts["full"] and "Pinned state" in prompts["offload"]


def test_recall_round_loads_the_offloaded_turn(doc_id: str) -> None:
    def hook(messages: Sequence[BaseMessage]) -> str | None:
        system, user = prompt_of(messages)
        if '"recall"' in system and "Who leads" in user:
            return json.dumps({"answer": "", "citations": [], "recall": ["[O1]"]})
        return None

    model = Model(hook)
    outs = session(model, doc_id, QUESTIONS[:4], {"policy": "offload", "keep_turns": 1})
    last = outs[-1]
    assert [c["step"] for c in last["calls"]] == ["read", "answer", "answer_after_recall", "offloader"]
    assert last["recalled"] == [
        {"id": "o1", "found": True, "source": "offload", "tokens": last["recalled"][0]["tokens"]}
    ]
    second = model.answers()[-1]
    assert '"recall"' not in second[0]  # no second recall round is offered
    assert "Recalled for this question:\n[o1] Turn 1\n" in second[1] and outs[0]["answer"] in second[1]
    assert last["input_tokens"] == last["calls"][2]["input"] and last["answer"].startswith("Alice Moreau leads")
    # the first turn had nothing offloaded: no recall offered
    assert '"recall"' not in model.answers()[0][0]


def test_recall_is_at_most_one_round_and_unknown_ids_get_a_note(doc_id: str) -> None:
    def hook(messages: Sequence[BaseMessage]) -> str | None:
        return json.dumps({"answer": "", "citations": [], "recall": ["o9", "o1"]})

    model = Model(hook)
    outs = session(model, doc_id, QUESTIONS[:2], {"policy": "offload"})
    second = outs[1]
    assert [c["step"] for c in second["calls"]] == ["read", "answer", "answer_after_recall", "offloader"]
    assert [(r["id"], r["found"]) for r in second["recalled"]] == [("o9", False), ("o1", True)]
    note = "o9: there is no offloaded turn or chunk with this id, so nothing was recalled. "
    assert note + "Offloaded ids you can recall: o1." in model.answers()[-1][1]


def test_canvas_is_made_once_per_document(doc_id: str) -> None:
    model = Model()
    outs = session(model, doc_id, QUESTIONS[:2], {"policy": "offload_canvas"})
    assert [c["step"] for c in outs[0]["calls"]] == ["canvas", "read", "answer", "offloader"]
    assert outs[0]["canvas"]["source"] == "llm" and not outs[0]["canvas"]["cached"]
    assert outs[0]["canvas"]["nodes"] == 4 and outs[1]["canvas"] == outs[0]["canvas"]
    assert "canvas" in outs[0]["usage"] and outs[0]["memory"]["canvas"] > 0
    # the quotes come from the reading, whatever the map shows
    assert [[(d["chunk_id"], d["via"]) for d in o["details"]] for o in outs] == [[("c2", "read")], [("c1", "read")]]
    for _, user in model.answers():
        assert user.startswith("Map of the document (nodes with their chunk ids, then relations):\nn1 ")

    other = Model()
    again = session(other, doc_id, QUESTIONS[2:3], {"policy": "offload_canvas"}, thread="t2")
    assert again[0]["canvas"]["cached"] and [c["step"] for c in again[0]["calls"]] == ["read", "answer", "offloader"]
    assert not any('"nodes"' in str(m[0].content) for m in other.chat.calls)


def test_a_first_turn_says_it_is_drawing_the_document_map(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    context = {**BASE, "policy": "offload_canvas"}
    with use_chat_model(Model().chat):
        turns = [
            [
                event["message"]
                for event in compiled.stream(
                    {"question": QUESTIONS[0], "doc_id": doc_id},
                    config={"configurable": {"thread_id": thread}},
                    context=context,
                    stream_mode="custom",
                )
                if event.get("stage") == "canvas"
            ]
            for thread in ("t1", "t2")
        ]
    assert turns[0] == ["drawing the document map...", "canvas: 4 nodes (drawn by the model)"]
    assert turns[1] == ["canvas: 4 nodes (cached)"]  # drawn once per document: nothing long to announce


def test_broken_canvas_json_gives_an_outline_and_the_session_goes_on(doc_id: str) -> None:
    model = Model()
    model.chat.rules = [('"nodes"', "this is not JSON")]
    outs = session(model, doc_id, QUESTIONS[:1], {"policy": "offload_canvas"})
    assert outs[0]["canvas"]["source"] == "outline" and outs[0]["answer"] == ANSWER
    assert "n1 Project Falcon [c0]" in model.answers()[0][1]


def test_token_budget_is_enforced_and_reported(doc_id: str) -> None:
    model = Model()
    outs = session(model, doc_id, QUESTIONS, {"policy": "full", "token_budget": 300})
    last = outs[-1]
    assert last["cut"] and last["cut"][0].startswith("history:turn 1 dropped")
    assert all(o["memory"]["total"] <= 300 for o in outs)
    assert "Turn 1\n" not in model.answers()[-1][1]


def test_large_answer_is_stored_and_replaced_by_a_reference(doc_id: str) -> None:
    long = " ".join(f"Point {i} of a very long answer about procurement [c2]." for i in range(60))
    model = Model(lambda m: json.dumps({"answer": long, "citations": ["c2"]}))
    outs = session(model, doc_id, QUESTIONS[:1], {"policy": "offload", "large_output_tokens": 100})
    assert [(o["id"], o["kind"]) for o in outs[0]["offloaded"]] == [("o1", "exchange"), ("o1a", "output")]
    store = get_offload_store("default")
    items = {i.id: i for i in store.list(outs[0]["session"])}
    assert items["o1a"].text == long and items["o1a"].role == "output"
    assert "(shortened; recall o1a for the full text)" in items["o1"].text and long not in items["o1"].text
    assert outs[0]["answer"] == long


def test_session_resumes_after_a_restart(doc_id: str) -> None:
    def hook(messages: Sequence[BaseMessage]) -> str | None:
        system, user = prompt_of(messages)
        if '"recall"' in system and "Where are" in user:
            return json.dumps({"answer": "", "recall": ["o1"]})
        return None

    with open_checkpointer() as saver:
        first = session(Model(), doc_id, QUESTIONS[:2], {"policy": "offload"}, thread="resume", saver=saver)
    reset_caches()  # a new process: stores and checkpointer reopened from disk
    model = Model(hook)
    with open_checkpointer() as saver, use_chat_model(model.chat):
        compiled = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "resume"}}
        before = compiled.get_state(config).values
        assert before["turn"] == 2 and before["pinned"]["facts"]
        out = compiled.invoke({"question": QUESTIONS[4]}, config=config, context={**BASE, "policy": "offload"})
    assert out["turn"] == 3 and out["session"] == first[0]["session"] == "resume"
    assert out["recalled"][0]["found"] and first[0]["answer"] in model.answers()[-1][1]
    user = model.answers()[0][1]
    assert "[o1] Who manages procurement? → " in user and "[o2] What budget" in user
    assert before["pinned"]["facts"][0] in user


def test_graph_without_checkpointer_takes_settings_from_a_dict_context(doc_id: str) -> None:
    config = {"configurable": {"thread_id": "served"}}
    context = {"policy": "offload", "offload_backend": "memory"}
    with use_chat_model(Model().chat):
        out = graph.invoke({"question": QUESTIONS[0], "doc_id": doc_id}, config=config, context=context)
    assert out["policy"] == "offload" and out["session"] == "served" and out["turn"] == 1
    assert get_store("default").count(kind="offload") == 0  # the memory backend was used
    assert get_offload_store("default", backend="memory").list("served")[0].id == "o1"


def test_chinese_document_gets_chinese_prompts(tmp_path: Path) -> None:
    path = tmp_path / "zh.md"
    path.write_text(
        "# 猎鹰项目\n\n猎鹰项目为干旱地区的农场制造太阳能水泵。\n\n## 预算\n\n委员会在三月批准了四万欧元的预算。\n",
        encoding="utf-8",
    )
    doc = ingest(str(path)).doc_id
    model = Model()
    outs = session(model, doc, ["委员会批准了多少预算？", "水泵用什么能源？"], {"policy": "offload_canvas"})
    system, user = model.answers()[-1]
    assert "以 JSON 回复" in system and "文档中的引文：" in user and "问题：水泵用什么能源？" in user
    assert "之前的轮次（一行记录" in user and outs[1]["citations"]


@pytest.mark.parametrize(
    ("request_", "context", "message"),
    [
        ({"question": "  "}, {}, "question is empty"),
        ({"question": "x"}, {}, "give one of doc_id, path or text"),
        ({"question": "x", "doc_id": "0123456789abcdef"}, {}, "not ingested"),
        ({"question": "x", "doc_id": "DOC", "path": "notebooks/data/falcon.md"}, {}, "not doc_id and path"),
        ({"question": "x", "doc_id": "DOC"}, {"policy": "everything"}, "unknown policy"),
        ({"question": "x", "doc_id": "DOC"}, {"token_budget": 50}, "token_budget"),
        ({"question": "x", "doc_id": "DOC"}, {"offload_backend": "redis"}, "offload_backend"),
    ],
)
def test_bad_input_is_refused(doc_id: str, request_: dict[str, str], context: dict[str, Any], message: str) -> None:
    request = {k: (doc_id if v == "DOC" else v) for k, v in request_.items()}
    with use_chat_model(Model().chat), pytest.raises(InputError, match=message):
        graph.invoke(request, context=OffloadContext(**{**BASE, **context}))  # type: ignore[arg-type]


def test_a_session_keeps_its_policy_and_reads_the_documents_a_turn_names(doc_id: str, tmp_path: Path) -> None:
    other = tmp_path / "other.md"
    other.write_text("# Other\n\nA different document about tea.\n", encoding="utf-8")
    other_id = ingest(str(other)).doc_id
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "bound"}}
    context = {**BASE, "policy": "offload"}
    with use_chat_model(Model().chat):
        compiled.invoke({"question": "Who?", "doc_id": doc_id}, config=config, context=context)
        with pytest.raises(InputError, match="not ingested"):
            compiled.invoke({"question": "Tea?", "doc_id": "0123456789abcdef"}, config=config, context=context)
        # the session is the thread: a session in the input is not the caller's to choose; the refused doc_id
        # stays out of the thread, so the next turn goes on with the session's document
        out = compiled.invoke({"question": "Tea?", "session": "someone-else"}, config=config, context=context)
        assert out["turn"] == 2 and out["session"] == "bound" and out["doc_id"] == doc_id
        out = compiled.invoke(
            {"question": "Which document is about tea?", "doc_id": other_id}, config=config, context=context
        )
        assert out["turn"] == 3 and out["doc_id"] == other_id and out["session"] == "bound"
        assert [(d["tag"], d["doc_id"]) for d in out["documents"]] == [(2, other_id)]
        assert len(compiled.get_state(config).values["history"]) == 3  # the conversation so far stays
        assert [s["doc_id"] for s in out["sources"]] == [other_id] * len(out["sources"]) and out["sources"]
        out = compiled.invoke({"question": "Who?"}, config=config, context=context)
        assert out["turn"] == 4 and out["doc_id"] == other_id
        with pytest.raises(InputError, match="uses policy 'offload'"):
            compiled.invoke({"question": "Who?", "doc_id": doc_id}, config=config, context={**BASE, "policy": "full"})
        out = compiled.invoke({"question": "Budget?", "doc_id": doc_id}, config=config, context=context)
    state = compiled.get_state(config).values
    assert out["turn"] == 5 and state["refused"] == "" and state["bound"]["doc_id"] == doc_id
    assert [(d["tag"], d["doc_id"]) for d in out["documents"]] == [(1, doc_id)]  # a document keeps its tag


def test_a_refused_first_turn_leaves_nothing_in_the_thread(doc_id: str, sample_markdown: Path) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "fresh"}}
    with use_chat_model(Model().chat):
        with pytest.raises(InputError, match="not ingested"):
            compiled.invoke(
                {"question": "Who?", "doc_id": "0123456789abcdef"}, config=config, context={**BASE, "policy": "offload"}
            )
        out = compiled.invoke(
            {"question": "Who?", "path": str(sample_markdown)},
            config=config,
            context={**BASE, "policy": "offload"},
        )
    assert out["turn"] == 1 and out["doc_id"] == doc_id


def test_langserve_route_answers_a_turn(doc_id: str) -> None:
    from fastapi.testclient import TestClient

    from surfaces.serve import create_app

    config = {"configurable": {"policy": "offload", "offload_backend": "memory"}}
    with TestClient(create_app(chat_model=Model().chat)) as client:
        schema = client.get("/offload/input_schema")
        assert schema.status_code == 200 and '"question"' in schema.text
        first = client.post(
            "/offload/invoke", json={"input": {"question": QUESTIONS[0], "doc_id": doc_id}, "config": config}
        )
        bad = client.post("/offload/invoke", json={"input": {"question": " ", "doc_id": doc_id}, "config": config})
    assert first.status_code == 200, first.text
    out = first.json()["output"]
    assert out["turn"] == 1 and out["policy"] == "offload" and out["answer"] == ANSWER and out["input_tokens"] > 0
    assert out["offloaded"][0]["id"] == "o1" and str(uuid.UUID(out["session"])) == out["session"]  # a new session
    assert bad.status_code == 400 and "question is empty" in bad.json()["detail"]


def test_a_turn_reads_its_canvas_and_resolves_its_recall_once(doc_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import nodes.offload.answer as answer_nodes
    import nodes.offload.canvas as canvas_store

    reads: list[str] = []
    resolved: list[list[str]] = []
    read_stored, resolve = canvas_store._read_stored, answer_nodes.resolve_recall

    def counting_read(store: Any, doc: str, index: str) -> Any:
        reads.append(doc)
        return read_stored(store, doc, index)

    def counting_resolve(ids: Sequence[str], **kwargs: Any) -> Any:
        resolved.append(list(ids))
        return resolve(ids, **kwargs)

    monkeypatch.setattr(canvas_store, "_read_stored", counting_read)
    monkeypatch.setattr(answer_nodes, "resolve_recall", counting_resolve)

    def hook(messages: Sequence[BaseMessage]) -> str | None:
        system, user = prompt_of(messages)
        if '"recall"' in system and "What budget" in user:
            return json.dumps({"answer": "", "citations": [], "recall": ["o1"]})
        return None

    outs = session(Model(hook), doc_id, QUESTIONS[:2], {"policy": "offload_canvas"})
    assert outs[0]["canvas"]["nodes"] and outs[1]["memory"].get("canvas", 0) > 0
    assert reads == [doc_id]  # read once (the canvas writer found none and made it), then kept for every step
    assert resolved == [["o1"]] and [r["id"] for r in outs[1]["recalled"]] == ["o1"]
