"""``longdoc summarize`` with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import nodes.summarize.expert as summarize_experts
from doubles.replies import summarize_chat_model
from stores.models import use_chat_model
from surfaces.cli import EXIT_INPUT, EXIT_OK, main
from tests.unit.test_summarize import assert_whole

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def test_summarize_json(capsys: pytest.CaptureFixture[str]) -> None:
    with use_chat_model(summarize_chat_model()):
        code = main(
            ["summarize", str(FALCON), "--json", "-q", "--length", "60", "--max-rounds", "1", "--questions", "3"]
        )
    assert code == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert {"summary", "sentences", "rounds", "tokens"} <= set(out)
    assert_whole(out)
    assert out["rounds"] == 1
    assert all(set(s) >= {"text", "citations"} and s["citations"] for s in out["sentences"])
    assert out["tokens"]["calls"] > 0 and out["tokens"]["input"] > out["tokens"]["output"] > 0
    assert set(out["tokens"]["by_role"]) >= {"questioner", "expert", "editor", "checker"}
    assert len(out["log"][0]["questions"]) == 3
    assert out["fit"]["target"] == 60 and out["fit"]["low"] <= out["fit"]["units"] <= out["fit"]["high"]


def test_summarize_length_fit_off_is_passed_to_the_graph(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["summarize", str(FALCON), "--json", "-q", "--length", "150", "--max-rounds", "1", "--questions", "1"]
    with use_chat_model(summarize_chat_model()):
        assert main([*argv, "--length-fit", "off"]) == EXIT_OK
        off = json.loads(capsys.readouterr().out)
        assert main(argv) == EXIT_OK
        filled = json.loads(capsys.readouterr().out)
    assert off["fit"]["filled"] == {"answer": 0, "excerpt": 0} and not off["fit"]["within"]
    assert filled["fit"]["within"] and sum(filled["fit"]["filled"].values()) > 0


def test_summarize_text_output_shows_progress_and_citations(capsys: pytest.CaptureFixture[str]) -> None:
    with use_chat_model(summarize_chat_model()):
        code = main(["summarize", str(FALCON), "--max-rounds", "1", "--questions", "2", "--format", "bullets"])
    assert code == EXIT_OK
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines and all(line.startswith("- ") and line.rstrip().endswith("]") for line in lines)
    assert "round 1: 2 questions" in captured.err and "round 1 · fact:" in captured.err
    assert "LLM calls" in captured.err and "fact-check:" in captured.err and "length " in captured.err


def test_summarize_by_doc_id_with_a_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(FALCON), "--json", "-q"]) == EXIT_OK
    doc_id = json.loads(capsys.readouterr().out)["doc_id"]
    with use_chat_model(summarize_chat_model()):
        code = main(["summarize", doc_id, "--method", "refine", "--json", "-q", "--query", "the budget"])
    assert code == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "refine" and out["rounds"] == 0 and out["doc_id"] == doc_id
    assert_whole(out)


def test_summarize_bad_input_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summarize", str(tmp_path / "missing.md"), "-q"]) == EXIT_INPUT
    assert "no such file" in capsys.readouterr().err
    with use_chat_model(summarize_chat_model()):
        assert main(["summarize", str(FALCON), "-q", "--length", "1"]) == EXIT_INPUT
    assert "length" in capsys.readouterr().err


def test_summarize_thread_id_resumes_an_interrupted_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = summarize_experts.answer_question
    calls: list[str] = []

    def crash_once(question: str, expert: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(expert)
        if expert == "structure" and calls.count("structure") == 1:
            raise RuntimeError("power cut")
        return real(question, expert, *args, **kwargs)

    monkeypatch.setattr(summarize_experts, "answer_question", crash_once)
    argv = ["summarize", str(FALCON), "--json", "-q", "--max-rounds", "1", "--questions", "3", "--thread-id", "t1"]
    with use_chat_model(summarize_chat_model()):
        with pytest.raises(RuntimeError, match="power cut"):
            main(argv)
        assert sorted(calls) == ["fact", "opinion", "structure"]
        assert main(argv) == EXIT_OK
    assert sorted(calls) == ["fact", "opinion", "structure", "structure"]
    out = json.loads(capsys.readouterr().out)
    assert all(q["status"] == "answered" for q in out["log"][0]["questions"])
