"""How fast each llama.cpp build reads prompts and writes replies with the bundled 1.5B model, side by side.

    python -m bench.reader --data ../shared/data/qa_long --split 0:3 --rounds 3 \\
        --candidates xllamacpp,native,native-q8_0,native-q4_0 --run 2026-12-07 --out bench/results/reader.json

Every candidate is a llama.cpp server (:mod:`stores.llama_server`) started once with its build, model file and settings,
all of them loaded at once and asked one after the other: each round sends every passage to every candidate in
turn, the candidates' order reversed every other round, so a machine that slows down or speeds up during the run
weighs on all of them alike. A passage is ~1,500 tokens of a long dev document (``--passage-chars`` characters from
the item's own paragraphs, the question after them), sent with ``cache_prompt`` off so nothing is read from the
prompt cache, greedy, ``--write`` tokens written (the end of the reply ignored, so each writing rate rests on as
many tokens). The rates are llama.cpp's own ``timings`` of each reply
(``prompt_per_second``, ``predicted_per_second``); reported per candidate as the median over passages and rounds,
with the ratio to the first candidate computed passage by passage, the share of the machine's int8 peak
(``--peak-gflops``, measured by ``bench.limit``: 2 FLOPs per weight per token, the model's
``--gflop-per-token``) and the instruction sets its backend reports. Each reply is journaled under ``--run``, so a
killed run resumes.

Candidates (``CANDIDATES``): ``xllamacpp`` (the prebuilt wheel, the shipped Q4_K_M file, the product's settings),
``native`` (the build for this CPU, same file and settings), ``native-q8_0`` / ``native-q4_0`` (files derived once
from the shipped one with the build's ``llama-quantize``), ``native-b2048`` (batches of 2,048, micro-batches of
512), ``native-fa`` (flash attention on), ``native-t1`` (one thread).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import journal
from bench.qa_data import QAItem, load_qa_dir, split_items

SYSTEM = "Answer the question from the passage in one short phrase."


@dataclass(frozen=True)
class Candidate:
    """A build, a model layout and the server settings that differ from the product's."""

    backend: str
    layout: str = "Q4_K_M"
    n_batch: int | None = None
    n_ubatch: int | None = None
    flash_attn: bool | None = None
    threads: int | None = None


CANDIDATES = {
    "xllamacpp": Candidate("xllamacpp"),
    "native": Candidate("native"),
    "native-q8_0": Candidate("native", "Q8_0"),
    "native-q4_0": Candidate("native", "Q4_0"),
    "native-b2048": Candidate("native", n_batch=2048, n_ubatch=512),
    "native-fa": Candidate("native", flash_attn=True),
    "native-t1": Candidate("native", threads=1),
    "xllamacpp-q4_0": Candidate("xllamacpp", "Q4_0"),
}


def derived_file(layout: str) -> Path:
    """The shipped model in ``layout`` (Q8_0, Q4_0): made once with the native build's ``llama-quantize``."""
    from stores.llama_server import native_binary
    from stores.local_model import model_path

    shipped = model_path()
    if layout == "Q4_K_M":
        return shipped
    target = shipped.with_name(shipped.name.replace("q4_k_m", layout.lower()))
    if target.exists():
        return target
    binary = native_binary()
    if binary is None:
        raise SystemExit(f"the {layout} file is made with the native build's llama-quantize: run `make fast-reader`")
    part = target.with_suffix(".part")
    quantize = [str(binary.with_name("llama-quantize")), "--allow-requantize", str(shipped), str(part), layout]
    subprocess.run(quantize, check=True, capture_output=True)
    part.replace(target)
    return target


def passages(items: list[QAItem], chars: int) -> list[dict[str, str]]:
    """One passage per item: its own paragraphs first, then the document's others, cut at ``chars`` characters."""
    out = []
    for item in items:
        own = [p.text for p in item.paragraphs if p.supporting]
        rest = [p.text for p in item.paragraphs if not p.supporting]
        text = "\n\n".join(own + rest)[:chars]
        out.append({"item": item.id, "passage": text, "question": item.question})
    return out


@contextmanager
def serving(name: str, candidate: Candidate, logs: Path) -> Iterator[tuple[str, str]]:
    """Start ``candidate``'s server; yield its base URL and the instruction sets it reports; stop it after."""
    from stores.llama_server import INSTALL_HINT, Choice, native_binary, server_options, start, stop, system_info
    from stores.local_model import DEFAULT_MODEL, free_port, wait_ready

    binary = native_binary() if candidate.backend == "native" else None
    if candidate.backend == "native" and binary is None:
        raise SystemExit(f"{name}: no llama.cpp build for this CPU is installed; {INSTALL_HINT}")
    choice = Choice(candidate.backend, "benchmark candidate", binary)
    options = server_options(DEFAULT_MODEL.name, derived_file(candidate.layout), free_port())
    options = replace(
        options,
        n_batch=candidate.n_batch or options.n_batch,
        n_ubatch=candidate.n_ubatch or options.n_ubatch,
        flash_attn=options.flash_attn if candidate.flash_attn is None else candidate.flash_attn,
        threads=candidate.threads or options.threads,
    )
    handle = start(choice, options, logs / f"{name}.log")
    try:
        wait_ready(options.port, handle)
        yield f"http://127.0.0.1:{options.port}", system_info(handle)
    finally:
        stop(handle)


def ask(base: str, passage: dict[str, str], write: int) -> dict[str, Any]:
    """One uncached request; llama.cpp's timings of it and the reply."""
    import httpx

    body = {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{passage['passage']}\n\nQuestion: {passage['question']}"},
        ],
        "max_tokens": write,
        "temperature": 0,
        "cache_prompt": False,
        "ignore_eos": True,  # llama.cpp: write all ``write`` tokens, so the writing rate rests on as many
    }
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=600).json()
    timings = reply["timings"]
    return {
        "prompt_tokens": timings["prompt_n"],
        "read_tps": timings["prompt_per_second"],
        "written_tokens": timings["predicted_n"],
        "write_tps": timings["predicted_per_second"],
        "reply": reply["choices"][0]["message"]["content"][:200],
    }


def summary(rows: list[dict[str, Any]], names: list[str], peak: float, gflop_per_token: float) -> dict[str, Any]:
    """Per candidate: median rates, paired ratios to the first candidate, the share of the int8 peak."""
    by = {(r["candidate"], r["item"], r["round"]): r for r in rows}
    base = names[0]
    out: dict[str, Any] = {}
    for name in names:
        mine = [r for r in rows if r["candidate"] == name]
        if not mine:
            continue
        pairs = [(r, by[(base, r["item"], r["round"])]) for r in mine if (base, r["item"], r["round"]) in by]
        read = statistics.median(r["read_tps"] for r in mine)
        out[name] = {
            "replies": len(mine),
            "prompt_tokens_median": statistics.median(r["prompt_tokens"] for r in mine),
            "read_tps": round(read, 1),
            "write_tps": round(statistics.median(r["write_tps"] for r in mine), 1),
            "read_ratio": round(statistics.median(r["read_tps"] / b["read_tps"] for r, b in pairs), 3),
            "write_ratio": round(statistics.median(r["write_tps"] / b["write_tps"] for r, b in pairs), 3),
            "share_of_int8_peak": round(read * gflop_per_token / peak, 3),
            "same_reply_as_first": round(sum(r["reply"] == b["reply"] for r, b in pairs) / max(1, len(pairs)), 2),
            "system_info": mine[-1]["system_info"],
        }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every round, every passage, every candidate in turn (order reversed every other round)."""
    names = [n.strip() for n in args.candidates.split(",") if n.strip()]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        raise SystemExit(f"unknown candidates {unknown}; choose from {', '.join(CANDIDATES)}")
    items = split_items(load_qa_dir(args.data), args.split)
    texts = passages(items, args.passage_chars)
    path = args.out.with_name(args.out.stem + "_journal.jsonl")
    done = journal.read(path)
    with ExitStack() as stack:
        servers = {
            name: stack.enter_context(serving(name, CANDIDATES[name], Path(tempfile.mkdtemp(prefix="reader-"))))
            for name in names
        }
        for round_no in range(args.rounds):
            order = names if round_no % 2 == 0 else names[::-1]
            for passage in texts:
                for name in order:
                    key = f"{args.run}|{name}|{passage['item']}|{round_no}"
                    if key in done:
                        continue
                    base, info = servers[name]
                    started = time.monotonic()
                    row = ask(base, passage, args.write)
                    row |= {"key": key, "candidate": name, "item": passage["item"], "round": round_no}
                    row |= {"system_info": info, "seconds": round(time.monotonic() - started, 2)}
                    journal.append(path, row)
                    done[key] = row
                    print(
                        f"{name:14} round {round_no} {passage['item']}: read {row['read_tps']:.1f}/s "
                        f"write {row['write_tps']:.1f}/s ({row['prompt_tokens']} prompt tokens)",
                        flush=True,
                    )
    rows = [r for k, r in done.items() if k.startswith(f"{args.run}|")]
    return {
        "command": "python -m bench.reader " + " ".join(args.argv),
        "data": f"{args.data} items {args.split} ({len(texts)} passages of {args.passage_chars} characters)",
        "rounds": args.rounds,
        "peak_int8_gflops": args.peak_gflops,
        "candidates": summary(rows, names, args.peak_gflops, args.gflop_per_token),
    }


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run, write the report."""
    import sys

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/qa_long"))
    parser.add_argument("--split", default="0:3", help="items a:b of every file of --data")
    parser.add_argument("--candidates", default="xllamacpp,native", help=f"from {', '.join(CANDIDATES)}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passage-chars", type=int, default=6000)
    parser.add_argument("--write", type=int, default=48, help="most tokens written per reply")
    parser.add_argument("--peak-gflops", type=float, default=723.0, help="int8 GFLOP/s of this machine (bench.limit)")
    parser.add_argument("--gflop-per-token", type=float, default=3.1, help="2 x the model's weights, in GFLOP")
    parser.add_argument("--run", default="default", help="journal name of this sitting")
    parser.add_argument("--out", type=Path, default=Path("bench/results/reader.json"))
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    journal.write_report(args.out, run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
