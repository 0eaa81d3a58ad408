"""``python -m bench.chat_long`` end to end with the scripted model on tiny qa_long-shaped files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import chat_long as bench
from bench.qa_data import load_qa_dir

PARAGRAPHS = [
    ("Falcon pump", "Project Falcon builds a solar pump for farms.", "falcon"),
    ("Bob Chen", "Bob Chen manages procurement for Project Falcon.", "procurement"),
    ("Coatings", "Bob Chen found a supplier of self-cleaning panel coatings.", "supplier"),
    ("Herons", "Herons wade in shallow water at dawn.", "herons"),
    ("Kenya trials", "Field trials start in June near Nakuru.", "trials"),
]


def item(number: int, question: str, answer: str, supporting: set[str]) -> dict:
    paragraphs = [{"title": title, "text": text, "supporting": key in supporting} for title, text, key in PARAGRAPHS]
    return {
        "id": f"q{number}",
        "source": "hotpotqa",
        "question": question,
        "answers": [answer],
        "paragraphs": paragraphs,
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "qa_long"
    folder.mkdir()
    rows = [
        item(1, "Who manages procurement for Project Falcon?", "Bob Chen", {"procurement"}),
        item(2, "Where do herons wade?", "shallow water", {"herons"}),
        item(3, "When do field trials start?", "June", {"trials"}),
    ]
    (folder / "hotpotqa_long_dev.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return folder


def test_earlier_turns_ask_other_items_whose_paragraphs_the_document_holds(data: Path) -> None:
    pool = load_qa_dir(data)["hotpotqa_long_dev"]
    assert bench.earlier_questions(pool[0], pool) == [pool[1].question, pool[2].question]
    alone = bench.earlier_questions(pool[0], pool[:1])
    assert alone == [bench.OVERVIEW, bench.OVERVIEW]  # no other item: the overview fills up


def test_the_answer_is_scored_without_its_citation_markers() -> None:
    assert bench.answer_text("Bob Chen [c2.2]; coatings [2:c4.1].") == "Bob Chen ; coatings ."


def test_fake_run_puts_chat_beside_ask_and_resumes_from_its_journal(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "chat_long.json"
    argv = ["--data", str(data), "--out", str(out), "--split", "0:2", "--canvas", "off,on", "--turns", "4"]
    argv += ["--embedder", "hash", "--fake"]
    report = bench.main(argv)
    summary = report["summary"]
    assert set(summary) == {"ask", "chat", "chat-canvas", "chat-third", "chat-third-canvas"}
    assert all(figures["items"] == 2 for figures in summary.values())
    # both answer from the same reading's quotes: the manager from the first, the chat from the one nearest the question
    assert 0.1 < summary["ask"]["f1"] < summary["chat"]["f1"]
    gap = summary["chat"]["vs_ask"]["f1_points"]
    assert gap > 0 and abs(gap - 100 * (summary["chat"]["f1"] - summary["ask"]["f1"])) < 0.2
    assert summary["chat"]["vs_ask"]["items"] == 2 and "vs_ask" not in summary["ask"]
    rows = {(r["item"], r["method"]): r for r in report["rows"]}
    first = rows[("q1", "chat")]
    assert first["asked"] == "Who manages procurement for Project Falcon?" and first["sources"]
    assert [t["steps"] for t in first["turns"]] == [["read", "answer", "offloader"]]
    assert (
        0 < first["answer_s"] <= first["seconds"] and rows[("q1", "ask")]["answer_s"] == rows[("q1", "ask")]["seconds"]
    )
    assert summary["chat"]["vs_ask"]["answer_seconds_ratio"] <= summary["chat"]["vs_ask"]["seconds_ratio"]
    third = rows[("q1", "chat-third-canvas")]
    assert [t["question"] for t in third["turns"]][2:] == [
        "Who manages procurement for Project Falcon?",
        bench.LAST_TURN,
    ]
    assert rows[("q1", "chat-canvas")]["turns"][0]["steps"][0] == "canvas"  # drawn once per document
    assert "canvas" not in third["turns"][0]["steps"] and "read" not in third["turns"][3]["steps"]
    assert len(third["turn_inputs"]) == 4 and summary["chat-third"]["turn_inputs"][0] > 0
    assert summary["chat-third"]["max_growth"] is not None
    journal_path = tmp_path / "chat_long_journal.jsonl"
    assert len(journal_path.read_text().splitlines()) == 10
    # a second run reads every row back from the journal: no model call
    from graphs.chain import graph as ask_graph

    monkeypatch.setattr(ask_graph, "graph", None)
    again = bench.main(argv)
    assert again["summary"] == summary and len(journal_path.read_text().splitlines()) == 10


def test_unknown_method_is_refused(data: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown methods"):
        bench.main(["--data", str(data), "--out", str(tmp_path / "x.json"), "--methods", "ask,magic", "--fake"])
