"""The chat workflow as chat clients drive it: turns as human messages, answers as AI messages, streamed tokens."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from doubles.chat import ScriptedChatModel
from doubles.replies import offload_chat_model
from graphs.offload.graph import builder
from nodes.ingest import ingest
from stores.chat_stream import FieldStream, streamed_field, unstreamed
from stores.models import LLM, use_chat_model
from stores.settings import InputError

BASE = {"min_score": -1.0, "history_min_score": 2.0, "keep_turns": 2, "details_k": 1}


@pytest.fixture
def doc_id(sample_markdown: Path) -> str:
    return ingest(str(sample_markdown), chunk_size=60, chunk_overlap=0).doc_id


def turn(compiled: Any, value: dict[str, Any], context: dict[str, Any], thread: str = "t1") -> tuple[list, dict]:
    """One turn streamed as a chat client asks for it: (messages-mode chunks, final values)."""
    config = {"configurable": {"thread_id": thread}}
    chunks: list[tuple[Any, dict[str, Any]]] = []
    final: dict[str, Any] = {}
    for mode, part in compiled.stream(
        value, config=config, context={**BASE, **context}, stream_mode=["messages", "values"]
    ):
        if mode == "messages":
            chunks.append(part)
        else:
            final = part
    return chunks, final


def test_a_chat_of_human_messages_streams_only_the_answer(doc_id: str) -> None:
    model = offload_chat_model()
    compiled = builder.compile(checkpointer=InMemorySaver())
    with use_chat_model(model):
        first, state = turn(compiled, {"messages": [HumanMessage("Who manages procurement?")]}, {"doc_id": doc_id})
        second, state2 = turn(compiled, {"messages": [{"role": "user", "content": "When do trials start?"}]}, {})

    assert len(model.calls) >= 5  # canvas, answer, offloader, answer, offloader: only the answers stream
    for chunks, values, number in ((first, state, 1), (second, state2, 2)):
        assert len(chunks) > 2 and {meta["langgraph_node"] for _, meta in chunks} == {"answer"}
        assert all(isinstance(c, AIMessageChunk) for c, _ in chunks) and len({c.id for c, _ in chunks}) == 1
        streamed = "".join(str(c.content) for c, _ in chunks)
        reply = values["messages"][-1]
        assert isinstance(reply, AIMessage) and reply.id == chunks[0][0].id
        assert streamed == reply.content == values["answer"] and "{" not in streamed
        meta = reply.additional_kwargs["longdoc"]
        assert meta["turn"] == number and meta["doc_id"] == doc_id
        assert meta["citations"] == values["citations"] and meta["citations"]
        assert [o["id"] for o in meta["offloaded"]][:1] == [f"o{number}"]
    kinds = [type(m).__name__ for m in state2["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    assert state2["turn"] == 2 and state2["history"][1]["question"] == "When do trials start?"
    assert state2["question"] == ""  # the next turn may come as a message alone


def test_question_field_callers_get_the_same_transcript(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "q"}}
    with use_chat_model(offload_chat_model()):
        out = compiled.invoke({"question": "Who leads engineering?", "doc_id": doc_id}, config, context=BASE)
        again = compiled.invoke({"question": "Who leads engineering?"}, config, context=BASE)
    assert out["turn"] == 1 and again["turn"] == 2
    texts = [(type(m).__name__, m.content) for m in again["messages"]]
    assert texts[0] == ("HumanMessage", "Who leads engineering?") and texts[2] == texts[0]
    assert texts[1] == ("AIMessage", out["answer"]) and texts[3] == ("AIMessage", again["answer"])


def test_the_first_message_may_name_the_document(doc_id: str, sample_markdown: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    compiled = builder.compile(checkpointer=InMemorySaver())
    with use_chat_model(offload_chat_model()):
        _, by_id = turn(compiled, {"messages": [HumanMessage(f"In {doc_id}: who manages procurement?")]}, {}, "a")
        assert by_id["doc_id"] == doc_id

        # A file name counts only inside the operator's ingest root; elsewhere it names nothing.
        with pytest.raises(InputError, match="no document"):
            turn(compiled, {"messages": [HumanMessage(f"Read {sample_markdown} please")]}, {}, "b")
        monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(sample_markdown.parent))
        _, by_path = turn(compiled, {"messages": [HumanMessage("What does sample.md say about the budget?")]}, {}, "c")
        assert by_path["doc_id"] == doc_id

        other = ingest(text="Herons wade in shallow water.").doc_id
        with pytest.raises(InputError, match="several documents"):
            turn(compiled, {"messages": [HumanMessage(f"Compare {doc_id} with {other}")]}, {}, "d")


def test_a_refused_turn_leaves_its_message_out_of_the_thread(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "r"}}
    with use_chat_model(offload_chat_model()):
        with pytest.raises(InputError, match="no document"):
            compiled.invoke({"messages": [HumanMessage("What is this about?")]}, config, context=BASE)
        assert compiled.get_state(config).values.get("messages") == []
        with pytest.raises(InputError, match="no question"):
            compiled.invoke({"doc_id": doc_id}, config, context=BASE)
        out = compiled.invoke(
            {"messages": [HumanMessage("Who manages procurement?")]}, config, context={**BASE, "doc_id": doc_id}
        )
    assert out["turn"] == 1 and out["messages"][0].content == "Who manages procurement?"
    assert len(out["messages"]) == 2


def test_checkpoints_keep_the_transcript_not_the_document(sample_markdown: Path) -> None:
    saver = InMemorySaver()
    compiled = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "c"}}
    text = sample_markdown.read_text(encoding="utf-8")
    with use_chat_model(offload_chat_model()):
        compiled.invoke({"text": text, "messages": [HumanMessage("Who manages procurement?")]}, config, context=BASE)
        compiled.invoke({"messages": [HumanMessage("And the budget?")]}, config, context=BASE)
    values = compiled.get_state(config).values
    stored = json.dumps([str(m.content) for m in values["messages"]]) + json.dumps(values.get("text", ""))
    assert "Field trials start in June" not in stored and "solar-powered water pump" not in stored
    assert len(values["messages"]) == 4 and values["text"] == ""


def test_field_stream_shows_the_field_and_starts_a_new_message_on_a_retry() -> None:
    shown: list[AIMessageChunk] = []

    class Sink(FieldStream):
        def _open(self) -> Any:
            sink = self

            class Run:
                def on_llm_new_token(self, token: str, chunk: Any) -> None:
                    shown.append(chunk.message)

                def on_llm_end(self, result: Any) -> None:
                    sink.ended = result.generations[0][0].message

            return Run()

    from uuid import uuid4

    stream = Sink("answer", "m", {})
    first, second = uuid4(), uuid4()
    for piece in ['{"ans', 'wer": "Bob', " Chen\\n", 'manages", "cit', 'ations": []}']:
        stream.on_llm_new_token(piece, run_id=first)
    assert "".join(str(c.content) for c in shown) == "Bob Chen\nmanages" and {c.id for c in shown} == {"m"}
    shown.clear()
    for piece in ["Plain ", "text."]:
        stream.on_llm_new_token(piece, run_id=second)
    assert "".join(str(c.content) for c in shown) == "Plain text." and stream.message_id == "m-1"


def test_model_calls_are_tagged_nostream_inside_the_blocks() -> None:
    seen: list[list[str]] = []

    class Probe(ScriptedChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(list(run_manager.tags) if run_manager else [])
            return super()._generate(messages, stop, run_manager, **kwargs)

    model = Probe(default="Fine.")
    with use_chat_model(model):
        LLM("expert").text([HumanMessage("a")])
        with unstreamed():
            LLM("expert").text([HumanMessage("b")])
        with streamed_field() as stream:
            LLM("expert").text([HumanMessage("c")])
    assert "nostream" not in seen[0] and "nostream" in seen[1] and "nostream" in seen[2]
    assert str(uuid.UUID(stream.message_id)) == stream.message_id  # a fresh id when none is given
