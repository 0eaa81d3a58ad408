from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from doubles.chat import ScriptedChatModel
from graphs.chain.graph import graph
from nodes.chain import core as chain_nodes
from nodes.chain.core import WorkerNote, compose_notes
from nodes.ingest import ingest
from stores.models import use_chat_model
from stores.settings import InputError, ModelError
from stores.text import count_tokens
from stores.vectorstore import get_store
from surfaces.cli import EXIT_INPUT, EXIT_OK, main

MANAGER = json.dumps({"answer": "40,000 euros", "evidence": ["c1", "c99"], "explanation": "Approved in March [c1]."})


def worker_reply(messages: Sequence[BaseMessage]) -> str:
    """Facts only from pieces that mention money; nothing from the others."""
    text = str(messages[-1].content)
    piece = text.split("Your piece", 1)[1]
    if "euros" in piece:
        return json.dumps({"facts": ["The budget is 40,000 euros."], "missing": "nothing"})
    return json.dumps({"facts": [], "missing": "the budget"})


def fake() -> ScriptedChatModel:
    return ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=worker_reply)


@pytest.fixture
def falcon(sample_markdown: Path) -> str:
    return ingest(str(sample_markdown), chunk_size=50, chunk_overlap=0).doc_id


def test_chain_reads_every_chunk_in_tree_order(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        out = graph.invoke(
            {"question": "What budget was approved?", "doc_id": falcon},
            context={"order": "chow-liu-bfs", "read_all": True},
        )
    order = out["order"][0]
    assert sorted(order, key=lambda c: int(c[1:])) == [f"c{i}" for i in range(len(order))]
    assert len(order) >= 4
    assert len(out["tree"]) == len(order) - 1
    assert out["answer"] == "40,000 euros"
    assert out["citations"] == ["c1"]
    assert out["usage"]["worker"]["calls"] == len(order)
    assert out["usage"]["manager"]["calls"] == 1
    assert out["calls"] == len(order) + 1
    assert "The budget is 40,000 euros. [c1]" in out["notes"][0]
    assert out["read"] == order and out["skipped"] == [] and out["stopped"] == "end"
    # the manager saw the notes of the chain
    assert "[c1]" in str(model.calls[-1][-1].content)


def test_irrelevant_workers_pass_the_notes_on_unchanged(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        graph.invoke({"question": "What budget?", "doc_id": falcon}, context={"order": "original", "read_all": True})
    worker_prompts = [str(c[-1].content) for c in model.calls[:-1]]
    after_budget = [p for p in worker_prompts if "Your piece [c1]" not in p][1:]
    assert all("40,000 euros. [c1]" in p for p in after_budget)


def test_orders_and_budget(falcon: str) -> None:
    with use_chat_model(fake()):
        full = {"read_all": True}
        original = graph.invoke({"question": "budget?", "doc_id": falcon}, context={"order": "original", **full})
        reverse = graph.invoke({"question": "budget?", "doc_id": falcon}, context={"order": "reverse", **full})
        short = graph.invoke(
            {"question": "budget?", "doc_id": falcon}, context={"max_chunks": 2, "early_stop": False, "floor": -9.0}
        )
    assert original["order"][0] == sorted(original["order"][0], key=lambda c: int(c[1:]))
    assert reverse["order"][0] == original["order"][0][::-1]
    assert len(short["order"][0]) == 2 and short["usage"]["worker"]["calls"] == 2 and short["stopped"] == "budget"


def test_multi_root_voting_runs_several_chains(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        out = graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"roots": 2})
    assert len(out["order"]) == 2 and out["order"][0][0] != out["order"][1][0]
    assert len(out["notes"]) == 2
    assert "Notes of chain 2" in str(model.calls[-1][-1].content)


def test_tree_is_cached_per_document(falcon: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with use_chat_model(fake()):
        graph.invoke({"question": "budget?", "doc_id": falcon})

        def fail(*_a: object, **_k: object) -> None:
            raise AssertionError("the tree should come from the cache")

        monkeypatch.setattr(chain_nodes, "build_tree", fail)
        out = graph.invoke({"question": "Who leads the team?", "doc_id": falcon})
    assert out["answer"]


def test_path_input_ingests_first(sample_markdown: Path) -> None:
    with use_chat_model(fake()):
        out = graph.invoke({"question": "budget?", "path": str(sample_markdown)})
    assert out["doc_id"] and out["order"][0]


@pytest.mark.parametrize(
    ("payload", "context", "message"),
    [
        ({"question": "  "}, {}, "empty"),
        ({"question": "why? " * 1000}, {}, "limit"),
        ({"question": "q"}, {"budget": -1}, "negative"),
        ({"question": "q"}, {"order": "sideways"}, "unknown order"),
        ({"question": "q"}, {"root": "middle"}, "root"),
        ({"question": "q", "doc_id": "0123456789abcdef"}, {}, "not ingested"),
    ],
)
def test_bad_input(falcon: str, payload: dict[str, str], context: dict[str, str], message: str) -> None:
    payload = {"doc_id": falcon, **payload}
    with use_chat_model(fake()), pytest.raises(InputError, match=message):
        graph.invoke(payload, context=context)


def test_one_chunk_and_identical_chunks() -> None:
    one = ingest(text="The budget is 40,000 euros.").doc_id
    same = ingest(
        text="\n\n".join(["Same words here about euros."] * 2) + "\n\n# B\n\nSame words here about euros."
    ).doc_id
    with use_chat_model(fake()):
        a = graph.invoke({"question": "budget?", "doc_id": one})
        b = graph.invoke({"question": "budget?", "doc_id": same}, context={"read_all": True})
    assert a["order"] == [["c0"]] and a["tree"] == []
    assert sorted(b["order"][0]) == ["c0", "c1"]


def test_question_in_another_language(falcon: str) -> None:
    with use_chat_model(fake()):
        out = graph.invoke({"question": "批准的预算是多少？", "doc_id": falcon}, context={"read_all": True})
    assert out["answer"] and len(out["order"][0]) >= 4


def test_manager_output_that_never_fits_is_a_model_error(falcon: str) -> None:
    broken = ScriptedChatModel(rules=[("manager of a chain", "I think it is 40,000.")], default=worker_reply)
    with use_chat_model(broken), pytest.raises(ModelError, match="Answer"):
        graph.invoke({"question": "budget?", "doc_id": falcon}, context={"max_chunks": 1})


def test_compose_notes_dedupes_and_stays_bounded() -> None:
    notes = compose_notes("", "c1", WorkerNote(facts=["Alpha is one.", "Beta is two."], missing="gamma"), 50)
    assert notes.splitlines() == ["- Alpha is one. [c1]", "- Beta is two. [c1]", "Missing: gamma"]
    notes = compose_notes(notes, "c2", WorkerNote(facts=["alpha is one.", "Gamma is three."], missing=""), 50)
    assert notes.splitlines() == ["- Alpha is one. [c1]", "- Beta is two. [c1]", "- Gamma is three. [c2]"]
    long = compose_notes(notes, "c3", WorkerNote(facts=["word " * 60]), 20)
    assert "[c3]" not in long


def test_cli_ask_json(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with use_chat_model(fake()):
        code = main(["ask", str(sample_markdown), "What budget was approved?", "--json", "-q", "--chunk-size", "50"])
    assert code == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] == "40,000 euros" and out["citations"] == ["c1"]
    assert re.fullmatch(r"c\d+", out["order"][0])
    assert out["read"] == out["order"] and out["stopped"] in ("complete", "budget", "end")
    assert isinstance(out["skipped"], list)
    assert set(out["tokens"]) == {"worker", "manager"}
    assert main(["ask", str(sample_markdown), " ", "-q"]) == EXIT_INPUT


class Writes(io.StringIO):
    """A stdout that remembers each write."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return super().write(text)

    def isatty(self) -> bool:
        return True


def test_cli_ask_streams_the_answer_on_a_terminal(sample_markdown: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = Writes()
    monkeypatch.setattr("sys.stdout", out)
    with use_chat_model(fake()):
        assert main(["ask", str(sample_markdown), "What budget was approved?", "-q", "--chunk-size", "50"]) == EXIT_OK
    text = out.getvalue()
    assert text.startswith("40,000 euros\n") and text.count("40,000 euros") == 1
    # written piece by piece as the model's reply arrived, never the JSON around it
    pieces = out.parts[: out.parts.index("\n")]
    assert len(pieces) >= 2 and "".join(pieces) == "40,000 euros"
    assert not any('"' in p or "{" in p for p in pieces)


def test_cli_ask_no_stream_prints_once(sample_markdown: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = Writes()
    monkeypatch.setattr("sys.stdout", out)
    with use_chat_model(fake()):
        args = ["ask", str(sample_markdown), "What budget was approved?", "-q", "--chunk-size", "50", "--no-stream"]
        assert main(args) == EXIT_OK
    assert "40,000 euros" in out.parts  # the whole answer in one write


def test_anytime_reading_stops_when_the_notes_answer_the_question(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        out = graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"confirm": 0})
    # the most relevant chunk holds the budget and its worker says nothing is missing
    assert out["order"] == [["c1"]] and out["read"] == ["c1"]
    assert out["stopped"] == "complete" and out["calls"] == 2
    assert out["answer"] == "40,000 euros"


def test_confirm_waits_for_a_second_informative_worker(falcon: str) -> None:
    def reply(messages: Sequence[BaseMessage]) -> str:
        piece = str(messages[-1].content).split("Your piece", 1)[1]
        if "euros" in piece:
            return json.dumps({"facts": ["The budget is 40,000 euros."], "missing": ""})
        if "procurement" in piece:
            return json.dumps({"facts": ["Bob Chen manages procurement."], "missing": "none"})
        return json.dumps({"facts": [], "missing": ""})  # adds nothing: neither confirms nor resets

    hits = {h.chunk_id: h.text for h in get_store("default", None).by_doc(falcon)}
    context = {"floor": -9.0, "budget": 0}
    with use_chat_model(ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=reply)):
        once = graph.invoke(
            {"question": "What budget was approved?", "doc_id": falcon}, context={**context, "confirm": 0}
        )
        twice = graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context=context)
    assert len(once["read"]) == 1 and once["stopped"] == "complete"
    assert twice["stopped"] == "complete" and len(twice["read"]) >= 2
    assert "procurement" in hits[twice["read"][-1]]  # stopped at the second informative worker


def test_budget_ends_the_chain_and_the_manager_answers_from_what_was_read(falcon: str) -> None:
    never_done = ScriptedChatModel(
        rules=[("manager of a chain", MANAGER)],
        default=json.dumps({"facts": ["Something about the project."], "missing": "the budget"}),
    )
    hits = get_store("default", None).by_doc(falcon)
    sizes = {h.chunk_id: count_tokens(h.text) for h in hits}
    budget = max(sizes.values()) + 1
    with use_chat_model(never_done):
        out = graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"budget": budget})
    assert out["stopped"] == "budget"
    assert 1 <= len(out["read"]) < len(hits)
    assert sum(sizes[c] for c in out["read"]) <= budget
    assert out["calls"] == len(out["read"]) + 1 and out["answer"] == "40,000 euros"


def test_chunks_below_the_floor_are_skipped_without_a_call(falcon: str) -> None:
    model = ScriptedChatModel(
        rules=[("manager of a chain", MANAGER)], default=json.dumps({"facts": [], "missing": "the budget"})
    )
    with use_chat_model(model):
        out = graph.invoke(
            {"question": "What budget was approved?", "doc_id": falcon},
            context={"budget": 0, "floor": 0.0, "order": "original"},
        )
    total = len(get_store("default", None).by_doc(falcon))
    assert out["stopped"] == "end" and out["skipped"]
    assert not set(out["read"]) & set(out["skipped"]) and len(out["read"]) + len(out["skipped"]) == total
    assert out["usage"]["worker"]["calls"] == len(out["read"])
    # the skipped chunks were never shown to a worker
    shown = " ".join(str(c[-1].content) for c in model.calls)
    assert not any(f"[{cid}]" in shown for cid in out["skipped"])


def test_best_first_follows_what_the_notes_say_is_missing(falcon: str) -> None:
    def reply(messages: Sequence[BaseMessage]) -> str:
        piece = str(messages[-1].content).split("Your piece", 1)[1]
        if "euros" in piece:
            return json.dumps({"facts": ["The budget is 40,000 euros."], "missing": "who manages procurement"})
        if "procurement" in piece:
            return json.dumps({"facts": ["Bob Chen manages procurement."], "missing": ""})
        return json.dumps({"facts": [], "missing": "who manages procurement"})

    model = ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=reply)
    with use_chat_model(model):
        out = graph.invoke(
            {"question": "What budget was approved?", "doc_id": falcon}, context={"floor": -9.0, "confirm": 0}
        )
    hits = {h.chunk_id: h.text for h in get_store("default", None).by_doc(falcon)}
    assert "euros" in hits[out["read"][0]]
    assert "procurement" in hits[out["read"][1]]  # reached through the missing text
    assert out["stopped"] == "complete" and len(out["read"]) == 2


def test_the_manager_sees_facts_not_the_missing_lines(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"read_all": True})
    manager_prompt = str(model.calls[-1][-1].content)
    assert "40,000 euros. [c1]" in manager_prompt and "Missing:" not in manager_prompt


def test_cli_ask_budget_flag(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    never_done = ScriptedChatModel(
        rules=[("manager of a chain", MANAGER)], default=json.dumps({"facts": ["A fact."], "missing": "more"})
    )
    args = ["ask", str(sample_markdown), "What budget was approved?", "--json", "-q", "--chunk-size", "50"]
    with use_chat_model(never_done):
        assert main([*args, "--budget", "1"]) == EXIT_OK
        one = json.loads(capsys.readouterr().out)
        assert main([*args, "--read-all"]) == EXIT_OK
        every = json.loads(capsys.readouterr().out)
    assert len(one["read"]) == 1 and one["stopped"] == "budget"
    assert len(every["read"]) >= 4 and every["stopped"] == "end" and every["skipped"] == []
    assert main([*args, "--budget", "-1"]) == EXIT_INPUT


def test_the_planner_loads_the_document_once_per_process(falcon: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import nodes.chain.planner as chain_graph

    loads: list[str] = []
    real = chain_graph.document_vectors

    def counted(store: object, doc_id: str) -> object:
        loads.append(doc_id)
        return real(store, doc_id)  # type: ignore[arg-type]

    monkeypatch.setattr(chain_graph, "document_vectors", counted)
    monkeypatch.setattr(chain_graph, "_READING", type(chain_graph._READING)())
    with use_chat_model(fake()):
        out = graph.invoke({"question": "Who leads the team?", "doc_id": falcon}, context={"read_all": True})
        assert len(out["read"]) > 2
        # once for the orderer, once for the planner's first step, none for the later steps
        assert len(loads) == 2
        graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"read_all": True})
    assert len(loads) == 3
