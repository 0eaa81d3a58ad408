"""A client of two instances: ingest through A; ask, summarize and chat through B; go on chatting through A.

    python -m deploy.demo URL_A URL_B [--key KEY] [--document notebooks/data/falcon.md]

Uses the LangGraph SDK (``langgraph_sdk``) as any Agent Protocol client would, and prints what
each instance saw as JSON: the document id, the answers, the chat's turn numbers, and whether
both instances show the same chat thread (values, latest checkpoint and history).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from langgraph_sdk import get_sync_client

ROOT = Path(__file__).resolve().parents[1]


def _wait(client: Any, thread: str, graph: str, input: dict[str, Any]) -> dict[str, Any]:
    """The result of one run (``runs.wait``); RuntimeError when the run failed (Aegra then answers ``{}``)."""
    out = client.runs.wait(thread, graph, input=input)
    if not isinstance(out, dict) or not out:
        raise RuntimeError(
            f"the {graph} run on thread {thread} failed: {client.runs.list(thread)[0].get('error_message')}"
        )
    return out


def walkthrough(url_a: str, url_b: str, key: str, text: str) -> dict[str, Any]:
    """Run the walkthrough; returns what each step gave."""
    a = get_sync_client(url=url_a, api_key=key or None, timeout=300)
    b = get_sync_client(url=url_b, api_key=key or None, timeout=300)
    ingested = _wait(a, a.threads.create()["thread_id"], "ingest", input={"text": text, "title": "demo"})
    doc_id = ingested["doc_id"]
    again = _wait(b, b.threads.create()["thread_id"], "ingest", input={"text": text, "title": "demo"})
    question = "Who manages procurement, and what did they find?"
    ask = _wait(b, b.threads.create()["thread_id"], "ask", input={"doc_id": doc_id, "question": question})
    summary = _wait(b, b.threads.create()["thread_id"], "summarize", input={"doc_id": doc_id, "length": 80})
    chat = b.threads.create()["thread_id"]
    first = _wait(b, chat, "chat", input={"doc_id": doc_id, "question": "What is this document about?"})
    second = _wait(a, chat, "chat", input={"question": "And who leads the engineering team?"})
    state_a, state_b = a.threads.get_state(chat), b.threads.get_state(chat)
    history_a = [h["checkpoint"]["checkpoint_id"] for h in a.threads.get_history(chat, limit=100)]
    history_b = [h["checkpoint"]["checkpoint_id"] for h in b.threads.get_history(chat, limit=100)]
    return {
        "doc_id": doc_id,
        "chunks": ingested["chunks"],
        "b_found_the_document": again["doc_id"] == doc_id and again["cached"],
        "answer": ask.get("answer"),
        "read": ask.get("read"),
        "summary": summary.get("summary"),
        "chat_thread": chat,
        "chat_turns": [first.get("turn"), second.get("turn")],
        "same_thread_state": state_a["values"] == state_b["values"]
        and state_a["checkpoint"]["checkpoint_id"] == state_b["checkpoint"]["checkpoint_id"],
        "same_history": history_a == history_b and len(history_a) > 0,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the command-line entry point; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url_a")
    parser.add_argument("url_b")
    parser.add_argument("--key", default="", help="an API key of the deployment (X-API-Key)")
    parser.add_argument("--document", type=Path, default=ROOT / "notebooks" / "data" / "falcon.md")
    args = parser.parse_args(argv)
    report = walkthrough(args.url_a, args.url_b, args.key, args.document.read_text(encoding="utf-8"))
    print(json.dumps(report, indent=1, ensure_ascii=False))
    shared = report["b_found_the_document"] and report["same_thread_state"] and report["same_history"]
    return 0 if shared and report["chat_turns"] == [1, 2] else 1


if __name__ == "__main__":
    raise SystemExit(main())
