"""Slides and e-books: a .pptx read slide by slide (slides as pages, titles as headings), an .epub chapter by chapter.

Both are zip archives: :func:`stores.loaders.load_bytes` checks the archive's bounds from its directory before
either is opened. Both need the ``formats`` extra (python-pptx, ebooklib); without it the file is refused naming
the extra. Every failure is an :class:`~stores.errors.InputError`.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from typing import Any

from stores.errors import InputError
from stores.extras import require_extra
from stores.pages import Page, join_paged


@dataclass(frozen=True)
class Paged:
    """A document's text, where its pages start (none for a format without pages) and its title (or empty)."""

    text: str
    pages: tuple[Page, ...]
    title: str


def pptx_text(data: bytes, source: str) -> Paged:
    """A presentation's text: each slide a page (its number the slide's), its title a heading, then its text boxes.

    Text boxes are read in the slide's order of shapes (grouped shapes within their group); tables row by row;
    speaker notes are left out (what the audience saw is what a citation points to).
    """
    require_extra("formats", "reading .pptx files")
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        deck = Presentation(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise InputError(f"{source}: not a readable .pptx file ({str(exc).splitlines()[0][:200]})") from exc
    slides = []
    first_title = ""
    for slide in deck.slides:
        title_shape = slide.shapes.title
        title = " ".join((title_shape.text_frame.text if title_shape is not None else "").split())
        first_title = first_title or title
        lines = [f"## {title}"] if title else []
        skip = title_shape.shape_id if title_shape is not None else None
        lines += [text for shape in slide.shapes if shape.shape_id != skip for text in _shape_texts(shape)]
        slides.append("\n\n".join(lines))
    text, pages = join_paged(slides, [""] * len(slides))
    title = " ".join(str(deck.core_properties.title or "").split())
    return Paged(text=text, pages=pages, title=title or first_title)


def _shape_texts(shape: Any) -> list[str]:
    """The paragraphs of a shape's text (a group's shapes in turn, a table's rows as lines of cells)."""
    if getattr(shape, "shapes", None) is not None:  # a group
        return [text for inner in shape.shapes for text in _shape_texts(inner)]
    if getattr(shape, "has_table", False):
        rows = [" | ".join(" ".join(cell.text.split()) for cell in row.cells) for row in shape.table.rows]
        return ["\n".join(row for row in rows if row.strip(" |"))]
    if not getattr(shape, "has_text_frame", False):
        return []
    paragraphs = ("".join(run.text for run in p.runs) for p in shape.text_frame.paragraphs)
    return [" ".join(p.split()) for p in paragraphs if p.strip()]


def epub_text(data: bytes, source: str, html: Any) -> Paged:
    """A book's text: its chapters in reading order (the spine), each's HTML read by ``html`` (text, title).

    A chapter whose text does not open with a heading gets its title in the table of contents (else its HTML title)
    as one, so every chapter is a section.
    An e-book has no fixed pages; its citations name the chapter.
    """
    require_extra("formats", "reading .epub files")
    import ebooklib
    from ebooklib import epub

    try:
        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
    except (epub.EpubException, zipfile.BadZipFile, KeyError, ValueError, AttributeError) as exc:
        raise InputError(f"{source}: not a readable .epub file ({str(exc).splitlines()[0][:200]})") from exc
    named = _toc_titles(book.toc)
    chapters = []
    for item_id, _linear in book.spine:
        item = book.get_item_with_id(item_id)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        text, heading = html(item.get_content(), f"{source}: {item.get_name()}")
        heading = named.get(item.get_name(), "") or heading
        if text.strip() and heading and not text.lstrip().startswith("#"):
            text = f"# {heading}\n\n{text}"
        chapters.append(text)
    titles = book.get_metadata("DC", "title")
    title = " ".join(str(titles[0][0]).split()) if titles else ""
    return Paged(text="\n\n".join(c.strip() for c in chapters if c.strip()), pages=(), title=title)


def _toc_titles(toc: Any) -> dict[str, str]:
    """File name -> title of each entry of an e-book's table of contents (nested sections flattened)."""
    out: dict[str, str] = {}
    for entry in toc or ():
        if isinstance(entry, tuple | list):  # (section, [entries])
            out.update(_toc_titles([entry[0]]))
            out.update(_toc_titles(entry[1] if len(entry) > 1 else []))
            continue
        href = str(getattr(entry, "href", "") or "").split("#")[0]
        title = " ".join(str(getattr(entry, "title", "") or "").split())
        if href and title:
            out.setdefault(href, title)
    return out
