"""Prompt identity: a hash of every prompt each workflow sends and of every output, over one document and many.

    python -m bench.prompt_identity --data ../shared/data/qa_long --out /tmp/prompt_identity.json

A few ``qa_long`` items (one plain-text document each, as :mod:`bench.chain_long` writes them) are
ingested with the hash embedder into a fresh data directory. Then ask (default settings, a fixed order
read to the end, and best-first over the whole set as :mod:`bench.chain_long`'s ``collection`` method
reads it), summarize and chat (two turns on one thread, each memory policy that reads the documents
differently) run over each item's own document and over the collection, with scripted models that
answer from what the prompt shows. Every request is recorded as the model layer sends it
(:func:`doubles.chat.recording`): role, messages, the JSON schema asked for, the token bound. The
result file gives, per run, the number of requests and the SHA-256 of its requests and of its output
(the data directory written as ``$HOME``); ``--journal`` writes every request (in the order of their
hashes: parallel calls arrive in any order) and output in full, one JSON line each, to see where two
versions part. Two versions of the code that send the same prompts and give the same outputs print
the same ``all`` hash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from doubles.chat import recording
from stores.cache import reset_caches

NAMESPACE = "identity"
QUESTION_WORDS = re.compile(r"[A-Za-z][A-Za-z'-]+")
_SHOWN = re.compile(r"\[((?:\d+:)?c\d+\.\d+)\] (.+?)(?= \[(?:\d+:)?c\d+\.\d+\] |$)")
_NOTE = re.compile(r"^\[((?:\d+:)?c\d+\.\d+)\] (.+)$", re.M)


def _words(text: str) -> set[str]:
    return {w.lower() for w in QUESTION_WORDS.findall(text) if len(w) > 3}


def chain_reply(messages: Sequence[BaseMessage]) -> str:
    """A worker's or the manager's reply made from the prompt: quote the shown sentences that share the most
    words with the question; answer with the first words of the first quote, citing it."""
    system, user = str(messages[0].content), str(messages[-1].content)
    if "manager of a chain" in system:
        notes = _NOTE.findall(user)
        if not notes:
            return json.dumps({"answer": "unknown", "evidence": [], "explanation": ""})
        label, sentence = notes[0]
        answer = " ".join(sentence.split()[:5])
        return json.dumps({"answer": answer, "evidence": [label], "explanation": f"{answer} [{label}]."})
    question = (re.findall(r"^Question: (.+)$", user, flags=re.M) or [""])[0]
    part = re.split(r"^Passages:$", user, flags=re.M)[-1]
    shown = [(m.group(1), m.group(2)) for line in part.splitlines() for m in _SHOWN.finditer(line)]
    wanted = _words(question)
    scored = sorted(((len(_words(text) & wanted), i, label) for i, (label, text) in enumerate(shown)), reverse=True)
    quotes = [label for score, _, label in scored[:2] if score >= 2]
    return json.dumps({"quotes": quotes, "missing": "" if quotes else "the answer"})


def _plain(value: Any, home: str) -> Any:
    """``value`` as JSON data with the data directory written as ``$HOME`` (messages as their dicts)."""
    from langchain_core.load import dumps

    return json.loads(dumps(value).replace(home, "$HOME"))


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def documents(data: Path, items: int) -> list[tuple[str, str, str]]:
    """``(doc_id, question, title)`` of the first ``items`` HotpotQA and MuSiQue items, each ingested."""
    from bench.long_text import as_text
    from bench.qa_data import load_qa_dir
    from nodes.ingest import ingest

    sets = load_qa_dir(data)
    chosen = [item for name in sorted(sets) for item in sets[name][: (items + 1) // 2]][:items]
    out = []
    for item in chosen:
        result = ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, title=item.id, embedder="hash")
        out.append((result.doc_id, item.question, item.id))
    return out


def runs(
    docs: Sequence[tuple[str, str, str]], ask: dict[str, Any] | None = None
) -> Iterator[tuple[str, str, dict[str, Any], Any]]:
    """``(name, workflow, input, context)`` of every run: each workflow over one document and over all.

    ``ask``: settings added to every ask run's context (``--whole-max``).
    """
    ids = [d for d, _, _ in docs]
    base = {"namespace": NAMESPACE, "embedder": "hash"}
    asked = {**base, **(ask or {})}
    for n, (doc_id, question, _) in enumerate(docs):
        for which, named in (("one", {"doc_id": doc_id}), ("all", {"doc_ids": ids})):
            yield f"ask/{which}/{n}", "chain", {"question": question, **named}, asked
            if n == 0 and which == "all":
                yield f"ask-s16/{which}/{n}", "chain", {"question": question, **named}, {**asked, "shortlist": 16}
            if n == 0 and which == "one":  # a fixed order, read to the end
                fixed = {**asked, "order": "chow-liu-bfs", "read_all": True, "roots": 2}
                yield f"ask-chow-liu/{which}/{n}", "chain", {"question": question, **named}, fixed
            yield f"summarize/{which}/{n}", "summarize", {"query": question, "length": 80, **named}, base
            for policy in ("offload_canvas", "offload", "full"):
                yield (
                    f"chat-{policy}/{which}/{n}",
                    "offload",
                    {"question": question, **named},
                    {**base, "policy": policy},
                )


def run(name: str, workflow: str, request: dict[str, Any], context: dict[str, Any]) -> Any:
    """The output of one run (a chat's: both turns' outputs)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from doubles.chat import ScriptedChatModel
    from doubles.replies import offload_reply, summarize_reply
    from stores.models import use_chat_model

    graph: Any
    if workflow == "chain":
        from graphs.chain.graph import graph
        from nodes.chain.context import ChainContext

        with use_chat_model(ScriptedChatModel(default=chain_reply)):
            return graph.invoke(request, context=ChainContext.from_mapping(context))
    if workflow == "summarize":
        from graphs.summarize.graph import graph
        from nodes.summarize.context import SummarizeContext

        with use_chat_model(ScriptedChatModel(default=summarize_reply)):
            return graph.invoke(request, context=SummarizeContext.from_mapping(context))
    from graphs.offload.graph import builder
    from nodes.offload.context import OffloadContext

    chat: Any = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": name.replace("/", ".")}}
    ctx = OffloadContext.from_mapping(context)
    with use_chat_model(ScriptedChatModel(default=offload_reply)):
        first = chat.invoke(request, config, context=ctx)
        second = chat.invoke({"question": f"And what else about {request['question'][:40]}"}, config, context=ctx)
    return [first, second]


VARYING = ("seconds", "elapsed", "started", "ended", "created_at", "updated_at", "timestamp")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _steady(value: Any) -> Any:
    """``value`` without the fields that tell time, and random ids (a message's) written as ``<uuid>``."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if not any(k.endswith(t) for t in VARYING)}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    if isinstance(value, str) and UUID.match(value):
        return "<uuid>"
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("../shared/data/qa_long"), help="the qa_long folder")
    p.add_argument("--items", type=int, default=3, help="documents (half HotpotQA, half MuSiQue)")
    p.add_argument("--out", type=Path, required=True, help="the result file (JSON)")
    p.add_argument("--journal", type=Path, help="every request and output in full, one JSON line each")
    p.add_argument(
        "--whole-max",
        type=int,
        default=None,
        help="ask runs: most chunks read whole (0: every ask run reads a shortlist; default: the graph's)",
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="longdoc-identity-") as home:
        return _check(args, home)


def _check(args: argparse.Namespace, home: str) -> int:
    """Run every workflow with ``home`` as the data directory and write the result (and the journal)."""
    os.environ.update(LONGDOC_HOME=home, LONGDOC_EMBEDDER="hash", LONGDOC_LLM_CACHE="0")
    reset_caches()  # nothing kept from another data directory of this process
    docs = documents(args.data, args.items)
    rows: dict[str, dict[str, Any]] = {}
    lines = []
    ask = {} if args.whole_max is None else {"whole_max": args.whole_max}
    for name, workflow, request, context in runs(docs, ask):
        sent: list[dict[str, Any]] = []
        with recording(sent):
            output = _steady(_plain(run(name, workflow, request, context), home))
        # parallel calls (summarize's experts) arrive in any order: the requests are compared as a set
        sent = sorted((_plain(s, home) for s in sent), key=_sha)
        row: dict[str, Any] = {"requests": len(sent), "requests_sha": _sha(sent), "output_sha": _sha(output)}
        rows[name] = row
        lines.append(json.dumps({"run": name, "requests": sent, "output": output}, sort_keys=True, ensure_ascii=False))
        print(name, row["requests"], row["requests_sha"][:12], row["output_sha"][:12], file=sys.stderr)
    result = {"documents": [title for _, _, title in docs], "runs": rows, "all": _sha(list(rows.values()))}
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.journal:
        args.journal.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(result["all"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
