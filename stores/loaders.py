"""Reading documents from disk (txt, md, pdf, docx, html) into plain text with markdown headings.

Every failure is an :class:`~stores.settings.InputError` with a message a person can act on.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

from stores.settings import InputError, get_settings

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text", ".rst"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
SUPPORTED = sorted(TEXT_SUFFIXES | HTML_SUFFIXES | {".pdf", ".docx"})


@dataclass(frozen=True)
class LoadedDocument:
    """Text read from a source, ready to chunk."""

    text: str
    title: str
    source: str
    media_type: str


def max_bytes() -> int:
    """The largest document accepted, in bytes (``LONGDOC_MAX_BYTES``)."""
    return get_settings().max_bytes


def _looks_binary(data: bytes) -> bool:
    sample = data[:8192]
    if b"\x00" in sample and not (sample.startswith((b"\xff\xfe", b"\xfe\xff"))):
        return True
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return bool(sample) and controls / len(sample) > 0.05


def _mostly_utf8(data: bytes) -> bool:
    """True when ``data`` is UTF-8 text with a few broken bytes (multi-byte characters that decode)."""
    text = data.decode("utf-8", errors="replace")
    broken = text.count("\ufffd")
    return any(ord(c) > 127 and c != "\ufffd" for c in text) and broken <= max(1, len(text) // 1000)


def decode_bytes(data: bytes, source: str = "input", encoding: str | None = None) -> str:
    """Decode text bytes: with ``encoding`` if given, else UTF-8/UTF-16 (BOM), else a confident guess.

    UTF-8 with a few broken bytes is an error (decoding it as a legacy code page would garble every
    non-ASCII character); so is text whose encoding cannot be guessed with confidence.
    """
    if encoding:
        try:
            return data.decode(encoding)
        except LookupError as exc:
            raise InputError(f"unknown encoding {encoding!r}") from exc
        except UnicodeDecodeError as exc:
            raise InputError(f"{source}: not {encoding} text ({exc.reason} at byte {exc.start})") from exc
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="strict")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InputError(f"{source}: broken UTF-16 text ({exc.reason})") from exc
    if _looks_binary(data):
        raise InputError(f"{source}: looks like a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if _mostly_utf8(data):
            raise InputError(
                f"{source}: invalid UTF-8 at byte {exc.start} (the rest reads as UTF-8); repair the file or give "
                "its encoding (longdoc ingest --encoding ENC)"
            ) from exc
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None or best.encoding is None or best.percent_chaos > 20:
        raise InputError(
            f"{source}: cannot decode the text (not UTF-8 and no other encoding fits); convert it to UTF-8 "
            "or give its encoding (longdoc ingest --encoding ENC)"
        )
    return str(best)


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _pdf_text(data: bytes, source: str) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError) as exc:
        raise InputError(f"{source}: not a readable PDF ({exc})") from exc
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text.strip():
        raise InputError(f"{source}: the PDF has no text layer (a scan?); run OCR on it first")
    return text


def _docx_text(data: bytes, source: str) -> str:
    import zipfile

    from docx import Document
    from lxml.etree import LxmlError

    try:
        document = Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError, LxmlError) as exc:
        raise InputError(f"{source}: not a readable .docx file ({str(exc).splitlines()[0][:200]})") from exc
    lines = []
    for para in document.paragraphs:
        text = para.text.strip()
        if not text:
            continue
        style = (para.style.name if para.style is not None else "") or ""
        match = re.match(r"Heading (\d)", style)
        if match:
            lines.append("#" * int(match.group(1)) + " " + text)
        elif style == "Title":
            lines.append("# " + text)
        else:
            lines.append(text)
    return "\n\n".join(lines)


def _html_text(data: bytes, source: str, encoding: str | None = None) -> tuple[str, str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_bytes(data, source, encoding), "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    title = soup.title.get_text(strip=True) if soup.title else ""
    blocks = []
    body = soup.body or soup
    for el in body.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "blockquote", "td"]):
        if el.find_parent(["p", "li", "pre", "blockquote", "td"]) is not None:
            continue
        text = el.get_text(" ", strip=True)
        if not text:
            continue
        if el.name and el.name[0] == "h" and el.name[1:].isdigit():
            blocks.append("#" * int(el.name[1:]) + " " + text)
        elif el.name == "li":
            blocks.append("- " + text)
        else:
            blocks.append(text)
    if not blocks:
        blocks = [body.get_text("\n", strip=True)]
    return "\n\n".join(blocks), title


def load_text(text: str, title: str = "", source: str = "text") -> LoadedDocument:
    """Wrap raw text given by a caller, validating it like a file."""
    if not isinstance(text, str):
        raise InputError("text must be a string")
    if len(text.encode("utf-8", errors="ignore")) > max_bytes():
        raise InputError(f"{source}: text is larger than the {max_bytes()} byte limit (LONGDOC_MAX_BYTES)")
    cleaned = _clean(text)
    if not cleaned:
        raise InputError(f"{source}: the document is empty")
    return LoadedDocument(text=cleaned, title=title or _first_line(cleaned), source=source, media_type="text/plain")


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:120]
    return "untitled"


def load_path(path: str | Path, encoding: str | None = None) -> LoadedDocument:
    """Read a document from ``path`` (txt, md, pdf, docx, html); ``encoding`` for text and html files."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a document")
    _check_suffix(p.name, str(p))
    size = p.stat().st_size
    if size > max_bytes():
        raise InputError(f"{p}: {size} bytes is over the {max_bytes()} byte limit (LONGDOC_MAX_BYTES)")
    return load_bytes(p.read_bytes(), p.name, source=str(p), encoding=encoding)


def _check_suffix(name: str, source: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED:
        raise InputError(f"{source}: unsupported type {suffix or '(none)'}; supported: {', '.join(SUPPORTED)}")
    return suffix


def load_bytes(data: bytes, filename: str, source: str = "", encoding: str | None = None) -> LoadedDocument:
    """Read a document from its bytes; ``filename``'s suffix gives the type (txt, md, pdf, docx, html)."""
    source = source or filename
    suffix = _check_suffix(filename, source)
    if len(data) > max_bytes():
        raise InputError(f"{source}: {len(data)} bytes is over the {max_bytes()} byte limit (LONGDOC_MAX_BYTES)")
    if not data.strip():
        raise InputError(f"{source}: the document is empty")
    title = ""
    if suffix == ".pdf":
        text, media = _pdf_text(data, source), "application/pdf"
    elif suffix == ".docx":
        text, media = (
            _docx_text(data, source),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        )
    elif suffix in HTML_SUFFIXES:
        (text, title), media = _html_text(data, source, encoding), "text/html"
    else:
        media = "text/markdown" if suffix in {".md", ".markdown"} else "text/plain"
        text = decode_bytes(data, source, encoding)
    cleaned = _clean(text)
    if not cleaned:
        raise InputError(f"{source}: the document is empty (no text after reading it)")
    stem = Path(filename).stem
    return LoadedDocument(text=cleaned, title=title or _first_line(cleaned) or stem, source=source, media_type=media)
