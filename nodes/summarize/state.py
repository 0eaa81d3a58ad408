"""Input, output and state of the summarize graph and of its map-reduce and refine baselines."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, cast

from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from nodes.context import DocumentId, DocumentIds, DocumentPath, DocumentText, Namespace, WholeNamespace, described
from nodes.ingest import in_namespace
from nodes.summarize.context import DEFAULT_LENGTH, Method, SummarizeContext
from stores.questions import MAX_QUESTION_CHARS
from stores.usage import merge_usage

if TYPE_CHECKING:
    from nodes.collection.sources import Sources


class SummarizeInput(TypedDict):
    """What to summarize (a document: doc_id, path, text; a collection: doc_ids, a folder path, whole_namespace)."""

    doc_id: NotRequired[DocumentId]
    path: NotRequired[DocumentPath]
    text: NotRequired[DocumentText]
    doc_ids: NotRequired[DocumentIds]
    whole_namespace: NotRequired[WholeNamespace]
    namespace: NotRequired[Namespace]
    query: NotRequired[
        Annotated[
            str,
            described(
                "Focus of the summary: what to summarize the document about (empty: the whole document).",
                example="what was decided about the budget",
                maxLength=MAX_QUESTION_CHARS,
            ),
        ]
    ]
    length: NotRequired[
        Annotated[
            int,
            described(
                "Target length in words (characters for Chinese); default 120. The summary lands within 25% of it.",
                example=80,
                minimum=10,
                maximum=2000,
            ),
        ]
    ]
    format: NotRequired[
        Annotated[
            Literal["paragraphs", "bullets"], described("Layout of the summary; default paragraphs.", example="bullets")
        ]
    ]
    language: NotRequired[
        Annotated[
            Literal["", "en", "zh"],
            described("Language of the summary: en or zh; empty (default): the document's.", example="en"),
        ]
    ]
    method: NotRequired[
        Annotated[
            Method,
            described(
                "expert-editor (default: an editor questions expert agents, then fact-checks), or the baselines "
                "map-reduce and refine.",
                example="expert-editor",
            ),
        ]
    ]


class SummarizeOutput(TypedDict, total=False):
    """The summary and how it was made (every key is set by the end of a run)."""

    doc_id: str
    """Id of the summarized document of a one-document run (empty for a collection: see ``documents``)."""
    documents: list[dict[str, Any]]
    """The run's documents, one or several: {tag, doc_id, title, source (relative to the server's ingest root)},
    where tag 2 is the document a citation ``2:c3`` names (a one-document run's citations carry no tag)."""
    method: Method
    """Method used."""
    summary: str
    """The final summary (citation markers removed)."""
    sentences: list[dict[str, Any]]
    """Sentences of the summary: {text, citations (chunk ids; in a collection ``2:c3``, chunk c3 of document 2),
    sources ({label, document}: the sentence of each cited chunk that best supports it, ``2:c3.4``, and the title
    or file name of its document; in a PDF also page and page_label, the page it starts on), verdict, origin
    (summary, answer or excerpt: where the length fit took it from)}; a flagged sentence kept (disputed,
    unsupported) also has flagged_by (model, grounding) and problems (what grounding found)."""
    log: list[dict[str, Any]]
    """Questions and answers by round: {round, questions: [...], judgement, stop}."""
    rounds: int
    """Editor rounds used (0 for the baselines)."""
    usage: Annotated[dict[str, Any], merge_usage]
    """Tokens in/out, calls and cached calls per role."""
    stop_reason: str
    """Why the rounds stopped (max_rounds, editor_satisfied, draft_unchanged, no_new_questions, ...)."""
    factcheck: dict[str, Any]
    """Fact-check counts and the share of checked sentences confirmed."""
    fit: dict[str, Any]
    """Length: {target, units, low, high, within, trimmed, filled: {answer, excerpt}}."""


class SummarizeState(SummarizeInput, SummarizeOutput, total=False):
    """Private state of the summarize graph."""

    collection: list[str]
    """Ids of the documents the run reads, resolved from the input (one for a one-document run); the input's
    ``doc_ids``, ``whole_namespace`` and ``path`` are cleared once resolved."""
    tags: dict[str, int]
    """The thread's tags: each document any of its runs read, and its tag (kept for the life of the thread)."""
    lang: str
    """Output language actually used."""
    kind: str
    """Path taken: short (the document is the summary), direct (one chunk), or the method."""
    overview: str
    """The document's structure as the editor sees it."""
    round: int
    """Current editor round (1-based)."""
    questions: list[dict[str, Any]]
    """Questions of the current round: {id, question, type, target_expert, expert}."""
    answers: Annotated[list[dict[str, Any]], operator.add]
    """Every expert answer so far: {id, round, question, expert, status, answer, citations, confidence}."""
    rounds_info: Annotated[list[dict[str, Any]], operator.add]
    """Per round: the editor's judgement and what happened."""
    draft: str
    """The editor's current draft, with [chunk_id] citations."""
    missing: str
    """The editor's note on what the draft still misses."""
    gaps: dict[str, Any]
    """What this round's questions were aimed at: {parts: parts of the focus not answered yet, topics: "[c4] term,
    term" lines of chunks the draft does not cover yet}."""
    final_text: str
    """The polished summary (or the baseline's), with [chunk_id] citations, before the fact-check."""
    fitted: list[dict[str, Any]]
    """Sentences of the summary after the length fit, before the fact-check: {text, citations, origin}."""
    checked: list[dict[str, Any]]
    """Fact-checked sentences: {text, original, citations, verdict, cited_by, origin}."""


class ExpertTask(TypedDict):
    """The payload of one expert task."""

    doc_id: str
    """Document id."""
    collection: NotRequired[list[str]]
    """A collection's document ids (empty or absent: ``doc_id`` alone)."""
    tags: NotRequired[dict[str, int]]
    """The thread's tags of the collection's documents (absent: 1, 2, ... in its order)."""
    namespace: str
    """Namespace of the document (empty: the context's, for runs checkpointed before it was recorded)."""
    lang: str
    """Answer language."""
    round: int
    """Editor round."""
    item: dict[str, Any]
    """The question: {id, question, type, target_expert, expert}."""


def target_length(state: SummarizeState) -> int:
    """The summary length asked for (the default when not given; 0 stays 0, to be refused)."""
    length = state.get("length")
    return DEFAULT_LENGTH if length is None else length


# --- the baselines (map-reduce, refine) -----------------------------------------------------
class BaselineInput(TypedDict):
    """What a baseline summarizer reads."""

    doc_id: str
    """Document to summarize (already ingested)."""
    collection: NotRequired[list[str]]
    """A collection to summarize instead (its chunks labelled ``2:c3``)."""
    tags: NotRequired[dict[str, int]]
    """The thread's tags of the collection's documents (absent: 1, 2, ... in its order)."""
    namespace: NotRequired[str]
    """Namespace of the document (default: the context's)."""
    lang: NotRequired[str]
    """Output language: en or zh."""
    query: NotRequired[str]
    """Optional focus of the summary."""
    length: NotRequired[int]
    """Target length in words (characters for Chinese)."""
    format: NotRequired[Literal["paragraphs", "bullets"]]
    """Layout of the summary."""


class BaselineOutput(TypedDict):
    """What a baseline summarizer returns."""

    final_text: str
    """The summary with [chunk_id] citations."""
    usage: Annotated[dict[str, Any], merge_usage]
    """Tokens in/out and calls per role."""


class MapReduceState(BaselineInput, BaselineOutput, total=False):
    """Private state of the map-reduce graph."""

    chunk_ids: list[str]
    """Chunk ids of the document, in order."""
    notes: Annotated[list[dict[str, Any]], operator.add]
    """One note per chunk from the map step: {position, chunk_id, text}."""
    collapsed: list[str]
    """The notes after the latest collapse pass, in document order."""
    collapses: int
    """Collapse passes done."""


class MapTask(TypedDict):
    """The payload of one map task."""

    doc_id: str
    """Document id."""
    collection: NotRequired[list[str]]
    """A collection's document ids (``chunk_id`` is then a label ``2:c3``)."""
    tags: NotRequired[dict[str, int]]
    """The thread's tags of the collection's documents (absent: 1, 2, ... in its order)."""
    namespace: NotRequired[str]
    """Namespace of the document (default: the context's)."""
    chunk_id: str
    """Chunk to summarize."""
    position: int
    """Position of the chunk."""
    lang: str
    """Output language."""
    query: str
    """Focus of the summary."""


class RefineState(BaselineInput, BaselineOutput, total=False):
    """Private state of the refine graph."""

    chunk_ids: list[str]
    """Chunk ids of the document, in order."""
    index: int
    """Next chunk to read."""


def run_context(state: SummarizeState | ExpertTask, runtime: Runtime[SummarizeContext]) -> SummarizeContext:
    """The run's settings, in the namespace the input names (``prepare`` records it in the state)."""
    return cast(SummarizeContext, in_namespace(runtime.context or SummarizeContext(), state))


def run_documents(state: Any) -> dict[str, Any]:
    """The fields that name a run's documents, as its parallel tasks carry them (:class:`langgraph.types.Send`)."""
    return {
        "doc_id": state["doc_id"],
        "collection": state.get("collection") or [],
        "tags": state.get("tags") or {},
        "namespace": state.get("namespace", ""),
    }


def run_doc_ids(state: Any) -> list[str]:
    """The documents a run (or one of its tasks) reads: its collection, else its one document."""
    return list(state.get("collection") or [state["doc_id"]])


def state_sources(state: Any, ctx: Any) -> Sources:
    """The :class:`Sources` a run (or one of its tasks) reads, tagged as its thread tags them."""
    from nodes.collection.sources import run_sources

    return run_sources(ctx.namespace, ctx.embedder, run_doc_ids(state), state.get("tags"))
