"""The usage recorder: every model request is added to each open ``track_usage`` of its context."""

from __future__ import annotations

import contextvars
import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from pydantic import BaseModel

from doubles.chat import ScriptedChatModel
from stores.models import LLM, ModelOutputError, messages, use_chat_model
from stores.text import count_tokens
from stores.usage import merge_usage, record_usage, track_usage


class Answer(BaseModel):
    answer: str


def test_nested_recorders_both_receive_each_call_and_close_in_order() -> None:
    fake = ScriptedChatModel(default="fine")
    with use_chat_model(fake), track_usage() as outer:
        LLM("worker").text(messages("s", "one"))
        with track_usage() as inner:
            LLM("expert").text(messages("s", "two"))
            LLM("expert").text(messages("s", "three"))
        LLM("worker").text(messages("s", "four"))
    assert set(inner) == {"expert"} and inner["expert"]["calls"] == 2
    assert outer["worker"]["calls"] == 2 and outer["expert"] == inner["expert"]
    record_usage({"worker": {"input": 1, "output": 1, "calls": 1, "cached": 0}})  # no recorder open: dropped
    assert outer["worker"]["calls"] == 2


def test_counts_are_the_reply_metadata_or_counted_here() -> None:
    prompt = messages("system words", "a user question")
    fake = ScriptedChatModel(default="a short reply")
    with use_chat_model(fake), track_usage() as spent:
        LLM("worker").text(prompt)
    n_in = sum(count_tokens(str(m.content)) for m in prompt)
    assert spent == {"worker": {"input": n_in, "output": count_tokens("a short reply"), "calls": 1, "cached": 0}}


def test_a_failed_reply_is_recorded_with_what_the_error_carries() -> None:
    fake = ScriptedChatModel(default="not json at all")
    with use_chat_model(fake), track_usage() as spent, pytest.raises(ModelOutputError) as caught:
        LLM("checker", max_retries=2).structured(messages("s", "u"), Answer)
    assert len(fake.calls) == 3 and spent["checker"]["calls"] == 3
    assert spent == caught.value.usage and spent["checker"]["input"] > 0 and spent["checker"]["output"] > 0


def test_a_cache_hit_is_recorded_as_cached_with_its_original_counts() -> None:
    fake = ScriptedChatModel(replies=['{"answer": "Oslo"}'], default='{"answer": "wrong"}')
    question = messages("s", "capital?")
    with use_chat_model(fake):
        with track_usage() as first:
            LLM("expert", cache=True).structured(question, Answer)
        with track_usage() as again:
            assert LLM("expert", cache=True).structured(question, Answer) == Answer(answer="Oslo")
    assert len(fake.calls) == 1 and first["expert"]["cached"] == 0
    assert again["expert"] == {**first["expert"], "cached": 1}


def test_threads_keep_their_own_recorders_and_share_an_outer_one() -> None:
    fake = ScriptedChatModel(default="fine", delay=0.05)
    both = threading.Barrier(2)
    seen: dict[str, dict[str, Any]] = {}

    def work(role: str, n: int) -> None:
        with track_usage() as mine:
            both.wait()  # the two threads' calls overlap
            for i in range(n):
                LLM(role).text(messages("s", f"{role} {i}"))
        seen[role] = mine

    with use_chat_model(fake), track_usage() as outer:
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(work, role, n))
            for role, n in (("expert", 3), ("checker", 2))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert set(seen["expert"]) == {"expert"} and seen["expert"]["expert"]["calls"] == 3
    assert set(seen["checker"]) == {"checker"} and seen["checker"]["checker"]["calls"] == 2
    assert outer == merge_usage(seen["expert"], seen["checker"]) and fake.peak_concurrency == 2


class Fan(TypedDict, total=False):
    questions: list[str]
    usage: Annotated[dict, merge_usage]
    answers: Annotated[list[str], operator.add]


def test_parallel_graph_steps_report_their_own_calls_and_the_state_sums_them() -> None:
    fake = ScriptedChatModel(default="fine", delay=0.05)

    def ask(state: Fan) -> dict[str, Any]:
        with track_usage() as usage:
            for question in state["questions"]:
                LLM("expert").text(messages("s", question))
        return {"answers": [str(usage["expert"]["calls"])], "usage": usage}

    builder = StateGraph(Fan)
    builder.add_node("ask", ask)
    builder.add_conditional_edges(START, lambda s: [Send("ask", {"questions": q}) for q in s["questions"]], ["ask"])
    builder.add_edge("ask", END)
    questions = [["a"], ["b", "c"], ["d", "e", "f"]]
    with use_chat_model(fake), track_usage() as outer:
        out = builder.compile().invoke({"questions": questions})  # type: ignore[arg-type]
    assert sorted(out["answers"]) == ["1", "2", "3"]  # each step saw only its own calls
    assert out["usage"]["expert"]["calls"] == 6 == len(fake.calls) and fake.peak_concurrency > 1
    assert outer == out["usage"]
