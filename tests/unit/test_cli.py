from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphs.cli import EXIT_INPUT, EXIT_OK, main


def test_ingest_json_then_cached(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(sample_markdown), "--json", "-q"]) == EXIT_OK
    first = json.loads(capsys.readouterr().out)
    assert set(first) == {"doc_id", "chunks", "cached"} and first["cached"] is False
    assert main(["ingest", str(sample_markdown), "--json", "-q"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == {**first, "cached": True}


def test_ingest_text_output_and_namespace(sample_markdown: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(sample_markdown), "--namespace", "team1", "-q"]) == EXIT_OK
    assert "indexed: Project Falcon" in capsys.readouterr().out


def test_bad_input_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(tmp_path / "missing.md")]) == EXIT_INPUT
    assert "no such file" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path), "--namespace", "bad name"]) == EXIT_INPUT


def test_models_reports_bundled_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--json"]) == EXIT_OK
    info = json.loads(capsys.readouterr().out)
    assert "bundled llama.cpp" in info["chat"]["worker"]["endpoint"]
    assert info["embedder"]["name"] == "hash"
    assert info["checkpoints"].endswith("checkpoints.sqlite")


def test_models_reports_configured_endpoint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LONGDOC_BASE_URL", "http://10.1.2.3:8000/v1")
    monkeypatch.setenv("LONGDOC_MODEL", "served-model")
    monkeypatch.setenv("LONGDOC_EDITOR_MODEL", "bigger-model")
    assert main(["models"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "served-model  ->  http://10.1.2.3:8000/v1" in out
    assert "editor     bigger-model" in out


def test_help_explains_the_product(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "Chow-Liu" in out and "LONGDOC_BASE_URL" in out
