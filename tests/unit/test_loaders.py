from __future__ import annotations

from pathlib import Path

import pytest

from doubles.files import docx_bomb, docx_bytes, pdf_with_text
from stores.errors import InputError, TooLarge
from stores.loaders import decode_bytes, load_bytes, load_path, load_text


def _pdf_with_text(path: Path, text: str, pages: int = 1) -> None:
    path.write_bytes(pdf_with_text(text, pages))


def test_markdown_and_text(tmp_path: Path) -> None:
    md = tmp_path / "a.md"
    md.write_text("# Title\r\n\r\nBody   \r\n\r\n\r\n\r\nMore", encoding="utf-8")
    doc = load_path(md)
    assert doc.title == "Title"
    assert doc.text == "# Title\n\nBody\n\nMore"
    assert doc.media_type == "text/markdown"


def test_html_keeps_headings_and_drops_scripts(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text(
        "<html><head><title>T</title><script>var x=1;</script></head><body>"
        "<h1>Main</h1><p>First <b>bold</b> para.</p><ul><li>item one</li></ul><h2>Sub</h2><p>Second.</p>"
        "</body></html>",
        encoding="utf-8",
    )
    doc = load_path(page)
    assert doc.title == "T"
    assert "var x" not in doc.text
    assert doc.text.split("\n\n") == ["# Main", "First bold para.", "- item one", "## Sub", "Second."]


def test_docx_headings_become_markdown(tmp_path: Path) -> None:
    from docx import Document

    d = Document()
    d.add_heading("Report", level=1)
    d.add_paragraph("Opening paragraph.")
    d.add_heading("Details", level=2)
    d.add_paragraph("Closing paragraph.")
    path = tmp_path / "r.docx"
    d.save(str(path))
    assert load_path(path).text == "# Report\n\nOpening paragraph.\n\n## Details\n\nClosing paragraph."


def test_pdf_with_text_layer(tmp_path: Path) -> None:
    path = tmp_path / "t.pdf"
    _pdf_with_text(path, "Hello from a PDF page")
    assert "Hello from a PDF page" in load_path(path).text


def test_pdf_without_text_layer_is_a_clear_error(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    path = tmp_path / "scan.pdf"
    with path.open("wb") as fh:
        writer.write(fh)
    with pytest.raises(InputError, match="no text layer"):
        load_path(path)


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("empty.txt", b"", "empty"),
        ("blank.txt", b"   \n\t\n  ", "empty"),
        ("bin.txt", bytes(range(256)) * 4, "binary"),
        ("broken.pdf", b"%PDF-1.4 garbage", "PDF"),
        ("broken.docx", b"not a zip at all", "docx"),
        ("image.png", b"\x89PNG\r\n", "unsupported"),
    ],
)
def test_bad_files_get_clear_errors(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError, match=message):
        load_path(path)


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_path(tmp_path / "nope.txt")
    with pytest.raises(InputError, match="folder"):
        load_path(tmp_path)


def test_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_BYTES", "10")
    path = tmp_path / "big.txt"
    path.write_text("x" * 100)
    with pytest.raises(InputError, match="limit"):
        load_path(path)
    with pytest.raises(InputError, match="limit"):
        load_text("y" * 100)


def test_encodings() -> None:
    assert decode_bytes("héllo wörld".encode()) == "héllo wörld"
    assert decode_bytes("\ufeffhi".encode("utf-8")) == "hi"
    assert decode_bytes("wide text".encode("utf-16")) == "wide text"
    latin = ("Le café est très bon, déjà vu à la fenêtre. " * 20).encode("latin-1")
    assert "café" in decode_bytes(latin, encoding="latin-1")
    chinese = ("这是一个用于测试编码检测的中文句子，内容足够长。" * 10).encode("gb18030")
    assert "中文句子" in decode_bytes(chinese, encoding="gb18030")
    for legacy, offset in ((latin, 6), (chinese, 0)):  # never guessed: the caller names the encoding
        with pytest.raises(InputError, match=f"invalid UTF-8 at byte {offset} "):
            decode_bytes(legacy)


def test_raw_text() -> None:
    doc = load_text("  Some raw text.  ", title="Raw")
    assert (doc.text, doc.title) == ("Some raw text.", "Raw")
    with pytest.raises(InputError, match="empty"):
        load_text(" \n ")


def test_docx_with_malformed_xml_is_a_clear_input_error(tmp_path: Path) -> None:
    import io
    import zipfile

    import docx

    good = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("Hello")
    document.save(good)
    bad = tmp_path / "broken.docx"
    with zipfile.ZipFile(io.BytesIO(good.getvalue())) as src, zipfile.ZipFile(bad, "w") as out:
        for item in src.infolist():
            data = src.read(item.filename)
            out.writestr(item, data[: len(data) // 2] if item.filename == "word/document.xml" else data)
    with pytest.raises(InputError, match=r"broken\.docx: not a readable \.docx file"):
        load_path(bad)


def test_utf8_with_a_broken_byte_is_an_error_not_a_legacy_code_page(tmp_path: Path) -> None:
    broken = tmp_path / "notes.txt"
    broken.write_bytes("Café crème, naïve résumé. ".encode() * 20 + b"\xff" + b" Fin.")
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 620 \(0xff\)"):
        load_path(broken)
    assert "Caf" in load_path(broken, encoding="latin-1").text
    with pytest.raises(InputError, match="not utf-8 text"):
        load_path(broken, encoding="utf-8")
    with pytest.raises(InputError, match="unknown encoding 'klingon'"):
        load_path(broken, encoding="klingon")
    legacy = tmp_path / "legacy.txt"
    legacy.write_bytes(("Le café est très bon, déjà vu à la fenêtre. " * 20).encode("cp1252"))
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 6 .*--encoding"):
        load_path(legacy)
    assert "café" in load_path(legacy, encoding="cp1252").text


def test_one_stray_byte_in_ascii_text_is_refused_naming_its_offset(tmp_path: Path) -> None:
    path = tmp_path / "prices.txt"
    path.write_bytes(b"The pump costs 10\xff euros.\n")
    with pytest.raises(InputError, match=r"prices\.txt: invalid UTF-8 at byte 17 \(0xff\)"):
        load_path(path)
    assert "10\xff euros" in load_path(path, encoding="latin-1").text  # the caller's choice is taken as given
    with pytest.raises(InputError, match="invalid UTF-8 at byte 5"):
        load_path(path.with_suffix(".html").write_bytes(b"<p>10\xff</p>") and path.with_suffix(".html"))


@pytest.mark.parametrize("encoding", ["klingon", "rot13", "base64", "undefined", "utf\x00", "x" * 5000, "idna"])
def test_an_unknown_or_non_text_encoding_is_an_input_error(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"caf\xe9 au lait.")
    with pytest.raises(InputError, match=r"encoding|not .* text") as caught:
        load_path(path, encoding=encoding)
    assert len(str(caught.value)) < 300


def test_ingest_command_takes_an_encoding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from surfaces import cli

    path = tmp_path / "notes.txt"
    path.write_bytes("Café crème. ".encode() * 20 + b"\xff")
    assert cli.main(["ingest", str(path), "-q", "--embedder", "hash"]) == 2
    assert "invalid UTF-8" in capsys.readouterr().err
    assert cli.main(["ingest", str(path), "-q", "--embedder", "hash", "--encoding", "cp1252", "--json"]) == 0
    assert '"chunks": 1' in capsys.readouterr().out


@pytest.mark.parametrize(
    "text",
    ["\u200b\u200c\u200d\ufeff\u2060" * 50, "# Title\n\n## Part one\n\n### Part two\n", "# \u200b\n\n\u00a0\u200b\n"],
)
def test_text_of_only_invisible_characters_or_headings_is_empty(tmp_path: Path, text: str) -> None:
    with pytest.raises(InputError, match="empty"):
        load_text(text)
    path = tmp_path / "blank.md"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="empty"):
        load_path(path)
    assert load_text("# Title\n\nOne line of text.").text.endswith("One line of text.")


def test_extracted_text_and_chunks_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stores.chunking import chunk_text
    from stores.errors import TooLarge

    monkeypatch.setenv("LONGDOC_MAX_TEXT_CHARS", "1000")
    with pytest.raises(TooLarge, match="1099 characters of text is over the 1000 limit"):
        load_text("word " * 220)
    pdf = tmp_path / "long.pdf"
    _pdf_with_text(pdf, "Forty characters of text on every page..", pages=40)
    with pytest.raises(TooLarge, match="the PDF's text is over the 1000 character limit"):
        load_path(pdf)
    monkeypatch.setenv("LONGDOC_MAX_CHUNKS", "3")
    with pytest.raises(TooLarge, match="more than 3 chunks of 60 tokens"):
        chunk_text("A sentence of a few words here. " * 200, chunk_size=60, chunk_overlap=0)
    assert 1 < len(chunk_text("A sentence of a few words here. " * 10, chunk_size=60, chunk_overlap=0)) <= 3


def test_a_pdf_of_3000_pages_is_refused_before_its_text_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stores import pdf_text
    from stores.errors import TooLarge

    pdf = tmp_path / "pages.pdf"
    _pdf_with_text(pdf, "A", pages=3000)
    read: list[object] = []
    text = pdf_text.page_text
    monkeypatch.setattr(pdf_text, "page_text", lambda document, index: read.append(index) or text(document, index))
    with pytest.raises(TooLarge, match="3000 pages is over the 2000 page limit"):
        load_path(pdf)
    assert read == []  # counted from the page tree: not one page's text was read


def test_a_docx_that_unpacks_to_30_mb_of_xml_is_refused_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracemalloc
    import zipfile

    from stores.errors import TooLarge

    bomb = docx_bomb(30)
    path = tmp_path / "bomb.docx"
    path.write_bytes(bomb)
    assert path.stat().st_size < 200_000
    opened: list[str] = []
    open_member = zipfile.ZipFile.open
    monkeypatch.setattr(
        zipfile.ZipFile,
        "open",
        lambda archive, name, *a, **k: opened.append(str(name)) or open_member(archive, name, *a, **k),
    )
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge, match=r"word/document\.xml unpacks to \d+ times its packed size"):
            load_path(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert opened == [] and peak < 5 * 1024 * 1024  # refused from the zip's directory: no file of it unpacked


def test_docx_archive_members_and_unpacked_size_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stores.errors import TooLarge
    from stores.loaders import load_bytes

    many = docx_bytes(["Hello."], {f"extra/item{i}.xml": b"<a/>" for i in range(30)})
    monkeypatch.setenv("LONGDOC_MAX_ARCHIVE_MEMBERS", "20")
    with pytest.raises(TooLarge, match=r"holds \d+ files, over the limit of 20"):
        load_bytes(many, "many.docx")
    monkeypatch.setenv("LONGDOC_MAX_ARCHIVE_MEMBERS", "1000")
    assert load_bytes(many, "many.docx").text == "Hello."
    monkeypatch.setenv("LONGDOC_MAX_UNPACKED_BYTES", "20000")
    with pytest.raises(TooLarge, match=r"unpacks to \d+ bytes, over the 20000 byte limit"):
        load_bytes(docx_bytes(["Some text. " * 3000]), "big.docx")


def test_a_pdfs_heading_lines_do_not_run_into_the_sentence_below() -> None:
    from doubles.files import pdf_with_lines
    from nodes.collection.sources import chunk_sentences

    body = "Bob Chen manages procurement and the supplier contracts for the whole pump project."
    pdf = pdf_with_lines(
        [
            (18, "Project Falcon"),
            (12, body),
            (12, "Field trials start in June in Kenya and the pilot runs"),
            (12, "until the end of the year."),
            (14, "Budget 2025"),
            (12, "The committee approved 40,000 euros."),
        ]
    )
    sentences = chunk_sentences(load_bytes(pdf, "falcon.pdf").text)
    assert sentences == [
        "Project Falcon",
        body,
        "Field trials start in June in Kenya and the pilot runs until the end of the year.",  # a wrapped line
        "Budget 2025",
        "The committee approved 40,000 euros.",
    ]


def test_html_over_its_element_bound_is_refused_while_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGDOC_MAX_HTML_ELEMENTS", "50")
    page = tmp_path / "p.html"
    page.write_text("<p>Otters hold hands.</p>" * 40, encoding="utf-8")  # 40 paragraphs, plus html and body
    assert load_path(page).text.count("Otters") == 40
    page.write_text("<p>Otters hold hands.</p>" * 60, encoding="utf-8")
    with pytest.raises(TooLarge, match=r"p\.html: the page has more than 50 elements \(LONGDOC_MAX_HTML_ELEMENTS\)"):
        load_path(page)


def test_html_nested_past_its_depth_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "deep.html"
    page.write_text("<div>" * 300 + "Otters hold hands." + "</div>" * 300, encoding="utf-8")
    with pytest.raises(TooLarge, match=r"nests elements more than 256 deep \(LONGDOC_MAX_HTML_DEPTH\)"):
        load_path(page)
    monkeypatch.setenv("LONGDOC_MAX_HTML_DEPTH", "400")
    assert load_path(page).text == "Otters hold hands."


def test_html_paragraphs_and_items_left_open_are_closed_not_nested(tmp_path: Path) -> None:
    """Old pages leave ``<p>`` and ``<li>`` open: each is a paragraph of its own, not one level deeper."""
    page = tmp_path / "old.html"
    page.write_text("<title>Old</title>" + "<p>A paragraph." * 400 + "<ul>" + "<li>An item" * 400 + "</ul>")
    doc = load_path(page)
    assert doc.title == "Old"
    assert doc.text.split("\n\n") == ["A paragraph."] * 400 + ["- An item"] * 400


def test_html_text_is_bounded_while_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_TEXT_CHARS", "1000")
    page = tmp_path / "long.html"
    page.write_text("<p>" + "Otters hold hands. " * 100 + "</p>", encoding="utf-8")
    with pytest.raises(TooLarge, match=r"the page's text is over the 1000 character limit"):
        load_path(page)
