"""Documents made to order for tests and benchmarks: PDFs with a text layer, .docx files, a .docx zip bomb."""

from __future__ import annotations

import io
import zipfile


def pdf_with_lines(lines: list[tuple[int, str]]) -> bytes:
    """A one-page PDF drawing each ``(font size, text)`` line below the one before (a title in 18 pt, say)."""
    drawn = " ".join(f"/F1 {size} Tf 0 -{size + 8} Td ({text}) Tj" for size, text in lines)
    return pdf_with_text("", stream=f"BT 72 740 Td {drawn} ET")


def pdf_with_text(text: str, pages: int = 1, stream: str = "") -> bytes:
    """A PDF of ``pages`` pages, each drawing ``text`` from one shared content stream (a real text layer).

    ``stream``: the page's content stream as given, instead of one drawing ``text``.
    """
    content = (stream or f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET").encode()
    kids = " ".join(f"{6 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length " + str(len(content)).encode() + b" >>\nstream\n" + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Font << /F1 4 0 R >> >>",
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources 5 0 R >>"
    objects += [page] * pages
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
    return bytes(out)


def docx_bytes(paragraphs: list[str], extra: dict[str, bytes] | None = None, padding: bytes = b"") -> bytes:
    """A .docx of ``paragraphs``, with ``extra`` files added to its zip and ``padding`` XML at the start of its body."""
    import docx

    made = io.BytesIO()
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(made)
    if not extra and not padding:
        return made.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(made) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "word/document.xml" and padding:
                data = data.replace(b"<w:body>", b"<w:body>" + padding)
            dst.writestr(item.filename, data, compresslevel=9)
        for name, data in (extra or {}).items():
            dst.writestr(name, data)
    return out.getvalue()


def docx_bomb(megabytes: int = 30) -> bytes:
    """A .docx of about 90 KB whose ``word/document.xml`` unpacks to ``megabytes`` MB of paragraphs."""
    paragraph = b"<w:p><w:r><w:t>spam</w:t></w:r></w:p>"
    return docx_bytes(["Hello"], padding=paragraph * (megabytes * 1024 * 1024 // len(paragraph)))
