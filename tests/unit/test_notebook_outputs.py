"""The committed notebooks carry the outputs of their current code (written by `make notebooks`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from bench import notebooks
from bench.notebooks import METADATA_KEY, NOTEBOOK_DIR, code_digest, problems

COMMITTED = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def test_there_are_five_notebooks() -> None:
    assert len(COMMITTED) == 5


@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_committed_notebook_is_current(path: Path) -> None:
    assert problems(nbformat.read(path, as_version=4)) == [], f"{path.name}: run `make notebooks`"


def _ran(notebook: Any) -> Any:
    """What a run leaves: every code cell counted, an output each, the digest recorded."""
    for count, cell in enumerate((c for c in notebook.cells if c.cell_type == "code"), 1):
        cell.execution_count = count
        cell.outputs = [new_output("stream", name="stdout", text=f"cell {count}\n")]
    notebook.metadata[METADATA_KEY] = {"code_sha256": code_digest(notebook)}
    return notebook


def _sample() -> Any:
    return new_notebook(cells=[new_markdown_cell("# A"), new_code_cell("x = 1"), new_code_cell("print(x)")])


def test_a_notebook_never_run_is_not_current() -> None:
    found = problems(_sample())
    assert any("never run" in p for p in found)
    assert any("have not run" in p for p in found)
    assert "no outputs" in found


def test_a_run_notebook_is_current_until_its_code_changes() -> None:
    notebook = _ran(_sample())
    assert problems(notebook) == []
    notebook.cells[0].source = "# A, reworded"  # prose may change without a new run
    assert problems(notebook) == []
    notebook.cells[2].source = "print(x + 1)"
    assert problems(notebook) == ["its code changed since it was run: run `make notebooks`"]
    assert problems(notebook, digest=False) == []


def test_a_cell_that_failed_or_an_empty_run_is_not_current() -> None:
    notebook = _ran(_sample())
    notebook.cells[2].outputs = [new_output("error", ename="ValueError", evalue="bad", traceback=[])]
    assert problems(notebook) == ["code cells [1] end in an error"]
    for cell in notebook.cells[1:]:
        cell.outputs = []
    assert problems(notebook) == ["no outputs"]


def test_the_digest_reads_split_and_joined_sources_alike() -> None:
    joined = {"cells": [{"cell_type": "code", "source": "a = 1\nprint(a)"}]}
    split = {"cells": [{"cell_type": "code", "source": ["a = 1\n", "print(a)"]}]}
    assert code_digest(joined) == code_digest(split)
    assert code_digest(joined) != code_digest({"cells": [{"cell_type": "code", "source": "a = 2\nprint(a)"}]})


def test_refresh_writes_outputs_and_digest_and_leaves_a_failed_notebook_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sample.ipynb"
    nbformat.write(_sample(), path)
    monkeypatch.setattr(notebooks, "execute", lambda notebook, work: _ran(notebook))
    assert notebooks.main([str(path)]) == 0
    assert problems(nbformat.read(path, as_version=4)) == []

    nbformat.write(_sample(), path)
    before = path.read_bytes()

    def fail(notebook: Any, work: Path) -> Any:
        assert (work / "data").is_dir()  # the run had its scratch copy of notebooks/data
        raise RuntimeError("cell 2 failed")

    monkeypatch.setattr(notebooks, "execute", fail)
    assert notebooks.main([str(path)]) == 1
    assert path.read_bytes() == before


def test_only_notebook_files_are_taken(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert notebooks.main([str(tmp_path / "notes.txt")]) == 2
    assert notebooks.main([str(tmp_path / "missing.ipynb")]) == 2
