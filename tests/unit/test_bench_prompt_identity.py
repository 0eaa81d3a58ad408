"""The prompt identity check: the same code gives the same hash; a changed output changes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import prompt_identity

WORDS = ["pump", "otter", "budget", "river", "harbour", "engine", "meadow", "lantern", "signal", "orchard"]


def _items(folder: Path) -> Path:
    """Two qa_long-style sets of one item each (the check takes half its documents from each set)."""
    folder.mkdir()
    for n in range(2):
        paragraphs = [
            {"title": f"Topic {n} {i}", "text": f"The {WORDS[i % 10]} of site {n} held {i} crates in year {1990 + i}."}
            for i in range(12)
        ]
        question = f"How many crates did the {WORDS[3]} of site {n} hold?"
        row = {"id": f"set-{n}", "source": "set", "question": question, "answers": ["3"], "paragraphs": paragraphs}
        (folder / f"set{n}_dev.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    return folder


def _run(data: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    for name in ("LONGDOC_HOME", "LONGDOC_EMBEDDER", "LONGDOC_LLM_CACHE"):
        monkeypatch.setenv(name, "")  # restored after the test: the check points these at its own data directory
    journal = out.with_suffix(".jsonl")
    assert (
        prompt_identity.main(["--data", str(data), "--items", "2", "--out", str(out), "--journal", str(journal)]) == 0
    )
    result: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    result["journal"] = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines()]
    return result


def test_the_same_code_gives_the_same_hash_and_a_changed_output_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _items(tmp_path / "qa")
    first, again = _run(data, tmp_path / "a.json", monkeypatch), _run(data, tmp_path / "b.json", monkeypatch)
    assert first["all"] == again["all"] and first["runs"] == again["runs"]
    runs: dict[str, dict[str, object]] = first["runs"]  # type: ignore[assignment]
    assert {"ask/one/0", "ask/all/0", "summarize/all/1", "chat-offload_canvas/one/1"} <= set(runs)
    journal = {row["run"]: row for row in first["journal"]}  # type: ignore[attr-defined]
    workers = {
        name: [r for r in journal[name]["requests"] if r["role"] == "worker"] for name in ("ask/one/0", "ask/all/0")
    }
    assert all(r["schema"]["title"] == "WorkerQuotes" for r in workers["ask/one/0"])  # one document: c3.2
    assert all(r["schema"]["title"] == "TaggedQuotes" for r in workers["ask/all/0"])  # a collection: 1:c3.2
    from nodes.offload import answer

    monkeypatch.setattr(answer, "QUOTE_WORDS", 3)  # the sources a chat answer shows, shorter
    changed = _run(data, tmp_path / "c.json", monkeypatch)
    moved = [name for name in runs if changed["runs"][name] != runs[name]]  # type: ignore[index]
    assert changed["all"] != first["all"] and moved and all(name.startswith("chat-") for name in moved)
