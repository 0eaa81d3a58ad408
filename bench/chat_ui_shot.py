"""The chat page of the published LangGraph SDK (tests/js/chat_ui) photographed in headless Chromium.

The page is the one ``tests/integration/test_chat_ui.py`` drives: Agent Chat UI's layout (thread history
on the left), its calls made by ``@langchain/langgraph-sdk`` from a loopback origin as the UI's are. It is
bundled (``node tests/js/chat_ui/build.mjs``), served on ``http://localhost:<free port>``, opened on the
server given in headless Chromium (``/usr/bin/chromium`` driven by playwright-core:
``tests/js/chat_ui/browse.mjs``), and photographed by it once the page has uploaded the document (a PDF
made from ``--document``, as Agent Chat UI's upload button sends a file), streamed the answers and listed
the threads. (``chromium --headless --screenshot`` alone photographs the page before a streamed answer
ends: its virtual time does not wait for a stream.)

    python -m bench.chat_ui_shot http://127.0.0.1:2025 --out chat_ui_page.png
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bench.chat_shot import QUESTIONS, report_pdf

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "tests" / "js"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


def photograph(url: str, out: Path, document: Path, questions: Sequence[str], budget_ms: int = 120_000) -> None:
    """Build and serve the page, open it on ``url`` in headless Chromium and write its screenshot to ``out``."""
    node, chromium = shutil.which("node"), shutil.which("chromium") or shutil.which("chromium-browser")
    if node is None or chromium is None:
        raise SystemExit("node and chromium are needed (make system; npm ci --prefix tests/js)")
    with tempfile.TemporaryDirectory() as folder:
        site = Path(folder) / "site"
        subprocess.run([node, str(JS / "chat_ui" / "build.mjs"), str(site)], cwd=JS, check=True, timeout=120)
        name = document.stem + ".pdf"
        (site / name).write_bytes(report_pdf(document.read_text(encoding="utf-8")))
        pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
        threading.Thread(target=pages.serve_forever, daemon=True).start()
        try:
            query = urlencode([("api", url), ("doc", name), *(("q", q) for q in questions)])
            page = f"http://localhost:{pages.server_address[1]}/index.html?{query}"
            browse = [node, str(JS / "chat_ui" / "browse.mjs"), page, str(out.resolve()), chromium]
            done = subprocess.run(browse, cwd=JS, capture_output=True, text=True, timeout=budget_ms / 1000 + 120)
            if done.returncode != 0:
                raise SystemExit(done.stderr[-2000:])
        finally:
            pages.shutdown()
            pages.server_close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chat_ui_shot", description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:2025 (make dev)")
    parser.add_argument("--document", type=Path, default=ROOT / "notebooks" / "data" / "falcon.md")
    parser.add_argument("--out", type=Path, default=Path("chat_ui_page.png"))
    args = parser.parse_args(argv)
    photograph(args.url, args.out, args.document, QUESTIONS)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
