"""What a chat turn reads: ``focus`` decides whether it reads and for what question; ``read`` reads as ask does.

* **focus**: a turn that only needs the conversation ("thanks", "say it shorter": :func:`conversational`) reads
  nothing and answers from the working memory. A later turn that reads is made standalone first, by one small
  model call (:func:`standalone_question`): "What supplier did they find?" after a turn about Bob Chen is read as
  "What supplier did Bob Chen find?" (only a message that refers back, :func:`refers_back`, costs the call). The
  question read for is the turn's ``asked``, shown in its status and output.
* **read**: the reading of ask (:data:`graphs.chain.graph.reading`: orderer, planner and workers with quotes,
  best-first over the Chow-Liu tree within a budget) run over the session's documents for ``asked``, within the
  turn's own budget (``read_budget``). The quotes it kept are the turn's ``evidence``, what the answer is written
  from and the sources it shows. Documents small enough are read over one tree of all their chunks, larger
  collections through a shortlist, exactly as ask reads them.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Literal

from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

import prompts
from nodes.chain.context import ChainContext
from nodes.chain.passages import quoted_sentences
from nodes.collection.sources import Sources
from nodes.context import Context
from nodes.offload.context import OffloadContext
from nodes.offload.pieces import question_note
from nodes.offload.state import OffloadState, call_record, session_context, session_documents
from stores.chat_stream import unstreamed
from stores.labels import QUOTE_LINE, chunk_of, split_label, tagged
from stores.models import ModelOutputError, llm_for, messages
from stores.questions import MAX_QUESTION_CHARS
from stores.status import show_status
from stores.text import content_words, count_tokens, lexical_tokens, truncate_tokens
from stores.usage import relabel_usage, track_usage
from stores.vectorstore import get_store

_CONVERSATION = (
    "thanks thank ok okay great good nice cool perfect fine got understood sure yes no please just again say said "
    "shorter short shorten briefly brief simpler simply simple plainer plain clearer explain rephrase reword repeat "
    "summarise summarize sum one two three sentence sentences word words bullet bullets points list format "
    "translate english french german spanish italian chinese answer reply last previous make put write "
    "谢 谢谢 好 好的 简短 简单 短 一点 再 说 一遍 翻译 英文 中文 总结"
)
CONVERSATION_WORDS = frozenset(_CONVERSATION.split())
"""Words of a message that asks about the conversation itself ("thanks", "say it shorter", "in one sentence")."""

_REFERRING = (
    "they them their theirs he him his she her hers it its this that these those there then such same former latter "
    "他 她 它 他们 她们 它们 这 那 这个 那个 这些 那些 其"
)
REFERRING = frozenset(_REFERRING.split())
"""Words by which a message refers back to the conversation: such a message is made standalone before it is read."""

TURN_TOKENS = 60
"""Most tokens of an earlier turn's answer shown to the call that makes a follow-up standalone."""


def conversational(message: str) -> bool:
    """Whether a message only needs the conversation: every content word of it is one of :data:`CONVERSATION_WORDS`.

    A cheap rule, no model call: a message that names anything else ("What supplier did they find?") reads.
    """
    words = content_words(message)
    return bool(words) and words <= CONVERSATION_WORDS


def refers_back(message: str) -> bool:
    """Whether a message leans on the conversation: it refers back ("they", "that") or names at most one thing."""
    return bool(set(lexical_tokens(message)) & REFERRING) or len(content_words(message)) <= 1


class Standalone(BaseModel):
    """The latest message made standalone."""

    question: str = Field(description="the message as a question that stands alone", max_length=MAX_QUESTION_CHARS)


def _turn_lines(history: Sequence[dict[str, Any]], keep: int) -> str:
    lines = []
    for t in history[-max(keep, 1) :]:
        said = t.get("conclusion") or t.get("answer") or ""
        lines.append(
            f"Q: {question_note(t['question'])}\nA: {truncate_tokens(' '.join(str(said).split()), TURN_TOKENS)}"
        )
    return "\n".join(lines)


def standalone_question(llm: Any, message: str, history: Sequence[dict[str, Any]], lang: str, keep: int) -> str:
    """``message`` rewritten to stand alone from the last ``keep`` turns of ``history`` (one model call).

    The rewrite is kept only when it keeps most of the message's content words (a reply that answers the
    message, or drifts from it, is not a rewrite of it); otherwise, or when the model gives nothing usable,
    the message stands as it is.
    """
    system = prompts.render("offload/standalone", lang)
    user = prompts.render("offload/standalone_user", lang, turns=_turn_lines(history, keep), message=message)
    try:
        rewritten = " ".join(llm.structured(messages(system, user), Standalone, max_tokens=80).question.split())
    except ModelOutputError:
        return message
    words = content_words(message)
    kept = len(words & content_words(rewritten))
    return rewritten if rewritten and kept * 2 >= len(words) else message


def focus(state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
    """Decide whether the turn reads the documents, and for what question (made standalone on later turns)."""
    ctx = session_context(state, runtime)
    question, history = state["question"], state.get("history", [])
    if history and conversational(question):
        _status(runtime, "answering from the conversation (nothing to read)")
        kept = quoted_sentences(state.get("evidence", ""))
        return {"asked": "", "details": [{"chunk_id": c, "via": "kept"} for c in dict.fromkeys(map(chunk_of, kept))]}
    asked = question
    calls = list(state.get("calls", []))
    update: dict[str, Any] = {}
    if history and refers_back(question):
        with track_usage() as usage, unstreamed():
            asked = standalone_question(
                llm_for("offloader", ctx), question, history, state.get("lang", "en"), ctx.keep_turns
            )
        calls.append(call_record("standalone", usage))
        update = {"calls": calls, "usage": relabel_usage(usage, "standalone")}
    if asked != question:
        _status(runtime, f'read as: "{asked}"')
    return {**update, "asked": asked}


def route_focus(state: OffloadState) -> Literal["read", "answer"]:
    """Read the documents when the turn has a question for them; else answer from the conversation."""
    return "read" if state.get("asked") else "answer"


def reading_context(ctx: OffloadContext, whole: bool = False) -> ChainContext:
    """The settings ask reads with, for a chat turn: the session's models, store and embedder, the turn's budget.

    ``whole``: the documents fit the budget, so every passage is read (no floor, no early stop: ``read_all``).
    """
    shared = {f.name: getattr(ctx, f.name) for f in fields(Context)}
    return ChainContext.from_mapping({**shared, "budget": ctx.read_budget, "read_all": whole})


SMALL_CHUNK_TOKENS = 20
"""Fewest tokens a chunk is counted at before its text is read: documents of more chunks than the budget over this
cannot fit it, and their texts are not fetched to find out."""


def fits(state: OffloadState, ctx: OffloadContext) -> bool:
    """Whether the session's documents fit the turn's budget whole (their chunks' tokens, overlaps counted twice)."""
    chunks = int(state.get("chunks") or 0)
    if not ctx.read_budget or not chunks or chunks * SMALL_CHUNK_TOKENS > ctx.read_budget:
        return not ctx.read_budget
    sources = Sources(get_store(ctx.namespace, ctx.embedder), session_documents(state), state.get("tags"))
    return sum(count_tokens(h.text) for h in sources.hits()) <= ctx.read_budget


def relabelled(label: str, tags: dict[int, str], thread: dict[str, int]) -> str:
    """A label of the reading (``2:c3.1``, tag 2 of its documents) under the tag the session gives that document."""
    tag, rest = split_label(label)
    if tag is None or tag not in tags or tags[tag] not in thread:
        return label
    return tagged(thread[tags[tag]], rest)


class Reader:
    """The ``read`` node over ``reading``, ask's reading graph without its manager (given by the chat graph)."""

    def __init__(self, reading: Runnable[Any, Any]) -> None:
        self.reading = reading
        self.__name__ = "read"

    def _read(
        self, request: dict[str, Any], context: Any, runtime: Runtime[OffloadContext], relay: Callable[..., Any]
    ) -> dict[str, Any]:
        """The reading's last state, its progress events relayed to the turn's stream as they come."""
        out: dict[str, Any] = {}
        for mode, event in self.reading.stream(request, context=context, stream_mode=["custom", "values"]):
            if mode == "custom":
                relay(_relay, runtime, event)
            else:
                out = event
        return out

    def __call__(self, state: OffloadState, runtime: Runtime[OffloadContext]) -> dict[str, Any]:
        """Read the session's documents for the turn's question as ask does; keep the quotes as the evidence."""
        ctx = session_context(state, runtime)
        asked, documents = state["asked"], session_documents(state)
        whole = fits(state, ctx)
        _status(runtime, f'reading {"every passage" if whole else "best-first"} for: "{asked}"')
        named = {"doc_id": documents[0]} if len(documents) == 1 else {"doc_ids": documents}
        request = {"question": asked, "namespace": ctx.namespace, **named}
        out: dict[str, Any] = {}
        try:
            with unstreamed():  # the workers' replies are not the turn's answer: chat clients see statuses instead
                out = detached(lambda relay: self._read(request, reading_context(ctx, whole), runtime, relay))
        except ModelOutputError as exc:  # a reply no worker could give as JSON: the turn answers from its memory
            _status(runtime, f"the reading stopped: {exc}")
            calls = [*state.get("calls", []), call_record("read", exc.usage, stopped="failed")]
            return {"evidence": "", "read": [], "stopped": "failed", "details": [], "calls": calls, "usage": exc.usage}
        tags = {int(d["tag"]): str(d["doc_id"]) for d in out.get("documents") or [] if d.get("tag") is not None}
        thread = dict(state.get("tags") or {})
        quotes: dict[str, str] = {}
        for line in "\n".join(out.get("notes") or []).splitlines():
            match = QUOTE_LINE.match(line)
            if match:
                quotes.setdefault(relabelled(match.group(1), tags, thread), line[match.end() :])
        lines = [f"[{label}] {sentence}" for label, sentence in quotes.items()]
        evidence = "\n".join(lines)
        read_ids = [relabelled(c, tags, thread) for c in out.get("read") or []]
        quoted = list(dict.fromkeys(chunk_of(label) for label in quotes))
        usage = out.get("usage") or {}
        calls = [*state.get("calls", []), call_record("read", usage, stopped=out.get("stopped", ""))]
        _status(
            runtime,
            f"read {len(read_ids)} of {state.get('chunks', len(read_ids))} chunks ({out.get('stopped', 'end')}); "
            f"{len(lines)} quote{'' if len(lines) == 1 else 's'} kept",
        )
        return {
            "evidence": evidence,
            "read": read_ids,
            "stopped": str(out.get("stopped") or ""),
            "details": [{"chunk_id": c, "via": "read"} for c in quoted],
            "calls": calls,
            "usage": usage,
        }


def detached(read: Callable[[Callable[..., Any]], dict[str, Any]]) -> dict[str, Any]:
    """``read()`` as a run of its own, not a subgraph of the turn.

    Clients that stream subgraphs take a subgraph's states for the thread's (Agent Chat UI's stream drops the
    messages they lack), so the reading's states stay out of the turn's stream; its progress is relayed as status
    lines. ``read`` gets a function that runs a call in the turn's own context (where its status lines go).
    """
    from langchain_core.runnables.config import var_child_runnable_config

    turn = contextvars.copy_context()

    def run() -> dict[str, Any]:
        var_child_runnable_config.set(None)
        return read(turn.run)

    return contextvars.copy_context().run(run)


def _relay(runtime: Runtime[OffloadContext], event: Any) -> None:
    """A progress event of the reading, passed on to the turn's stream and shown as a status line."""
    runtime.stream_writer(event)
    if not isinstance(event, dict):
        return
    if event.get("chunk"):
        found = "quoted" if event.get("relevant") else "nothing new"
        _status(runtime, f"read {event['chunk']}: {found} ({event.get('done', 0)} of {event.get('total', 0)} chunks)")
    elif event.get("message") and event.get("stage") in ("ordered", "reading"):
        show_status(str(event["message"]))


def _status(runtime: Runtime[OffloadContext], message: str) -> None:
    runtime.stream_writer({"stage": "read", "message": message})
    show_status(message)
