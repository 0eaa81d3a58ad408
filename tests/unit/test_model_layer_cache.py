"""The LLM response cache: a ``BaseCache`` in SQLite under ``LONGDOC_HOME``, read and written by :class:`LLM`."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from pydantic import BaseModel

from doubles.chat import ScriptedChatModel
from stores import llm_cache
from stores.llm_cache import SQLiteReplyCache, response_cache
from stores.models import LLM, ModelError, ModelOutputError, llm_for, messages, use_chat_model
from stores.usage import track_usage


class Answer(BaseModel):
    answer: str


class Verdict(BaseModel):
    answer: str
    sure: bool


def test_a_repeated_request_is_answered_from_the_sqlite_cache_with_its_original_counts(longdoc_home: Path) -> None:
    fake = ScriptedChatModel(replies=["first", "second", "third"])
    with use_chat_model(fake):
        with track_usage() as used1:
            one = LLM("worker", cache=True).text(messages("s", "same question"))
        llm_cache._caches.clear()  # a new process: the answer comes from the file
        with track_usage() as used2:
            two = LLM("worker", cache=True).text(messages("s", "same question"))
        with track_usage() as used3:
            three = LLM("worker", cache=True).text(messages("s", "other question"))
    assert isinstance(response_cache(), SQLiteReplyCache) and (longdoc_home / "llm_cache.sqlite").is_file()
    assert (one, two, three) == ("first", "first", "second") and len(fake.calls) == 2
    assert used1["worker"]["cached"] == 0 and used3["worker"]["cached"] == 0
    assert used2["worker"] == {**used1["worker"], "cached": 1}
    assert used2["worker"]["input"] > 0 and used2["worker"]["output"] > 0


def test_the_key_tells_schemas_and_token_budgets_apart() -> None:
    fake = ScriptedChatModel(default='{"answer": "Oslo", "sure": true}')
    question = messages("s", "capital?")
    with use_chat_model(fake):
        llm = LLM("expert", cache=True)
        llm.structured(question, Answer)
        llm.structured(question, Verdict)
        llm.structured(question, Answer)
        llm.text(question, max_tokens=50)
        llm.text(question, max_tokens=60)
        with track_usage() as again:
            llm.text(question, max_tokens=60)
    assert len(fake.calls) == 4 and again["expert"]["cached"] == 1
    keys = {llm._key(question, schema, budget) for schema, budget in [(Answer, None), (Verdict, None), (None, 50)]}
    assert len({prompt for prompt, _ in keys}) == 1 and len(keys) == 3  # same prompt, three llm strings


def test_the_cache_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ScriptedChatModel(replies=["first", "second", "third"])
    monkeypatch.setenv("LONGDOC_LLM_CACHE", "1")

    class Off:
        llm_cache = False

    with use_chat_model(fake):
        assert llm_for("worker", Off()).text(messages("s", "q")) == "first"
        assert llm_for("worker", None).text(messages("s", "q")) == "second"  # the setting: on
        assert llm_for("worker", None).text(messages("s", "q")) == "second"
        assert LLM("worker", cache=False).text(messages("s", "q")) == "third"
    assert len(fake.calls) == 3


def test_replies_that_fail_the_schema_are_not_kept_and_the_accepted_one_answers_the_request() -> None:
    fake = ScriptedChatModel(replies=["not json at all", "still not json", '{"answer": "Oslo"}'])
    question = messages("s", "capital?")
    with use_chat_model(fake):
        with pytest.raises(ModelOutputError):
            LLM("expert", cache=True, max_retries=1).structured(question, Answer)
        # Nothing of the refused attempts was kept: the model is asked again, and now answers well.
        with track_usage() as used1:
            first = LLM("expert", cache=True, max_retries=1).structured(question, Answer)
        with track_usage() as used2:
            again = LLM("expert", cache=True, max_retries=1).structured(question, Answer)
    assert first == again == Answer(answer="Oslo") and len(fake.calls) == 3
    assert used1["expert"]["cached"] == 0 and used2["expert"] == {**used1["expert"], "cached": 1}


class AlwaysCut(ScriptedChatModel):
    """Every reply stops at ``max_tokens`` (``finish_reason: length``)."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        result = super()._generate(messages, stop, run_manager, **kwargs)
        message = result.generations[0].message
        assert isinstance(message, AIMessage)
        message.response_metadata = {"finish_reason": "length"}
        return result


def test_truncated_and_failed_replies_are_never_cached() -> None:
    cut = AlwaysCut(default="Bob Chen manages procurement [c2]. He joined the project in")
    with use_chat_model(cut):
        for _ in range(2):
            with track_usage() as usage:
                text = LLM("worker", cache=True).text(messages("s", "who?"), max_tokens=20)
            assert text == "Bob Chen manages procurement [c2]." and usage["worker"]["cached"] == 0
    assert len(cut.calls) == 4  # two budgets, twice: nothing was kept

    failing = ScriptedChatModel(fail_on="boom")
    with use_chat_model(failing):
        for _ in range(2):
            with pytest.raises(ModelError, match="failed"):
                LLM("worker", cache=True).text(messages("s", "boom"))
    assert len(failing.calls) == 2
