"""Documents made to order for tests and benchmarks: PDFs with a text layer, .docx files, a .docx zip bomb."""

from __future__ import annotations

import io
import zipfile


def pdf_with_lines(lines: list[tuple[int, str]]) -> bytes:
    """A one-page PDF drawing each ``(font size, text)`` line below the one before (a title in 18 pt, say)."""
    drawn = " ".join(f"/F1 {size} Tf 0 -{size + 8} Td ({text}) Tj" for size, text in lines)
    return pdf_with_text("", stream=f"BT 72 740 Td {drawn} ET")


def pdf_of_pages(pages: list[list[str]], *, labels: str = "", title: str = "") -> bytes:
    """A PDF whose page ``i`` draws the lines ``pages[i]`` (12 pt, top to bottom), each page its own content stream.

    ``labels``: the ``/Nums`` array of the catalog's ``/PageLabels`` (``0 << /S /r >> 2 << /S /D >>``: i, ii, then
    1, 2, ...); ``title``: the ``/Title`` of its document information.
    """

    def escaped(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    streams = [
        "BT /F1 12 Tf 72 740 Td " + " ".join(f"({escaped(line)}) Tj 0 -16 Td" for line in lines) + " ET"
        for lines in pages
    ]
    first_page = 5 + len(pages)
    kids = " ".join(f"{first_page + i} 0 R" for i in range(len(pages)))
    catalog = "<< /Type /Catalog /Pages 2 0 R" + (f" /PageLabels << /Nums [{labels}] >>" if labels else "") + " >>"
    objects = [
        catalog.encode(),
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Font << /F1 3 0 R >> >>",
    ]
    objects += [b"<< /Length %d >>\nstream\n" % len(s.encode()) + s.encode() + b"\nendstream" for s in streams]
    objects += [
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + i} 0 R /Resources 4 0 R >>".encode()
        for i in range(len(pages))
    ]
    info = f"<< /Title ({escaped(title)}) >>".encode() if title else b""
    return _pdf_file(objects + ([info] if info else []), info=len(objects) + 1 if info else 0)


def _pdf_file(objects: list[bytes], info: int = 0) -> bytes:
    """A PDF file of ``objects`` (object 1 the catalog) with its cross-reference table; ``info``: its /Info object."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    extra = f" /Info {info} 0 R" if info else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{extra} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


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
    return _pdf_file(objects)


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


SCAN_FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
)
"""Fonts a scan is drawn in: the first found that draws every character (Noto CJK for Chinese)."""


def scanned_pdf(pages: list[list[str]], dpi: int = 120, font_path: str = "") -> bytes:
    """An image-only PDF (no text layer, as a scanner makes it): page ``i`` a grey image of the lines ``pages[i]``.

    A4 at ``dpi``, 11 pt text, stored as JPEG so a page stays a few tens of KB.
    """
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(font_path or SCAN_FONTS[0], size=round(11 * dpi / 72))
    width, height = round(8.27 * dpi), round(11.69 * dpi)
    images = []
    for lines in pages:
        image = Image.new("L", (width, height), color=255)
        draw = ImageDraw.Draw(image)
        y = dpi  # a one-inch margin
        for line in lines:
            draw.text((dpi, y), line, fill=0, font=font)
            y += round(16 * dpi / 72)
        images.append(image)
    made = io.BytesIO()
    images[0].save(made, "PDF", resolution=dpi, save_all=True, append_images=images[1:], quality=70)
    return made.getvalue()


def scan_of_markdown(text: str, breaks: tuple[str, ...] = ()) -> bytes:
    """A scanned copy of a markdown document (:func:`scanned_pdf`): its lines without heading marks, a new page
    before each line in ``breaks`` (``notebooks/data/falcon-scan.pdf`` is the one of falcon.md, breaking at Team)."""
    pages: list[list[str]] = [[]]
    for line in text.split("\n"):
        plain = line.lstrip("#").strip()
        if plain in breaks:
            pages.append([])
        pages[-1].append(plain)
    return scanned_pdf(pages)
