"""``longdoc summarize`` and ``python -m bench.summarize`` with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import graphs.summarize as summarize
from bench import summarize as bench
from graphs.cli import EXIT_INPUT, EXIT_OK, main
from stores.models import use_chat_model

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_summarize_json(capsys: pytest.CaptureFixture[str]) -> None:
    with use_chat_model(bench.fake_chat_model()):
        code = main(
            ["summarize", str(FALCON), "--json", "-q", "--length", "60", "--max-rounds", "1", "--questions", "3"]
        )
    assert code == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert {"summary", "sentences", "rounds", "tokens"} <= set(out)
    assert out["summary"] and out["rounds"] == 1
    assert all(set(s) >= {"text", "citations"} and s["citations"] for s in out["sentences"])
    assert out["tokens"]["calls"] > 0 and out["tokens"]["input"] > out["tokens"]["output"] > 0
    assert set(out["tokens"]["by_role"]) >= {"questioner", "expert", "editor", "checker"}
    assert len(out["log"][0]["questions"]) == 3


def test_summarize_text_output_shows_progress_and_citations(capsys: pytest.CaptureFixture[str]) -> None:
    with use_chat_model(bench.fake_chat_model()):
        code = main(["summarize", str(FALCON), "--max-rounds", "1", "--questions", "2", "--format", "bullets"])
    assert code == EXIT_OK
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines and all(line.startswith("- ") and line.rstrip().endswith("]") for line in lines)
    assert "round 1: 2 questions" in captured.err and "round 1 · fact:" in captured.err
    assert "LLM calls" in captured.err and "fact-check:" in captured.err


def test_summarize_by_doc_id_with_a_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(FALCON), "--json", "-q"]) == EXIT_OK
    doc_id = json.loads(capsys.readouterr().out)["doc_id"]
    with use_chat_model(bench.fake_chat_model()):
        code = main(["summarize", doc_id, "--method", "refine", "--json", "-q", "--query", "the budget"])
    assert code == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "refine" and out["rounds"] == 0 and out["doc_id"] == doc_id and out["summary"]


def test_summarize_bad_input_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summarize", str(tmp_path / "missing.md"), "-q"]) == EXIT_INPUT
    assert "no such file" in capsys.readouterr().err
    with use_chat_model(bench.fake_chat_model()):
        assert main(["summarize", str(FALCON), "-q", "--length", "1"]) == EXIT_INPUT
    assert "length" in capsys.readouterr().err


def test_summarize_thread_id_resumes_an_interrupted_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = summarize.answer_question
    calls: list[str] = []

    def crash_once(question: str, expert: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(expert)
        if expert == "structure" and calls.count("structure") == 1:
            raise RuntimeError("power cut")
        return real(question, expert, *args, **kwargs)

    monkeypatch.setattr(summarize, "answer_question", crash_once)
    argv = ["summarize", str(FALCON), "--json", "-q", "--max-rounds", "1", "--questions", "3", "--thread-id", "t1"]
    with use_chat_model(bench.fake_chat_model()):
        with pytest.raises(RuntimeError, match="power cut"):
            main(argv)
        assert sorted(calls) == ["fact", "opinion", "structure"]
        assert main(argv) == EXIT_OK
    assert sorted(calls) == ["fact", "opinion", "structure", "structure"]
    out = json.loads(capsys.readouterr().out)
    assert all(q["status"] == "answered" for q in out["log"][0]["questions"])


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
