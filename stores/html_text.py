"""The text of an HTML page, read as a stream with its bounds checked while it is read.

lxml's HTML parser (libxml2) is fed the page in pieces and reports each element's start and end and each piece
of text to a target object, which keeps only the text it needs: no tree of the page is built. libxml2 closes
what HTML leaves open (a ``<p>`` before a block, the previous ``<li>``), so its events nest like the page a
browser shows. Elements (``LONGDOC_MAX_HTML_ELEMENTS``), nesting (``LONGDOC_MAX_HTML_DEPTH``) and the characters
of text kept (``LONGDOC_MAX_TEXT_CHARS``) are counted as the events come: past a bound the parser stops at once
with :class:`~stores.errors.TooLarge`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bs4.builder import HTMLTreeBuilder

from stores.errors import TooLarge

FEED_BYTES = 1 << 20
"""Bytes handed to the parser at a time (:func:`stores.loaders.utf8_pieces`)."""

SKIPPED = frozenset({"script", "style", "noscript", "template", "svg"})
"""Elements whose content is not text a reader sees."""

HEADINGS = {f"h{level}": level for level in range(1, 7)}
CONTAINERS = frozenset({"p", "li", "pre", "blockquote", "td"})
"""Blocks whose inner blocks are part of their own text."""
BLOCKS = CONTAINERS | frozenset(HEADINGS)
"""Elements whose text becomes one paragraph of the document (headings as markdown, list items as ``- ``)."""

LINE_BREAKS = frozenset(HTMLTreeBuilder.DEFAULT_BLOCK_ELEMENTS) | BLOCKS | {"br", "tr", "th", "body"}
"""Elements that start a new line of a page without paragraphs (inline ones, ``<b>`` or ``<a>``, do not)."""


@dataclass(frozen=True)
class HtmlBounds:
    """The bounds a page is read within."""

    elements: int
    depth: int
    chars: int


class _Reader:
    """lxml parser target: collects a page's title and blocks of text, refusing it as soon as it passes a bound."""

    def __init__(self, source: str, bounds: HtmlBounds) -> None:
        self.source, self.bounds = source, bounds
        self.stack: list[str] = []
        self.elements = self.chars = self.skipping = 0
        self.title: str | None = None
        self.title_parts: list[str] | None = None
        self.blocks: list[str] = []
        self.block: tuple[str, int, list[str]] | None = None  # tag, its place in the stack, its text
        self.lines: list[str] = []  # the page's lines, for a page without any block
        self.line: list[str] = []
        self.pending: list[str] = []

    def data(self, data: str) -> None:
        """Text, kept until the next tag (one text node may come in several pieces)."""
        if not self.skipping:
            self.pending.append(data)

    def _flush(self) -> None:
        """Hand the text node read since the last tag to the title, or to the open block and the page's lines."""
        if not self.pending:
            return
        text = "".join(self.pending).strip()
        self.pending.clear()
        if not text or (self.title_parts is None and "head" in self.stack):
            return
        self.chars += len(text)
        if self.chars > self.bounds.chars:
            raise TooLarge(
                f"{self.source}: the page's text is over the {self.bounds.chars} character limit "
                "(LONGDOC_MAX_TEXT_CHARS)"
            )
        if self.title_parts is not None:
            self.title_parts.append(text)
            return
        if self.block is not None:
            self.block[2].append(text)
        if not self.blocks:
            self.line.append(text)

    def _break_line(self) -> None:
        if self.line:
            self.lines.append(" ".join(self.line))
            self.line.clear()

    def start(self, tag: str, attrib: object) -> None:
        """An element opens: counted, its depth checked, and a title, block or skipped part begun."""
        self._flush()
        self.elements += 1
        if self.elements > self.bounds.elements:
            raise TooLarge(
                f"{self.source}: the page has more than {self.bounds.elements} elements (LONGDOC_MAX_HTML_ELEMENTS)"
            )
        self.stack.append(tag)
        if len(self.stack) > self.bounds.depth:
            raise TooLarge(
                f"{self.source}: the page nests elements more than {self.bounds.depth} deep (LONGDOC_MAX_HTML_DEPTH)"
            )
        if tag in LINE_BREAKS:
            self._break_line()
        if tag in SKIPPED:
            self.skipping += 1
        elif self.skipping:
            return
        elif tag == "title" and self.title is None and self.title_parts is None:
            self.title_parts = []
        elif tag in BLOCKS and self.block is None:
            self.block = (tag, len(self.stack) - 1, [])

    def end(self, tag: str) -> None:
        """An element closes, with what is still open inside it; an end of nothing open is ignored."""
        self._flush()
        if tag in LINE_BREAKS:
            self._break_line()
        for place in range(len(self.stack) - 1, -1, -1):
            if self.stack[place] == tag:
                self._close_to(place)
                return

    def _close_to(self, place: int) -> None:
        """Close the open elements from ``place`` up (ending the block, title or skipped part they hold)."""
        for tag in reversed(self.stack[place:]):
            if tag in SKIPPED:
                self.skipping -= 1
            elif tag == "title" and self.title_parts is not None:
                self.title, self.title_parts = "".join(self.title_parts), None
        del self.stack[place:]
        if self.block is not None and self.block[1] >= place:
            self._end_block()

    def _end_block(self) -> None:
        assert self.block is not None
        tag, _, parts = self.block
        self.block = None
        text = " ".join(parts)
        if not text:
            return
        if tag in HEADINGS:
            text = "#" * HEADINGS[tag] + " " + text
        elif tag == "li":
            text = "- " + text
        self.blocks.append(text)
        self.lines.clear()
        self.line.clear()

    def close(self) -> tuple[str, str]:
        """The page's text (its blocks, else its lines) and title, once the whole page was read."""
        self._flush()
        if self.stack:
            self._close_to(0)
        self._break_line()
        if self.title is None and self.title_parts is not None:
            self.title = "".join(self.title_parts)
        text = "\n\n".join(self.blocks) if self.blocks else "\n".join(self.lines)
        return text, self.title or ""


def html_text(pieces: Iterable[bytes], source: str, bounds: HtmlBounds) -> tuple[str, str]:
    """The text (blocks as paragraphs, headings as markdown) and title of the page in UTF-8 ``pieces``.

    :class:`~stores.errors.TooLarge` as soon as the page passes one of ``bounds``: elements, nesting depth or
    characters of text.
    """
    from lxml import etree

    # huge_tree: no depth limit of libxml2's own (256), which would end the text there without an error; the
    # bound is the reader's.
    parser = etree.HTMLParser(
        target=_Reader(source, bounds), encoding="utf-8", huge_tree=True, no_network=True, remove_comments=True
    )
    for piece in pieces:
        parser.feed(piece)
    result: tuple[str, str] = parser.close()
    return result
