"""The chat workflow as chat clients drive it: turns as human messages, answers as AI messages, streamed tokens."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from doubles.chat import ScriptedChatModel
from doubles.files import docx_bytes, pdf_with_text
from doubles.replies import offload_chat_model, offload_reply
from graphs.offload.graph import builder
from nodes.ingest import ingest
from stores.chat_stream import FieldStream, streamed_field, unstreamed
from stores.documents import find_document, list_documents
from stores.errors import InputError
from stores.models import LLM, use_chat_model
from stores.status import is_status

BASE = {"history_min_score": 2.0, "keep_turns": 2}


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


def answer_chunks(chunks: list[tuple[Any, dict[str, Any]]]) -> list[tuple[Any, dict[str, Any]]]:
    """The streamed chunks of answers, without the steps' status messages."""
    return [(c, meta) for c, meta in chunks if not is_status(c.id)]


def test_a_chat_of_human_messages_streams_only_the_answer(doc_id: str) -> None:
    model = offload_chat_model()
    compiled = builder.compile(checkpointer=InMemorySaver())
    with use_chat_model(model):
        first, state = turn(compiled, {"messages": [HumanMessage("Who manages procurement?")]}, {"doc_id": doc_id})
        second, state2 = turn(compiled, {"messages": [{"role": "user", "content": "When do trials start?"}]}, {})

    assert len(model.calls) >= 5  # canvas, answer, offloader, answer, offloader: only the answers stream
    for streamed_chunks, values, number in ((first, state, 1), (second, state2, 2)):
        chunks = answer_chunks(streamed_chunks)  # statuses: the test below
        assert len(chunks) > 2 and {meta["langgraph_node"] for _, meta in chunks} == {"answer"}
        assert all(isinstance(c, AIMessageChunk) for c, _ in chunks) and len({c.id for c, _ in chunks}) == 1
        streamed = "".join(str(c.content) for c, _ in chunks)
        reply = values["messages"][-1]
        assert isinstance(reply, AIMessage) and reply.id == chunks[0][0].id
        assert streamed == reply.content and "{" not in streamed
        # the text ends with the sources it cites, as any chat client shows them; the data stays beside it
        answer, sources = reply.content.split("\n\n**Sources**\n")
        assert answer == values["answer"]
        meta = reply.additional_kwargs["longdoc"]
        assert meta["turn"] == number and meta["doc_id"] == doc_id
        assert meta["citations"] == values["citations"] and meta["citations"]
        assert meta["sources"] == values["sources"] and [s["chunk_id"] for s in meta["sources"]] == meta["citations"]
        for line, source in zip(sources.splitlines(), meta["sources"], strict=True):
            # each source names its quote as the answer's markers do
            assert line == f'- [{source["label"]}] Project Falcon: "{source["quote"]}"'
            assert f"[{source['label']}]" in answer and source["cited"]
            assert source["label"].startswith(source["chunk_id"] + ".") and source["quote"]
        assert [o["id"] for o in meta["offloaded"]][:1] == [f"o{number}"]
    kinds = [type(m).__name__ for m in state2["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    assert state2["turn"] == 2 and state2["history"][1]["question"] == "When do trials start?"
    assert state2["question"] == ""  # the next turn may come as a message alone


def test_a_long_turn_streams_its_steps_as_a_status_message_the_thread_does_not_keep(sample_markdown: Path) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    data = base64.b64encode(sample_markdown.read_bytes()).decode()
    upload = {"type": "file", "source_type": "base64", "mime_type": "text/markdown", "data": data}
    content = [{"type": "text", "text": "Who manages procurement?"}, {**upload, "metadata": {"filename": "sample.md"}}]
    with use_chat_model(offload_chat_model()):
        first, state = turn(compiled, {"messages": [HumanMessage(content)]}, {"chunk_size": 60}, "s")
        second, state2 = turn(compiled, {"messages": [HumanMessage("When do trials start?")]}, {}, "s")

    statuses: dict[str, str] = {}
    for chunk, meta in first:
        if is_status(chunk.id):
            assert isinstance(chunk, AIMessageChunk) and chunk.id == f"status-{meta['langgraph_checkpoint_ns'][-36:]}"
            statuses[meta["langgraph_node"]] = statuses.get(meta["langgraph_node"], "") + str(chunk.content)
    # one message per step, its lines in order: reading and ingesting the upload, then drawing the map
    begin = statuses["begin"].split("\n\n")
    assert begin[1] == "_reading Project Falcon_"  # the document's title
    assert begin[-1] == f"_ingesting: {state['chunks']} of {state['chunks']} chunks embedded_"
    assert statuses["canvas"] == "\n\n_drawing the document map..._"
    assert statuses["answer"] == "\n\n_writing the answer..._"  # shown until the answer's words come
    assert statuses["offload"] == "\n\n_noting this turn for the next ones..._"
    answers = [c for c, _ in first if not is_status(c.id)]
    assert answers and answers[0].id == state["messages"][-1].id  # the answer comes after, as a message of its own
    # the thread keeps the question and the answer only: no status message, no status words
    for values in (state, state2):
        assert not any(is_status(m.id) or "drawing the document map" in str(m.content) for m in values["messages"])
    assert [type(m).__name__ for m in state2["messages"]] == ["HumanMessage", "AIMessage"] * 2
    assert not any(is_status(c.id) and "map" in str(c.content) for c, _ in second)  # the map is drawn once


def test_question_field_callers_get_the_same_transcript(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "q"}}
    with use_chat_model(offload_chat_model()):
        out = compiled.invoke({"question": "Who leads engineering?", "doc_id": doc_id}, config, context=BASE)
        again = compiled.invoke({"question": "Who leads engineering?"}, config, context=BASE)
    assert out["turn"] == 1 and again["turn"] == 2
    texts = [(type(m).__name__, m.content) for m in again["messages"]]
    assert texts[0] == ("HumanMessage", "Who leads engineering?") and texts[2] == texts[0]
    assert texts[1][0] == "AIMessage" and texts[1][1].startswith(out["answer"] + "\n\n**Sources**\n- ")
    assert texts[3][0] == "AIMessage" and texts[3][1].startswith(again["answer"] + "\n\n**Sources**\n- ")


def test_the_first_message_may_name_the_document(doc_id: str, sample_markdown: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    compiled = builder.compile(checkpointer=InMemorySaver())
    with use_chat_model(offload_chat_model()):
        _, by_id = turn(compiled, {"messages": [HumanMessage(f"In {doc_id}: who manages procurement?")]}, {}, "a")
        assert by_id["doc_id"] == doc_id

        # A file name counts only inside the operator's ingest root; elsewhere it names nothing, and the
        # message is answered with what to attach or name (the documents of the namespace among it).
        _, outside = turn(compiled, {"messages": [HumanMessage(f"Read {sample_markdown} please")]}, {}, "b")
        assert "turn" not in outside and outside["messages"][0].content == f"Read {sample_markdown} please"
        assert "attach it to your message" in outside["messages"][-1].content
        assert f"(`{doc_id}`)" in outside["messages"][-1].content
        monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(sample_markdown.parent))
        _, by_path = turn(compiled, {"messages": [HumanMessage("What does sample.md say about the budget?")]}, {}, "c")
        assert by_path["doc_id"] == doc_id

        other = ingest(text="Herons wade in shallow water.").doc_id
        _, both = turn(compiled, {"messages": [HumanMessage(f"Compare {doc_id} with {other}")]}, {}, "d")
        assert "several documents" in both["messages"][-1].content and len(both["messages"]) == 2
        with pytest.raises(InputError, match="several documents"):  # a question field is answered with an error
            compiled.invoke(
                {"question": f"Compare {doc_id} with {other}"}, {"configurable": {"thread_id": "e"}}, context=BASE
            )


def test_a_first_message_without_a_document_is_answered_and_the_chat_goes_on(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "r"}}
    with use_chat_model(offload_chat_model()):
        first = compiled.invoke({"messages": [HumanMessage("What is this about?")]}, config, context=BASE)
        assert [type(m).__name__ for m in first["messages"]] == ["HumanMessage", "AIMessage"]
        help_reply = first["messages"][-1]
        assert (
            "attach it to your message" in help_reply.content
            and "no document" in help_reply.additional_kwargs["longdoc"]["refused"]
        )
        assert not compiled.get_state(config).values.get("turn")
        with pytest.raises(InputError, match="no question"):
            compiled.invoke({"doc_id": doc_id}, config, context=BASE)
        out = compiled.invoke(
            {"messages": [HumanMessage("Who manages procurement?")]}, config, context={**BASE, "doc_id": doc_id}
        )
    assert out["turn"] == 1 and out["messages"][2].content == "Who manages procurement?"
    assert (
        len(out["messages"]) == 4
        and compiled.get_state(config).values["history"][0]["question"] == out["messages"][2].content
    )


def test_a_refused_question_field_leaves_its_message_out_of_the_thread(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "q"}}
    with use_chat_model(offload_chat_model()):
        with pytest.raises(InputError, match="no document"):
            compiled.invoke({"question": "What is this about?"}, config, context=BASE)
        assert compiled.get_state(config).values.get("messages") == []


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


PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
FALCON_LINE = "Bob Chen manages procurement for Project Falcon. Field trials start in June."


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def attached_blocks() -> dict[str, dict[str, Any]]:
    """The same document as each client sends it: LangChain 1.x standard blocks, Agent Chat UI's form, text."""
    return {
        "pdf, standard block": {
            "type": "file",
            "base64": _b64(pdf_with_text(FALCON_LINE)),
            "mime_type": PDF,
            "extras": {"filename": "falcon.pdf"},
        },
        "pdf, agent chat ui": {
            "type": "file",
            "source_type": "base64",
            "data": _b64(pdf_with_text(FALCON_LINE)),
            "mime_type": PDF,
            "metadata": {"filename": "falcon.pdf"},
        },
        "docx, camel case": {
            "type": "file",
            "data": _b64(docx_bytes([FALCON_LINE])),
            "mimeType": DOCX,
            "metadata": {"name": "falcon.docx"},
        },
        "markdown, no name": {
            "type": "file",
            "base64": _b64(f"# Falcon\n\n{FALCON_LINE}\n".encode()),
            "mime_type": "text/markdown",
        },
        "html": {
            "type": "file",
            "base64": _b64(f"<html><body><p>{FALCON_LINE}</p></body></html>".encode()),
            "mime_type": "text/html",
            "extras": {"filename": "falcon.html"},
        },
        "text-plain block": {
            "type": "text-plain",
            "text": FALCON_LINE,
            "mime_type": "text/plain",
            "title": "falcon.txt",
        },
    }


@pytest.mark.parametrize("kind", list(attached_blocks()))
def test_a_document_attached_to_the_message_is_ingested_and_answered(kind: str) -> None:
    block = attached_blocks()[kind]
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "attached"}}
    message = HumanMessage(content=[{"type": "text", "text": "Who manages procurement?"}, block])
    with use_chat_model(offload_chat_model()):
        out = compiled.invoke({"messages": [message]}, config, context={**BASE, "namespace": "team-x"})
        again = compiled.invoke(
            {"messages": [HumanMessage("And the trials?")]}, config, context={**BASE, "namespace": "team-x"}
        )
    doc_id = out["doc_id"]
    assert out["turn"] == 1 and again["turn"] == 2 and again["doc_id"] == doc_id
    assert find_document("team-x", doc_id) is not None and find_document("default", doc_id) is None
    assert out["messages"][-1].content.startswith(out["answer"]) and "Bob Chen" in out["answer"]
    kept = out["messages"][0]
    assert kept.id == message.id and kept.text.startswith("Who manages procurement?")
    assert f"document {doc_id}, 1 chunk]" in kept.text
    stored = json.dumps([m.content for m in compiled.get_state(config).values["messages"]])
    assert '"type": "file"' not in stored and '"text-plain"' not in stored
    payload = str(block.get("base64") or block.get("data") or "")
    assert payload[:40] not in stored or not payload


def test_an_attachment_without_words_asks_for_an_overview() -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    block = attached_blocks()["pdf, standard block"]
    with use_chat_model(offload_chat_model()):
        out = compiled.invoke(
            {"messages": [HumanMessage(content=[block])]}, {"configurable": {"thread_id": "o"}}, context=BASE
        )
    assert out["turn"] == 1 and out["answer"]
    state = compiled.get_state({"configurable": {"thread_id": "o"}}).values
    assert state["history"][0]["question"] == "What is this document about? Give a short overview."


@pytest.mark.parametrize(
    ("block", "env", "said"),
    [
        (
            {
                "type": "file",
                "base64": _b64(pdf_with_text(FALCON_LINE)),
                "mime_type": PDF,
                "extras": {"filename": "big.pdf"},
            },
            {"LONGDOC_MAX_BYTES": "300"},
            "big.pdf: ",
        ),
        (
            {"type": "image", "base64": _b64(b"\x89PNG...."), "mime_type": "image/png"},
            {},
            "image/png files are not read",
        ),
        (
            {
                "type": "file",
                "base64": _b64(b"a,b\n1,2\n"),
                "mime_type": "application/vnd.ms-excel",
                "extras": {"filename": "sheet.xls"},
            },
            {},
            "sheet.xls: unsupported type application/vnd.ms-excel",
        ),
        ({"type": "file", "url": "http://127.0.0.1:9/secret.pdf", "mime_type": PDF}, {}, "not fetched from links"),
        (
            {"type": "file", "base64": "!!not base64!!", "mime_type": PDF, "extras": {"filename": "x.pdf"}},
            {},
            "not valid base64",
        ),
    ],
    ids=["too big", "an image", "a spreadsheet", "a link", "broken base64"],
)
def test_a_refused_attachment_is_answered_in_the_chat(
    block: dict[str, Any], env: dict[str, str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "refused"}}
    message = HumanMessage(content=[{"type": "text", "text": "What does it say?"}, block])
    with use_chat_model(offload_chat_model()):
        out = compiled.invoke({"messages": [message]}, config, context=BASE)
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage", "AIMessage"]
    reply = out["messages"][-1]
    assert reply.content.startswith("I could not take this message: ") and said in reply.content, reply.content
    assert said in reply.additional_kwargs["longdoc"]["refused"]
    assert out["messages"][0].text.startswith("What does it say?") and "not read]" in out["messages"][0].text
    assert not compiled.get_state(config).values.get("turn") and list_documents("default") == []


def test_several_documents_attached_to_one_message_are_talked_about_as_a_collection() -> None:
    blocks = [
        {"type": "text-plain", "text": FALCON_LINE, "mime_type": "text/plain", "title": "falcon.txt"},
        {"type": "text-plain", "text": "Herons wade in water.", "mime_type": "text/plain", "title": "herons.txt"},
    ]
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "many"}}
    message = HumanMessage(content=[{"type": "text", "text": "Who manages procurement?"}, *blocks])
    with use_chat_model(offload_chat_model()):
        out = compiled.invoke({"messages": [message]}, config, context=BASE)
        again = compiled.invoke({"messages": [HumanMessage("And the herons?")]}, config, context=BASE)
    titles = [d["title"] for d in out["documents"]]
    assert sorted(titles) == ["falcon.txt", "herons.txt"]
    assert sorted(d["doc_id"] for d in out["documents"]) == sorted(d.doc_id for d in list_documents("default"))
    assert out["citations"] and all(":" in c for c in out["citations"])  # tagged: 1:c0
    sources = out["messages"][-1].additional_kwargs["longdoc"]["sources"]
    assert {s["title"] for s in sources} <= set(titles) and sources[0]["label"].startswith(out["citations"][0] + ".")
    assert again["turn"] == 2 and again["documents"] == out["documents"]


def test_a_document_dropped_into_a_conversation_is_read(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "two"}}
    other = {"type": "text-plain", "text": "Herons wade in shallow water.", "mime_type": "text/plain"}
    with use_chat_model(offload_chat_model()):
        first = compiled.invoke(
            {"messages": [HumanMessage("Who manages procurement?")]}, config, context={**BASE, "doc_id": doc_id}
        )
        out = compiled.invoke(
            {"messages": [HumanMessage(content=[{"type": "text", "text": "Where do herons wade?"}, other])]},
            config,
            context=BASE,
        )
        again = compiled.invoke({"messages": [HumanMessage("And the herons?")]}, config, context=BASE)
    herons = next(d.doc_id for d in list_documents("default") if d.doc_id != doc_id)
    assert out["turn"] == 2 and out["doc_id"] == herons and out["documents"][0]["tag"] == 2
    assert "[attached attachment.txt: document " in out["messages"][-2].text
    sources = out["messages"][-1].additional_kwargs["longdoc"]["sources"]
    assert sources and {s["doc_id"] for s in sources} == {herons} and "Herons wade" in sources[0]["quote"]
    assert len(out["messages"]) == len(first["messages"]) + 2  # the conversation so far stays
    assert again["turn"] == 3 and again["documents"] == out["documents"]


def test_a_later_message_naming_another_document_in_its_words_stays_on_the_sessions_documents(
    doc_id: str, sample_markdown: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGDOC_INGEST_ROOT", str(sample_markdown.parent))
    other = ingest(text="Herons wade in shallow water.").doc_id
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "words"}}
    with use_chat_model(offload_chat_model()):
        first = compiled.invoke(
            {"messages": [HumanMessage(f"In {other}: where do herons wade?")]}, config, context=BASE
        )
        by_id = compiled.invoke({"messages": [HumanMessage(f"Does {doc_id} say more?")]}, config, context=BASE)
        by_name = compiled.invoke({"messages": [HumanMessage("What does sample.md say?")]}, config, context=BASE)
        by_input = compiled.invoke(
            {"messages": [HumanMessage("And the budget?")], "doc_id": doc_id}, config, context=BASE
        )
    assert first["doc_id"] == by_id["doc_id"] == by_name["doc_id"] == other and by_name["turn"] == 3
    assert by_input["doc_id"] == doc_id and by_input["turn"] == 4  # the input's fields rebind
    # What the client guide says of it.
    guide = " ".join((Path(__file__).parents[2] / "docs" / "clients.md").read_text(encoding="utf-8").split())
    assert "A later message's words never rebind" in guide and "reads them from then on" not in guide


def test_a_turn_that_recalls_streams_one_message() -> None:
    asked: list[int] = []

    def reply(messages: Sequence[BaseMessage]) -> str:
        system = str(messages[0].content)
        if '"recall"' in system and not asked:
            asked.append(1)
            return json.dumps({"recall": ["o1"], "answer": "", "citations": []})
        return offload_reply(messages)

    compiled = builder.compile(checkpointer=InMemorySaver())
    text = "# Falcon\n\n" + FALCON_LINE + "\n\nThe budget is 40,000 euros.\n"
    with use_chat_model(ScriptedChatModel(default=reply)):
        turn(compiled, {"text": text, "messages": [HumanMessage("Who manages procurement?")]}, {}, "rc")
        second, values = turn(compiled, {"messages": [HumanMessage("What is the budget?")]}, {}, "rc")
    assert asked and values["recalled"] and values["recalled"][0]["id"] == "o1"
    assert len({c.id for c, _ in answer_chunks(second)}) == 1  # the call that asked to recall showed nothing
    assert "".join(str(c.content) for c, _ in answer_chunks(second)) == values["messages"][-1].content
    assert [type(m).__name__ for m in values["messages"]] == ["HumanMessage", "AIMessage"] * 2


def test_a_held_reply_whose_recall_is_already_in_view_is_shown_as_the_answer() -> None:
    def reply(messages: Sequence[BaseMessage]) -> str:
        if '"recall"' in str(messages[0].content):  # asks for a quote the memory shows whole: no recall round
            shown = re.findall(r"^\[(c0\.\d+)\] ", str(messages[-1].content), re.M)[0]
            return json.dumps({"recall": [shown], "answer": f"Bob Chen manages procurement. [{shown}]"})
        return offload_reply(messages)

    compiled = builder.compile(checkpointer=InMemorySaver())
    text = "# Falcon\n\n" + FALCON_LINE + "\n"
    with use_chat_model(ScriptedChatModel(default=reply)):
        turn(compiled, {"text": text, "messages": [HumanMessage("Who manages procurement?")]}, {}, "held")
        second, values = turn(compiled, {"messages": [HumanMessage("Who buys for the project?")]}, {}, "held")
    assert values["turn"] == 2 and not values["recalled"]
    streamed = "".join(str(c.content) for c, _ in answer_chunks(second))
    assert len({c.id for c, _ in answer_chunks(second)}) == 1 and streamed == values["messages"][-1].content
    assert re.match(r"Bob Chen manages procurement\. \[c0\.\d\]\n\n\*\*Sources\*\*\n- ", streamed)


def _citing_nothing(messages: Sequence[BaseMessage]) -> str:
    """The scripted model, its answers stripped of every citation (as small models often write them)."""
    reply = offload_reply(messages)
    try:
        data = json.loads(reply)
    except ValueError:
        return reply
    if isinstance(data, dict) and "answer" in data:
        data["answer"] = data["answer"].split(" [", 1)[0]
        data["citations"] = []
        return json.dumps(data)
    return reply


def test_an_answer_that_cites_nothing_shows_the_quotes_the_readers_kept(doc_id: str) -> None:
    compiled = builder.compile(checkpointer=InMemorySaver())
    model = ScriptedChatModel(default=_citing_nothing)
    with use_chat_model(model):
        chunks, values = turn(compiled, {"messages": [HumanMessage("Who manages procurement?")]}, {"doc_id": doc_id})
    reply = values["messages"][-1]
    assert values["citations"] == [] and "[c" not in values["answer"] and values["details"]
    sources = values["sources"]
    assert sources and all(not s["cited"] for s in sources)
    assert {s["chunk_id"] for s in sources} == {d["chunk_id"] for d in values["details"]} == {"c2"}
    # the sentence that backs the answer is among them
    assert any(values["answer"].rstrip(".") in s["quote"] for s in sources)
    head, *lines = reply.content.split("\n\n")[-1].splitlines()
    assert head == "**Sources** (quoted by the readers; the answer cites none of them)"
    assert lines == [f'- [{s["label"]}] Project Falcon: "{s["quote"]}"' for s in sources]
    assert "".join(str(c.content) for c, _ in answer_chunks(chunks)) == reply.content  # streamed as kept
    assert reply.additional_kwargs["longdoc"]["sources"] == sources


def test_sizes_are_written_in_binary_units_as_the_readme_writes_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodes.offload.chat import help_text, mebibytes

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `LONGDOC_MAX_BYTES`"))
    assert "largest document accepted" in row and row.endswith("| 200 MiB, 10,000 |")
    assert "up to 200 MiB)" in help_text("nowhere", "en")  # the default: 200 * 2**20 bytes
    assert [mebibytes(n) for n in (300, 100_000, 2**20, 5 * 2**19, 3 * 2**30)] == [
        "300 bytes",
        "97.7 KiB",
        "1 MiB",
        "2.5 MiB",
        "3 GiB",
    ]
    monkeypatch.setenv("LONGDOC_MAX_BYTES", str(100 * 2**20))
    assert "up to 100 MiB)" in help_text("nowhere", "en")


def test_documents_of_the_same_title_are_told_apart_by_more_than_their_ids(sample_markdown: Path) -> None:
    from nodes.offload.chat import help_text

    text = sample_markdown.read_text(encoding="utf-8")
    first = ingest(str(sample_markdown))
    second = ingest(text=text + "\n\nThe pilot ends in May.", title=first.title)
    listed = [line for line in help_text("default", "en").splitlines() if line.startswith("- ")]
    assert len(listed) == 2 and all(line.startswith(f"- {first.title} · ") for line in listed)
    without_ids = [line.rsplit(" (`", 1)[0] for line in listed]
    assert without_ids[0] != without_ids[1], listed
    by_id = {line.rsplit("(`", 1)[1].rstrip("`)"): line for line in listed}
    assert f" · {sample_markdown.name} · " in by_id[first.doc_id] and " · given as text · " in by_id[second.doc_id]
    assert all(" chunks · ingested 20" in line for line in listed)
    # a title of its own is listed as before
    other = ingest(text="# Otters\n\nOtters hold hands.", title="Otters")
    assert f"- Otters (`{other.doc_id}`)" in help_text("default", "en")


def test_the_sources_are_the_quotes_the_answer_cites_else_every_quote_kept() -> None:
    from nodes.collection.sources import Sources
    from nodes.offload.answer import quote_sources
    from stores.vectorstore import get_store

    text = "Project Falcon\n\nBob Chen manages procurement and the supplier contracts.\n\nTrials start in June."
    doc = ingest(text=text, title="Falcon", chunk_size=400, chunk_overlap=0)
    sources = Sources(get_store("default"), [doc.doc_id])
    evidence = "[c0.2] Bob Chen manages procurement and the supplier contracts.\n[c0.3] Trials start in June."
    (cited,) = quote_sources(sources, evidence, ["c0.3"])
    assert (cited["label"], cited["chunk_id"], cited["quote"], cited["cited"]) == (
        "c0.3",
        "c0",
        "Trials start in June.",
        True,
    )
    assert [s["label"] for s in quote_sources(sources, evidence, ["c0"])] == ["c0.2", "c0.3"]  # a chunk: its quotes
    kept = quote_sources(sources, evidence, [])  # cites none: every quote, marked as the readers'
    assert [(s["label"], s["cited"], s["title"]) for s in kept] == [
        ("c0.2", False, "Falcon"),
        ("c0.3", False, "Falcon"),
    ]
    assert quote_sources(sources, "", ["c0"]) == []
    # it cites the quote that names the man, and says what the other quote says: that one backs it too
    said = "Bob Chen; trials start in June [c0.2]"
    backed = [(s["label"], s["cited"]) for s in quote_sources(sources, evidence, ["c0.2"], said)]
    assert backed == [("c0.2", True), ("c0.3", False)]
    assert len(quote_sources(sources, evidence, ["c0.2"], "Bob Chen manages procurement [c0.2]")) == 1
