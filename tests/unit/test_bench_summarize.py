"""The summarization benchmark (``bench.summarize``): subset, scores, failed items, a scripted run."""

from __future__ import annotations

import json
from pathlib import Path

from bench import summarize as bench
from nodes.ingest import ingest
from stores.models import use_chat_model
from stores.testing import ScriptedChatModel

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_a_summary_with_no_usable_sentence_counts_as_failed() -> None:
    mute = ScriptedChatModel(default="")
    doc_id = ingest(str(FALCON)).doc_id
    with use_chat_model(mute):
        out, _seconds = bench.summarize_once(doc_id, "", "expert-editor", {"max_rounds": 1})
    assert out["summary"] == "" and out["stop_reason"].startswith("failed: the summary came out empty")
    assert out["factcheck"]["sentences"] == 0


def test_bench_subset_is_fixed_and_shortest_first(tmp_path: Path) -> None:
    data = tmp_path / "qmsum.jsonl"
    meetings = [
        {
            "id": f"m{i}",
            "transcript": [{"speaker": "A", "content": "word " * (100 * (3 - i))}],
            "topics": [],
            "queries": [
                {"kind": "general", "query": "Summarize the meeting", "answer": "x"},
                {"kind": "specific", "query": f"q{i}a", "answer": "ya"},
                {"kind": "specific", "query": f"q{i}b", "answer": "yb"},
                {"kind": "specific", "query": f"q{i}c", "answer": "yc"},
            ],
        }
        for i in range(3)
    ]
    data.write_text("\n".join(json.dumps(m) for m in meetings))
    items = bench.load_items(data, 3, per_meeting=2)
    assert [(i["meeting"]["id"], i["query"]) for i in items] == [("m2", "q2a"), ("m2", "q2b"), ("m1", "q1a")]
    assert bench.transcript_text(meetings[0]).startswith("A: word word")


def test_bench_rouge_and_aggregate() -> None:
    assert bench.rouge("the budget was approved", "the budget was approved")["rouge1"] == 1.0
    assert bench.rouge("cats", "the budget was approved")["rougeL"] == 0.0
    rows = [
        {
            "rouge": {"rouge1": 0.5, "rouge2": 0.25, "rougeL": 0.5},
            "factcheck": {"checked": 4, "supported": 3},
            "tokens_in": 100,
            "tokens_out": 20,
            "calls": 5,
            "cached_calls": 1,
            "seconds": 2.0,
            "summary": "a b c",
        },
        {
            "rouge": {"rouge1": 0.3, "rouge2": 0.05, "rougeL": 0.2},
            "factcheck": {"checked": 6, "supported": 2},
            "tokens_in": 200,
            "tokens_out": 40,
            "calls": 7,
            "cached_calls": 0,
            "seconds": 4.0,
            "summary": "a",
        },
    ]
    agg = bench.aggregate(rows)
    assert agg["rouge1"] == 0.4 and agg["rouge2"] == 0.15 and agg["rougeL"] == 0.35
    assert agg["supported"] == 0.5 and agg["tokens"] == 180 and agg["calls"] == 6 and agg["seconds"] == 3.0


def test_bench_runs_end_to_end_with_the_scripted_model(tmp_path: Path) -> None:
    data = tmp_path / "qmsum.jsonl"
    turns = [
        {"speaker": "Project Manager", "content": "We agreed the remote will cost twelve euros and use a rubber case."},
        {"speaker": "Marketing", "content": "Users want fewer buttons and a design that is easy to find."},
        {"speaker": "Industrial Designer", "content": "The case can be curved; a kinetic battery is too expensive."},
    ] * 30
    meeting = {
        "id": "m0",
        "transcript": turns,
        "topics": [],
        "queries": [
            {"kind": "specific", "query": "What did the group decide about the cost?", "answer": "twelve euros"}
        ],
    }
    data.write_text(json.dumps(meeting))
    out = tmp_path / "res.json"
    assert bench.main(["--data", str(data), "--out", str(out), "--subset", "1", "--fake", "--length", "40"]) == 0
    report = json.loads(out.read_text())
    for method in bench.METHODS:
        assert {"rouge1", "rouge2", "rougeL", "supported", "tokens", "calls", "seconds"} <= set(report[method])
        assert report[method]["calls"] > 0
    assert report["parallel"]["parallel_s"] >= 0 and report["parallel"]["sequential_s"] >= 0
    assert report["config"]["model"] == "scripted" and len(report["items"]) == 3
