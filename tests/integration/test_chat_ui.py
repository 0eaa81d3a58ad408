"""Agent Chat UI against ``langgraph dev`` as ``make dev`` runs it, with the published JavaScript SDK.

The UI's calls are made by ``@langchain/langgraph-sdk`` from npm (``tests/js/chat_ui``): from the UI's
dev origin (``http://localhost:3000``), through a proxy that forwards bodies as the UI's server-side proxy
does (no JSON ``Content-Type``), and from a page of the same client opened in headless Chromium on a
loopback origin. The server's model is the scripted endpoint; the server runs on 127.0.0.1 and is stopped
at the end. The tests skip, saying why, where Node's modules or Chromium are missing.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.endpoint import Script, create_app, running
from tests.integration.conftest import ROOT, copy_project, langgraph_dev

JS = ROOT / "tests" / "js"
CHAT_UI = JS / "chat_ui"
FALCON = ROOT / "notebooks" / "data" / "falcon.md"
LANGGRAPH = shutil.which("langgraph", path=str(Path(sys.executable).parent))
NODE = shutil.which("node")
CHROMIUM = "/usr/bin/chromium"
UI_ORIGIN = "http://localhost:3000"
QUESTIONS = ["Who manages procurement?", "When do the field trials start?"]

pytestmark = [
    pytest.mark.skipif(LANGGRAPH is None, reason="the langgraph CLI is not installed (make install)"),
    pytest.mark.skipif(NODE is None, reason="node is not installed (make system)"),
    pytest.mark.skipif(
        not (JS / "node_modules" / "@langchain" / "langgraph-sdk").is_dir(),
        reason="tests/js/node_modules has no @langchain/langgraph-sdk (npm ci --prefix tests/js)",
    ),
]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``langgraph dev`` on a free loopback port, as ``make dev`` runs it; its model the scripted endpoint."""
    assert LANGGRAPH is not None
    folder = tmp_path_factory.mktemp("dev")
    work = copy_project(folder / "srv")
    with running(create_app(Script())) as endpoint:
        env = {
            **os.environ,
            "LONGDOC_HOME": str(folder / "home"),
            "LONGDOC_EMBEDDER": "hash",
            "LONGDOC_BASE_URL": f"{endpoint}/v1",
            "LONGDOC_MODEL": "scripted",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LANGGRAPH_NO_VERSION_CHECK": "true",
            "LANGSMITH_TRACING": "false",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("LONGDOC_DEV_ORIGINS", None)
        with langgraph_dev(LANGGRAPH, work, env, folder / "dev.log") as url:
            yield url


def _node(script: str, *args: str) -> dict[str, Any]:
    """Run a script of tests/js/chat_ui; the JSON line it prints."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(CHAT_UI / script), *args], cwd=JS, capture_output=True, text=True, timeout=240, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-3000:]
    return dict(json.loads(lines[-1]))


def _check_conversation(out: dict[str, Any]) -> None:
    """Two turns, each one AI message streamed in pieces that ends with its sources; the thread listed by title."""
    assert "error" not in out, out
    assert len(out["turns"]) == len(QUESTIONS)
    for number, turn in enumerate(out["turns"], 1):
        assert not turn["errors"], turn["errors"]
        values = turn["values"]
        reply = values["messages"][-1]
        assert reply["type"] == "ai" and values["turn"] == number
        assert turn["streamed"] == {reply["id"]: reply["content"]}  # the tokens add up to the kept message
        assert turn["nodes"] == ["answer"]
        # each step's status is streamed as a message of its own, which the thread does not keep
        assert "writing the answer..." in "".join(turn["statuses"].values()), turn["statuses"]
        assert not set(turn["statuses"]) & {m["id"] for m in values["messages"]}
        assert reply["content"].startswith(values["answer"] + "\n\n**Sources**")
        assert values["sources"] and f"\n- [{values['sources'][0]['label']}] " in reply["content"]
    listed = {t["thread_id"]: t["label"] for t in out["history"]}
    assert listed[out["thread_id"]] == QUESTIONS[0]  # a title, not the thread's id


def test_agent_chat_ui_calls_from_its_dev_origin_are_answered(dev: str) -> None:
    out = _node("client.mjs", dev, "direct", UI_ORIGIN, str(FALCON), *QUESTIONS)
    _check_conversation(out)
    assert all(r["status"] == 200 for r in out["seen"]), out["seen"]
    refused = _node("client.mjs", dev, "direct", "https://evil.example", str(FALCON), *QUESTIONS)
    assert "Failed to connect" in refused["error"] and refused["seen"][0]["status"] == 403


def test_agent_chat_ui_calls_through_its_proxy_are_answered(dev: str) -> None:
    out = _node("client.mjs", dev, "proxy", "", str(FALCON), *QUESTIONS)
    _check_conversation(out)
    posts = [r for r in out["seen"] if r["method"] == "POST"]
    assert posts and all(r["status"] == 200 for r in posts), out["seen"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"Chromium is not installed at {CHROMIUM} (make system)")
@pytest.mark.skipif(
    not (JS / "node_modules" / "playwright-core").is_dir() or not (JS / "node_modules" / "esbuild").is_dir(),
    reason="tests/js/node_modules has no playwright-core or esbuild (npm ci --prefix tests/js)",
)
def test_a_page_of_the_sdk_in_chromium_shows_a_streamed_answer_with_sources(dev: str, tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert NODE is not None
    subprocess.run([NODE, str(CHAT_UI / "build.mjs"), str(site)], cwd=JS, check=True, timeout=120)
    shutil.copyfile(FALCON, site / "falcon.md")
    handler = functools.partial(_Quiet, directory=str(site))
    pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=pages.serve_forever, daemon=True).start()
    try:
        query = "&".join([f"api={dev}", "doc=falcon.md", *(f"q={q.replace(' ', '+')}" for q in QUESTIONS)])
        # localhost, not 127.0.0.1: the page's origin is another site than the server's, as the UI's is.
        url = f"http://localhost:{pages.server_address[1]}/index.html?{query}"
        shot = tmp_path / "chat.png"
        out = _node("browse.mjs", url, str(shot), CHROMIUM)
    finally:
        pages.shutdown()
        pages.server_close()
    result = out["result"]
    assert result and "error" not in result, out
    _check_conversation(result)
    text = out["text"]
    assert text.count("Sources") == len(QUESTIONS) and QUESTIONS[0] in text and "falcon.md" in text
    # a status was on the page while the turn ran, as the UI draws the stream; the answer took its place
    assert any("writing the answer..." in seen for seen in out["seen"]), out["seen"]
    assert "writing the answer" not in text
    for turn in result["turns"]:
        reply = turn["values"]["messages"][-1]
        assert reply["additional_kwargs"]["longdoc"]["sources"][0]["quote"] in text
    calls = [r for r in out["requests"] if r["url"].startswith(dev)]
    assert calls and all(r["status"] in (200, 204) for r in calls), calls
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
