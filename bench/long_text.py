"""The documents of the long-document QA benchmarks as text, and which of their sentences a run read.

Shared by :mod:`bench.chain_long` (one document a question) and :mod:`bench.collection` (the whole data
as one collection).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.qa_data import Paragraph

NAMESPACE = "bench-chain-long"


def as_text(paragraphs: Sequence[Paragraph]) -> str:
    """A plain-text document: one ``title: text`` paragraph after another."""
    return "\n\n".join(p.chunk_text for p in paragraphs)


class SentenceMap:
    """The sentences of a document's chunks as the chain labels them, to tell which gold paragraphs a run read."""

    def __init__(self, chunks: Sequence[tuple[str, str]], limit: int | None = None) -> None:
        from nodes.chain.context import ChainContext
        from nodes.chain.passages import chunk_paragraphs
        from nodes.chain.state import CHUNK_TOKENS
        from stores.text import truncate_tokens

        self.limit = limit or ChainContext().passage_tokens
        self.by_chunk: dict[str, list[str]] = {}
        self.raw: dict[str, list[str]] = {}
        for cid, text in chunks:
            paragraphs = chunk_paragraphs(truncate_tokens(text, CHUNK_TOKENS), self.limit)
            self.raw[cid] = [s for paragraph in paragraphs for s in paragraph]
            self.by_chunk[cid] = [_norm(s) for s in self.raw[cid]]

    def _spans(self, row: dict[str, Any], table: dict[str, list[str]]) -> list[list[str]]:
        """Per passage of a run (``c3.4-7``), its sentences as ``table`` holds them."""
        from nodes.chain.passages import span_labels

        out = []
        for span in row["passages"]:
            sentences = []
            for label in span_labels(span):
                cid, number = label.split(".")
                known = table.get(cid, [])
                if 0 < int(number) <= len(known):
                    sentences.append(known[int(number) - 1])
            out.append(sentences)
        return out

    def read(self, row: dict[str, Any]) -> set[str]:
        """The sentences a run read: those of its passages, or every sentence of the chunks it read whole."""
        if row.get("passages") is None:
            return {s for cid in row.get("read", []) for s in self.by_chunk.get(cid, [])}
        return {s for passage in self._spans(row, self.by_chunk) for s in passage}

    def text_tokens(self, row: dict[str, Any]) -> int:
        """Tokens of document text a run's workers were shown: each passage's sentences joined, as the
        reading budget counts them (the chunks read whole, for a run without passages)."""
        from stores.text import count_tokens

        if row.get("passages") is None:
            return int(row.get("read_tokens", 0))
        return sum(count_tokens(" ".join(passage)) for passage in self._spans(row, self.raw))

    def recall(self, paragraphs: Sequence[Paragraph], row: dict[str, Any]) -> float | None:
        """Share of the supporting paragraphs at least half of whose words a run read (None without any)."""
        return paragraph_recall(paragraphs, self.read(row), self.limit)


def paragraph_recall(paragraphs: Sequence[Paragraph], read: set[str], limit: int) -> float | None:
    """Share of the supporting paragraphs at least half of whose words are in the sentences ``read`` (lower-cased,
    spaces collapsed; the paragraphs split as passages of ``limit`` tokens split them), None without any."""
    from nodes.chain.passages import chunk_paragraphs

    found = []
    for p in paragraphs:
        if not p.supporting:
            continue
        sentences = [_norm(s) for part in chunk_paragraphs(p.chunk_text, limit) for s in part]
        words = sum(len(s.split()) for s in sentences)
        seen = sum(len(s.split()) for s in sentences if s in read)
        found.append(words > 0 and seen / words >= 0.5)
    return sum(found) / len(found) if found else None


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()
