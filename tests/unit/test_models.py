from __future__ import annotations

import socket

import pytest
from pydantic import BaseModel

from doubles.chat import ScriptedChatModel
from stores.errors import InputError, ModelError
from stores.models import LLM, ModelOutputError, llm_for, messages, use_chat_model
from stores.replies import parse_json_object
from stores.settings import get_settings
from stores.usage import merge_usage, track_usage


class Answer(BaseModel):
    answer: str
    confidence: float


def test_role_settings_override_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LONGDOC_MODEL", "base-model")
    monkeypatch.setenv("LONGDOC_EDITOR_MODEL", "big-model")
    monkeypatch.setenv("LONGDOC_EXPERT_TEMPERATURE", "0.7")
    settings = get_settings()
    assert settings.role("editor").model == "big-model"
    assert settings.role("worker").model == "base-model"
    assert settings.role("expert").temperature == 0.7
    assert settings.role("worker").base_url == "http://127.0.0.1:9/v1"


def test_endpoint_without_model_name_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(InputError, match="LONGDOC_MODEL"):
        get_settings().role("worker")


def test_bundled_model_is_the_default() -> None:
    spec = get_settings().role("manager")
    assert spec.base_url is None and spec.model.startswith("qwen2.5")


def test_structured_output_is_retried_then_accepted() -> None:
    fake = ScriptedChatModel(replies=["not json at all", '```json\n{"answer": "Paris", "confidence": 0.9}\n```'])
    with use_chat_model(fake), track_usage() as usage:
        result = LLM("expert", max_retries=2).structured(messages("sys", "capital?"), Answer)
    assert result == Answer(answer="Paris", confidence=0.9)
    assert usage["expert"]["calls"] == 2
    assert "does not match the required JSON schema" in str(fake.calls[1][-1].content)


def test_structured_output_gives_up_with_a_clear_error() -> None:
    fake = ScriptedChatModel(default='{"answer": 3}')
    with use_chat_model(fake), pytest.raises(ModelOutputError, match="Answer"):
        LLM("editor", max_retries=1).structured(messages("s", "u"), Answer)
    assert len(fake.calls) == 2


def test_usage_is_merged_per_role() -> None:
    merged = merge_usage(
        {"a": {"input": 1, "output": 2, "calls": 1}}, {"a": {"input": 3, "calls": 1}, "b": {"output": 5}}
    )
    assert merged == {"a": {"input": 4, "output": 2, "calls": 2}, "b": {"output": 5}}


def test_response_cache_answers_repeated_requests() -> None:
    fake = ScriptedChatModel(replies=["first", "second"])
    with use_chat_model(fake):
        llm = LLM("worker", cache=True)
        with track_usage() as used1:
            one = llm.text(messages("s", "same question"))
        with track_usage() as used2:
            two = llm.text(messages("s", "same question"))
        three = llm.text(messages("s", "other question"))
    assert (one, two, three) == ("first", "first", "second")
    assert used2["worker"]["cached"] == 1 and used2["worker"]["input"] == used1["worker"]["input"]
    assert len(fake.calls) == 2


def test_model_errors_are_wrapped() -> None:
    fake = ScriptedChatModel(fail_on="boom")
    with use_chat_model(fake), pytest.raises(ModelError, match="worker model call failed"):
        LLM("worker").text(messages("s", "boom"))


@pytest.mark.enable_socket
def test_unreachable_endpoint_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("LONGDOC_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("LONGDOC_MODEL", "m")
    monkeypatch.setenv("LONGDOC_MAX_RETRIES", "0")
    with pytest.raises(ModelError, match="cannot be reached"):
        llm_for("worker").text(messages("s", "hi"))


def test_parse_json_object_tolerates_chatter() -> None:
    assert parse_json_object('Sure! {"a": [1, 2]} hope that helps') == {"a": [1, 2]}
    with pytest.raises(ValueError):
        parse_json_object("no json here")


def length_error() -> Exception:
    """The OpenAI client's error when a structured reply hits max_tokens."""
    import openai
    from openai.types.chat import ChatCompletion

    choice = {"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": "{"}}
    completion = {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    return openai.LengthFinishReasonError(completion=ChatCompletion.model_validate(completion))


class CutOnce(ScriptedChatModel):
    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        if not self.calls:
            self.calls.append(list(messages))
            raise length_error()
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_truncated_structured_reply_is_retried_with_a_larger_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    budgets: list[int | None] = []
    fake = CutOnce(default='{"answer": "Oslo", "confidence": 0.8}')
    monkeypatch.setattr("stores.models.is_openai", lambda model: False)
    original = LLM._call

    def spy(self, messages, schema, max_tokens):  # type: ignore[no-untyped-def]
        budgets.append(max_tokens)
        return original(self, messages, schema, max_tokens)

    monkeypatch.setattr(LLM, "_call", spy)
    with use_chat_model(fake), track_usage() as usage:
        result = LLM("manager", max_retries=2).structured(messages("s", "u"), Answer, max_tokens=50)
    assert result.answer == "Oslo"
    assert budgets == [50, 100]
    assert usage["manager"]["calls"] == 2 and usage["manager"]["truncated"] == 1


def test_a_run_deadline_keeps_the_earlier_of_two_and_no_call_starts_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from stores.deadlines import check_deadline, deadline_left, run_deadline
    from stores.errors import RunTimeout
    from stores.models import transient
    from tests.clocks import fake_deadline_clock

    clock = fake_deadline_clock(monkeypatch)
    model = ScriptedChatModel(default="fine")
    assert deadline_left() is None and check_deadline() is None
    with run_deadline(0.2), run_deadline(60):
        assert deadline_left() == 0.2  # the inner, later deadline does not extend the outer one
        with use_chat_model(model):
            clock.advance(0.1)
            assert LLM("worker").text(messages("s", "q")) == "fine"
            clock.advance(0.1)  # the deadline reached
            with pytest.raises(RunTimeout, match=r"did not finish within 0\.2 s") as caught:
                LLM("worker").text(messages("s", "q"))
    assert len(model.calls) == 1 and deadline_left() is None
    assert not transient(caught.value)  # a graph's retry policy does not try again past the deadline


def test_llm_for_names_a_model_for_one_use_over_the_roles() -> None:
    from types import SimpleNamespace

    ctx = SimpleNamespace(model="base", editor_model="editor-m", llm_cache=False)
    assert llm_for("editor", ctx).overrides["editor_model"] == "editor-m"
    assert llm_for("editor", ctx, model="questions-m").overrides["editor_model"] == "questions-m"
    assert llm_for("editor", ctx, model="").overrides["editor_model"] == "editor-m"  # unset: the role's
    assert "expert_model" not in llm_for("expert", ctx, model=None).overrides


def test_a_chat_model_override_holds_in_its_own_context_only() -> None:
    import asyncio
    import threading
    from typing import Any, TypedDict

    from langgraph.graph import END, START, StateGraph

    from stores.models import chat_model, model_overridden

    class State(TypedDict, total=False):
        reply: str
        thread: int

    def ask(_state: State) -> State:
        return {"reply": str(chat_model("worker").invoke("hi").content), "thread": threading.get_ident()}

    graph = StateGraph(State).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END).compile()
    inside = threading.Barrier(3)  # both blocks entered before any run starts, and still open until all are done
    seen: dict[str, Any] = {}

    def run(name: str) -> None:
        with use_chat_model(ScriptedChatModel(default=f"model {name}")):
            inside.wait(timeout=30)
            out = asyncio.run(graph.ainvoke({}))  # a sync node: LangGraph runs it in a worker thread
            seen[name] = (out["reply"], out["thread"] != threading.get_ident())
            inside.wait(timeout=30)

    def outside() -> None:
        inside.wait(timeout=30)
        seen["outside"] = model_overridden()
        inside.wait(timeout=30)

    threads = [threading.Thread(target=run, args=(n,)) for n in "AB"] + [threading.Thread(target=outside)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert seen == {"A": ("model A", True), "B": ("model B", True), "outside": False}
    assert not model_overridden()
