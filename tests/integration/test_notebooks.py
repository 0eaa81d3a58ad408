"""Every notebook in notebooks/ runs top to bottom on the bundled model without an error (`make notebook-test`).

Each runs as `make notebooks` runs it (:mod:`bench.notebooks`: a fresh LONGDOC_HOME, a scratch copy
of notebooks/data as working directory, the default embedder) in a ``python3`` kernel that must be
this virtual environment's Python: a first cell added to the copy that runs checks that. The
committed files are not touched; tests/unit/test_notebook_outputs.py checks that they are current.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from bench.notebooks import NOTEBOOK_DIR, execute, notebook_environment, problems

NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
PROBE = "import json, sys\nprint(json.dumps({'executable': sys.executable, 'prefix': sys.prefix}))"


def test_there_are_notebooks() -> None:
    assert {"chain.ipynb", "tour.ipynb"} <= {path.name for path in NOTEBOOKS}


@pytest.mark.notebooks
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    cells = len(notebook.cells)
    notebook.cells.insert(0, new_code_cell(PROBE))
    try:
        with notebook_environment(tmp_path / "scratch") as work:
            execute(notebook, work)
    finally:  # the executed copy, outputs and all, stays with the test's files for a look afterwards
        nbformat.write(notebook, tmp_path / path.name)

    probe = json.loads(notebook.cells[0].outputs[0]["text"])
    assert probe == {"executable": sys.executable, "prefix": sys.prefix}
    assert len(notebook.cells) == cells + 1
    notebook.cells.pop(0)
    assert problems(notebook, digest=False) == []
