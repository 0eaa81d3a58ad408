"""Scripted chat models and helpers for tests, notebooks and benchmarks (no network, no weights)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from stores.text import count_tokens

Reply = str | Callable[[Sequence[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """Answers from a script and records every call.

        ``replies`` is consumed in order (the last one repeats when ``cycle`` is false and the
        script runs out); a reply may be a function of the messages. ``rules`` maps a substring of
        the system or user prompt to a reply and takes precedence. ``delay`` sleeps per call (to
        measure parallelism). ``fail_on`` raises for prompts containing the given substring. When a
    caller streams (LangGraph's ``messages`` mode), the reply arrives in pieces of ``piece`` characters.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    replies: list[Any] = Field(default_factory=list)
    rules: list[tuple[str, Any]] = Field(default_factory=list)
    default: Any = "Nothing relevant."
    delay: float = 0.0
    fail_on: str | None = None
    piece: int = 7
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _index: int = PrivateAttr(default=0)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _active: int = PrivateAttr(default=0)
    _peak: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Messages of every call so far."""
        return self._calls

    @property
    def peak_concurrency(self) -> int:
        """The most calls that were running at the same time so far."""
        return self._peak

    def _pick(self, messages: Sequence[BaseMessage]) -> Any:
        text = "\n".join(str(m.content) for m in messages)
        for needle, reply in self.rules:
            if needle in text:
                return reply
        with self._lock:
            if self._index < len(self.replies):
                reply = self.replies[self._index]
                self._index += 1
                return reply
        return self.default

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self._calls.append(list(messages))
            self._active += 1
            self._peak = max(self._peak, self._active)
        try:
            return self._reply(messages)
        finally:
            with self._lock:
                self._active -= 1

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        text_in = "\n".join(str(m.content) for m in messages)
        if self.fail_on and self.fail_on in text_in:
            raise RuntimeError(f"scripted failure for a prompt containing {self.fail_on!r}")
        if self.delay:
            time.sleep(self.delay)
        reply = self._pick(messages)
        made = reply(messages) if callable(reply) else reply
        given = made if isinstance(made, AIMessage) else AIMessage(content=str(made))
        n_in, n_out = count_tokens(text_in), count_tokens(str(given.content))
        usage = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
        message = given.model_copy(update={"usage_metadata": usage})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """The same model: the script decides the tool calls."""
        return self

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The scripted reply in pieces of a few characters, usage on the last one (as a streaming API sends it)."""
        message = self._generate(messages, stop, run_manager, **kwargs).generations[0].message
        if getattr(message, "tool_calls", None):  # a tool-calling reply arrives whole
            whole = message.model_dump(exclude={"type", "tool_call_chunks"})
            yield ChatGenerationChunk(message=AIMessageChunk(**whole))
            return
        content = str(message.content)
        pieces = [content[i : i + self.piece] for i in range(0, len(content), self.piece)] or [""]
        for n, piece in enumerate(pieces):
            usage = message.usage_metadata if n == len(pieces) - 1 else None  # type: ignore[attr-defined]
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece, usage_metadata=usage))


@contextmanager
def recording(journal: list[dict[str, Any]]) -> Iterator[None]:
    """Every request of the model layer appended to ``journal`` as sent (role, messages, schema, bound)."""
    from langchain_core.load import dumps

    from stores import models

    real = models.LLM._call

    def call(self: Any, messages: Sequence[BaseMessage], schema: Any, max_tokens: int | None) -> Any:
        sent = {
            "role": self.role,
            "messages": json.loads(dumps(list(messages))),
            "schema": {"title": schema.__name__, **schema.model_json_schema()} if schema is not None else None,
            "max_tokens": max_tokens,
        }
        text, parsed, used = real(self, messages, schema, max_tokens)
        journal.append({**sent, "reply": text})
        return text, parsed, used

    models.LLM._call = call  # type: ignore[method-assign]
    try:
        yield
    finally:
        models.LLM._call = real  # type: ignore[method-assign]
