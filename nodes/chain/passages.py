"""Passages and quotes: what the chain's workers read, and the evidence they pass on.

Passages. Every chunk is cut into sentences (paragraphs and lines first, so lists and transcripts
split too), numbered within the chunk: sentence ``k`` of chunk ``c3`` is labelled ``c3.k``. The
sentences of one paragraph are grouped into passages of at most ``passage_tokens`` tokens. A
sentence that the previous chunk already holds (the chunks overlap) is not repeated. A worker
reads a batch of the passages most relevant to the question and to what is still missing, from
anywhere in the document, so a fixed budget of tokens reaches far more of it than whole chunks.

Quotes. A worker answers with the labels of the sentences that bear on the question; the code
looks every label up in the passages the worker was shown and copies the sentence verbatim, so the
evidence loses nothing between worker and manager. A label that was not shown (or a quote whose
text is in none of the shown sentences) is dropped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stores.labels import QUOTE_LINE, SENTENCE_ONLY, sentence_label, sentences_cited
from stores.ranking import bm25_index, bm25_scores
from stores.text import content_words, count_tokens, lexical_tokens, split_sentences, truncate_tokens


@dataclass(frozen=True)
class Passage:
    """Consecutive sentences of one paragraph of one chunk."""

    chunk: int
    """Position of the chunk in the document."""
    chunk_id: str
    first: int
    """Number of the passage's first sentence within its chunk (1-based)."""
    sentences: tuple[str, ...]

    @property
    def labels(self) -> list[str]:
        """The sentence labels, chunk id then sentence number."""
        return [sentence_label(self.chunk_id, self.first + i) for i in range(len(self.sentences))]

    @property
    def text(self) -> str:
        """The passage's sentences joined by spaces."""
        return " ".join(self.sentences)

    @property
    def tokens(self) -> int:
        """The passage's length in tokens."""
        return count_tokens(self.text)

    @property
    def span(self) -> str:
        """The passage's name: chunk id and sentence range, e.g. ``c3.4-7``."""
        return f"{self.chunk_id}.{self.first}-{self.first + len(self.sentences) - 1}"

    def labelled(self) -> str:
        """The passage as the worker sees it: every sentence behind its label."""
        return " ".join(f"[{label}] {s}" for label, s in zip(self.labels, self.sentences, strict=True))


_SPACE = re.compile(r"\s+")
_ABBREVIATION = re.compile(r"(?:^|[\s(])(?:[A-Z]|Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Gen|Col|Lt|Mt|No|vs|etc|e\.g|i\.e)\.$")
_OPENS_LINE = re.compile(r"^(?:[-*•·>|#]|\d+[.)、]\s|[^\s:：]{1,24}(?: [^\s:：]{1,24}){0,3}[:：]\s)")


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def chunk_paragraphs(text: str, max_tokens: int = 120) -> list[list[str]]:
    """The sentences of a chunk, grouped by paragraph (blank lines).

    Every line is split into sentences (hard-wrapped lines joined first); a sentence longer than ``max_tokens``
    is cut into pieces of about that size (each a sentence of its own).
    """
    out: list[list[str]] = []
    for block in re.split(r"\n\s*\n", text):
        sentences: list[str] = []
        for line in _lines(block):
            for sentence in _rejoin(split_sentences(line)):
                sentences.extend(_pieces(sentence, max_tokens))
        if sentences:
            out.append(sentences)
    return out


def _lines(block: str) -> list[str]:
    """The lines of a paragraph, a hard-wrapped line joined to the one before it.

    Only a line that opens a list item, a heading or a speaker's turn (``Name: ...``) starts a line of its own.
    """
    lines: list[str] = []
    for line in block.split("\n"):
        line = line.strip()
        if not line:
            continue
        if lines and not _OPENS_LINE.match(line):
            lines[-1] = f"{lines[-1]} {line}"
        else:
            lines.append(line)
    return lines


def _rejoin(sentences: list[str]) -> list[str]:
    """Sentences cut after an initial or a title ("G. Stanley Hall", "Dr. Chen") joined again."""
    out: list[str] = []
    for sentence in sentences:
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {sentence}"
        else:
            out.append(sentence)
    return out


def _pieces(sentence: str, max_tokens: int) -> list[str]:
    """``sentence`` cut on spaces into pieces of at most about ``max_tokens`` tokens (whole when it fits)."""
    if count_tokens(sentence) <= max_tokens:
        return [sentence]
    out: list[str] = []
    rest = sentence
    while count_tokens(rest) > max_tokens:
        piece = truncate_tokens(rest, max_tokens).removesuffix(" …")
        if not piece or len(piece) >= len(rest):
            break
        out.append(piece)
        rest = rest[len(piece) :].lstrip()
    return [*out, rest] if rest else out


def split_passages(chunks: Sequence[tuple[str, str]], passage_tokens: int = 120) -> list[Passage]:
    """The passages of a document's chunks ``(chunk id, text)``, in document order.

    Sentences are numbered per chunk (every sentence of the chunk, repeated ones included, so a
    label always names the same sentence); the sentences a chunk opens with that the previous chunk
    already holds (the overlap between chunks) are left out.
    """
    passages: list[Passage] = []
    previous: set[str] = set()
    for position, (chunk_id, text) in enumerate(chunks):
        paragraphs = chunk_paragraphs(text, passage_tokens)
        keys = [_norm(s) for paragraph in paragraphs for s in paragraph]
        overlap = next((i for i, key in enumerate(keys) if key not in previous), len(keys))
        if overlap == len(keys):  # a chunk that only repeats the previous one is no overlap: keep it whole
            overlap = 0
        number = 0
        for paragraph in paragraphs:
            group: list[str] = []
            first = 0
            used = 0
            for sentence in paragraph:
                number += 1
                cost = count_tokens(sentence)
                repeated = number <= overlap
                if group and (repeated or used + cost > passage_tokens or number != first + len(group)):
                    passages.append(Passage(position, chunk_id, first, tuple(group)))
                    group, used = [], 0
                if repeated:
                    continue
                if not group:
                    first = number
                group.append(sentence)
                used += cost
            if group:
                passages.append(Passage(position, chunk_id, first, tuple(group)))
        previous = set(keys)
    return passages


def span_labels(span: str) -> list[str]:
    """The sentence labels a passage name (``c3.4-7``) covers."""
    chunk, numbers = span.rsplit(".", 1)
    first, last = (int(n) for n in numbers.split("-"))
    return [sentence_label(chunk, k) for k in range(first, last + 1)]


def sentence_index(passages: Sequence[Passage]) -> dict[str, str]:
    """Label -> sentence text of every sentence in ``passages``."""
    return {label: s for p in passages for label, s in zip(p.labels, p.sentences, strict=True)}


@dataclass
class Quotes:
    """The checked quotes of one worker reply."""

    kept: list[str]
    """Labels of the quoted sentences, as shown to the worker, in the order given."""
    dropped: int
    """Quotes that named no sentence the worker was shown."""


def check_quotes(replies: Sequence[str], shown: dict[str, str]) -> Quotes:
    """Map a worker's quotes (labels such as ``c3.2``, or sentence text) to the sentences it was shown.

    A label counts when it was shown; a text counts when it is contained in a shown sentence (or a
    shown sentence in it, when the quote runs over several). Everything else is dropped and counted.
    """
    kept: list[str] = []
    dropped = 0
    normalised = {label: _norm(text) for label, text in shown.items()}
    for reply in replies:
        labels = [m.group(1) for m in (SENTENCE_ONLY.match(reply),) if m] or sentences_cited(reply)
        if labels:  # a label, or sentences copied behind their labels: the labels say which
            for label in labels:
                if label not in shown:
                    dropped += 1
                elif label not in kept:
                    kept.append(label)
            continue
        quote = _norm(reply).strip(" .\"'")
        hits = [label for label, text in normalised.items() if len(quote) >= 12 and (quote in text or text in quote)]
        if not hits:
            dropped += 1
            continue
        kept.extend(label for label in hits if label not in kept)
    return Quotes(kept, dropped)


@dataclass(frozen=True)
class NextHop:
    """What the evidence leaves open of a question, and what its anchor names (see :func:`next_hop`)."""

    lacking: frozenset[str]
    """Content words of the question no anchor holds."""
    named: frozenset[str]
    """Content words of the anchors that are not in the question: the entity the next hop is about."""
    query: str
    """The named words in the anchors' order, to search for the next hop with."""
    anchors: tuple[str, ...] = ()
    """Labels of the anchors."""


def next_hop(question: str, evidence: dict[str, str]) -> NextHop | None:
    """The next hop of a question from its evidence (label -> sentence), or None when no quote anchors it.

    The anchors are the quoted sentences that share the most content words (at least 2) with the question.
    """
    asked = content_words(question)
    shared = {label: content_words(text) & asked for label, text in evidence.items()}
    best = max((len(w) for w in shared.values()), default=0)
    if best < 2:
        return None
    labels = tuple(label for label, w in shared.items() if len(w) == best)
    anchors = [evidence[label] for label in labels]
    words = set().union(*(content_words(text) for text in anchors))
    named = words - asked
    query = " ".join(dict.fromkeys(t for text in anchors for t in lexical_tokens(text) if t in named))
    return NextHop(frozenset(asked - words), frozenset(named), query, labels)


def bridging(shown: dict[str, str], evidence: dict[str, str], question: str, most: int = 2) -> list[str]:
    """Shown sentences that join the evidence to the part of the question it does not cover yet.

    A bridge holds a question word no anchor of the evidence holds (:func:`next_hop`) and a
    word the anchor names beyond the question ("published by the American Psychological Association" -> "Hall,
    the first president of the American Psychological Association"); the ``most`` with the most such words (at
    least 3) are returned, best first. A small model reading passages of many documents on one topic quotes the
    sentences that repeat the question's words and passes over the one that takes the next hop.
    """
    hop = next_hop(question, evidence)
    if hop is None:
        return []
    found = []
    for i, (label, text) in enumerate(shown.items()):
        if label in evidence:
            continue
        words = content_words(text)
        lacking, linking = len(words & hop.lacking), len(words & hop.named)
        if lacking and linking and lacking + linking >= 3:
            found.append((-(lacking + linking), i, label))
    return [label for _, _, label in sorted(found)[:most]]


def hop_first(question: str, evidence: str) -> str:
    """The evidence with the hop the question takes first: its anchors, then the quotes that bridge them.

    The rest follows in its own order. What a reader sees first is what it answers from most often, and a
    collection's evidence holds many quotes that only repeat the question's words.
    """
    quoted = quoted_sentences(evidence)
    hop = next_hop(question, quoted)
    if hop is None:
        return evidence
    anchors = {label: quoted[label] for label in hop.anchors}
    first = [*hop.anchors, *bridging({k: v for k, v in quoted.items() if k not in anchors}, anchors, question)]
    lines = {m.group(1): line for line in evidence.splitlines() if (m := QUOTE_LINE.match(line))}
    return "\n".join([lines[label] for label in first] + [line for k, line in lines.items() if k not in first])


def quoted_sentences(evidence: str) -> dict[str, str]:
    """Label -> sentence of every quote line of an evidence text."""
    return {m.group(1): line[m.end() :] for line in evidence.splitlines() if (m := QUOTE_LINE.match(line))}


@dataclass
class PassageIndex:
    """A document's passages and their BM25 index (built once per document, see :func:`passage_index`)."""

    passages: list[Passage]
    bm25: Any | None  # a bm25s.BM25 index (bm25s has no type hints)

    def __post_init__(self) -> None:
        self.chunks = np.asarray([p.chunk for p in self.passages], dtype=np.int64)
        """Per passage, the position of its chunk."""
        self.tokens = [p.tokens for p in self.passages]
        """Per passage, its tokens."""

    def of_chunk(self, chunk: int) -> list[int]:
        """Numbers of the passages of the chunk at position ``chunk``."""
        return [i for i, p in enumerate(self.passages) if p.chunk == chunk]

    def lexical(self, query: str) -> np.ndarray:
        """BM25 score of every passage for ``query`` (zeros when the query shares no term)."""
        return bm25_scores(self.bm25, lexical_tokens(query), len(self.passages))


def build_passage_index(chunks: Sequence[tuple[str, str]], passage_tokens: int = 120) -> PassageIndex:
    """Passages of the chunks ``(chunk id, text)`` with a BM25 index over them."""
    return indexed(split_passages(chunks, passage_tokens))


def indexed(passages: list[Passage]) -> PassageIndex:
    """``passages`` with a BM25 index over them."""
    return PassageIndex(passages, bm25_index([lexical_tokens(p.text) for p in passages]))
