"""Expert agents: answer one editor question only from chunks they retrieve, citing ``[chunk_id]``.

Each expert has a name and a description (fact, opinion, structure and style by default; the
set is configurable). An expert retrieves a few chunks of the document with
:func:`nodes.retrieval.hybrid_search`, keeps the sentences of each that matter for the question,
and asks the model for a short answer with citations and a confidence. An answer that cites no
retrieved chunk, or says nothing was found, is recorded as ``not_found``. Answers are cached per
document (question, expert and settings) so a question asked again costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, Field, create_model

import prompts
from nodes.collection.resolve import cache_file, collections_dir
from nodes.collection.sources import Sources
from nodes.retrieval import Rerank, focus_snippet
from nodes.summarize.context import SummarizeContext
from nodes.summarize.state import ExpertTask, SummarizeState, run_context, run_doc_ids, run_documents, state_sources
from stores.cache import ProcessCache
from stores.errors import ModelError
from stores.labels import CITED_GROUP, citations_in, normalise_chunk_id
from stores.models import LLM, ModelOutputError, llm_for, messages, resolve_role
from stores.text import lexical_tokens
from stores.usage import track_usage
from stores.vectorstore import Hit

NOT_FOUND = "not found"
_NOT_FOUND_MARKERS = ("not found", "no information", "未找到", "没有找到", "未提及", "没有相关")


class ExpertReply(BaseModel):
    """What an expert answers."""

    answer: str = Field(description="The answer with [chunk_id] citations, or 'not found'.", max_length=1200)
    citations: list[str] = Field(description="Chunk ids the answer rests on.", min_length=1, max_length=6)
    confidence: float = Field(ge=0, le=1, description="How sure the expert is, 0 to 1.")


def reply_schema(chunk_ids: Sequence[str]) -> type[ExpertReply]:
    """The expert's reply schema with ``citations`` limited to the retrieved ``chunk_ids`` (at least one)."""
    ids = tuple(chunk_ids)
    return create_model(
        "ExpertAnswer",
        __base__=ExpertReply,
        citations=(list[Literal[ids]], Field(min_length=1, max_length=len(ids))),  # type: ignore[valid-type]
    )


def says_not_found(answer: str) -> bool:
    """True when an answer only says the excerpts hold nothing."""
    text = answer.strip().lower()
    if not text:
        return True
    head = text[:60]
    return any(marker in head for marker in _NOT_FOUND_MARKERS) and len(lexical_tokens(text)) < 25


def question_key(question: str) -> frozenset[str]:
    """Content tokens of a question (for duplicate detection)."""
    return frozenset(lexical_tokens(question))


class AnswerCache:
    """Expert answers of one document, keyed by question, expert and settings, in LangGraph's ``SqliteCache``.

    Kept beside the LLM response cache (:func:`stores.llm_cache.response_cache`): it holds a whole
    answer (the retrieval, the model call and the citation check) under the question's content
    words, where the LLM cache holds one model call under its exact prompt.
    """

    NAMESPACE = ("answers",)
    """A document's own answers; a collection's are kept under ``("answers", *its document ids)``."""

    def __init__(self, path: Path, doc_ids: Sequence[str] = ()) -> None:
        self.path = path
        self.namespace = (*self.NAMESPACE, *doc_ids)
        self.store: Any = _stores.get_or_build(path, lambda: _sqlite_cache(path), exclusive=True)

    @classmethod
    def for_documents(cls, namespace: str, doc_ids: Sequence[str]) -> AnswerCache:
        """The answer cache of a run over ``doc_ids`` (:func:`nodes.collection.resolve.cache_file`).

        A collection's keys name its version: another set of documents, or one re-indexed, asks again. Its entries
        name their documents, so forgetting one deletes them (:meth:`forget_document`).
        """
        return cls(cache_file(namespace, doc_ids, "answers.sqlite"), doc_ids)

    @classmethod
    def forget_document(cls, namespace: str, doc_id: str) -> tuple[int, Path]:
        """Delete the answers of every collection of ``namespace`` that included ``doc_id``: how many, and the file.

        An entry that does not name its documents goes too. A document's own cache goes with its folder.
        """
        path = collections_dir(namespace) / "answers.sqlite"
        if not path.exists():
            return 0, path
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as db, db:
            try:
                gone = db.execute(
                    "DELETE FROM cache WHERE ns = ? OR instr(ns || ',', ',' || ? || ',') > 0",
                    (",".join(cls.NAMESPACE), doc_id),
                ).rowcount
            except sqlite3.OperationalError:  # no table: nothing was cached
                gone = 0
        return gone, path

    @staticmethod
    def key(**parts: Any) -> str:
        """A stable key from the parts that decide an answer."""
        return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached value for the key, or None."""
        return cast("dict[str, Any] | None", self.store.get([(self.namespace, key)]).get((self.namespace, key)))

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Cache the value under the key."""
        self.store.set({(self.namespace, key): (value, None)})


def _sqlite_cache(path: Path) -> Any:
    from langgraph.cache.sqlite import SqliteCache

    return SqliteCache(path=str(path))


_stores: ProcessCache[Path, Any] = ProcessCache("expert answer stores", 64)


def expert_prompt_version(lang: str, system_prompt: str | None = None) -> str:
    """A digest of the expert's prompts and reply schema (part of the answer-cache key).

    ``system_prompt`` is the context's ``expert_prompt`` (None: the template file in ``lang``).
    """
    parts = [
        prompts.chosen("summarize/expert", lang, system_prompt).template,
        prompts.load("summarize/expert_user", lang).template,
    ]
    parts.append(json.dumps(ExpertReply.model_json_schema(), sort_keys=True))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def bad_output(exc: BaseException) -> bool:
    """True for a model error caused by the reply itself: still invalid after retries, or cut off at max_tokens.

    The model layer reports a cut reply as truncated and ends in :class:`ModelOutputError`.
    """
    return isinstance(exc, ModelOutputError)


def language_name(lang: str) -> str:
    """How prompts (written in ``lang``) name the output language ``lang``."""
    return {"zh": "简体中文", "en": "English"}.get(lang, lang)


_PLACEHOLDERS = {
    "no_focus": ("(none: summarize the whole document)", "（无：概括整份文档）"),
    "empty_draft": ("(empty: this is the first round)", "（空：这是第一轮）"),
    "empty": ("(empty)", "（空）"),
    "no_notes": ("(no notes yet)", "（暂无）"),
    "none": ("(none)", "（无）"),
    "none_yet": ("(none yet)", "（暂无）"),
}


def placeholder(name: str, lang: str) -> str:
    """A filler phrase for an empty prompt field, in the prompt's language."""
    en, zh = _PLACEHOLDERS[name]
    return zh if lang == "zh" else en


def focus_text(query: str, lang: str) -> str:
    """The summary's focus for a prompt: the query, or a note that there is none."""
    return query.strip() or placeholder("no_focus", lang)


def answer_question(
    question: str,
    expert: str,
    description: str,
    *,
    sources: Sources,
    llm: LLM,
    lang: str = "en",
    k: int = 3,
    chunk_tokens: int = 160,
    max_tokens: int = 120,
    rerank: Rerank = "none",
    system_prompt: str | None = None,
) -> dict[str, Any]:
    """One expert's answer to ``question`` from the chunks it retrieves from ``sources``.

    In a collection every document is searched, its chunks labelled ``2:c3``.
    ``system_prompt``: the context's ``expert_prompt``; None: the template file in ``lang``.

    Returns ``{status, answer, citations, confidence, chunks}``; ``status`` is
    ``answered`` or ``not_found``. Model errors propagate (the caller marks the question failed).
    """
    hits = sources.search(question, k, rerank=rerank)
    retrieved = [h.chunk_id for h in hits]
    if not hits:
        return {"status": "not_found", "answer": NOT_FOUND, "citations": [], "confidence": 0.0, "chunks": []}

    def where(hit: Hit) -> str:
        parts = [p for p in (sources.name(hit.chunk_id), hit.section) if p]
        return f" ({' · '.join(parts)})" if parts else ""

    excerpts = "\n\n".join(f"[{h.chunk_id}]{where(h)} {focus_snippet(h.text, question, chunk_tokens)}" for h in hits)
    system = prompts.render(
        "summarize/expert",
        lang,
        template=system_prompt,
        expert=expert,
        description=description,
        language=language_name(lang),
    )
    user = prompts.render("summarize/expert_user", lang, excerpts=excerpts, question=question)
    reply = llm.structured(messages(system, user), reply_schema(retrieved), max_tokens=max_tokens)
    cited = [c for c in citations_in(reply.answer) + [normalise_chunk_id(c) for c in reply.citations] if c]
    valid = [c for c in dict.fromkeys(cited) if c in retrieved]
    answer = CITED_GROUP.sub(
        lambda m: m.group(0) if all(c in retrieved for c in citations_in(m.group(0))) else "", reply.answer
    )
    answer = re.sub(r"\s{2,}", " ", answer).strip()
    if says_not_found(answer) or not valid:
        return {"status": "not_found", "answer": NOT_FOUND, "citations": [], "confidence": 0.0, "chunks": retrieved}
    if not citations_in(answer):
        answer = f"{answer} [{', '.join(valid)}]"
    result = {
        "status": "answered",
        "answer": answer,
        "citations": valid,
        "confidence": round(float(reply.confidence), 3),
        "chunks": retrieved,
    }
    return result


def send_questions(state: SummarizeState) -> list[Send] | Literal["polish"]:
    """One expert task per question, in parallel; no questions ends the rounds."""
    items = state.get("questions", [])
    if not items or state.get("stop_reason"):
        return "polish"
    return [
        Send(
            "expert",
            {
                **run_documents(state),
                "lang": state["lang"],
                "round": state["round"],
                "item": item,
            },
        )
        for item in items
    ]


def expert(state: ExpertTask, runtime: Runtime[SummarizeContext]) -> dict[str, Any]:
    """One expert answers one question from the chunks it retrieves (failed on a model error)."""
    ctx = run_context(state, runtime)
    item, lang = state["item"], state["lang"]
    name = item["expert"]
    llm = llm_for("expert", ctx)
    docs = run_doc_ids(state)
    sources = state_sources(state, ctx)
    cache = AnswerCache.for_documents(ctx.namespace, docs) if ctx.answer_cache else None
    spec = resolve_role("expert", llm.overrides)
    key = AnswerCache.key(
        question=sorted(question_key(item["question"])),
        expert=name,
        description=ctx.experts[name],
        lang=lang,
        k=ctx.expert_k,
        chunk_tokens=ctx.expert_chunk_tokens,
        rerank=ctx.rerank,
        model=[spec.model, spec.base_url, spec.temperature],
        embedder=ctx.embedder,
        index=sources.version(),
        tags=sources.tags(),
        prompts=expert_prompt_version(lang, ctx.expert_prompt),
    )
    hit = cache.get(key) if cache else None
    with track_usage() as usage:
        if hit is not None:
            result = {**hit, "cached": True}
        else:
            try:
                result = answer_question(
                    item["question"],
                    name,
                    ctx.experts[name],
                    sources=sources,
                    llm=llm,
                    lang=lang,
                    k=ctx.expert_k,
                    chunk_tokens=ctx.expert_chunk_tokens,
                    max_tokens=ctx.expert_max_tokens,
                    rerank=cast(Rerank, ctx.rerank),  # check_context held it to get_args(Rerank)
                    system_prompt=ctx.expert_prompt,
                )
            except ModelError as exc:
                result = {
                    "status": "failed",
                    "answer": "",
                    "citations": [],
                    "confidence": 0.0,
                    "chunks": [],
                    "error": str(exc),
                }
            if cache is not None and result["status"] != "failed":
                cache.put(key, result)
            result = {**result, "cached": False}
    record = {**item, "round": state["round"], **result}
    cites = f" [{', '.join(result['citations'])}]" if result["citations"] else ""
    runtime.stream_writer(
        {
            "stage": "experts",
            "message": f"round {state['round']} · {name}: {result['status']} ({result['confidence']:.2f}){cites}",
        }
    )
    return {"answers": [record], "usage": usage}
