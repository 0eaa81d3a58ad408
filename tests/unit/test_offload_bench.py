"""``python -m bench.offload`` end to end with the scripted model on a tiny QMSum-shaped file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import offload as bench


def meeting(mid: str, turns: int, queries: int) -> dict:
    topics = ["budget", "schedule", "marketing", "remote design", "battery", "buttons", "colour"]
    transcript = [
        {"speaker": f"Speaker {i % 3}", "content": f"We talk about the {topics[i % 7]} now. Item {i} costs {i} euros."}
        for i in range(turns)
    ]
    asked = [
        {"kind": "specific", "query": f"What was said about the {topics[q % 7]}?", "answer": f"The {topics[q % 7]}."}
        for q in range(queries)
    ]
    return {"id": mid, "transcript": transcript, "topics": [], "queries": asked}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "qmsum.jsonl"
    rows = [meeting("long", 120, 6), meeting("short", 60, 5), meeting("few", 10, 2), meeting("mid", 90, 5)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_sessions_are_the_shortest_meetings_with_enough_queries(data: Path) -> None:
    sessions = bench.load_sessions(data, meetings=2, queries=4)
    assert [s["meeting"]["id"] for s in sessions] == ["short", "mid"]
    assert [len(s["queries"]) for s in sessions] == [4, 4]
    assert sessions[0]["queries"][0] == {
        "query": "What was said about the budget?",
        "kind": "specific",
        "reference": "The budget.",
    }


def test_fake_benchmark_reports_every_policy(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "offload.json"
    code = bench.main(["--data", str(data), "--out", str(out), "--meetings", "2", "--queries", "5", "--fake"])
    assert code == 0
    report = json.loads(out.read_text())
    for policy in ("full", "last_k", "offload", "offload_canvas"):
        figures = report[policy]
        assert {"input_tokens_per_call", "rougeL", "calls"} <= set(figures)
        assert figures["turns"] == 10 and figures["calls"] >= 10 and 0.0 <= figures["rougeL"] <= 1.0
        assert set(figures["vs_full"]) == {"input_tokens_per_call", "input_tokens_per_turn", "rougeL"}
    assert report["full"]["vs_full"]["input_tokens_per_call"] == 0.0
    # every turn reads (one record for its workers), answers, and under offloading notes the turn
    assert report["offload"]["all_calls"] == 30 and report["full"]["all_calls"] == 20
    assert report["offload_canvas"]["all_calls"] == 32  # one canvas per meeting
    by_turn = report["full"]["input_tokens_by_turn"]
    assert list(by_turn) == ["1", "2", "3", "4", "5"] and by_turn["5"] > by_turn["1"]
    assert report["config"]["meetings"] == ["short", "mid"] and report["config"]["model"] == "scripted"
    assert len(report["turns"]) == 40 and {t["policy"] for t in report["turns"]} == set(bench.POLICIES)
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == set(bench.POLICIES)


def test_unknown_policy_is_refused(data: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="unknown policies"):
        bench.main(["--data", str(data), "--out", str(tmp_path / "x.json"), "--policies", "full,magic", "--fake"])
