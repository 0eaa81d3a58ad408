"""The rate limit per remote endpoint and the bound on a run's fan-out.

``LONGDOC_REQUESTS_PER_SECOND`` gives each endpoint one ``InMemoryRateLimiter``;
``LONGDOC_MAX_CONCURRENCY`` goes into the ``RunnableConfig`` of command-line and served runs.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.rate_limiters import InMemoryRateLimiter
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from doubles.chat import ScriptedChatModel
from stores.models import LLM, chat_model, messages, use_chat_model
from stores.settings import run_config


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_BASE_URL", "http://models.example/v1")
    monkeypatch.setenv("LONGDOC_MODEL", "m")


def test_no_rate_limiter_unless_a_rate_is_set(remote: None) -> None:
    assert chat_model("worker").rate_limiter is None  # type: ignore[attr-defined]


def test_one_rate_limiter_per_endpoint_shared_by_every_role(remote: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_REQUESTS_PER_SECOND", "4")
    monkeypatch.setenv("LONGDOC_CHECKER_BASE_URL", "http://other.example/v1")
    worker, editor, checker = (chat_model(role).rate_limiter for role in ("worker", "editor", "checker"))  # type: ignore[attr-defined]
    assert isinstance(worker, InMemoryRateLimiter) and worker.requests_per_second == 4
    assert editor is worker  # the same endpoint: one limiter for both roles
    assert isinstance(checker, InMemoryRateLimiter) and checker is not worker


class Fan(TypedDict, total=False):
    questions: list[str]
    answers: Annotated[list[str], operator.add]


def fan_out_graph() -> Any:
    """One model call per question, all sent at once."""

    def spread(state: Fan) -> list[Send]:
        return [Send("ask", {"questions": [q]}) for q in state["questions"]]

    def ask(state: Fan) -> dict[str, Any]:
        text = LLM("expert").text(messages("s", state["questions"][0]))
        return {"answers": [text]}

    builder = StateGraph(Fan)
    builder.add_node("ask", ask)
    builder.add_conditional_edges(START, spread, ["ask"])
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


QUESTIONS = {"questions": [f"question {i}" for i in range(6)]}


def test_a_fan_out_runs_its_calls_at_once_without_a_bound() -> None:
    fake = ScriptedChatModel(default="fine", delay=0.1)
    with use_chat_model(fake):
        out = fan_out_graph().invoke(QUESTIONS, config=run_config({"configurable": {"thread_id": "t"}}))
    assert len(out["answers"]) == 6 and fake.peak_concurrency > 1


def test_max_concurrency_one_never_runs_two_calls_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_MAX_CONCURRENCY", "1")
    fake = ScriptedChatModel(default="fine", delay=0.05)
    with use_chat_model(fake):
        out = fan_out_graph().invoke(QUESTIONS, config=run_config({"configurable": {"thread_id": "t"}}))
    assert len(out["answers"]) == 6 and len(fake.calls) == 6 and fake.peak_concurrency == 1


def test_the_command_line_and_the_server_bound_their_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from surfaces.cli import run_graph
    from surfaces.serve import ServedGraph

    monkeypatch.setenv("LONGDOC_MAX_CONCURRENCY", "2")
    assert run_config({"max_concurrency": 1})["max_concurrency"] == 1  # a caller's lower bound is kept
    assert run_config({"max_concurrency": 8})["max_concurrency"] == 2
    fake = ScriptedChatModel(default="fine", delay=0.05)
    with use_chat_model(fake):
        out = run_graph(
            fan_out_graph(), QUESTIONS, context={}, config={"configurable": {"thread_id": "cli"}}, on_event=print
        )
        served = ServedGraph(bound=fan_out_graph(), name="fan")
        again = served.invoke(QUESTIONS, {"configurable": {"thread_id": "served"}})
    assert len(out["answers"]) == len(again["answers"]) == 6
    assert len(fake.calls) == 12 and fake.peak_concurrency == 2
