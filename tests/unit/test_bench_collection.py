"""bench.collection: evidence found in any document of a collection, the model-free design and scale parts,
and the QMSum collection summaries, on small data with the hash embedder and scripted models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.chain_long import NAMESPACE, as_text, collection_ids, run_long, summarise
from bench.collection import collection_evidence, main
from bench.qa_data import Paragraph, QAItem
from doubles.chat import ScriptedChatModel
from nodes.ingest import ingest
from stores.models import use_chat_model
from tests.unit.test_bench_chain_long import POOL, scripted


def write_qa(folder: Path, items: list[QAItem]) -> Path:
    """The items as two qa_long-like files."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, part in (("a_long", items[: len(items) // 2]), ("b_long", items[len(items) // 2 :])):
        lines = [
            json.dumps(
                {
                    "id": i.id,
                    "source": i.source,
                    "question": i.question,
                    "answers": i.answers,
                    "paragraphs": [p.__dict__ for p in i.paragraphs],
                }
            )
            for i in part
        ]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_a_collection_run_finds_its_evidence_in_whichever_document_holds_it() -> None:
    gold = Paragraph("City 0", "City 0 lies on River0, the long river.", True)
    own = QAItem("q0", "test", "Which river?", ["River0"], [gold, Paragraph("Filler", "Nothing here at all.")])
    other = QAItem("q9", "test", "Other?", ["x"], [Paragraph("Else", "Something else."), gold])
    ids = [ingest(text=as_text(i.paragraphs), namespace=NAMESPACE, embedder="hash").doc_id for i in (own, other)]
    documents = [{"tag": 1, "doc_id": ids[1], "title": "", "source": "text"}]
    read_elsewhere = {"passages": ["1:c0.2-2"], "read": ["1:c0"], "documents": documents}
    assert collection_evidence(own.paragraphs, read_elsewhere, "hash") == 1.0  # the copy in document q9 counts
    missed = {"passages": ["1:c0.1-1"], "read": ["1:c0"], "documents": documents}
    assert collection_evidence(own.paragraphs, missed, "hash") == 0.0


def test_the_collection_methods_ask_every_document_and_report_their_figures(tmp_path: Path) -> None:
    methods = ["anytime", "collection", "topk-collection"]
    with use_chat_model(scripted()):
        rows = run_long(POOL[:2], POOL, tmp_path / "journal.jsonl", methods, budget=2000, embedder="hash")
    summary = summarise(rows)
    assert summary["collection"]["f1"] == 1.0 and summary["topk-collection"]["calls"] == 1
    collection = [r for r in rows if r["method"] == "collection"]
    assert all(len(r["documents"]) >= 1 and r["evidence"] == 1.0 for r in collection)
    assert all(r["planning_s"] is not None and r["planning_s"] >= 0 for r in rows if r["method"] != "topk-collection")
    assert len(collection_ids(POOL)) == len(POOL)


def test_design_and_scale_parts_run_without_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = write_qa(tmp_path / "qa", POOL)
    for item in POOL:
        ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, title=item.id, embedder="hash")
    fail = ScriptedChatModel(default=lambda _messages: pytest.fail("no model call is expected"))
    with use_chat_model(fail):
        out = tmp_path / "design.json"
        assert (
            main(
                [
                    "design",
                    "--data",
                    str(data),
                    "--out",
                    str(out),
                    "--split",
                    "0:1",
                    "--sizes",
                    "2,4",
                    "--embedder",
                    "hash",
                ]
            )
            == 0
        )
        report = json.loads(out.read_text())
        assert set(report["designs"]) == {"shortlist-2", "shortlist-4", "documents-first", "own-document"}
        assert report["designs"]["own-document"]["recall_1"] == 1.0 and report["config"]["questions"] == 2
    scale = tmp_path / "scale.json"
    sizes = ["--sizes", "3", "--questions", "1", "--shortlist", "4"]
    assert main(["scale", "--data", str(data), "--out", str(scale), *sizes]) == 0
    row = json.loads(scale.read_text())["sizes"][0]
    assert row["documents"] == 3 and row["chunks"] >= 3 and row["planning_s_median"] > 0 and row["peak_rss_mb"] > 0


def test_the_qmsum_collection_part_summarizes_over_one_meeting_and_over_all(tmp_path: Path) -> None:
    def meeting(n: int) -> dict:
        turns = [
            {"speaker": f"Speaker {k % 2}", "content": f"Meeting {n} chose plan {k} for topic {n}."} for k in range(40)
        ]
        return {
            "id": f"m{n}",
            "transcript": turns,
            "queries": [
                {"kind": "general", "query": "Summarize the meeting", "answer": f"Meeting {n} chose plans."},
                {"kind": "specific", "query": f"What did meeting {n} choose?", "answer": f"Meeting {n} chose plans."},
            ],
        }

    data = tmp_path / "qmsum.jsonl"
    data.write_text("\n".join(json.dumps(meeting(n)) for n in range(3)) + "\n", encoding="utf-8")
    out = tmp_path / "summ.json"
    assert main(["summarize", "--data", str(data), "--out", str(out), "--items", "0:6", "--fake"]) == 0
    report = json.loads(out.read_text())
    assert set(report["methods"]) == {"own", "collection"} and len(report["config"]["queries"]) == 3
    collection = [r for r in report["items"] if r["method"] == "collection"]
    assert all(len(r["documents"]) == 3 for r in collection) and "rougeL_gap" in report
