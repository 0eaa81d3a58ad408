r"""Structure-aware chunking: markdown headings first, then paragraphs, lines, sentences.

Chunks stay inside their section, carry the section title and their position, and
overlap the previous chunk of the same section by whole sentences.

Hand-made because ``langchain_text_splitters`` does not give these chunks: its
``MarkdownHeaderTextSplitter`` drops the blank lines between paragraphs (joining lines with
``"  \n"``), so paragraphs can no longer be told apart, and its recursive splitter overlaps by
characters rather than by whole sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from stores.errors import InputError, TooLarge
from stores.labels import chunk_label
from stores.settings import get_settings
from stores.text import CHARS_PER_TOKEN, LONG_RUN, estimate_tokens, split_sentences

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Chunk:
    """One chunk of a document."""

    chunk_id: str
    position: int
    section: str
    text: str

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready fields."""
        return {
            "chunk_id": self.chunk_id,
            "position": self.position,
            "section": self.section,
            "text": self.text,
        }


def split_sections(text: str) -> list[tuple[str, str]]:
    """Split markdown-ish text into ``(section title, body)`` pairs in document order."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    stack: list[tuple[int, str]] = []
    in_fence = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            level, title = len(match.group(1)), match.group(2).strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            sections.append((" > ".join(t for _, t in stack), []))
        else:
            sections[-1][1].append(line)
    out = []
    for title, lines in sections:
        body = "\n".join(lines).strip()
        if body or title:
            out.append((title, body))
    return [(t, b) for t, b in out if b]


def _units(body: str, max_tokens: int) -> list[str]:
    """Break a section body into pieces no larger than ``max_tokens`` (paragraphs, lines, sentences)."""
    pieces: list[str] = []
    for para in re.split(r"\n\s*\n", body):
        para = para.strip()
        if not para:
            continue
        if estimate_tokens(para) <= max_tokens:
            pieces.append(para)
            continue
        for line in para.split("\n"):
            line = line.strip()
            if not line:
                continue
            if estimate_tokens(line) <= max_tokens:
                pieces.append(line)
                continue
            for sentence in split_sentences(line):
                if estimate_tokens(sentence) <= max_tokens:
                    pieces.append(sentence)
                else:
                    pieces.extend(_hard_split(sentence, max_tokens))
    return pieces


_ATOM = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+\s*|\s+"
)


def _hard_split(text: str, max_tokens: int) -> list[str]:
    """Cut an over-long sentence into pieces of whole words (or single CJK characters).

    A word over ``max_tokens`` on its own (a base64 blob, minified code, a hex dump) is cut into pieces of
    characters.
    """
    out: list[str] = []
    current: list[str] = []
    size = 0.0
    # An atom of up to LONG_RUN characters always fits: chunk sizes start at 50 tokens.
    atoms = (
        part
        for atom in _ATOM.findall(text)
        for part in (split_by_characters(atom, max_tokens) if len(atom) > LONG_RUN else (atom,))
    )
    for atom in atoms:
        cost = estimate_tokens(atom)
        if current and size + cost > max_tokens:
            out.append("".join(current).strip())
            current, size = [], 0.0
        current.append(atom)
        size += cost
    if current and "".join(current).strip():
        out.append("".join(current).strip())
    return [p for p in out if p]


def split_by_characters(text: str, max_tokens: int) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``max_tokens`` estimated tokens each, by characters.

    ``text`` itself when it fits. The last resort when there is no space to cut at.

    A piece is not the longest that fits, only close to it: its length is guessed from the cost of the widest
    window (a piece costs at least a third of a token a character past ``LONG_RUN`` characters,
    :func:`stores.text.run_floor`), then shortened until it fits.
    """
    if estimate_tokens(text) <= max_tokens:
        return [text]
    pieces: list[str] = []
    start = 0
    widest = CHARS_PER_TOKEN * max_tokens + LONG_RUN
    while start < len(text):
        size = min(len(text) - start, widest)
        cost = estimate_tokens(text[start : start + size])
        while cost > max_tokens and size > 1:
            size = max(1, min(size - 1, int(size * max_tokens / cost * 0.97)))
            cost = estimate_tokens(text[start : start + size])
        pieces.append(text[start : start + size])
        start += size
    return pieces


def _tail(pieces: list[str], overlap: int) -> list[str]:
    """Trailing sentences of ``pieces`` worth about ``overlap`` tokens."""
    if overlap <= 0 or not pieces:
        return []
    sentences = split_sentences(pieces[-1]) if len(pieces) == 1 else []
    candidates = sentences or pieces
    tail: list[str] = []
    total = 0.0
    for piece in reversed(candidates):
        cost = estimate_tokens(piece)
        if total + cost > overlap:
            break
        tail.insert(0, piece)
        total += cost
    if not tail and sentences:
        last = sentences[-1]
        if estimate_tokens(last) <= overlap * 2:
            tail = [last]
    return tail


def effective_overlap(chunk_size: int, chunk_overlap: int) -> int:
    """The overlap actually used: as asked, but at most a third of the chunk size (then a sixth)."""
    if chunk_size < 50:
        raise InputError(f"chunk_size must be at least 50 tokens, got {chunk_size}")
    if chunk_overlap < 0:
        raise InputError("chunk_overlap must not be negative")
    return chunk_overlap if chunk_overlap * 3 <= chunk_size else chunk_size // 6


def chunk_text(text: str, chunk_size: int = 900, chunk_overlap: int = 150) -> list[Chunk]:
    """Chunk ``text``: sections by heading, then paragraphs, lines and sentences, with overlap."""
    if chunk_size < 50:
        raise InputError("chunk_size must be at least 50 tokens")
    if chunk_overlap < 0 or chunk_overlap >= chunk_size:
        raise InputError("chunk_overlap must be between 0 and chunk_size - 1")
    chunks: list[Chunk] = []
    limit = get_settings().max_chunks
    for section, body in split_sections(text):
        current: list[str] = []
        size = 0.0
        fresh = 0
        for piece in _units(body, chunk_size):
            cost = estimate_tokens(piece)
            if current and size + cost > chunk_size and fresh:
                if len(chunks) >= limit:
                    raise _too_many(limit, chunk_size)
                chunks.append(_make(len(chunks), section, current))
                current = _tail(current, chunk_overlap)
                size = sum(estimate_tokens(p) for p in current)
                fresh = 0
                while current and size + cost > chunk_size:
                    size -= estimate_tokens(current.pop(0))
            current.append(piece)
            size += cost
            fresh += 1
        if current and fresh:
            if len(chunks) >= limit:
                raise _too_many(limit, chunk_size)
            chunks.append(_make(len(chunks), section, current))
    return chunks


def _too_many(limit: int, chunk_size: int) -> TooLarge:
    return TooLarge(
        f"the document makes more than {limit} chunks of {chunk_size} tokens (LONGDOC_MAX_CHUNKS); "
        "ingest it with a larger chunk size or in parts"
    )


def _make(position: int, section: str, pieces: list[str]) -> Chunk:
    return Chunk(chunk_id=chunk_label(position), position=position, section=section, text="\n\n".join(pieces))
