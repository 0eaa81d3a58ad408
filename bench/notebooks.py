"""Run the notebooks on the bundled model and keep their outputs in the committed files.

    python -m bench.notebooks notebooks/*.ipynb      (make notebooks)

Each notebook runs top to bottom in a ``python3`` kernel of this environment, in a fresh
``LONGDOC_HOME`` and a scratch working directory holding a copy of ``notebooks/data`` (so what a
notebook writes stays out of the checkout), with the default embedder and this checkout first on
``PYTHONPATH``. A notebook whose cell fails is left as it was. Otherwise its outputs are written
back into the ``.ipynb`` with, in its metadata (``longdoc.code_sha256``), the digest of its code
cells: :func:`problems` tells a notebook whose code changed after it was last run, or that has no
outputs, and a unit test holds every committed notebook to it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
METADATA_KEY = "longdoc"
CELL_TIMEOUT = 600
STARTUP_TIMEOUT = 180


def code_digest(notebook: Any) -> str:
    """SHA-256 of the notebook's code cells' sources, in order (markdown and outputs do not count)."""
    sources = [cell.get("source", "") for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"]
    sources = ["".join(s) if isinstance(s, list) else s for s in sources]  # a file on disk may split lines
    return hashlib.sha256(json.dumps(sources, ensure_ascii=False).encode("utf-8")).hexdigest()


def problems(notebook: Any, *, digest: bool = True) -> list[str]:
    """Why a notebook is not current: code never run or (``digest``) changed since its run, no outputs, errors."""
    code = [cell for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"]
    found = []
    if not code:
        found.append("no code cells")
    recorded = notebook.get("metadata", {}).get(METADATA_KEY, {}).get("code_sha256")
    if not digest:
        pass
    elif recorded is None:
        found.append("never run by `make notebooks` (no code digest in its metadata)")
    elif recorded != code_digest(notebook):
        found.append("its code changed since it was run: run `make notebooks`")
    unrun = [i for i, cell in enumerate(code) if not cell.get("execution_count")]
    if unrun:
        found.append(f"code cells {unrun} have not run")
    if not any(cell.get("outputs") for cell in code):
        found.append("no outputs")
    errors = [i for i, cell in enumerate(code) for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    if errors:
        found.append(f"code cells {sorted(set(errors))} end in an error")
    return found


@contextmanager
def notebook_environment(scratch: Path) -> Iterator[Path]:
    """Environment and working directory for a run; yields the working directory, restores on exit.

    The kernel spec comes from this environment (ipykernel installs it under ``sys.prefix``), the
    data home and temporary files go under ``scratch``, and this checkout's packages come first.
    """
    work = scratch / "notebooks"
    shutil.copytree(NOTEBOOK_DIR / "data", work / "data")
    (scratch / "tmp").mkdir()
    (scratch / "home").mkdir()
    changes: dict[str, str | None] = {
        "LONGDOC_HOME": str(scratch / "home"),
        "LONGDOC_EMBEDDER": None,  # run as a reader would: the bundled embedder
        "JUPYTER_PATH": None,
        "JUPYTER_PREFER_ENV_PATH": "1",
        "JUPYTER_PLATFORM_DIRS": "1",
        "JUPYTER_RUNTIME_DIR": str(scratch / "jupyter-runtime"),
        "TMPDIR": str(scratch / "tmp"),  # pages the notebooks write to temporary files end up here
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    saved = _set_environment(changes)
    try:
        yield work
    finally:
        _set_environment(saved)


def _set_environment(values: dict[str, str | None]) -> dict[str, str | None]:
    """Set (or, for None, remove) each variable; returns what they were."""
    before = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return before


def execute(notebook: Any, work: Path) -> Any:
    """Run ``notebook`` (an nbformat node, changed in place) in ``work``; a failing cell raises."""
    from nbclient import NotebookClient

    client = NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        startup_timeout=STARTUP_TIMEOUT,
        kernel_name="python3",
        record_timing=False,  # no timestamps in the committed files
        resources={"metadata": {"path": str(work)}},
    )
    client.execute()
    return notebook


def refresh(path: Path) -> None:
    """Run the notebook at ``path`` and write it back with its outputs and code digest."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    with (
        tempfile.TemporaryDirectory(prefix="longdoc-notebook-") as scratch,
        notebook_environment(Path(scratch)) as work,
    ):
        execute(notebook, work)
    notebook.metadata[METADATA_KEY] = {"code_sha256": code_digest(notebook)}
    text = nbformat.writes(notebook) + "\n"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.notebooks", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: every notebooks/*.ipynb)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOK_DIR.glob("*.ipynb"))
    missing = [str(p) for p in paths if p.suffix != ".ipynb" or not p.is_file()]
    if missing:
        print(f"bench.notebooks: not a notebook file: {', '.join(missing)}", file=sys.stderr)
        return 2
    failed = []
    for path in paths:
        print(f"running {path} ...", flush=True)
        try:
            refresh(path)
        except Exception as exc:  # noqa: BLE001 - a failed notebook is reported and left as it was; the rest still run
            print(f"{path}: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr, flush=True)
            failed.append(str(path))
    if failed:
        print(f"bench.notebooks: failed and left unchanged: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
