"""Reading documents from disk (txt, md, pdf, docx, pptx, epub, html) into plain text with markdown headings.

Every failure is an :class:`~stores.errors.InputError` with a message a person can act on.
"""

from __future__ import annotations

import codecs
import io
import re
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from stores.errors import InputError, TooLarge
from stores.pages import Page
from stores.settings import get_settings
from stores.text import clean_text

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text", ".rst"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
ARCHIVE_SUFFIXES = {".docx", ".pptx", ".epub"}
"""Formats that are zip archives, checked from their directory before they are opened."""
SUPPORTED = sorted(TEXT_SUFFIXES | HTML_SUFFIXES | ARCHIVE_SUFFIXES | {".pdf"})


@dataclass(frozen=True)
class LoadedDocument:
    """Text read from a source, ready to chunk."""

    text: str
    title: str
    source: str
    media_type: str
    pages: tuple[Page, ...] = ()
    """Where each page starts in ``text`` (a PDF's); empty for a format without pages."""


def max_bytes() -> int:
    """The largest document accepted, in bytes (``LONGDOC_MAX_BYTES``)."""
    return get_settings().max_bytes


def _looks_binary(data: bytes) -> bool:
    sample = data[:8192]
    if b"\x00" in sample and not (sample.startswith((b"\xff\xfe", b"\xfe\xff"))):
        return True
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return bool(sample) and controls / len(sample) > 0.05


def check_encoding(encoding: object) -> str:
    """The codec name of ``encoding`` (a caller's choice), or InputError when it names no text encoding."""
    shown = repr(encoding)[:60]
    if not isinstance(encoding, str) or not encoding.strip() or len(encoding) > 40 or not encoding.isprintable():
        raise InputError(f"unknown encoding {shown}")
    try:
        info = codecs.lookup(encoding.strip())
    except (LookupError, ValueError):
        raise InputError(f"unknown encoding {shown}") from None
    if not getattr(info, "_is_text_encoding", True) or info.name == "undefined":
        raise InputError(f"{shown} is not a text encoding")
    return info.name


def decode_bytes(data: bytes, source: str = "input", encoding: str | None = None) -> str:
    """Decode text bytes: with ``encoding`` if the caller gave one, else as UTF-8 (UTF-16 with its BOM).

    Strict: any byte that is not valid in the encoding is an InputError naming its offset; nothing
    is guessed or replaced (a stray byte would silently become another character).
    """
    if encoding:
        codec = check_encoding(encoding)
        try:
            return data.decode(codec)
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{source}: not {encoding} text (byte 0x{data[exc.start]:02x} at offset {exc.start}: {exc.reason})"
            ) from exc
        except UnicodeError as exc:
            raise InputError(f"{source}: not {encoding} text ({exc})") from exc
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise InputError(f"{source}: broken UTF-16 text ({exc.reason} at byte {exc.start})") from exc
    if _looks_binary(data):
        raise InputError(f"{source}: looks like a binary file, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _invalid_utf8(data, exc.start, source) from exc


def _invalid_utf8(data: bytes, at: int, source: str) -> InputError:
    return InputError(
        f"{source}: invalid UTF-8 at byte {at} (0x{data[at]:02x}); repair the file, convert it to UTF-8 or give its "
        "encoding (longdoc ingest --encoding ENC, or `encoding` in the request)"
    )


_HEADING = re.compile(r"^#{1,6}[ \t].*$", re.MULTILINE)


def _has_content(text: str) -> bool:
    """True when ``text`` holds a visible character outside its headings (not only zero-width or blank ones)."""
    body = _HEADING.sub("", text)
    return any(not ch.isspace() and unicodedata.category(ch) not in ("Cf", "Cc", "Zs", "Zl", "Zp") for ch in body)


def _checked(text: str, source: str) -> str:
    """``text`` cleaned, or InputError when it is empty or longer than ``LONGDOC_MAX_TEXT_CHARS``."""
    cleaned = clean_text(text)
    limit = get_settings().max_text_chars
    if len(cleaned) > limit:
        raise TooLarge(
            f"{source}: {len(cleaned)} characters of text is over the {limit} limit (LONGDOC_MAX_TEXT_CHARS)"
        )
    if not _has_content(cleaned):
        raise InputError(f"{source}: the document is empty (no text besides headings and invisible characters)")
    return cleaned


def _check_archive(data: bytes, source: str, kind: str = ".docx") -> None:
    """Refuse a ``kind`` file (.docx, .pptx, .epub) whose zip holds too many files or unpacks to too much.

    Read from the zip's directory alone, before the file is opened.

    ``zipfile`` stops every file at the size its directory declares, so these bounds hold while it is read.
    """
    settings = get_settings()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError) as exc:
        raise InputError(f"{source}: not a readable {kind} file ({str(exc).splitlines()[0][:200]})") from exc
    if len(members) > settings.max_archive_members:
        raise TooLarge(
            f"{source}: the {kind} holds {len(members)} files, over the limit of {settings.max_archive_members} "
            "(LONGDOC_MAX_ARCHIVE_MEMBERS)"
        )
    total = sum(m.file_size for m in members)
    if total > settings.max_unpacked_bytes:
        raise TooLarge(
            f"{source}: the {kind} unpacks to {total} bytes, over the {settings.max_unpacked_bytes} byte limit "
            "(LONGDOC_MAX_UNPACKED_BYTES)"
        )
    for member in members:
        ratio = member.file_size / max(1, member.compress_size)
        if member.file_size > 1024 * 1024 and ratio > settings.max_unpack_ratio:
            raise TooLarge(
                f"{source}: {member.filename} unpacks to {ratio:.0f} times its packed size (a zip bomb?), over "
                f"the limit of {settings.max_unpack_ratio:g} (LONGDOC_MAX_UNPACK_RATIO)"
            )


def _docx_text(data: bytes, source: str) -> str:
    from docx import Document
    from lxml.etree import LxmlError

    _check_archive(data, source)
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


def utf8_pieces(data: bytes, source: str, size: int) -> Iterator[bytes]:
    """``data`` (UTF-8, a BOM left out) in pieces of ``size`` bytes, each checked as it is handed on.

    Strict like :func:`decode_bytes`, naming the offset of an invalid byte, without holding the whole text decoded.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    view = memoryview(data)
    for offset in range(start, len(data), size):
        piece = view[offset : offset + size]
        held = len(decoder.getstate()[0])  # the end of a character cut by the last piece, decoded with this one
        try:
            decoder.decode(piece, final=offset + size >= len(data))
        except UnicodeDecodeError as exc:
            raise _invalid_utf8(data, offset - held + exc.start, source) from exc
        yield bytes(piece)


def _html_text(data: bytes, source: str, encoding: str | None = None) -> tuple[str, str]:
    """The text and title of an HTML page, read as a stream within the HTML bounds (:mod:`stores.html_text`)."""
    from stores.html_text import FEED_BYTES, HtmlBounds, html_text

    settings = get_settings()
    bounds = HtmlBounds(settings.max_html_elements, settings.max_html_depth, settings.max_text_chars)
    if encoding or data.startswith((b"\xff\xfe", b"\xfe\xff")) or _looks_binary(data):
        text = decode_bytes(data, source, encoding)  # another encoding (or a refusal): decoded whole, then fed
        pieces: Iterable[bytes] = (text[i : i + FEED_BYTES].encode("utf-8") for i in range(0, len(text), FEED_BYTES))
        return html_text(pieces, source, bounds)
    return html_text(utf8_pieces(data, source, FEED_BYTES), source, bounds)


def load_text(text: str, title: str = "", source: str = "text") -> LoadedDocument:
    """Wrap raw text given by a caller, validating it like a file."""
    if not isinstance(text, str):
        raise InputError("text must be a string")
    if len(text.encode("utf-8", errors="ignore")) > max_bytes():
        raise TooLarge(f"{source}: text is larger than the {max_bytes()} byte limit (LONGDOC_MAX_BYTES)")
    cleaned = _checked(text, source)
    return LoadedDocument(text=cleaned, title=title or _first_line(cleaned), source=source, media_type="text/plain")


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:120]
    return "untitled"


def load_path(path: str | Path, encoding: str | None = None) -> LoadedDocument:
    """Read a document from ``path`` (txt, md, pdf, docx, pptx, epub, html); ``encoding`` for text and html files."""
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a folder, not a document")
    _check_suffix(p.name, str(p))
    size = p.stat().st_size
    if size > max_bytes():
        raise TooLarge(f"{p}: {size} bytes is over the {max_bytes()} byte limit (LONGDOC_MAX_BYTES)")
    return load_bytes(p.read_bytes(), p.name, source=str(p), encoding=encoding)


def _check_suffix(name: str, source: str) -> str:
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED:
        raise InputError(f"{source}: unsupported type {suffix or '(none)'}; supported: {', '.join(SUPPORTED)}")
    return suffix


def load_bytes(data: bytes, filename: str, source: str = "", encoding: str | None = None) -> LoadedDocument:
    """Read a document from its bytes; ``filename``'s suffix gives the type (txt, md, pdf, docx, pptx, epub, html)."""
    source = source or filename
    suffix = _check_suffix(filename, source)
    if len(data) > max_bytes():
        raise TooLarge(f"{source}: {len(data)} bytes is over the {max_bytes()} byte limit (LONGDOC_MAX_BYTES)")
    if not data.strip():
        raise InputError(f"{source}: the document is empty")
    title = ""
    if suffix == ".pdf":
        return _pdf_document(data, filename, source)
    if suffix in (".pptx", ".epub"):
        return _archive_document(data, filename, source, suffix)
    if suffix == ".docx":
        text, media = (
            _docx_text(data, source),
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        )
    elif suffix in HTML_SUFFIXES:
        (text, title), media = _html_text(data, source, encoding), "text/html"
    else:
        media = "text/markdown" if suffix in {".md", ".markdown"} else "text/plain"
        text = decode_bytes(data, source, encoding)
    cleaned = _checked(text, source)
    title = title or _first_heading(cleaned) or _first_line(cleaned) or Path(filename).stem
    return LoadedDocument(text=cleaned, title=title, source=source, media_type=media)


def _archive_document(data: bytes, filename: str, source: str, suffix: str) -> LoadedDocument:
    """A .pptx (slides as pages) or .epub (chapters as sections) read by :mod:`stores.formats`."""
    from stores.formats import epub_text, pptx_text

    _check_archive(data, source, suffix)
    if suffix == ".pptx":
        read = pptx_text(data, source)
        media = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    else:
        read = epub_text(data, source, lambda raw, name: _html_text(raw, name))
        media = "application/epub+zip"
    cleaned = _checked(read.text, source)
    pages = read.pages if cleaned == read.text else ()
    title = read.title or _first_heading(cleaned) or _first_line(cleaned) or Path(filename).stem
    return LoadedDocument(text=cleaned, title=title, source=source, media_type=media, pages=pages)


def _pdf_document(data: bytes, filename: str, source: str) -> LoadedDocument:
    """A PDF read page by page (:mod:`stores.pdf_text`), titled by its metadata, else its first heading line."""
    from stores.pdf_text import read_pdf

    read = read_pdf(data, source)
    if not read.text.strip():
        raise InputError(f"{source}: the PDF has no text layer (a scan?); run OCR on it first")
    cleaned = _checked(read.text, source)
    pages = read.pages if cleaned == read.text else ()  # cleaned page by page already: the offsets hold
    title = read.title or _pdf_heading(cleaned) or _first_line(cleaned) or Path(filename).stem
    return LoadedDocument(text=cleaned, title=title, source=source, media_type="application/pdf", pages=pages)


def _first_heading(text: str) -> str:
    """The text of the first markdown heading line (``# Title``), empty when there is none."""
    found = _HEADING.search(text)
    return found.group(0).lstrip("#").strip()[:120] if found else ""


def _pdf_heading(text: str) -> str:
    """A PDF's first line when it stands alone as a heading (set off by a blank line, short, no end stop)."""
    head, _, rest = text.partition("\n\n")
    line = head.strip()
    if "\n" in line or not rest or len(line.split()) > 15 or line[-1:] in ".!?;,:。！？":
        return ""
    return line[:120]
