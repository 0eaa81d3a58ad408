"""Pages of PDFs: where each chunk's and each cited sentence's page is, and the layout rules of a PDF's text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from doubles.chat import ScriptedChatModel
from doubles.files import pdf_of_pages
from doubles.replies import chain_reply
from nodes.collection.sources import Sources, chunk_sentences, quote_sources
from nodes.ingest import ingest
from nodes.offload.answer import quote_sources as chat_sources
from nodes.offload.chat import render_sources
from stores.errors import InputError
from stores.labels import sentence_label
from stores.loaders import load_bytes, load_path
from stores.models import use_chat_model
from stores.pages import Page, Squeezed, chunk_marks, chunk_span, page_at
from stores.pdf_text import join_hyphenated, join_pages, strip_running_lines
from stores.vectorstore import get_store
from surfaces.cli import EXIT_OK, main

ANIMALS = ["falcon", "heron", "otter", "badger", "lynx", "marten", "stork", "viper", "ibex", "crane"]
LABELS = "0 << /S /r >> 2 << /S /D >>"
"""Pages 1-2 printed i, ii; pages 3 on printed 1, 2, ... (a preface, then the body)."""


def _report(pages: int = 8) -> bytes:
    """A PDF whose every sentence says which page (in the file) it is printed on, with a running header and footer.

    Each page's sentences name a different animal, so no body line repeats from page to page.
    """
    drawn = []
    for number in range(1, pages + 1):
        animal = ANIMALS[(number - 1) % len(ANIMALS)]
        lines = ["QUARTERLY REPORT ON WILDLIFE", f"Section {number % 3 + 1}"]
        lines += [
            f"The {animal} count rose sharply on page {number}. Rangers saw the {animal} near the river at dawn",
            f"and again at dusk on page {number}. A survey team marked the {animal} nests with blue flags.",
            f"Volunteers said the {animal} season was long. The {animal} trail was closed for rest-",
            f"oration work near the {animal} den.",
        ]
        lines.append(str(number))
        drawn.append(lines)
    return pdf_of_pages(drawn, labels=LABELS, title="Wildlife Report")


def _page_said(sentence: str) -> int | None:
    """The page a sentence of :func:`_report` says it is on (its animal's page), None for a sentence without one."""
    found = re.search(r"\b(" + "|".join(ANIMALS) + r")\b", sentence)
    return ANIMALS.index(found.group(1)) + 1 if found else None


def test_a_pdf_gives_its_pages_title_and_labels_without_running_lines() -> None:
    doc = load_bytes(_report(), "report.pdf")
    assert doc.title == "Wildlife Report"  # the metadata title, not the first words
    assert "QUARTERLY REPORT" not in doc.text  # the running header
    assert not re.search(r"^\d+$", doc.text, re.MULTILINE)  # the page numbers
    assert "restoration work" in doc.text and "rest-" not in doc.text  # hyphenation joined
    assert [p.number for p in doc.pages] == list(range(1, 9))
    assert [p.shown for p in doc.pages] == ["i", "ii", "1", "2", "3", "4", "5", "6"]
    for page, following in zip(doc.pages, [*doc.pages[1:], None], strict=True):
        text = doc.text[page.start : following.start if following else None]
        assert {_page_said(s) for s in re.split(r"(?<=\.)\s", text) if _page_said(s)} == {page.number}


def test_every_cited_sentence_of_an_ingested_pdf_names_its_page(tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(_report())
    done = ingest(str(path), chunk_size=60, chunk_overlap=15)
    sources = Sources(get_store("default"), [done.doc_id])
    labels = []
    said, sentences = {}, {}
    for hit in sources.hits():
        for number, sentence in enumerate(chunk_sentences(hit.text), start=1):
            label = sentence_label(hit.chunk_id, number)
            labels.append(label)
            said[label], sentences[label] = _page_said(sentence), sentence
    pages = sources.pages(labels)
    checked = [label for label in labels if said[label] is not None]
    assert len(checked) > 30 and len({said[label] for label in checked}) == 8
    assert all(pages[label].number == said[label] for label in checked)
    assert {pages[label].shown for label in checked} == {"i", "ii", "1", "2", "3", "4", "5", "6"}
    # a quote line of the chain carries its page, a chat source too
    label = next(label for label in checked if said[label] == 5)
    quoted = quote_sources(sources, [f"[{label}] a sentence"])
    assert quoted == [{"label": label, "quote": "a sentence", "section": "", "page": 5, "page_label": "3"}]
    chat = chat_sources(sources, f"[{label}] {sentences[label]}", [label], "the count rose sharply")
    assert chat[0]["page"] == 5 and chat[0]["page_label"] == "3" and chat[0]["label"] == label
    assert f", p. {chat[0]['page_label']}:" in render_sources(chat)


def test_a_markdown_quote_names_its_section_and_no_page(sample_markdown: Path) -> None:
    done = ingest(str(sample_markdown), chunk_size=60, chunk_overlap=10)
    sources = Sources(get_store("default"), [done.doc_id])
    hit = sources.hits()[1]
    quoted = quote_sources(sources, [f"[{hit.chunk_id}.1] a sentence"])
    assert quoted == [{"label": f"{hit.chunk_id}.1", "quote": "a sentence", "section": hit.section}]
    assert hit.section and "page" not in hit.metadata


def test_chunk_marks_follow_a_chunk_over_a_page_break() -> None:
    text = "Alpha one.\n\nBeta two. Gamma three.\n\nDelta four."
    pages = [Page(0, 1, "vii"), Page(text.index("Gamma"), 2, "viii"), Page(text.index("Delta"), 3, "ix")]
    chunks = ["Alpha one.", "Beta two.\n\nGamma three.", "Gamma three. Delta four."]
    marks = chunk_marks(text, pages, chunks)
    assert marks[0] == [(0, 1, "vii")]
    assert marks[1] == [(0, 1, "vii"), (chunks[1].index("Gamma"), 2, "viii")]
    assert marks[2] == [(0, 2, "viii"), (chunks[2].index("Delta"), 3, "ix")]
    assert chunk_span(marks[1]) == "pp. vii-viii" and chunk_span(marks[0]) == "p. vii"
    assert page_at(marks[2], chunks[2].index("four")) == Page(chunks[2].index("Delta"), 3, "ix")
    assert page_at(marks[2], 0) == Page(0, 2, "viii")
    assert chunk_marks(text, [], chunks) == [[], [], []]


def test_squeezed_text_finds_parts_whatever_their_spacing() -> None:
    squeezed = Squeezed("one two\n\nthree  four")
    at = squeezed.find("two three")
    assert at == 3 and squeezed.original(at) == 4 and squeezed.find("five") == -1


def test_running_lines_go_and_body_lines_stay() -> None:
    pages = [[f"Annual review {n}", "Unique opening words", f"text {n * 'x'}", f"Page {n} of 4"] for n in range(1, 5)]
    kept = strip_running_lines(pages)
    assert all("Annual review" not in " ".join(lines) for lines in kept)
    assert all(not any(line.startswith("Page ") for line in lines) for lines in kept)
    assert [lines[-1] for lines in kept] == [f"text {n * 'x'}" for n in range(1, 5)]


def test_hyphenation_is_joined_only_before_a_small_letter() -> None:
    assert join_hyphenated("an exam-\nple of it") == "an example of it"
    assert join_hyphenated("Baden-\nWürttemberg") == "Baden-Württemberg"
    assert join_hyphenated("pages 3-\n4") == "pages 3-\n4"


def test_empty_pages_are_skipped_and_the_offsets_hold() -> None:
    joined = join_pages(["First page text.", "", "Third page text."], ["", "", ""])
    assert joined.text == "First page text.\n\nThird page text."
    assert [(p.start, p.number) for p in joined.pages] == [(0, 1), (18, 3)]


def test_an_encrypted_pdf_opens_with_the_empty_password_or_names_its_cause(tmp_path: Path) -> None:
    import io

    from pypdf import PdfReader, PdfWriter

    for password, readable in (("", True), ("secret", False)):
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_report(3))))
        writer.encrypt(user_password=password, owner_password="owner", algorithm="AES-128")
        made = io.BytesIO()
        writer.write(made)
        path = tmp_path / f"locked-{readable}.pdf"
        path.write_bytes(made.getvalue())
        if readable:
            assert "heron" in load_path(path).text
        else:
            with pytest.raises(InputError, match="encrypted with a password"):
                load_path(path)


def test_ask_on_a_pdf_gives_each_quote_its_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(_report())
    question = ["ask", str(path), "Where did rangers see the otter?", "-q", "--chunk-size", "60"]
    tree = tmp_path / "tree.html"
    with use_chat_model(ScriptedChatModel(default=chain_reply)):
        assert main([*question, "--json", "--tree-html", str(tree)]) == EXIT_OK
        out = json.loads(capsys.readouterr().out)
        assert main(question) == EXIT_OK
        shown = capsys.readouterr().out
    assert out["sources"] and len(out["sources"]) == len(out["quotes"])
    for quote, source in zip(out["quotes"], out["sources"], strict=True):
        assert quote == f"[{source['label']}] {source['quote']}"
        assert source["page"] == _page_said(source["quote"])
        assert source["page_label"] == (
            ["i", "ii"][source["page"] - 1] if source["page"] < 3 else str(source["page"] - 2)
        )
    assert f"{out['quotes'][0]} (p. {out['sources'][0]['page_label']})" in shown
    hovers = re.findall(r"p{1,2}\. [0-9iv]+(?:-[0-9iv]+)?", tree.read_text(encoding="utf-8"))
    assert "p. i" in hovers and any(h.startswith("pp. ") for h in hovers)  # each chunk's pages on hover


def test_pdfs_read_in_several_threads_at_once_read_alike() -> None:
    from concurrent.futures import ThreadPoolExecutor

    data = [_report(pages) for pages in (3, 5, 8, 4)] * 3
    with ThreadPoolExecutor(max_workers=4) as pool:
        texts = list(pool.map(lambda pdf: load_bytes(pdf, "report.pdf").text, data))
    assert texts == [load_bytes(pdf, "report.pdf").text for pdf in data] and len(set(texts)) == 4
