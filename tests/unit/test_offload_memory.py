"""Working memory of a turn: pieces per policy, the token budget, recall, citations and the offloader agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import prompts
from doubles.chat import ScriptedChatModel
from nodes.collection.sources import Sources
from nodes.ingest import ingest
from nodes.offload.answer import AnswerReply, ask, citations_of, normalise_ids, resolve_recall
from nodes.offload.memory import Piece, build_memory, render_user
from nodes.offload.offloader import OffloadNote, compress_turn, first_sentence, supported, update_pinned
from nodes.offload.pieces import evidence_pieces, history_pieces, pinned_piece, quoted_lines
from stores.models import LLM, use_chat_model
from stores.offload import OffloadItem, get_offload_store
from stores.text import count_tokens
from stores.usage import track_usage
from stores.vectorstore import get_store

LONG = " ".join(f"Sentence {i} is about the budget of the pump project and item {i}." for i in range(40))
SYSTEM = "Answer from the memory."


def turns(n: int) -> list[dict]:
    return [
        {
            "turn": t,
            "question": f"Question number {t} about the budget?",
            "answer": f"Answer {t}: the budget is {t}0,000 euros.",
            "details": ["c1"],
            "quotes": ["c1.1"],
            "offload_id": f"o{t}",
            "conclusion": f"conclusion {t}",
        }
        for t in range(1, n + 1)
    ]


def sample_pieces() -> list[Piece]:
    pinned = pinned_piece({"goal": "plan the trials", "facts": ["budget is 40,000 euros"]}, "en")
    assert pinned is not None
    return [
        Piece("canvas", "canvas", "n1 Budget [c1]\nn2 Team [c2]", "canvas"),
        pinned,
        *history_pieces(turns(4), "offload", 2, "en", relevant=["o1"]),
        Piece("details", "c1", LONG, "detail", rank=0, head="[c1] ", query="budget"),
        Piece("details", "c2", LONG, "detail", rank=-1, head="[c2] ", query="budget"),
        Piece("recalled", "o1", LONG, "recalled", head="[o1] ", query="budget"),
    ]


def test_memory_sections_in_order_and_parts() -> None:
    memory = build_memory(SYSTEM, sample_pieces(), "What is the budget?", "en", budget=0)
    user = memory.user
    order = [
        "Map of the document",
        "Pinned state:",
        "Earlier turns (one-line notes",
        "Quotes from the documents:",
        "Recalled for this question:",
        "Question: What is the budget?",
    ]
    positions = [user.index(heading) for heading in order]
    assert positions == sorted(positions)
    assert "Older turns offloaded (ask to recall by id): o2" in user
    assert "[o1] Question number 1 about the budget? → conclusion 1" in user
    assert "[o4] Question number 4" in user and "[o2] Question" not in user
    assert memory.cut == [] and memory.tokens == count_tokens(SYSTEM) + count_tokens(user)
    assert set(memory.parts) == {"system", "canvas", "pinned", "history", "details", "recalled", "question"}


def test_budget_cuts_least_important_first() -> None:
    pieces = sample_pieces()
    full = build_memory(SYSTEM, pieces, "What is the budget?", "en", budget=0).tokens
    memory = build_memory(SYSTEM, pieces, "What is the budget?", "en", budget=full - 20)
    assert memory.cut[0] == "history:older dropped" and memory.tokens <= full - 20
    assert "Pinned state" in memory.user and "[c1]" in memory.user

    tight = build_memory(SYSTEM, pieces, "What is the budget?", "en", budget=260)
    cut = tight.cut
    assert cut[:2] == ["history:older dropped", "history:o1 dropped"]
    assert cut[2].startswith("details:c2 shortened") and cut[3].startswith("details:c1 shortened")
    assert cut[4:6] == ["details:c2 dropped", "recalled:o1 shortened 728->348 tokens"]
    assert cut.index("history:o3 dropped") < cut.index("history:o4 dropped") < cut.index("recalled:o1 dropped")
    assert tight.tokens <= 260 and "… …" not in tight.user
    # what is never cut: the pinned state, the canvas map's head and the question
    assert "budget is 40,000 euros" in tight.user and "Question: What is the budget?" in tight.user


def test_budget_too_small_records_the_overrun() -> None:
    pieces = [Piece("details", "c1", LONG, "detail", head="[c1] ", query="budget")]
    question = "budget " * 400
    memory = build_memory(SYSTEM, pieces, question, "en", budget=200)
    assert memory.cut[-1].startswith("over budget by") and question.strip() in memory.user


@pytest.mark.parametrize("collection", [False, True], ids=["one document", "collection"])
def test_quotes_become_pieces_and_earlier_quotes_are_looked_up_by_label(
    sample_markdown: Path, collection: bool
) -> None:
    doc_id = ingest(str(sample_markdown), chunk_size=60, chunk_overlap=0).doc_id
    others = [ingest(text="# Otters\n\nSea otters hold hands while they sleep.").doc_id] if collection else []
    sources = Sources(get_store("default"), [*others, doc_id])
    team = sources.label(doc_id, "c2")  # c2 alone, 2:c2 in the collection
    evidence = f"[{team}.2] Bob Chen manages procurement.\nnot a quote\n[{team}.1] Alice Moreau leads the team."
    pieces = evidence_pieces(evidence, "Who manages procurement?")
    assert [(p.key, p.text, p.stage) for p in pieces] == [
        (f"{team}.2", f"[{team}.2] Bob Chen manages procurement.", "detail"),
        (f"{team}.1", f"[{team}.1] Alice Moreau leads the team.", "detail"),
    ]
    assert pieces[0].rank > pieces[1].rank  # the later quotes are cut first
    shown = quoted_lines(sources, [f"{team}.2", f"{team}.9", "c99.1"])  # no sentence 9, no chunk 99: left out
    assert shown == f"[{team}.2] Bob Chen manages procurement."


def test_history_per_policy() -> None:
    history = turns(5)
    full = history_pieces(history, "full", 2, "en", details_text=lambda labels: f"[{labels[0]}] detail text")
    assert [p.key for p in full] == [f"turn {t}" for t in range(1, 6)]
    assert [p.stage for p in full] == ["old", "old", "old", "recent", "recent"]
    assert "Q: Question number 1 about the budget?\nA: Answer 1: the budget is 10,000 euros." in full[0].text
    assert "[c1.1] detail text" in full[0].text
    last = history_pieces(history, "last_k", 2, "en")
    assert [p.key for p in last] == ["turn 4", "turn 5"]
    notes = history_pieces(history, "offload_canvas", 2, "en", relevant=["o2"])
    assert [p.key for p in notes] == ["older", "o2", "o4", "o5"]
    assert notes[0].text.endswith("o1, o3") and [p.stage for p in notes] == ["old", "old", "recent", "recent"]
    assert history_pieces([], "full", 2, "en") == []
    assert [p.key for p in history_pieces(history, "offload", 0, "en")] == ["older"]
    user = render_user(full, "q", "en", "verbatim")
    assert user.startswith("Earlier turns:\nTurn 1")


def test_pinned_state_is_small_and_kept() -> None:
    pinned = {"goal": "", "facts": []}
    pinned = update_pinned(
        pinned, OffloadNote(conclusion="c", facts=["Budget is 40,000 euros."], goal="Plan"), max_facts=2
    )
    assert pinned == {"goal": "Plan", "facts": ["Budget is 40,000 euros."]}
    pinned = update_pinned(
        pinned,
        OffloadNote(conclusion="c", facts=["budget is 40,000 euros", "Trials start in June"], goal="Other"),
        max_facts=2,
    )
    assert pinned["goal"] == "Plan" and pinned["facts"] == ["Budget is 40,000 euros.", "Trials start in June"]
    pinned = update_pinned(pinned, OffloadNote(conclusion="c", facts=["Alice leads " + "x " * 60]), max_facts=2)
    assert pinned["facts"][0] == "Trials start in June" and count_tokens(pinned["facts"][1]) <= 27
    assert pinned_piece({"goal": "", "facts": []}, "en") is None
    assert "固定状态" in pinned_piece({"goal": "目标", "facts": []}, "zh").text  # type: ignore[union-attr]


def test_offloader_note_and_its_fallback() -> None:
    good = ScriptedChatModel(replies=[json.dumps({"conclusion": "Bob Chen manages procurement.", "facts": ["Bob"]})])
    with use_chat_model(good), track_usage() as usage:
        note, error = compress_turn(
            LLM("offloader"),
            question="Who?",
            answer="Bob Chen does.",
            pinned={"goal": "g"},
            lang="en",
            max_tokens=50,
        )
    assert note.conclusion == "Bob Chen manages procurement." and error == "" and usage["offloader"]["calls"] == 1
    user = str(good.calls[0][-1].content)
    assert "Goal so far: g" in user and "Answer: Bob Chen does." in user

    bad = ScriptedChatModel(default="not json")
    with use_chat_model(bad):
        note, error = compress_turn(
            LLM("offloader", max_retries=1),
            question="Who?",
            answer="Bob Chen manages procurement. He also signs contracts.",
            pinned={},
            lang="en",
            max_tokens=50,
        )
    assert note.conclusion == "Bob Chen manages procurement." and note.facts == [] and "OffloadNote" in error
    assert len(bad.calls) == 2
    assert first_sentence("") == ""


def test_answer_falls_back_to_plain_text() -> None:
    memory = build_memory(SYSTEM, [], "Who?", "en", budget=0)
    fake = ScriptedChatModel(replies=["{broken", "{broken", "Bob Chen [c2]."])
    with use_chat_model(fake), track_usage() as usage:
        reply, mode = ask(LLM("expert", max_retries=1), memory, recall=False, max_tokens=50, lang="en")
    assert mode == "text" and reply.answer == "Bob Chen [c2]." and usage["expert"]["calls"] == 3  # 2 refused JSON
    assert str(fake.calls[-1][0].content) == prompts.render("offload/answer_plain", "en")
    assert citations_of(reply, ["c0", "c1", "c2"]) == ["c2"] and citations_of(reply, ["c0", "c1"]) == []
    reply = AnswerReply(answer="See [c1] and [c7].", citations=["C3", "[c1]", "chunk 2", "c40"])
    assert citations_of(reply, [f"c{i}" for i in range(10)]) == ["c3", "c1", "c7"]
    tagged = AnswerReply(answer="Both [2:c1] and [c1], [3:c0].", citations=["[1:C0]", "2: c1", "9:c1"])
    assert citations_of(tagged, ["1:c0", "2:c0", "2:c1"]) == ["1:c0", "2:c1"]  # one parser: tags name documents


def test_normalise_ids() -> None:
    assert normalise_ids(["[O2]", " c3 ", "o2", "", "what?"]) == ["o2", "c3", "what?"]


def test_recall_loads_known_ids_and_explains_unknown_ones(sample_markdown: Path) -> None:
    doc_id = ingest(str(sample_markdown)).doc_id
    offload = get_offload_store("default", backend="memory")
    offload.put(OffloadItem(id="o1", session="s", doc_id=doc_id, turn=1, role="exchange", text="Q: x\nA: " + LONG))
    pieces, report = resolve_recall(
        ["o1", "c0", "o7", "c99"],
        offload_store=offload,
        session="s",
        sources=Sources(get_store("default"), [doc_id]),
        recall_tokens=60,
        lang="en",
    )
    assert [(r["id"], r["found"], r["source"]) for r in report] == [
        ("o1", True, "offload"),
        ("c0", True, "chunk"),
        ("o7", False, ""),
        ("c99", False, ""),
    ]
    assert pieces[0].shortened and count_tokens(pieces[0].body) <= 62
    assert pieces[1].text.startswith("[c0] Project Falcon builds")
    assert pieces[2].text == (
        "o7: there is no offloaded turn or chunk with this id, so nothing was recalled. "
        "Offloaded ids you can recall: o1."
    )
    assert pieces[2].stage == "fixed"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_offload_prompt_renders(lang: str) -> None:
    for name, language in prompts.all_templates():
        if name.startswith("offload/") and language == lang:
            names = prompts.placeholders(name, lang)
            assert prompts.render(name, lang, **{n: "x" for n in names})


def test_offloader_keeps_only_what_the_exchange_supports() -> None:
    note = {
        "conclusion": "The committee cancelled the whole project in May.",
        "facts": [
            "Bob Chen is the procurement manager.",
            "He oversees compliance audits for every purchase in the company.",
        ],
        "goal": "",
    }
    with use_chat_model(ScriptedChatModel(replies=[json.dumps(note)])):
        kept, error = compress_turn(
            LLM("offloader"),
            question="Who manages procurement?",
            answer="Bob Chen manages procurement and the supplier contracts.",
            pinned={},
            lang="en",
            max_tokens=80,
        )
    assert error == "" and kept.facts == ["Bob Chen is the procurement manager."]
    assert kept.conclusion == "Bob Chen manages procurement and the supplier contracts."
    assert supported("Trials start in June", "When do trials start? In June.")
    assert not supported("", "anything") and not supported("Alice leads design", "Bob buys parts")
