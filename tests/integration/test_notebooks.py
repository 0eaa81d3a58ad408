"""Every notebook in notebooks/ runs top to bottom on the bundled model without an error.

Each notebook runs in a fresh LONGDOC_HOME, with notebooks/ as its working directory and the
default embedder, in a ``python3`` kernel that must be this virtual environment's Python: the
kernel spec comes from the environment (ipykernel installs it under ``sys.prefix``), and its
``python`` is replaced by ``sys.executable`` when the kernel starts. A first cell added to the
copy that runs checks that.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

NOTEBOOK_DIR = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 600
PROBE = "import json, sys\nprint(json.dumps({'executable': sys.executable, 'prefix': sys.prefix}))"


def test_there_are_notebooks() -> None:
    assert {"chain.ipynb", "tour.ipynb"} <= {path.name for path in NOTEBOOKS}


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LONGDOC_EMBEDDER", raising=False)  # run as a reader would: the bundled embedder
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    scratch = tmp_path / "tmp"  # pages the notebooks write to temporary files end up here
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))

    notebook = nbformat.read(path, as_version=4)
    cells = len(notebook.cells)
    notebook.cells.insert(0, new_code_cell(PROBE))
    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        startup_timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    try:
        client.execute()
    finally:  # the executed copy, outputs and all, stays with the test's files for a look afterwards
        nbformat.write(notebook, tmp_path / path.name)

    probe = json.loads(notebook.cells[0].outputs[0]["text"])
    assert probe == {"executable": sys.executable, "prefix": sys.prefix}
    errors = [
        (i, output.get("ename"), output.get("evalue"))
        for i, cell in enumerate(notebook.cells[1:], start=1)
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert errors == []
    code = [cell for cell in notebook.cells[1:] if cell.cell_type == "code"]
    assert len(notebook.cells) == cells + 1 and code
    assert all(cell.get("execution_count") for cell in code), "a code cell did not run"
