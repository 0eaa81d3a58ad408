from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from doubles.chat import ScriptedChatModel
from graphs.chain.graph import graph
from nodes.chain import orderer as chain_nodes
from nodes.chain import planner
from nodes.chain.passages import span_labels
from nodes.chain.worker import compose_evidence
from nodes.ingest import ingest
from stores.cache import reset_caches
from stores.documents import list_documents
from stores.errors import InputError, ModelError
from stores.models import use_chat_model
from stores.text import count_tokens
from stores.vectorstore import get_store
from surfaces.cli import EXIT_INPUT, EXIT_OK, main
from tests.fakes import quoting, shown_sentences

BUDGET = "[c1.1] The committee approved a budget of 40,000 euros in March."
MANAGER = json.dumps({"answer": "40,000 euros", "evidence": ["c1", "c99"], "explanation": "Approved in March [c1]."})


worker_reply = quoting([("euros", "nothing")], otherwise="the budget")
"""Quotes only the sentences that mention money."""


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
    assert out["notes"] == [BUDGET]
    assert out["quotes"] == [BUDGET] and out["inferred"] is False and out["dropped"] == 0
    assert out["read"] == order and out["skipped"] == [] and out["stopped"] == "end"
    assert [p.split(".")[0] for p in out["passages"]] == order  # the full chain reads every chunk whole
    # the manager saw the quotes of the chain
    assert BUDGET in str(model.calls[-1][-1].content)


def test_irrelevant_workers_pass_the_quotes_on_unchanged(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        graph.invoke({"question": "What budget?", "doc_id": falcon}, context={"order": "original", "read_all": True})
    worker_prompts = [str(c[-1].content) for c in model.calls[:-1]]
    found = next(i for i, p in enumerate(worker_prompts) if "[c1.1]" in p.split("Passages:")[1])
    assert found >= 1 and BUDGET not in worker_prompts[found - 1]
    assert all(p.split("Passages:")[0].count(BUDGET) == 1 for p in worker_prompts[found + 1 :])


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
    assert len(short["order"][0]) == 2 and short["stopped"] == "budget"


def test_multi_root_voting_runs_several_chains(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        out = graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"roots": 2})
    assert len(out["order"]) == 2 and out["order"][0][0] != out["order"][1][0]
    assert len(out["notes"]) == 2
    assert "Quotes of chain 2" in str(model.calls[-1][-1].content)


def test_tree_is_cached_per_document(falcon: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with use_chat_model(fake()):
        graph.invoke({"question": "budget?", "doc_id": falcon})

        def fail(*_a: object, **_k: object) -> None:
            raise AssertionError("the tree should come from the cache")

        monkeypatch.setattr(chain_nodes, "build_tree", fail)
        out = graph.invoke({"question": "Who leads the team?", "doc_id": falcon})
    assert out["answer"] == "40,000 euros" and len(out["tree"]) == get_store().count(doc_id=falcon) - 1


def test_path_input_ingests_first(sample_markdown: Path) -> None:
    with use_chat_model(fake()):
        out = graph.invoke({"question": "budget?", "path": str(sample_markdown)})
    (document,) = list_documents("default")
    assert out["doc_id"] == document.doc_id and out["answer"] == "40,000 euros"
    assert 1 <= len(out["order"][0]) <= document.chunks


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
    model = fake()
    with use_chat_model(model):
        out = graph.invoke({"question": "批准的预算是多少？", "doc_id": falcon}, context={"read_all": True})
    order = out["order"][0]
    assert sorted(order) == [f"c{i}" for i in range(len(order))] and len(order) >= 4  # every chunk read
    assert out["answer"] == "40,000 euros"  # the manager's reply
    assert len(model.calls) >= 2 and all("Question: 批准的预算是多少？" in str(m[-1].content) for m in model.calls)


def test_manager_output_that_never_fits_is_a_model_error(falcon: str) -> None:
    broken = ScriptedChatModel(rules=[("manager of a chain", "I think it is 40,000.")], default=worker_reply)
    with use_chat_model(broken), pytest.raises(ModelError, match="Answer"):
        graph.invoke({"question": "budget?", "doc_id": falcon}, context={"max_chunks": 1})


def test_compose_evidence_keeps_document_order_dedupes_and_stays_bounded() -> None:
    shown = {"c1.1": "Alpha is one.", "c1.2": "Beta is two.", "c2.1": "Gamma is three.", "c3.1": "word " * 60}
    notes = compose_evidence("", ["c2.1", "c1.1"], shown, 50)
    assert notes.splitlines() == ["[c1.1] Alpha is one.", "[c2.1] Gamma is three."]
    again = compose_evidence(notes, ["c1.1", "c1.2", "c9.9"], shown, 50)
    assert again.splitlines() == ["[c1.1] Alpha is one.", "[c1.2] Beta is two.", "[c2.1] Gamma is three."]
    assert compose_evidence(again, ["c3.1"], shown, 50) == again  # over the bound: left out


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
    assert text.startswith("40,000 euros\n") and text.split("citations:")[0].count("40,000 euros") == 1
    assert "  [c1.1] The committee approved a budget of 40,000 euros in March." in text  # the quote it rests on
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


def test_anytime_reading_stops_when_nothing_is_missing(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        out = graph.invoke(
            {"question": "What budget was approved?", "doc_id": falcon}, context={"confirm": 0, "batch_tokens": 50}
        )
    # the most relevant passage holds the budget and its worker says nothing is missing
    assert out["passages"][0].startswith("c1.1-") and "c1" in out["read"] and len(out["read"]) < 4
    assert out["stopped"] == "complete" and out["calls"] == 2
    assert out["answer"] == "40,000 euros" and out["quotes"] == [BUDGET]


def test_one_worker_reads_the_best_passages_of_several_chunks(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        out = graph.invoke(
            {"question": "What budget was approved?", "doc_id": falcon}, context={"floor": -9.0, "confirm": 0}
        )
    shown = shown_sentences(model.calls[0])
    assert len({label.split(".")[0] for label, _ in shown}) >= 3  # one call, passages of several chunks
    assert out["usage"]["worker"]["calls"] == 1 and out["stopped"] == "complete"


def test_confirm_waits_for_a_second_informative_worker(falcon: str) -> None:
    reply = quoting([("euros", ""), ("procurement", "none")])  # elsewhere: adds nothing, neither confirms nor resets
    hits = {h.chunk_id: h.text for h in get_store("default", None).by_doc(falcon)}
    context = {"floor": -9.0, "budget": 0, "order": "relevance"}
    with use_chat_model(ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=reply)):
        question = {"question": "What budget was approved, and who manages procurement?", "doc_id": falcon}
        once = graph.invoke(question, context={**context, "confirm": 0})
        twice = graph.invoke(question, context=context)
    assert len(once["read"]) == 1 and once["stopped"] == "complete"
    assert twice["stopped"] == "complete" and len(twice["read"]) >= 2
    informative = [c for c in twice["read"] if "procurement" in hits[c] or "euros" in hits[c]]
    assert len(informative) == 2 and twice["read"][-1] in informative  # stopped at the second informative worker


def test_budget_ends_the_chain_and_the_manager_answers_from_what_was_read(falcon: str) -> None:
    never_done = ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=quoting([("", "the budget")]))
    hits = get_store("default", None).by_doc(falcon)
    budget = 40
    context = {"budget": budget, "batch_tokens": 50, "passage_tokens": 20, "hop_budget": 0, "floor": -9.0}
    with use_chat_model(never_done):
        out = graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context=context)
    assert out["stopped"] == "budget"
    assert 1 <= len(out["read"]) < len(hits)
    read = [s for call in never_done.calls[:-1] for _, s in shown_sentences(call)]
    assert 0 < sum(count_tokens(s) for s in read) <= budget
    assert out["calls"] == out["usage"]["worker"]["calls"] + 1 and out["answer"] == "40,000 euros"


def test_a_remainder_under_the_least_batch_is_not_read(falcon: str, monkeypatch: pytest.MonkeyPatch) -> None:
    batch, budget = 40, 70

    def run(least: float) -> tuple[dict[str, Any], ScriptedChatModel]:
        monkeypatch.setattr(planner, "LEAST_BATCH", least)
        model = ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=quoting([("", "the budget")]))
        context = {"budget": budget, "batch_tokens": batch, "passage_tokens": 20, "hop_budget": 0, "floor": -9.0}
        with use_chat_model(model):
            return graph.invoke({"question": "What budget?", "doc_id": falcon}, context=context), model

    every, model = run(0.0)
    shown = dict(shown_sentences(model.calls[0]))
    passages = [span_labels(span) for span in every["passages"]]
    # what the first worker read, as the budget counts it: each of its passages' sentences joined
    left = budget - sum(count_tokens(" ".join(shown[x] for x in p)) for p in passages if all(x in shown for x in p))
    assert every["usage"]["worker"]["calls"] == 2 and 0 < left < batch
    above, _ = run((left + 1) / batch)  # what is left is under the least batch: no second call
    below, _ = run((left - 1) / batch)
    assert above["stopped"] == below["stopped"] == "budget"
    assert above["usage"]["worker"]["calls"] == 1 and below["usage"]["worker"]["calls"] == 2


def test_a_named_missing_piece_extends_the_budget_once(falcon: str) -> None:
    never_done = ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=quoting([("", "the budget")]))
    context = {"budget": 40, "batch_tokens": 50, "passage_tokens": 20, "floor": -9.0}
    with use_chat_model(never_done):
        plain = graph.invoke({"question": "What budget?", "doc_id": falcon}, context={**context, "hop_budget": 0})
        extended = graph.invoke({"question": "What budget?", "doc_id": falcon}, context={**context, "hop_budget": 30})
    assert plain["stopped"] == "budget" and extended["stopped"] == "hop-budget"
    assert len(extended["passages"]) > len(plain["passages"])
    shown = {label for call in never_done.calls for label, _ in shown_sentences(call)}
    read = {label for out in (plain, extended) for span in out["passages"] for label in span_labels(span)}
    assert shown == read  # the workers were shown what the chains say they read, and nothing else


def test_no_extension_when_nothing_is_named_missing(falcon: str) -> None:
    done = ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=quoting([("", "")], otherwise=""))
    context = {"budget": 40, "batch_tokens": 50, "passage_tokens": 20, "hop_budget": 500, "early_stop": False}
    context["floor"] = -9.0
    with use_chat_model(done):
        out = graph.invoke({"question": "What budget?", "doc_id": falcon}, context=context)
    assert out["stopped"] == "budget"


def test_chunks_below_the_floor_are_skipped_without_a_call(falcon: str) -> None:
    model = ScriptedChatModel(
        rules=[("manager of a chain", MANAGER)], default=json.dumps({"quotes": [], "missing": "the budget"})
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
    assert not any(f"[{cid}." in shown for cid in out["skipped"])


def test_best_first_follows_what_the_quotes_say_is_missing(falcon: str) -> None:
    reply = quoting([("procurement", ""), ("euros", "who manages procurement")], otherwise="who manages procurement")
    model = ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=reply)
    context = {"floor": -9.0, "confirm": 0, "batch_tokens": 20, "passage_tokens": 20, "tree_weight": 0.0}
    with use_chat_model(model):
        out = graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context=context)
    first, second = (shown_sentences(call) for call in model.calls[:2])
    assert any("euros" in s for _, s in first) and not any("procurement" in s for _, s in first)
    assert any("procurement" in s for _, s in second)  # reached through the missing text
    assert out["stopped"] == "complete" and out["usage"]["worker"]["calls"] == 2
    # the quote and the opening sentence of its passage
    assert [q.split("]")[0] for q in out["notes"][0].splitlines()] == ["[c1.1", "[c2.1", "[c2.2"]


def test_the_manager_sees_the_quotes_not_what_was_missing(falcon: str) -> None:
    model = fake()
    with use_chat_model(model):
        graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"read_all": True})
    manager_prompt = str(model.calls[-1][-1].content)
    assert BUDGET in manager_prompt and "the budget" not in manager_prompt.split("Quotes:")[1]


def test_cli_ask_budget_flag(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    never_done = ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=quoting([("", "more")]))
    args = ["ask", str(sample_markdown), "What budget was approved?", "--json", "-q", "--chunk-size", "50"]
    with use_chat_model(never_done):
        assert main([*args, "--budget", "1", "--hop-budget", "0"]) == EXIT_OK
        one = json.loads(capsys.readouterr().out)
        assert main([*args, "--read-all"]) == EXIT_OK
        every = json.loads(capsys.readouterr().out)
    assert len(one["read"]) == 1 and one["stopped"] == "budget"
    assert len(every["read"]) >= 4 and every["stopped"] == "end" and every["skipped"] == []
    assert main([*args, "--budget", "-1"]) == EXIT_INPUT


def test_the_planner_loads_the_document_once_per_process(falcon: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import nodes.chain.pool as pool

    loads: list[int] = []
    real = pool._previous_chunks

    def counted(store: Any, hits: Any, chunk_tokens: int) -> Any:
        loads.append(len(hits))  # once per reading built
        return real(store, hits, chunk_tokens)

    monkeypatch.setattr(pool, "_previous_chunks", counted)
    with use_chat_model(fake()):
        out = graph.invoke({"question": "Who leads the team?", "doc_id": falcon}, context={"read_all": True})
        assert len(out["read"]) > 2
        # built by the orderer, read again by the planner's and workers' steps
        assert len(loads) == 1 and len(pool._readings) == 1
        reset_caches()  # the one reset the tests use forgets the planner's reading inputs too
        assert len(pool._readings) == 0
        graph.invoke({"question": "Who leads the team?", "doc_id": falcon}, context={"read_all": True})
        assert len(loads) == 2
        graph.invoke({"question": "What budget was approved?", "doc_id": falcon}, context={"read_all": True})
    assert len(loads) == 2  # another question reads the same chunks: the same reading


def test_the_planner_embeds_a_text_once_per_vector_space() -> None:
    import numpy as np

    from nodes.chain.pool import PoolInfo, PoolVectors, Reading

    asked: list[str] = []

    class Embedder:
        def embed_query(self, text: str) -> list[float]:
            asked.append(text)
            return [1.0, 0.0]

    class Store:
        space = "test-space"
        embedder = Embedder()

    matrix = np.array([[1.0, 0.0], [0.0, 2.0]])
    vectors = PoolVectors(PoolInfo("en"), ["c0", "c1"], ["", ""], matrix, ["d", "d"])
    reading = Reading(Store(), vectors, tree=None, passages=None, chunk_index=None)  # type: ignore[arg-type]
    first = reading.cosine("who leads")
    again = reading.cosine("who leads")
    assert asked == ["who leads"] and first.tolist() == again.tolist() == [1.0, 0.0]
    Store.space = "other-space"
    reading.cosine("who leads")
    assert asked == ["who leads", "who leads"]
    reset_caches()
    Store.space = "test-space"
    reading.cosine("who leads")
    assert len(asked) == 3
