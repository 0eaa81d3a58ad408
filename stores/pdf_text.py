"""A PDF's text, page by page, with its layout rules applied; where each page starts; its title.

Read with PDFium (pypdfium2, chosen by measurement: docs/benchmarks/ingest.md). The layout rules: lines that repeat
at the top or bottom of pages (running headers and footers, with their page numbers) and lone page numbers are left
out; a word hyphenated at a line end is joined; each heading line is set off as a paragraph
(:func:`set_off_headings`). Every failure is an :class:`~stores.errors.InputError` naming its cause: a broken
file, a password, too many pages, too much text.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from stores.errors import InputError, TooLarge
from stores.pages import Page, join_paged
from stores.settings import get_settings

EDGE_LINES = 2
"""Lines at the top and at the bottom of a page where a running header or footer may stand."""
REPEATS = 3
"""A top or bottom line found on this many pages or more (digits aside) is a running header or footer.

Not a share of the pages: a chapter's running title stands on that chapter's pages only."""

_PAGE_NUMBER = re.compile(
    r"^(?:(?:page|seite|p\.|s\.)\s*)?(?:\d{1,5}|[ivxlcdm]{1,8})(?:\s*(?:/|of|von)\s*\d{1,5})?$|^[-–—]\s*\d{1,5}\s*[-–—]?$",
    re.IGNORECASE,
)
_HYPHENATED = re.compile(r"([^\W\d_])-\n[ \t]*([^\W\d_]+)")


@dataclass(frozen=True)
class PdfText:
    """What a PDF gives: its text, where each page starts in it, and the title its metadata names."""

    text: str
    pages: tuple[Page, ...]
    title: str


PDFIUM = threading.Lock()
"""PDFium is not thread-safe: every call into it, for any document, holds this lock (a page's OCR does not)."""


def _open(data: bytes, source: str) -> Any:
    """A PDFium document of ``data`` (one encrypted with the empty password opens); InputError otherwise."""
    import pypdfium2 as pdfium

    try:
        with PDFIUM:
            return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            raise InputError(
                f"{source}: the PDF is encrypted with a password; save a copy without it (e.g. `qpdf --decrypt`) "
                "and ingest that"
            ) from exc
        raise InputError(f"{source}: not a readable PDF ({str(exc)[:200]})") from exc


def metadata_title(document: Any) -> str:
    """The title the PDF's metadata gives, unless it is empty or a placeholder a writing program left."""
    with PDFIUM:
        title = str(document.get_metadata_value("Title") or "").strip()
    plain = title.lower()
    if not title or plain in {"untitled", "title", "document", "(anonymous)"} or plain.startswith("microsoft word -"):
        return ""
    return " ".join(title.split())[:200]


def page_text(document: Any, index: int) -> str:
    """The text of page ``index`` (from 0) in PDFium's reading order, words PDFium joined over a line end joined."""
    with PDFIUM, _page(document, index) as page:
        textpage = page.get_textpage()
        try:
            text = textpage.get_text_bounded()
        finally:
            textpage.close()
    return str(text).replace("\r\n", "\n").replace("\x02", "").replace("\r", "\n").strip()


def has_images(document: Any, index: int) -> bool:
    """Whether page ``index`` (from 0) draws an image (a scanned page is one)."""
    import pypdfium2 as pdfium

    with PDFIUM, _page(document, index) as page:
        return any(obj.type == pdfium.raw.FPDF_PAGEOBJ_IMAGE for obj in page.get_objects(max_depth=2))


def page_image(document: Any, index: int, dpi: int = 150) -> Any:
    """Page ``index`` (from 0) drawn at ``dpi`` as an RGB PIL image, what OCR reads (a copy: the bitmap is closed)."""
    with PDFIUM, _page(document, index) as page:
        bitmap = page.render(scale=dpi / 72)
        try:
            return bitmap.to_pil().convert("RGB")
        finally:
            bitmap.close()


@contextlib.contextmanager
def _page(document: Any, index: int) -> Iterator[Any]:
    """Page ``index`` of ``document``, closed on the way out.

    Not left to the garbage collector, which could close it in another thread while PDFium works there.
    """
    page = document[index]
    try:
        yield page
    finally:
        page.close()


def read_pdf(data: bytes, source: str, *, ocr: bool = True) -> PdfText:
    """The text of the PDF ``data``, its pages' starts and its metadata title.

    A page with images and no text layer (a scan) is read by OCR (:mod:`stores.ocr`) unless ``ocr`` is False.
    """
    settings = get_settings()
    document = _open(data, source)
    try:
        count = len(document)
        if count > settings.max_pdf_pages:
            raise TooLarge(
                f"{source}: {count} pages is over the {settings.max_pdf_pages} page limit (LONGDOC_MAX_PDF_PAGES)"
            )
        bound = _TextBound(source, settings.max_text_chars)
        texts = [bound.add(page_text(document, i)) for i in range(count)]
        scanned = [i for i, text in enumerate(texts) if not text and has_images(document, i)] if ocr else []
        if scanned:
            from stores.ocr import PageReader

            read = PageReader(source, len(scanned))
            for i in scanned:
                texts[i] = bound.add(read(functools.partial(page_image, document, i), i + 1))
        with PDFIUM:
            labels = [str(document.get_page_label(i) or "") for i in range(count)]
        return join_pages(texts, labels, metadata_title(document))
    finally:
        with PDFIUM:
            document.close()


class _TextBound:
    """Counts a PDF's text as its pages are read: over ``LONGDOC_MAX_TEXT_CHARS`` reading stops (TooLarge)."""

    def __init__(self, source: str, limit: int) -> None:
        self.source, self.limit, self.size = source, limit, 0

    def add(self, text: str) -> str:
        self.size += len(text)
        if self.size > self.limit:
            raise TooLarge(
                f"{self.source}: the PDF's text is over the {self.limit} character limit (LONGDOC_MAX_TEXT_CHARS)"
            )
        return text


_HEADING_LINE = re.compile(r"^[A-Z0-9\u00c0-\u024f][^.!?;,:…。！？；，：]{0,78}[^\s.!?;,:…。！？；，：]$")
_SENTENCE_START = re.compile(r"^[\"'“(]?[A-Z0-9\u00c0-\u024f]")


def set_off_headings(text: str) -> str:
    """A PDF page's text with each heading line set off as a paragraph of its own (a blank line after it).

    A PDF's text layer has no heading marks: a title line comes out as a line like any other, and would be
    read as the first words of the sentence under it. A heading line here: at most 10 words without end or
    inner punctuation, starting with a capital or a digit, after a line that ends a sentence (or none), before a
    line that starts one, and shorter than half the page's longest line (a wrapped line runs to the margin).
    """
    lines = text.split("\n")
    widest = max((len(line.strip()) for line in lines), default=0)
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line)
        here = line.strip()
        before = lines[i - 1].strip() if i else ""
        after = lines[i + 1].strip() if i + 1 < len(lines) else ""
        heading = (
            bool(_HEADING_LINE.match(here))
            and len(here.split()) <= 10
            and len(here) * 2 <= widest
            and (not before or before[-1] in '.!?:…。！？："”)')
            and bool(_SENTENCE_START.match(after))
        )
        if heading:
            out.append("")
    return "\n".join(out)


def join_pages(texts: Sequence[str], labels: Sequence[str], title: str = "") -> PdfText:
    """The pages' texts with the layout rules applied, joined by blank lines, and where each page starts."""
    kept = strip_running_lines([text.split("\n") for text in texts])
    text, pages = join_paged([set_off_headings(join_hyphenated("\n".join(lines))) for lines in kept], labels)
    return PdfText(text=text, pages=pages, title=title)


def _edge_key(line: str) -> str:
    """A top or bottom line as compared across pages: its letters alone, lower-cased.

    A running head's page number changes from page to page, and stands left on one page and right on the next.
    """
    return " ".join(re.sub(r"[\W\d_]+", " ", line).split()).lower()


def _edges(lines: list[str]) -> list[tuple[int, str]]:
    """A page's first and last :data:`EDGE_LINES` non-blank lines (at most a third of its lines each): index, key.

    The key is the side (``top`` or ``bottom``) and the line's :func:`_edge_key`.
    """
    filled = [i for i, line in enumerate(lines) if line.strip()]
    reach = min(EDGE_LINES, len(filled) // 3)
    edges = [(i, "top") for i in filled[:reach]] + [(i, "bottom") for i in filled[len(filled) - reach :]]
    if len(filled) in (1, 2):  # a page of a line or two: only a lone page number may go
        edges = [(i, "lone") for i in filled]
    return [(i, f"{side} {_edge_key(lines[i])}") for i, side in edges]


def strip_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Each page's lines without its running header and footer lines and its lone page number.

    A running line is a top or bottom line whose text (digits aside) stands on the same side of :data:`REPEATS`
    pages or more; a lone page number is a top or bottom line holding only a
    number (``58``, ``iv``, ``Page 3 of 9``, ``- 4 -``) in a document of two pages or more.
    """
    seen: Counter[str] = Counter()
    for lines in pages:
        seen.update({key for _, key in _edges(lines) if not key.startswith("lone") and key.partition(" ")[2]})
    out = []
    for lines in pages:
        drop = {
            i
            for i, key in _edges(lines)
            if seen[key] >= REPEATS or (len(pages) > 1 and _PAGE_NUMBER.match(lines[i].strip()))
        }
        out.append([line for i, line in enumerate(lines) if i not in drop])
    return out


def join_hyphenated(text: str) -> str:
    """``text`` with each word hyphenated at a line end joined (``exam-`` / ``ple`` -> ``example``).

    Only when the part after the break starts in lower case: ``Baden-`` / ``Württemberg`` keeps its hyphen.
    """

    def joined(match: re.Match[str]) -> str:
        head, tail = match.group(1), match.group(2)
        return f"{head}{tail}" if tail[0].islower() else f"{head}-{tail}"

    return _HYPHENATED.sub(joined, text)
