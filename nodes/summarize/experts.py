"""The experts of the summarize graph: one ``Send`` per question of a round, each answered by one expert from
the chunks it retrieves (kept in the experts' answer cache)."""

from __future__ import annotations

from typing import Any, Literal, cast

from langgraph.runtime import Runtime
from langgraph.types import Send

from graphs.summarize.state import ExpertTask, SummarizeContext, SummarizeState, run_context
from nodes.retrieval import Rerank
from nodes.summarize.expert import AnswerCache, answer_question, expert_prompt_version, question_key
from stores.documents import get_document, index_identity
from stores.models import llm_for, resolve_role
from stores.settings import ModelError
from stores.usage import track_usage
from stores.vectorstore import get_store


def send_questions(state: SummarizeState) -> list[Send] | Literal["polish"]:
    """One expert task per question, in parallel; no questions ends the rounds."""
    items = state.get("questions", [])
    if not items or state.get("stop_reason"):
        return "polish"
    return [
        Send(
            "expert",
            {
                "doc_id": state["doc_id"],
                "namespace": state.get("namespace", ""),
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
    cache = AnswerCache.for_document(ctx.namespace, state["doc_id"]) if ctx.answer_cache else None
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
        index=index_identity(get_document(ctx.namespace, state["doc_id"])),
        prompts=expert_prompt_version(lang),
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
                    store=get_store(ctx.namespace, ctx.embedder),
                    doc_id=state["doc_id"],
                    llm=llm,
                    lang=lang,
                    k=ctx.expert_k,
                    chunk_tokens=ctx.expert_chunk_tokens,
                    max_tokens=ctx.expert_max_tokens,
                    rerank=cast(Rerank, ctx.rerank),  # check_context held it to get_args(Rerank)
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
