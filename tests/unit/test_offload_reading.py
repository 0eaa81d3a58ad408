"""A chat turn reads as ask does: what it reads for (standalone follow-ups), what reads nothing, what it shows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from doubles.chat import ScriptedChatModel
from doubles.replies import offload_reply
from graphs.offload.graph import builder
from nodes.ingest import ingest
from nodes.offload.context import OffloadContext
from nodes.offload.reading import conversational, fits, refers_back, relabelled, standalone_question
from stores.models import llm_for, use_chat_model

FALCON = (
    "# Project Falcon\n\nProject Falcon builds a solar-powered water pump for small farms.\n\n"
    "## Team\n\nAlice Moreau leads the engineering team. Bob Chen manages procurement.\n\n"
    "## Schedule\n\nField trials start in June near Nakuru and end in September.\n\n"
    "## Risks\n\nDust on the panels can cut power by a fifth. "
    "Bob Chen found a supplier of self-cleaning panel coatings.\n"
)


@pytest.fixture
def falcon() -> str:
    return ingest(text=FALCON, title="Project Falcon", chunk_size=60, chunk_overlap=0).doc_id


def conversation(
    doc_id: str, questions: Sequence[str], context: dict[str, Any] | None = None, model: Any = None
) -> tuple[list[dict[str, Any]], list[list[Any]], Any]:
    """The turns' outputs and their ``custom`` stream events, with the scripted model (or ``model``)."""
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reading"}}
    chat = model or ScriptedChatModel(default=offload_reply)
    outs, events = [], []
    with use_chat_model(chat):
        for i, question in enumerate(questions):
            request = {"question": question, **({"doc_id": doc_id} if i == 0 else {})}
            seen = []
            for mode, part in compiled.stream(
                request,
                config=config,
                context={"policy": "offload", **(context or {})},
                stream_mode=["custom", "values"],
            ):
                if mode == "custom":
                    seen.append(part)
            events.append(seen)
            outs.append(compiled.get_state(config).values)
    return outs, events, chat


def worker_questions(chat: ScriptedChatModel) -> list[str]:
    """The question every worker of the turns' readings was given."""
    return [
        str(m[-1].content).split("\n", 1)[0].removeprefix("Question: ")
        for m in chat.calls
        if '"quotes"' in str(m[0].content)
    ]


def test_a_follow_up_is_read_as_a_standalone_question_and_says_so(falcon: str) -> None:
    questions = ["Who manages procurement?", "What supplier did they find?"]
    outs, events, chat = conversation(falcon, questions)
    first, second = outs
    assert first["asked"] == "Who manages procurement?" and "Bob Chen manages procurement." in first["answer"]
    # the follow-up names no one: made standalone from the conversation, the reading gets the rewrite
    assert second["asked"] == "What supplier did Bob Chen find?"
    assert worker_questions(chat)[-1] == "What supplier did Bob Chen find?"
    assert [c["step"] for c in second["calls"]] == ["standalone", "read", "answer", "offloader"]
    statuses = [e["message"] for e in events[1] if e.get("stage") == "read"]
    assert statuses[0] == 'read as: "What supplier did Bob Chen find?"'
    assert statuses[1] == 'reading every passage for: "What supplier did Bob Chen find?"'
    # the quote on the supplier is the answer's source, as the chat message shows it
    assert [s["label"] for s in second["sources"]] == ["c3.2"] and "self-cleaning" in second["sources"][0]["quote"]
    message = second["messages"][-1]
    assert message.additional_kwargs["longdoc"]["asked"] == second["asked"]
    assert '- [c3.2] Project Falcon: "Bob Chen found a supplier of self-cleaning panel coatings."' in message.content


def test_a_standalone_follow_up_costs_no_rewrite(falcon: str) -> None:
    outs, _, _ = conversation(falcon, ["Who manages procurement?", "When do the field trials start?"])
    assert outs[1]["asked"] == "When do the field trials start?"
    assert [c["step"] for c in outs[1]["calls"]] == ["read", "answer", "offloader"]


def test_a_turn_about_the_conversation_reads_nothing_and_sees_the_last_exchange(falcon: str) -> None:
    outs, events, chat = conversation(falcon, ["Who manages procurement?", "Thanks! Say it shorter."])
    first, second = outs
    assert second["asked"] == "" and second["read"] == [] and second["stopped"] == ""
    assert [c["step"] for c in second["calls"]] == ["answer", "offloader"]
    assert len(worker_questions(chat)) == len(worker_questions(chat)[:1])  # only the first turn read
    assert [r["id"] for r in second["recalled"]] == ["o1"]
    prompt = str(chat.calls[-2][-1].content)  # the answering call of the second turn
    assert "Recalled for this question:\n[o1] Turn 1" in prompt and first["answer"] in prompt
    # the quotes of the last reading stay in the memory and back the answer
    assert "Quotes from the documents:\n[c1.1] Alice Moreau" in prompt and second["sources"]
    assert {d["via"] for d in second["details"]} == {"kept"}
    assert [e["message"] for e in events[1] if e.get("stage") == "read"] == [
        "answering from the conversation (nothing to read)"
    ]


def test_the_statuses_say_what_is_being_read(falcon: str) -> None:
    _, events, _ = conversation(falcon, ["Who manages procurement?"])
    lines = [e.get("message", "") for e in events[0]]
    read = [e for e in events[0] if e.get("chunk")]
    assert read and all(e["stage"] == "reading" and e["total"] == 4 for e in read)
    assert any(line.startswith("stopped (") for line in lines)
    assert lines[-2].startswith("read ") and "quote" in lines[-2]  # what the reading kept, before the offloader


def test_a_document_over_the_turn_budget_is_read_best_first(falcon: str) -> None:
    outs, events, _ = conversation(falcon, ["Who manages procurement?"], {"read_budget": 60})
    assert outs[0]["stopped"] in ("budget", "complete", "end")
    assert any(e.get("message") == 'reading best-first for: "Who manages procurement?"' for e in events[0])


def test_what_fits_the_budget_is_read_whole(falcon: str) -> None:
    state: Any = {"chunks": 4, "collection": [falcon], "doc_id": falcon, "tags": {}}
    assert fits(state, OffloadContext(read_budget=3000))
    assert not fits(state, OffloadContext(read_budget=30))  # the texts hold more than 30 tokens
    assert not fits({**state, "chunks": 1000}, OffloadContext(read_budget=3000))  # too many chunks to look
    assert fits(state, OffloadContext(read_budget=0))  # no budget: everything


def test_working_memory_stays_bounded_over_four_turns(falcon: str) -> None:
    questions = [
        "Who manages procurement?",
        "What supplier did they find?",
        "When do the field trials start?",
        "Who leads the engineering team?",
    ]
    outs, _, _ = conversation(falcon, questions)
    tokens = [o["input_tokens"] for o in outs]
    assert all(tokens) and max(tokens) <= 2 * tokens[0], tokens


@pytest.mark.parametrize(
    ("message", "conversation_only", "refers"),
    [
        ("Thanks!", True, True),
        ("Say it shorter.", True, True),
        ("Can you say that in one sentence?", True, True),
        ("谢谢", True, False),
        ("What supplier did they find?", False, True),
        ("And the budget?", False, True),
        ("Who manages procurement?", False, False),
        ("When do the field trials start?", False, False),
    ],
)
def test_the_rules_for_what_a_message_needs(message: str, conversation_only: bool, refers: bool) -> None:
    assert conversational(message) is conversation_only
    assert refers_back(message) is refers


def test_a_rewrite_that_drops_the_message_is_not_taken() -> None:
    history = [{"question": "Who manages procurement?", "conclusion": "Bob Chen manages procurement."}]
    answering = ScriptedChatModel(default=lambda m: json.dumps({"question": "Bob Chen."}))
    with use_chat_model(answering):
        kept = standalone_question(llm_for("offloader"), "What supplier did they find?", history, "en", 2)
    assert kept == "What supplier did they find?"
    rewriting = ScriptedChatModel(default=lambda m: json.dumps({"question": "What supplier did Bob Chen find?"}))
    with use_chat_model(rewriting):
        taken = standalone_question(llm_for("offloader"), "What supplier did they find?", history, "en", 2)
    assert taken == "What supplier did Bob Chen find?"
    prompt = str(rewriting.calls[0][-1].content)
    assert "Q: Who manages procurement?\nA: Bob Chen manages procurement." in prompt
    assert prompt.endswith("Latest message: What supplier did they find?")


def test_labels_of_a_collection_reading_take_the_sessions_tags() -> None:
    reading = {1: "doc-b", 2: "doc-a"}  # the reading tagged its documents in its own order
    thread = {"doc-a": 1, "doc-b": 3}
    assert relabelled("2:c4.1", reading, thread) == "1:c4.1"
    assert relabelled("1:c0.2", reading, thread) == "3:c0.2"
    assert relabelled("c2.1", reading, thread) == "c2.1"  # one document: no tag


def test_a_chat_over_a_collection_cites_each_document_by_the_sessions_tag(tmp_path: Path, falcon: str) -> None:
    herons = ingest(text="# Herons\n\nHerons wade in shallow water at dawn.\n", title="Herons").doc_id
    compiled = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "both"}}
    with use_chat_model(ScriptedChatModel(default=offload_reply)):
        out = compiled.invoke(
            {"question": "Where do herons wade?", "doc_ids": [herons, falcon]}, config=config, context={}
        )
    tags = {d["doc_id"]: d["tag"] for d in out["documents"]}
    (source,) = out["sources"]
    assert source["doc_id"] == herons and source["label"] == f"{tags[herons]}:c0.1" and tags[falcon] == 2
    assert source["title"] == "Herons" and "shallow water" in source["quote"]
