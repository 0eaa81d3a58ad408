"""Input, output and state of the Chain-of-Agents graph (its settings: :mod:`nodes.chain.context`)."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from typing_extensions import TypedDict

from nodes.context import DocumentId, DocumentIds, DocumentPath, DocumentText, Namespace, WholeNamespace, described
from stores.questions import MAX_QUESTION_CHARS
from stores.usage import Usage, merge_usage

CHUNK_TOKENS = 1200
"""Most tokens of one chunk a reader takes (longer chunks are cut)."""


class ChainRequest(TypedDict):
    """The input less ``doc_id`` (which the state shares with the output, where it is always set)."""

    question: Annotated[
        str,
        described(
            "The question to answer about the document or collection, in its words or yours; one question per call.",
            example="Who manages procurement, and which supplier did they find?",
            minLength=1,
            maxLength=MAX_QUESTION_CHARS,
        ),
    ]
    path: NotRequired[DocumentPath]
    text: NotRequired[DocumentText]
    doc_ids: NotRequired[DocumentIds]
    whole_namespace: NotRequired[WholeNamespace]
    namespace: NotRequired[Namespace]


class ChainInput(ChainRequest):
    """A question about a document (doc_id, path or text) or a collection (doc_ids, a folder path, whole_namespace)."""

    doc_id: NotRequired[DocumentId]


class ChainOutput(TypedDict):
    """The answer and how it was reached."""

    answer: str
    """Short answer."""
    explanation: str
    """One sentence of justification with citations."""
    citations: list[str]
    """Chunk ids that support the answer (in a collection ``2:c3``: chunk c3 of the document tagged 2)."""
    quotes: list[str]
    """The quoted sentences the answer rests on, each behind its label ``[c3.2]`` (sentence 2 of chunk c3)."""
    sources: list[dict[str, Any]]
    """What each quote cites, in the order of ``quotes``: its ``label``, sentence (``quote``), ``section``, the
    ``document`` of a collection's quote, and in a PDF the ``page`` (its number in the file, from 1) and
    ``page_label`` (the page as printed: ``58``, ``ii``) the sentence starts on."""
    inferred: bool
    """The answer is not stated in its quotes word for word (the manager joined or read between them)."""
    order: list[list[str]]
    """Chunk ids in the order the workers read them, one list per chain."""
    read: list[str]
    """Chunk ids read (wholly or in part) by any chain, in first-read order."""
    passages: list[str]
    """Passages read by any chain, as chunk id and sentence range (``c3.4-7``), in reading order."""
    skipped: list[str]
    """Chunk ids passed over without a model call (relevance below the floor)."""
    stopped: str
    """Why reading ended: complete (a worker found nothing missing), budget, hop-budget (the budget and its
    extension for a missing piece were spent), or end (nothing left worth reading)."""
    tree: list[list[Any]]
    """Chow-Liu tree edges as [chunk id, chunk id, weight]."""
    notes: list[str]
    """The quotes every chain gathered, one ``[label] sentence`` line each."""
    dropped: int
    """Quotes the workers gave that named no sentence they were shown (left out)."""
    usage: Annotated[Usage, merge_usage]
    """Tokens in/out and calls per role."""
    calls: int
    """LLM calls made."""
    doc_id: str
    """Id of the document of a one-document run (empty for a collection: see ``documents``)."""
    documents: list[dict[str, Any]]
    """The run's documents, one or several: {tag, doc_id, title, source (relative to the server's ingest root)},
    tag 2 being the document a label ``2:c3.4`` names (a one-document run's labels carry no tag); of a collection,
    those its shortlist holds (the ones its labels can name)."""


class ChainState(ChainRequest, ChainOutput, total=False):
    """Private state: where the chains are."""

    chunk_ids: list[str]
    """All chunk ids of the document, in document order."""
    plan: list[list[str]]
    """Per chain: the planned order (fixed orders) or the root (best-first)."""
    stops: list[str]
    """Why each finished chain stopped."""
    chain: int
    """Index of the chain being read."""
    pos: int
    """Position in the current chain's plan (fixed orders)."""
    current: str
    """Quotes of the chain being read."""
    missing: str
    """What the current chain's last informative worker said is missing."""
    streak: int
    """Workers in a row that found the notes complete."""
    spent: int
    """Tokens of document text the current chain has read."""
    extended: int
    """Tokens the current chain's budget was extended by for a missing piece."""
    taken: list[int]
    """Passages (document-wide numbers) the current chain has read."""
    batch: list[int]
    """Passages the next worker reads (empty when the chains are done)."""
    relevant: Annotated[list[str], lambda a, b: (a or []) + (b or [])]
    """Chunk ids whose sentences a worker quoted."""
    language: str
    """Prompt language (the document's)."""
    collection: list[str]
    """The run's documents (one or more); the input's doc_ids, whole_namespace and folder path are cleared once
    resolved (:func:`nodes.collection.resolve.run_fields`)."""
    tags: dict[str, int]
    """The thread's tags: each document any of its runs read, and its tag (kept for the life of the thread)."""
    indexes: list[str]
    """Per document of the run, the index its record published when the run began."""
    pool: list[str]
    """Store record ids of the chunks the run reads: every chunk of its documents, or a shortlist, in the order
    they joined it (:func:`nodes.chain.pool.run_pool`)."""
    shortlisted: bool
    """Whether ``pool`` is a shortlist (grown for each missing piece) rather than every chunk."""
    expanded: list[str]
    """The texts the shortlist was made or grown for (the question, then each missing piece)."""
