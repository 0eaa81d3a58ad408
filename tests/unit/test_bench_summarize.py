"""The summarization benchmark (``bench.summarize``): items, scores, the journal, a scripted run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import summarize as bench
from doubles.chat import ScriptedChatModel
from nodes.ingest import ingest
from stores.models import use_chat_model

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_a_summary_with_no_usable_sentence_counts_as_failed() -> None:
    mute = ScriptedChatModel(default="")
    doc_id = ingest(str(FALCON)).doc_id
    with use_chat_model(mute):
        out, _seconds = bench.summarize_once(doc_id, "", "expert-editor", {"max_rounds": 1})
    assert out["summary"] == "" and out["stop_reason"].startswith("failed: the summary came out empty")
    assert out["factcheck"]["sentences"] == 0


def _meetings(n: int = 3) -> list[dict]:
    return [
        {
            "id": f"m{i}",
            "transcript": [{"speaker": "A", "content": "word " * (100 * (3 - i))}],
            "topics": [],
            "queries": [
                {"kind": "general", "query": f"Summarize meeting {i}", "answer": "x"},
                {"kind": "specific", "query": f"q{i}a", "answer": "ya"},
                {"kind": "specific", "query": f"q{i}b", "answer": "yb"},
                {"kind": "specific", "query": f"q{i}c", "answer": "yc"},
            ],
        }
        for i in range(n)
    ]


def test_items_are_fixed_shortest_meeting_first_and_sliced(tmp_path: Path) -> None:
    data = tmp_path / "qmsum.jsonl"
    meetings = _meetings()
    data.write_text("\n".join(json.dumps(m) for m in meetings))
    items = bench.load_items(data, per_meeting=2, general=1)
    assert [(i["id"], i["kind"], i["query"]) for i in items[:4]] == [
        ("m2#g0", "general", "Summarize meeting 2"),
        ("m2#s0", "specific", "q2a"),
        ("m2#s1", "specific", "q2b"),
        ("m1#g0", "general", "Summarize meeting 1"),
    ]
    assert len(items) == 9 and len(bench.load_items(data, per_meeting=3, general=0)) == 9
    assert [i["id"] for i in items[bench.item_range("2:4")]] == ["m2#s1", "m1#g0"]
    assert items[bench.item_range("3")] == items[:3] and items[bench.item_range("7:")] == items[7:]
    assert bench.transcript_text(meetings[0]).startswith("A: word word")


def test_rouge_coverage_and_aggregate() -> None:
    assert bench.rouge("the budget was approved", "the budget was approved")["rouge1"] == 1.0
    assert bench.rouge("cats", "the budget was approved")["rougeL"] == 0.0
    # reference content words: budget, approved, march -> the summary has two of three
    assert bench.coverage("The budget got approved.", "The budget was approved in March.") == round(2 / 3, 4)
    base = {"tokens_in": 100, "tokens_out": 20, "calls": 5, "cached_calls": 0, "seconds": 2.0, "length": 10}
    rows = [
        {
            **base,
            "rouge": {"rouge1": 0.5, "rouge2": 0.25, "rougeL": 0.5},
            "coverage": 0.5,
            "factcheck": {"checked": 4, "supported": 3},
            "flags": {"flagged": 1, "by_grounding": 1},
            "words": 10,
            "within": True,
        },
        {
            **base,
            "rouge": {"rouge1": 0.3, "rouge2": 0.05, "rougeL": 0.2},
            "coverage": 0.1,
            "factcheck": {"checked": 6, "supported": 2},
            "flags": {"flagged": 4, "by_model": 3, "by_grounding": 2},
            "tokens_in": 200,
            "tokens_out": 40,
            "calls": 7,
            "cached_calls": 2,
            "seconds": 4.0,
            "words": 4,
            "within": False,
        },
    ]
    agg = bench.aggregate(rows)
    assert agg["rouge1"] == 0.4 and agg["rouge2"] == 0.15 and agg["rougeL"] == 0.35 and agg["coverage"] == 0.3
    assert agg["supported"] == 0.5 and agg["tokens"] == 180 and agg["calls"] == 6 and agg["seconds"] == 3.0
    assert agg["within_25"] == 0.5 and agg["words"] == 7.0 and agg["length_ratio"]["median"] == 1.0
    assert agg["flags"] == {"flagged": 5, "by_grounding": 3, "by_model": 3}
    assert agg["timed"] == 1 and agg["seconds_timed"] == 2.0


def _data(tmp_path: Path, meetings: int = 2) -> Path:
    data = tmp_path / "qmsum.jsonl"

    def turns(k: int) -> list[dict[str, str]]:
        return [
            {"speaker": "Project Manager", "content": f"In part {k} we agreed the remote costs {k + 10} euros."},
            {"speaker": "Marketing", "content": f"Survey {k} says users want {k % 4 + 2} buttons at most."},
            {"speaker": "Industrial Designer", "content": f"Case model {k} can be curved; battery {k} is too dear."},
        ]

    lines = []
    for m in range(meetings):
        meeting = {
            "id": f"m{m}",
            "transcript": [turn for k in range(30 + m) for turn in turns(k)],
            "topics": [],
            "queries": [
                {"kind": "general", "query": "Summarize the whole meeting.", "answer": "A remote for twelve euros."},
                {"kind": "specific", "query": "What did the group decide about the cost?", "answer": "twelve euros"},
            ],
        }
        lines.append(json.dumps(meeting))
    data.write_text("\n".join(lines))
    return data


def test_bench_runs_end_to_end_with_the_scripted_model_and_resumes_from_its_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, out = _data(tmp_path), tmp_path / "res.json"
    argv = ["--data", str(data), "--out", str(out), "--items", "0:3", "--fake", "--length", "40"]
    assert bench.main(argv) == 0
    report = json.loads(out.read_text())
    journal = tmp_path / "res_journal.jsonl"
    assert len(journal.read_text().splitlines()) == 9 and report["config"]["item_ids"] == ["m0#g0", "m0#s0", "m1#g0"]
    for method in bench.METHODS:
        figures = report["methods"][method]
        assert figures["items"] == 3 and figures["calls"] > 0 and 0 <= figures["coverage"] <= 1
        assert figures["within_25"] == 1.0 and set(figures["length_ratio"]) == {"p10", "median", "p90"}
    assert set(report["by_kind"]) == {"general", "specific"} and report["by_kind"]["general"]["refine"]["items"] == 2
    assert "| expert-editor | 3 |" in report["table"] and "parallel" not in report
    assert report["config"]["model"] == "scripted" and len(report["items"]) == 9

    # a second sitting reads the finished runs back and runs only what is new
    calls: list[str] = []
    real = bench.run_row
    monkeypatch.setattr(bench, "run_row", lambda item, method, *a: calls.append(method) or real(item, method, *a))
    assert bench.main([*argv[:5], "0:4", *argv[6:], "--methods", "expert-editor,refine"]) == 0
    assert calls == ["expert-editor", "refine"]  # item m1#s0 only
    again = json.loads(out.read_text())
    assert again["methods"]["refine"]["items"] == 4 and set(again["methods"]) == {"expert-editor", "refine"}
    assert again["methods"]["refine"]["rougeL"] >= 0 and len(journal.read_text().splitlines()) == 11


def test_a_changed_setup_is_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, out = _data(tmp_path, 1), tmp_path / "res.json"
    argv = ["--data", str(data), "--out", str(out), "--items", "0:1", "--fake", "--methods", "map-reduce"]
    assert bench.main(argv) == 0
    assert bench.main([*argv, "--length", "60"]) == 0  # the length is part of the key
    assert bench.main([*argv, "--length", "60", "--baseline-length-fit", "off"]) == 0  # so is the context
    monkeypatch.setattr(bench, "WORKFLOW_CODE", ("graphs/summarize/graph.py",))  # as if the code had changed
    assert bench.main(argv) == 0
    keys = [json.loads(line)["key"] for line in (tmp_path / "res_journal.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 4
    report = json.loads(out.read_text())
    assert report["config"]["length_fit"] == {"expert-editor": "fill", "baselines": "fill"}


def test_the_parallel_timing_is_optional(tmp_path: Path) -> None:
    data, out = _data(tmp_path, 1), tmp_path / "res.json"
    argv = ["--data", str(data), "--out", str(out), "--items", "0:1", "--fake", "--methods", "refine", "--parallel"]
    assert bench.main(argv) == 0
    parallel = json.loads(out.read_text())["parallel"]
    assert parallel["sequential_s"] > parallel["parallel_s"] > 0 and parallel["calls"] > 0


def test_unknown_methods_and_empty_ranges_are_refused(tmp_path: Path) -> None:
    data, out = _data(tmp_path, 1), tmp_path / "res.json"
    with pytest.raises(SystemExit, match="unknown methods"):
        bench.main(["--data", str(data), "--out", str(out), "--fake", "--methods", "magic"])
    with pytest.raises(SystemExit, match="no items 5:9"):
        bench.main(["--data", str(data), "--out", str(out), "--fake", "--items", "5:9"])


def test_the_journal_skips_a_line_cut_by_a_kill(tmp_path: Path) -> None:
    from bench import journal

    path = tmp_path / "j.jsonl"
    journal.append(path, {"key": "a|m", "item": "a", "method": "m"})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"key": "b|m", "ite')  # the process died mid-write
    assert list(journal.read(path)) == ["a|m"]
    journal.append(path, {"key": "a|m", "item": "a", "method": "m", "again": True})
    assert journal.read(path)["a|m"]["again"] is True  # the later row wins
