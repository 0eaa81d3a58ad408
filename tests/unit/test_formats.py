"""Slides and e-books: a .pptx read slide by slide (slides as pages), an .epub chapter by chapter."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from nodes.collection.sources import Sources, chunk_sentences
from nodes.ingest import ingest
from stores.errors import InputError
from stores.extras import MissingExtra, missing_module
from stores.labels import sentence_label
from stores.loaders import load_bytes
from stores.vectorstore import get_store

pytestmark = pytest.mark.skipif(missing_module("formats") is not None, reason="the formats extra is not installed")
TOPICS = ["pumps", "panels", "farms", "trials"]


def _deck() -> bytes:
    """Four slides, each titled by its topic, its sentences naming the topic; the first a title slide."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    for number, topic in enumerate(TOPICS, start=1):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"About the {topic}"
        body = slide.placeholders[1].text_frame
        body.text = f"The {topic} were checked in week {number}."
        body.add_paragraph().text = f"Every one of the {topic} passed its test."
        box = slide.shapes.add_textbox(Inches(1), Inches(6), Inches(4), Inches(1))
        box.text_frame.text = f"More notes on the {topic} follow the review."
    made = io.BytesIO()
    deck.save(made)
    return made.getvalue()


def test_a_deck_reads_slide_by_slide_with_titles_as_headings() -> None:
    doc = load_bytes(_deck(), "review.pptx")
    assert doc.title == "About the pumps"  # no title in its properties: the first slide's
    assert doc.text.startswith("## About the pumps\n\nThe pumps were checked in week 1.")
    assert [p.number for p in doc.pages] == [1, 2, 3, 4]
    for page, topic in zip(doc.pages, TOPICS, strict=True):
        assert doc.text[page.start :].startswith(f"## About the {topic}")


def test_each_cited_sentence_of_a_deck_names_its_slide(tmp_path: Path) -> None:
    path = tmp_path / "review.pptx"
    path.write_bytes(_deck())
    done = ingest(str(path), chunk_size=50, chunk_overlap=10)
    sources = Sources(get_store("default"), [done.doc_id])
    said = {}
    for hit in sources.hits():
        for number, sentence in enumerate(chunk_sentences(hit.text), start=1):
            said[sentence_label(hit.chunk_id, number)] = next(i for i, t in enumerate(TOPICS, 1) if t in sentence)
    pages = sources.pages(list(said))
    assert len(said) == 12 and {label: page.number for label, page in pages.items()} == said


def _book() -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("falcon-book")
    book.set_title("The Falcon Book")
    book.set_language("en")
    chapters = []
    for number, (title, body) in enumerate([("Budget", "The budget is 40,000 euros."), ("Team", "Bob Chen buys.")], 1):
        chapter = epub.EpubHtml(title=title, file_name=f"c{number}.xhtml", lang="en")
        chapter.content = f"<html><head><title>{title}</title></head><body><p>{body}</p></body></html>"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = chapters
    book.spine = chapters
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    made = io.BytesIO()
    epub.write_epub(made, book)
    return made.getvalue()


def test_a_book_reads_chapter_by_chapter_as_sections() -> None:
    doc = load_bytes(_book(), "falcon.epub")
    assert doc.title == "The Falcon Book" and doc.pages == ()
    assert "# Budget\n\nThe budget is 40,000 euros." in doc.text and "# Team\n\nBob Chen buys." in doc.text
    assert doc.text.index("# Budget") < doc.text.index("# Team")


def test_broken_slides_and_books_are_clear_errors() -> None:
    for name in ("deck.pptx", "book.epub"):
        with pytest.raises(InputError, match=f"not a readable .{name.split('.')[1]} file"):
            load_bytes(b"PK\x03\x04 not really a zip", name)


def test_without_the_formats_extra_a_deck_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("stores.extras.installed", lambda module: module != "pptx")
    with pytest.raises(MissingExtra, match=r"reading \.pptx files needs the formats extra"):
        load_bytes(_deck(), "review.pptx")
