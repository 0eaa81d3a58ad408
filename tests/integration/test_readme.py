"""The Python examples of the README and docs/ run as written (against the scripted endpoint, in a scratch folder).

Links, commands and the files and modules the pages name are checked without a model in tests/unit/test_docs.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import DEV_ARGS, ROOT, copy_project, dev_url, serve_on_socket, uvicorn_args, wait_http

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [
    (str(page.relative_to(ROOT)), code)
    for page in PAGES
    for code in re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)
]
REGISTRY = [
    {
        "name": "charts",
        "description": "Draw charts from tables",
        "tools": [{"name": "bar_chart", "description": "plot monthly sales as a bar chart", "input_schema": {}}],
    },
    {
        "name": "weather",
        "description": "Weather forecasts",
        "tools": [{"name": "forecast", "description": "weather forecast for a city", "input_schema": {}}],
    },
]


def test_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 6
    assert sum(page == "README.md" for page, _ in BLOCKS) >= 3


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notebooks").symlink_to(ROOT / "notebooks")
    (work / "servers.json").write_text(json.dumps(REGISTRY))
    return work


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"{page}-{i}" for i, (page, _) in enumerate(BLOCKS)])
def test_readme_python_block_runs(index: int, scratch: Path, server_env: dict[str, str], spawn) -> None:  # type: ignore[no-untyped-def]
    page, code = BLOCKS[index]
    env = dict(server_env)
    proc, _log, model = serve_on_socket(spawn, [sys.executable, "-m", "doubles.endpoint"], env)
    wait_http(f"{model}/v1/models", timeout=60, proc=proc)
    env.update({"LONGDOC_BASE_URL": f"{model}/v1", "LONGDOC_MODEL": "scripted"})
    env["PYTHONPATH"] = str(ROOT)
    if "127.0.0.1:8000" in code:
        server, _server_log, api = serve_on_socket(spawn, uvicorn_args("surfaces.serve:app"), env)
        wait_http(f"{api}/health", timeout=120, proc=server)
        code = code.replace("http://127.0.0.1:8000", api)
    if "127.0.0.1:2025" in code:
        exe = str(Path(sys.executable).parent / "langgraph")
        project = copy_project(scratch.parent / "srv")
        server, server_log = spawn([exe, *DEV_ARGS], env, cwd=project)
        code = code.replace("http://127.0.0.1:2025", dev_url(server, server_log))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=scratch, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{page}: block {index} failed:\n{code}\n{result.stderr[-3000:]}"
