"""``longdoc chat`` and ``longdoc canvas`` with the scripted model."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from doubles.replies import offload_chat_model as fake_chat_model
from stores.models import use_chat_model
from surfaces.cli import EXIT_INPUT, EXIT_OK, main

FALCON = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "falcon.md"


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_chat_script_prints_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "questions.txt"
    script.write_text("# a comment\nWho manages procurement?\n\nWhat is the budget?\nWhen do trials start?\n")
    with use_chat_model(fake_chat_model()):
        code = main(["chat", str(FALCON), "--script", str(script), "-q"])
    assert code == EXIT_OK
    out = lines(capsys.readouterr().out)
    assert [o["turn"] for o in out] == [1, 2, 3]
    assert all({"turn", "answer", "input_tokens", "citations", "offloaded", "recalled", "cut"} <= set(o) for o in out)
    assert all(o["answer"] and o["input_tokens"] > 0 for o in out)
    assert [o["offloaded"] for o in out] == [["o1"], ["o2"], ["o3"]]


def test_chat_session_resumes_with_its_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = tmp_path / "first.json"
    first.write_text(json.dumps(["Who manages procurement?", "What is the budget?"]))
    second = tmp_path / "second.txt"
    second.write_text("Who leads engineering?\n")
    with use_chat_model(fake_chat_model()):
        assert main(["chat", str(FALCON), "--script", str(first), "--session", "s1", "--policy", "full", "-q"]) == 0
        assert main(["chat", str(FALCON), "--script", str(second), "--session", "s1", "-q"]) == 0
    out = lines(capsys.readouterr().out)
    assert [o["turn"] for o in out] == [1, 2, 3]
    assert out[2]["offloaded"] == []  # still the full-history policy: nothing offloaded


def test_chat_interactive(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("Who manages procurement?\nWhat is the budget?\n\n"))
    with use_chat_model(fake_chat_model()):
        code = main(["chat", str(FALCON), "--goal", "plan the field trials", "--session", "talk"])
    assert code == EXIT_OK
    captured = capsys.readouterr()
    assert captured.out.count("**Sources**\n- [c") == 2
    assert "session talk (resume it later with --session talk)" in captured.err
    assert "[turn 1 · " in captured.err and "offloaded o1" in captured.err and "[turn 2 · " in captured.err


def test_chat_bad_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chat", str(FALCON), "--script", str(tmp_path / "none.txt"), "-q"]) == EXIT_INPUT
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n")
    assert main(["chat", str(FALCON), "--script", str(empty), "-q"]) == EXIT_INPUT
    bad = tmp_path / "bad.json"
    bad.write_text('{"q": 1}')
    assert main(["chat", str(FALCON), "--script", str(bad), "-q"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "no such script file" in err and "holds no question" in err and "JSON list" in err


def test_canvas_writes_html_and_mermaid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page, text = tmp_path / "falcon.html", tmp_path / "falcon.mmd"
    with use_chat_model(fake_chat_model()):
        assert main(["canvas", str(FALCON), "--out", str(page), "--json", "-q", "--max-nodes", "4"]) == EXIT_OK
        first = json.loads(capsys.readouterr().out)
        assert main(["canvas", str(FALCON), "--out", str(text), "--json", "-q"]) == EXIT_OK
        second = json.loads(capsys.readouterr().out)
        assert main(["canvas", str(FALCON), "-q"]) == EXIT_OK
        printed = capsys.readouterr().out
    assert first["source"] == "llm" and not first["cached"] and first["nodes"] == 4
    assert list(first["usage"]) == ["offloader"] and first["usage"]["offloader"]["calls"] == 1  # one canvas call
    assert second["cached"] and second["mermaid"] == first["mermaid"] and second["usage"] == {}
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and 'globalThis["mermaid"]' in html and "http://" not in html[:3000]
    assert text.read_text(encoding="utf-8") == first["mermaid"] == printed
    assert printed.startswith("flowchart TD\n")


def test_canvas_bad_output_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["canvas", str(FALCON), "--out", str(tmp_path / "x.png"), "-q"]) == EXIT_INPUT
    assert "--out must end in .html or .mmd" in capsys.readouterr().err
    assert main(["canvas", str(FALCON), "--max-nodes", "40", "-q"]) == EXIT_INPUT


def test_chat_streams_answers_when_asked(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("Who manages procurement?\n\n"))
    with use_chat_model(fake_chat_model()):
        assert main(["chat", str(FALCON), "--stream", "-q"]) == EXIT_OK
    streamed = capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO("Who manages procurement?\n\n"))
    with use_chat_model(fake_chat_model()):
        assert main(["chat", str(FALCON), "--no-stream", "-q"]) == EXIT_OK
    printed = capsys.readouterr().out
    assert streamed == printed and printed.count("**Sources**\n- ") == 1
    assert "{" not in printed.splitlines()[0]
