"""Which model calls LangGraph's ``messages`` stream shows, and a JSON reply's text field streamed as a chat message.

LangGraph streams the tokens of every chat-model call made in a node (``stream_mode="messages"``,
``messages-tuple`` on a server) unless the call is tagged ``nostream``. A chat client (Studio's
chat view, Agent Chat UI) shows those tokens as the reply being written. The chat workflow wants
one call shown, its answer, and that call returns schema-enforced JSON: the client should see the
answer's words, not ``{"answer": "...``.

- :func:`unstreamed`: model calls inside the block are tagged ``nostream``;
- :func:`streamed_field`: model calls inside the block are tagged ``nostream`` too, and the string
  field ``field`` of their JSON reply is re-streamed, as it is written, as the tokens of one AI
  message with a known id (a reply that is not a JSON object streams as it is). The node that
  appends the final answer to ``messages`` gives it that id, so a client merges the two;
- :func:`stream_more`: text a node adds to the end of that message (the sources an answer cites).

The re-streamed message is reported to the node's callbacks as a chat-model run of its own (the
public callback-manager API): LangChain offers no way to change the tokens a model run streams.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, GenerationChunk, LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, get_callback_manager_for_config, merge_configs
from langchain_core.utils.json import parse_partial_json

NOSTREAM = "nostream"
"""The tag LangGraph's ``messages`` stream skips (``langgraph.constants.TAG_NOSTREAM``)."""


def partial_object(text: str) -> dict[str, Any] | None:
    """The JSON object still being written in ``text`` (langchain_core's ``parse_partial_json``).

    None while the text does not parse (an escape sequence cut in the middle) or is not an object.
    """
    start = text.lstrip()
    if not start.startswith("{"):
        return None
    try:
        value = parse_partial_json(start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def field_text(value: dict[str, Any], field: str) -> str | None:
    """The string field ``field`` of a partial object.

    A first half of a surrogate pair at its end is left for the next call, so each value starts with the one before.
    """
    found = value.get(field)
    if not isinstance(found, str):
        return None
    return found[:-1] if found and "\ud800" <= found[-1] <= "\udbff" else found


def partial_field(text: str, field: str) -> str | None:
    """The string field ``field`` of a JSON object still being written; None until the field's value has begun."""
    value = partial_object(text)
    return None if value is None else field_text(value, field)


class FieldStream(BaseCallbackHandler):
    """Re-streams field ``field`` of the JSON replies it observes as one AI message with id :attr:`message_id`.

    A second reply (a schema retry, a longer budget, the plain-text fallback) after text was shown
    starts a new message id: clients append chunks of one id, and the new reply is not a continuation.
    """

    run_inline = True

    def __init__(self, field: str, message_id: str, config: RunnableConfig, hold: str = "") -> None:
        self.field = field
        self.hold = hold
        self.base_id = message_id
        self.message_id = message_id
        self.config = config
        self.reply_run: UUID | None = None
        self.raw = ""
        self.shown = ""
        self.attempt = 0
        self.run: CallbackManagerForLLMRun | None = None

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        """Add the token to the reply and emit the newly shown text (a new run starts a new message)."""
        piece = token if isinstance(token, str) else (chunk.text if chunk is not None else "")
        if run_id != self.reply_run:
            self.reply_run, self.raw = run_id, ""
            if self.shown:
                self.close()
                self.attempt += 1
                self.message_id, self.shown = f"{self.base_id}-{self.attempt}", ""
        self.raw += piece
        text = self._text()
        if text and text.startswith(self.shown) and len(text) > len(self.shown):
            delta, self.shown = text[len(self.shown) :], text
            self._open().on_llm_new_token(
                delta, chunk=ChatGenerationChunk(message=AIMessageChunk(content=delta, id=self.message_id))
            )

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """A held reply whose ``hold`` list ended empty (or absent) is the answer: show what is left of it at once."""
        if run_id != self.reply_run or not self.hold:
            return
        text = self._text(final=True)
        if text and text.startswith(self.shown) and len(text) > len(self.shown):
            delta, self.shown = text[len(self.shown) :], text
            self._open().on_llm_new_token(
                delta, chunk=ChatGenerationChunk(message=AIMessageChunk(content=delta, id=self.message_id))
            )

    def _text(self, final: bool = False) -> str | None:
        start = self.raw.lstrip()
        if not start:
            return None
        if not start.startswith("{"):
            return self.raw  # a plain-text reply streams as it is
        value = partial_object(start)
        if value is None:
            return None
        if self.hold and (value.get(self.hold) or (self.hold not in value and not final)):
            return None  # the reply asks for more first, or has not said yet whether it will
        return field_text(value, self.field)

    def _open(self) -> CallbackManagerForLLMRun:
        if self.run is None:
            manager = get_callback_manager_for_config(self.config)
            self.run = manager.on_chat_model_start(
                {"name": f"streamed {self.field}"}, [[HumanMessage(content="")]], name=f"streamed_{self.field}"
            )[0]
        return self.run

    def close(self) -> None:
        """End the streamed message (its whole text, with its id, so the stream does not send it again)."""
        if self.run is not None:
            final = AIMessage(content=self.shown, id=self.message_id)
            self.run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=final)]]))
            self.run = None


_extra: contextvars.ContextVar[RunnableConfig | None] = contextvars.ContextVar("model_call_config", default=None)


def call_config() -> RunnableConfig | None:
    """The config a model call made now runs with: the caller's, plus the tags and handlers of the blocks here."""
    extra = _extra.get()
    return None if extra is None else merge_configs(ensure_config(), extra)


def streaming_wanted() -> bool:
    """True inside :func:`streamed_field`: the call should be streamed so its field can be shown as written."""
    extra = _extra.get()
    return bool(extra and extra.get("callbacks"))


@contextlib.contextmanager
def unstreamed() -> Iterator[None]:
    """Model calls inside the block are not shown in LangGraph's ``messages`` stream."""
    token = _extra.set({"tags": [NOSTREAM]})
    try:
        yield
    finally:
        _extra.reset(token)


@contextlib.contextmanager
def streamed_field(field: str = "answer", message_id: str | None = None, hold: str = "") -> Iterator[FieldStream]:
    """Model calls inside the block stream only their reply's ``field``, as the AI message ``stream.message_id``.

    With ``hold`` (a list field written before ``field``), a reply streams only once that list is known
    to be empty: a reply that asks for more first (a chat's recall) shows nothing, so a turn shows one
    message whatever it did. A reply that writes ``field`` first is shown whole when it ends.
    """
    stream = FieldStream(field, message_id or str(uuid.uuid4()), ensure_config(), hold)
    token = _extra.set({"tags": [NOSTREAM], "callbacks": [stream]})
    try:
        yield stream
    finally:
        _extra.reset(token)
        stream.close()


def stream_more(message_id: str, text: str) -> None:
    """Add ``text`` to the end of the streamed AI message ``message_id`` (what a node appends to a model's reply)."""
    manager = get_callback_manager_for_config(ensure_config())
    run = manager.on_chat_model_start({"name": "streamed tail"}, [[HumanMessage(content="")]], name="streamed_tail")[0]
    run.on_llm_new_token(text, chunk=ChatGenerationChunk(message=AIMessageChunk(content=text, id=message_id)))
    run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=AIMessage(content=text, id=message_id))]]))
