from __future__ import annotations

from pathlib import Path

import pytest

from stores.loaders import decode_bytes, load_path, load_text
from stores.settings import InputError


def _pdf_with_text(path: Path, text: str) -> None:
    """Write a one-page PDF whose content stream draws ``text`` (a real text layer)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))


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
    assert "café" in decode_bytes(latin)
    chinese = ("这是一个用于测试编码检测的中文句子，内容足够长。" * 10).encode("gb18030")
    assert "中文句子" in decode_bytes(chinese)


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
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 620 \(the rest reads as UTF-8\)"):
        load_path(broken)
    assert "Caf" in load_path(broken, encoding="latin-1").text
    with pytest.raises(InputError, match="not utf-8 text"):
        load_path(broken, encoding="utf-8")
    with pytest.raises(InputError, match="unknown encoding 'klingon'"):
        load_path(broken, encoding="klingon")
    legacy = tmp_path / "legacy.txt"
    legacy.write_bytes(("Le café est très bon, déjà vu à la fenêtre. " * 20).encode("cp1252"))
    assert "café" in load_path(legacy).text  # a whole legacy file is still read, by a confident guess


def test_ingest_command_takes_an_encoding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from surfaces import cli

    path = tmp_path / "notes.txt"
    path.write_bytes("Café crème. ".encode() * 20 + b"\xff")
    assert cli.main(["ingest", str(path), "-q", "--embedder", "hash"]) == 2
    assert "invalid UTF-8" in capsys.readouterr().err
    assert cli.main(["ingest", str(path), "-q", "--embedder", "hash", "--encoding", "cp1252", "--json"]) == 0
    assert '"chunks": 1' in capsys.readouterr().out
