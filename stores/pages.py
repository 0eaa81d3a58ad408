"""Pages of a paged document (a PDF) as optional metadata of its chunks, and the page a quote is on.

A loaded PDF names where each page starts in its text (:class:`Page`: offset, page number from 1, the printed
label when the PDF has ``/PageLabels``). Chunking does not see pages; :func:`chunk_marks` finds each chunk back in
the text afterwards and records where its pages start inside it (a chunk's ``pages`` metadata, JSON). A cited
sentence is found inside its chunk the same way, so its page is the page its first word is printed on.

Chunks and sentences are matched with their whitespace left out: the chunker joins pieces with blank lines and the
sentence splitter joins wrapped lines with spaces, so neither is a plain substring of the text it came from.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stores.text import clean_text


@dataclass(frozen=True)
class Page:
    """Where one page starts in a document's text."""

    start: int
    """Offset of the page's first character in the document's text."""
    number: int
    """The page's number in the file, from 1."""
    label: str = ""
    """The page's printed label (``ii``, ``58``) when the file gives labels, else empty."""

    @property
    def shown(self) -> str:
        """How the page is named to a reader: its printed label, else its number."""
        return self.label or str(self.number)


class Squeezed:
    """A text with its whitespace left out, and the offset in the text of every character kept."""

    def __init__(self, text: str) -> None:
        self.offsets = [i for i, ch in enumerate(text) if not ch.isspace()]
        self.text = "".join(text[i] for i in self.offsets)

    def find(self, part: str, start: int = 0) -> int:
        """Offset (in the squeezed text) of ``part`` with its whitespace left out, from ``start``; -1 if absent."""
        needle = "".join(part.split())
        return self.text.find(needle, start) if needle else -1

    def original(self, at: int) -> int:
        """Offset in the original text of the squeezed text's character ``at`` (the end for one past the last)."""
        return self.offsets[at] if at < len(self.offsets) else (self.offsets[-1] + 1 if self.offsets else 0)

    def squeezed(self, offset: int) -> int:
        """The squeezed offset of the first kept character at or after original ``offset``."""
        return bisect.bisect_left(self.offsets, offset)


def join_paged(texts: Sequence[str], labels: Sequence[str]) -> tuple[str, tuple[Page, ...]]:
    """Pages' texts (page ``i`` numbered ``i + 1``), each cleaned, joined by blank lines; and where each starts.

    An empty page is left out (it starts nowhere); the text is what :func:`stores.text.clean_text` leaves of it.
    """
    parts: list[str] = []
    pages: list[Page] = []
    start = 0
    for number, (raw, label) in enumerate(zip(texts, labels, strict=True), start=1):
        text = clean_text(raw)
        if not text:
            continue
        if parts:
            start += 2  # the blank line between pages
        pages.append(Page(start=start, number=number, label=label))
        parts.append(text)
        start += len(text)
    return "\n\n".join(parts), tuple(pages)


Mark = tuple[int, int, str]
"""Where a page starts inside a chunk: offset in the chunk's text, page number, printed label."""


def chunk_marks(text: str, pages: Sequence[Page], chunks: Sequence[str]) -> list[list[Mark]]:
    """For each chunk of ``text`` (in document order), where its pages start inside it; empty lists without pages.

    A chunk not found in the text (it should always be) gets no marks rather than a wrong page.
    """
    if not pages:
        return [[] for _ in chunks]
    doc = Squeezed(text)
    starts = [doc.squeezed(p.start) for p in pages]
    out: list[list[Mark]] = []
    cursor = 0
    for chunk in chunks:
        at = doc.find(chunk, cursor)
        if at < 0:
            at = doc.find(chunk)
        if at < 0:
            out.append([])
            continue
        cursor = at
        inner = Squeezed(chunk)
        end = at + len(inner.text)
        first = max(0, bisect.bisect_right(starts, at) - 1)
        marks: list[Mark] = [(0, pages[first].number, pages[first].label)]
        for page, begin in zip(pages[first + 1 :], starts[first + 1 :], strict=True):
            if begin >= end:
                break
            marks.append((inner.original(begin - at), page.number, page.label))
        out.append(marks)
    return out


def encode_marks(marks: Sequence[Mark]) -> str:
    """A chunk's page marks as stored in its metadata (JSON)."""
    return json.dumps([list(m) for m in marks], ensure_ascii=False, separators=(",", ":"))


def decode_marks(value: Any) -> list[Mark]:
    """A chunk's page marks from its metadata (none for a chunk of a document without pages)."""
    if not value or not isinstance(value, str):
        return []
    try:
        return [(int(a), int(b), str(c)) for a, b, c in json.loads(value)]
    except (ValueError, TypeError):
        return []


def page_at(marks: Sequence[Mark], offset: int) -> Page | None:
    """The page of the chunk's character at ``offset``, None for a chunk without pages."""
    if not marks:
        return None
    found = marks[0]
    for mark in marks:
        if mark[0] > offset:
            break
        found = mark
    return Page(start=found[0], number=found[1], label=found[2])


def sentence_pages(chunk: str, marks: Sequence[Mark], sentences: Sequence[str]) -> list[Page | None]:
    """The page each of a chunk's sentences (in order) starts on; all None for a chunk without pages."""
    if not marks:
        return [None for _ in sentences]
    inner = Squeezed(chunk)
    out: list[Page | None] = []
    cursor = 0
    for sentence in sentences:
        at = inner.find(sentence, cursor)
        if at < 0:  # not found (it should be): the page of the sentence before, else the chunk's first
            out.append(out[-1] if out else page_at(marks, 0))
            continue
        cursor = at
        out.append(page_at(marks, inner.original(at)))
    return out


def chunk_span(marks: Sequence[Mark]) -> str:
    """The pages a chunk spans as a reader names them (``p. 57``, ``pp. 57-58``); empty without pages."""
    if not marks:
        return ""
    first, last = Page(0, marks[0][1], marks[0][2]), Page(0, marks[-1][1], marks[-1][2])
    return f"p. {first.shown}" if first.number == last.number else f"pp. {first.shown}-{last.shown}"


def page_fields(page: Page | None) -> dict[str, Any]:
    """A quote's page as JSON outputs carry it: ``page`` (number in the file) and ``page_label`` (printed)."""
    if page is None:
        return {}
    return {"page": page.number, "page_label": page.shown}
