"""A PDF dropped into the chat, sent as Agent Chat UI sends it, and the conversation photographed in headless Chromium.

The turns go through the LangGraph SDK to a running server (``langgraph dev``, or the scale-out
deployment with ``--key``): the first human message carries the PDF as the content block Agent Chat
UI's upload makes (``{"type": "file", "source_type": "base64", "mime_type": "application/pdf",
"data": ..., "metadata": {"filename": ...}}``), the next ones words only. The conversation is then
drawn from the thread as the server keeps it (each human message, each AI message's Markdown) on a
page of its own, and photographed by Chromium. It is not Agent Chat UI's own screen: its current
version (the one with the upload button) is published on GitHub only, not on npm (see
docs/clients.md).

    python -m bench.chat_shot http://127.0.0.1:2025 --out chat_upload.png
"""

from __future__ import annotations

import argparse
import base64
import html
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ("Who manages procurement, and what did they find?", "And when do the field trials start?")


def report_pdf(markdown: str) -> bytes:
    """A PDF of ``markdown`` (headings in bold), as a user would have it."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    for block in markdown.split("\n\n"):
        heading = block.startswith("#")
        pdf.set_font("Helvetica", "B" if heading else "", 14 if heading else 11)
        pdf.multi_cell(0, 6, " ".join(block.lstrip("# ").split()))
        pdf.ln(2)
    return bytes(pdf.output())


def converse(
    url: str, pdf: bytes, filename: str, questions: Sequence[str], key: str | None = None
) -> list[dict[str, Any]]:
    """The conversation's messages as the thread keeps them, the PDF attached to the first question."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=key, timeout=600)
    thread = client.threads.create()["thread_id"]
    block = {
        "type": "file",
        "source_type": "base64",
        "mime_type": "application/pdf",
        "data": base64.b64encode(pdf).decode(),
        "metadata": {"filename": filename},
    }
    for number, question in enumerate(questions):
        content: Any = [{"type": "text", "text": question}, block] if number == 0 else question
        turn: Any = {"messages": [{"type": "human", "content": content}]}
        client.runs.wait(thread, "chat", input=turn)
    values: Any = client.threads.get_state(thread)["values"]
    return list(values["messages"])


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")


def transcript_html(messages: Sequence[dict[str, Any]], title: str) -> str:
    """A chat page of ``messages``: the user's on the right (an attachment as a chip), the answers on the left."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False})
    rows = []
    for message in messages:
        text = _text(message.get("content"))
        if message.get("type") == "human":
            lines = [line for line in text.splitlines() if line.strip()]
            chips = "".join(f'<div class="chip">{html.escape(line[1:-1])}</div>' for line in lines if line[0] == "[")
            words = " ".join(line for line in lines if line[0] != "[")
            rows.append(f'<div class="human">{chips}<div class="bubble">{html.escape(words)}</div></div>')
        else:
            rows.append(f'<div class="ai">{md.render(text)}</div>')
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{html.escape(title)}</title><style>
body {{ font-family: system-ui, sans-serif; max-width: 760px; margin: 1.5rem auto; color: #1f2328; }}
h1 {{ font-size: 1.05rem; color: #57606a; font-weight: 600; }}
.human {{ display: flex; flex-direction: column; align-items: flex-end; margin: 1rem 0; }}
.bubble {{ background: #f0f2f5; border-radius: 1rem; padding: 0.6rem 1rem; max-width: 80%; }}
.chip {{ border: 1px solid #d0d7de; border-radius: 0.5rem; padding: 0.3rem 0.6rem; margin-bottom: 0.3rem;
  font-size: 0.85rem; background: #fff; }}
.chip::before {{ content: "PDF  "; font-weight: 700; color: #b42318; }}
.ai {{ margin: 1rem 0; line-height: 1.45; }} .ai ul {{ padding-left: 1.2rem; }} .ai li {{ font-size: 0.92rem; }}
</style></head><body><h1>{html.escape(title)}</h1>{"".join(rows)}</body></html>
"""


def screenshot(page: Path, png: Path, size: str = "900,760") -> None:
    """Photograph ``page`` with headless Chromium (Debian's ``chromium``)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (Debian package `chromium`: bash .ci/system-deps)")
    with tempfile.TemporaryDirectory() as profile:
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}"]
        subprocess.run(
            [chromium, *flags, f"--window-size={size}", f"--screenshot={png}", page.as_uri()],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chat_shot", description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the server, e.g. http://127.0.0.1:2025 (make dev)")
    parser.add_argument("--key", help="API key of the scale-out deployment")
    parser.add_argument("--document", type=Path, default=ROOT / "notebooks" / "data" / "falcon.md")
    parser.add_argument("--out", type=Path, default=Path("chat_upload.png"))
    parser.add_argument("--title", default="chat: falcon-report.pdf dropped into the conversation")
    args = parser.parse_args(argv)
    pdf = report_pdf(args.document.read_text(encoding="utf-8"))
    messages = converse(args.url, pdf, "falcon-report.pdf", QUESTIONS, args.key)
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "chat.html"
        page.write_text(transcript_html(messages, args.title), encoding="utf-8")
        screenshot(page, args.out)
    print(f"{args.out}: {len(messages)} messages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
