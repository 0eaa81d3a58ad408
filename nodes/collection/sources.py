"""Labels that name a collection's documents, and :class:`Sources`: the chunks a run reads.

The chunks are one document's or many's, behind one interface (see :mod:`nodes.collection`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodes.collection.resolve import label_tags, members, run_label
from stores.errors import InputError
from stores.labels import (
    QUOTE_LINE,
    TAG_STRIDE,
    chunk_label,
    chunk_of,
    label_position,
    label_tag,
    sentence_label,
    split_label,
    tagged,
)
from stores.pages import Page, decode_marks, page_fields, sentence_pages
from stores.text import content_words
from stores.vectorstore import Hit, VectorStore, get_store


def document_name(document: dict[str, Any]) -> str:
    """How outputs name a document of a run's ``documents`` list: its title, else its file name, else its id."""
    source = str(document.get("source") or "")
    file_name = source.replace("\\", "/").rsplit("/", 1)[-1] if source not in ("", "text") else ""
    return str(document.get("title") or file_name or document.get("doc_id") or "")


def cited_documents(labels: Sequence[str], documents: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """``{label, document}`` for each tagged label (``2:c3``): the document its tag names in a run's ``documents``.

    The document is named by its title or file name; labels without a known tag are left out.
    """
    names = {int(d["tag"]): document_name(d) for d in documents}
    tags = [(label, label_tag(label)) for label in labels]
    return [{"label": label, "document": names[tag]} for label, tag in tags if tag in names]


class Sources:
    """The chunks a run reads: one document's (labelled ``c3``) or a collection's (``2:c3``).

    Summaries and chat read through it, so the same code serves one document and many: ``hits``
    every chunk, ``chunks`` some by label, ``search`` the most relevant to a query.
    """

    def __init__(self, store: VectorStore, doc_ids: Sequence[str], tags: Mapping[str, int] | None = None) -> None:
        if not doc_ids:
            raise InputError("no document to read")
        self.store = store
        self.doc_ids = list(doc_ids)
        self.single = len(self.doc_ids) == 1
        self.members = members(store.namespace, self.doc_ids, tags)
        self._tags = {m.doc_id: m.tag for m in self.members}
        self._shown = label_tags(self.doc_ids, self._tags)
        self._docs = {m.tag: m.doc_id for m in self.members}

    @property
    def doc_id(self) -> str:
        """The first document (the only one of a one-document run)."""
        return self.doc_ids[0]

    def version(self) -> str:
        """What the run's chunks are as indexed: the document's index identity, or the collection's version."""
        from nodes.collection.resolve import collection_version
        from stores.documents import get_document, index_identity

        if self.single:
            return index_identity(get_document(self.store.namespace, self.doc_id))
        return collection_version(self.store.namespace, self.doc_ids)

    def tags(self) -> list[int]:
        """The documents' tags, in the run's order (what its collection labels carry)."""
        return [m.tag for m in self.members]

    def described(self) -> str:
        """How messages name the run's documents: the document's title (else its id), or how many they are."""
        return repr(self.members[0].title or self.doc_id) if self.single else f"{len(self.doc_ids)} documents"

    def documents(self) -> list[dict[str, Any]]:
        """The run's documents as outputs list them (a one-document run's one, its tag in no label)."""
        return [m.to_dict() for m in self.members]

    def labels(self) -> list[str]:
        """The label of every chunk, document after document (as their records count them)."""
        return [self.label(m.doc_id, chunk_label(i)) for m in self.members for i in range(m.chunks)]

    def label(self, doc_id: str, chunk_id: str) -> str:
        """The label of chunk (or sentence) ``chunk_id`` of ``doc_id`` in this run."""
        return run_label(self._shown, doc_id, chunk_id)

    def tag(self, doc_id: str) -> int | None:
        """The tag ``doc_id``'s labels carry in this run (``2`` of ``2:c3``).

        None in a one-document run, whose labels carry none: there is no other document to tell it from. What
        lists the run's documents (the summary overview, the session canvas) shows a tag only where labels carry it.
        """
        return label_tag(self.label(doc_id, chunk_label(0)))

    def heading(self, doc_id: str) -> str:
        """How lists name ``doc_id``: its title or file name, after its tag when labels carry one (``[2] Title``)."""
        name = next(m.name for m in self.members if m.doc_id == doc_id)
        tag = self.tag(doc_id)
        return name if tag is None else f"[{tag}] {name}"

    def locate(self, label: str) -> tuple[str, str] | None:
        """``(doc_id, chunk id)`` of a label of this run, None when it names no document of it."""
        try:
            tag, chunk = split_label(label)
        except InputError:
            return None
        if self.single:
            return (self.doc_id, chunk) if tag is None else None
        return (self._docs[tag], chunk) if tag in self._docs else None

    def _relabel(self, hit: Hit) -> Hit:
        if self.single:
            return hit
        doc_id = str(hit.metadata.get("doc_id", ""))
        tag = self._tags[doc_id]
        meta = {**hit.metadata, "chunk_id": tagged(tag, hit.chunk_id), "position": tag * TAG_STRIDE + hit.position}
        return Hit(hit.id, hit.text, meta, hit.score, hit.embedding)

    def hits(self) -> list[Hit]:
        """Every chunk, document after document, each in position order."""
        return [self._relabel(h) for doc_id in self.doc_ids for h in self.store.by_doc(doc_id)]

    def chunks(self, labels: Sequence[str]) -> list[Hit]:
        """The chunks named by ``labels``, in the order asked (labels of no chunk left out)."""
        wanted: dict[str, list[str]] = {}
        for label in labels:
            found = self.locate(label)
            if found is not None:
                wanted.setdefault(found[0], []).append(chunk_of(found[1]))
        got = {
            self.label(doc_id, h.chunk_id): self._relabel(h)
            for doc_id, ids in wanted.items()
            for h in self.store.chunks(doc_id, ids)
        }
        return [got[label] for label in dict.fromkeys(labels) if label in got]

    def search(self, query: str, k: int, *, rerank: Any = "none") -> list[Hit]:
        """The ``k`` chunks most relevant to ``query``: vector search fused with BM25 (over every document)."""
        from nodes.collection.index import collection_index
        from nodes.retrieval import hybrid_search, rerank_by_sentence

        if self.single:
            return hybrid_search(self.store, self.doc_id, query, k, rerank=rerank)
        index = collection_index(self.store, self.doc_ids)
        pool = max(3 * k, 10)
        hits = index.search(query, pool if rerank == "sentence" else k)
        if rerank == "sentence":
            hits = rerank_by_sentence(self.store, query, hits)
        return [self._relabel(h) for h in hits[:k]]

    def dense(self, query: str, k: int) -> list[Hit]:
        """The ``k`` chunks nearest to ``query`` by the embedder alone, their score the cosine similarity."""
        from nodes.collection.index import collection_index

        if self.single:
            return self.store.search(query, k=k, doc_id=self.doc_id)
        return [self._relabel(h) for h in collection_index(self.store, self.doc_ids).dense(query, k)]

    def supporting(self, claim: str, labels: Sequence[str], texts: dict[str, str]) -> list[dict[str, str]]:
        """For each cited chunk label, the chunk's sentence that shares the most content words with ``claim``.

        The chunk's text is in ``texts``; each entry is ``{label: "2:c3.4", document: title or file name}``.
        Sentences are numbered as the chain numbers them (:func:`chunk_sentences`), so ``2:c3.4`` is the same
        sentence wherever it is shown.
        """
        words = content_words(claim)
        out = []
        for label in labels:
            sentences = chunk_sentences(texts.get(label, ""))
            if not sentences:
                continue
            scores = [len(content_words(sentence) & words) for sentence in sentences]
            best = max(range(len(sentences)), key=lambda i: (scores[i], -i))
            found = self.locate(label)
            document = self.name(label) or (self.members[0].name if found is not None else "")
            out.append({"label": sentence_label(label, best + 1), "document": document})
        return out

    def pages(self, labels: Sequence[str]) -> dict[str, Page]:
        """The page each label's sentence (``c3.2``) or chunk (``c3``) starts on, for labels of paged documents.

        Labels of a document without pages (markdown, text, html), or of no chunk, are left out.
        """
        hits = {h.chunk_id: h for h in self.chunks([chunk_of(label) for label in labels])}
        out: dict[str, Page] = {}
        for label in labels:
            hit = hits.get(chunk_of(label))
            marks = decode_marks(hit.metadata.get("pages")) if hit is not None else []
            if hit is None or not marks:
                continue
            number = label_position(label)[2]
            if not number:
                out[label] = Page(0, marks[0][1], marks[0][2])
                continue
            found = sentence_pages(hit.text, marks, chunk_sentences(hit.text))
            page = found[number - 1] if number <= len(found) else None
            if page is not None:
                out[label] = page
        return out

    def name(self, label: str) -> str:
        """The title or file name of the document a label names (empty for a one-document run)."""
        found = self.locate(label)
        if self.single or found is None:
            return ""
        return next(m.name for m in self.members if m.doc_id == found[0])


def chunk_sentences(text: str) -> list[str]:
    """The sentences of a chunk in the order the chain numbers them: sentence ``k`` is ``c3.k``."""
    from nodes.chain.passages import chunk_paragraphs
    from nodes.chain.reading import DEFAULT_PASSAGE

    return [sentence for paragraph in chunk_paragraphs(text, DEFAULT_PASSAGE) for sentence in paragraph]


def run_sources(
    namespace: str, embedder: str, doc_ids: Sequence[str], tags: Mapping[str, int] | None = None
) -> Sources:
    """The :class:`Sources` of a run's documents in ``namespace``'s store for ``embedder`` (``tags``: the thread's)."""
    return Sources(get_store(namespace, embedder), doc_ids, tags)


def quote_sources(sources: Sources, quotes: Sequence[str]) -> list[dict[str, Any]]:
    """What each quote line (``[c3.2] sentence``) cites: label, sentence, section, document and page.

    ``page`` (the page's number in the file) and ``page_label`` (its printed label) only for a paged document's
    quotes; a quote of a document without pages names its section heading instead.
    """
    lines = [(found.group(1), line[found.end() :]) for line in quotes if (found := QUOTE_LINE.match(line))]
    labels = [label for label, _ in lines]
    pages = sources.pages(labels)
    sections = {h.chunk_id: h.section for h in sources.chunks([chunk_of(label) for label in labels])}
    out = []
    for label, sentence in lines:
        entry: dict[str, Any] = {"label": label, "quote": sentence, "section": sections.get(chunk_of(label), "")}
        if not sources.single:
            entry["document"] = sources.name(label)
        out.append({**entry, **page_fields(pages.get(label))})
    return out
