"""Chat models per role and the one call path of every LLM request.

Every chat call goes through ``langchain_openai.ChatOpenAI`` against an OpenAI-compatible endpoint: the bundled
llama.cpp server when no base URL is configured, anything else (OpenAI, vLLM, Ollama, a llama.cpp server) when
``LONGDOC_BASE_URL`` / ``LONGDOC_MODEL`` / ``LONGDOC_API_KEY`` (or the per-role ``LONGDOC_<ROLE>_*``) are set. Each
request is held to the rules of :mod:`stores.endpoints` (deadline, rate limit, endpoint gate) and answered from
:mod:`stores.llm_cache` when it was asked before.

Nodes use :func:`llm_for`; each request's usage ``{role: {"input": n, "output": m, "calls": 1,
"cached": 0}}`` is recorded with :func:`stores.usage.record_usage`, and the graph node that made it
gathers it with :func:`stores.usage.track_usage`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumps
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, SecretStr, ValidationError

from stores.chat_stream import call_config, streaming_wanted
from stores.deadlines import DeadlineReached, check_deadline, deadline_left, deadline_reached
from stores.endpoints import (
    endpoint_gate,
    endpoint_of,
    http_client,
    is_openai,
    model_error,
    rate_limiter,
    request_timeout,
    unavailable,
)
from stores.errors import InputError, ModelError, RunTimeout
from stores.liveness import ServerStalled, watching
from stores.llm_cache import cached_reply, remember
from stores.replies import complete_sentences, cut_reply, parse_json_object
from stores.settings import RoleModel, get_settings
from stores.usage import Usage, merge_usage, record_usage, spend_call, usage_of

if TYPE_CHECKING:
    from stores.local_model import LocalServer

T = TypeVar("T", bound=BaseModel)
ChatFactory = Callable[[str], BaseChatModel]


class ModelOutputError(ModelError):
    """The model kept answering with output that does not fit the required schema."""

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage: Usage = usage or {}
        """Tokens spent on the rejected attempts (also recorded, :func:`stores.usage.record_usage`)."""


_override: contextvars.ContextVar[ChatFactory | None] = contextvars.ContextVar("chat_model_override", default=None)
"""The model factory of the current context: graph runs started inside ``use_chat_model`` see it
(LangGraph runs sync nodes in threads with a copy of the caller's context); other threads do not."""


@contextlib.contextmanager
def use_chat_model(factory: ChatFactory | BaseChatModel) -> Iterator[None]:
    """Route every role to ``factory(role)`` (or one model) inside the block; used by tests and benches.

    Scoped to the current context, not the process: a served app takes its model as
    ``create_app(chat_model=...)``, since requests run in the server's threads.
    """
    chosen = factory if callable(factory) and not isinstance(factory, BaseChatModel) else (lambda _role: factory)
    token = _override.set(chosen)
    try:
        yield
    finally:
        _override.reset(token)


def model_overridden() -> bool:
    """True inside ``use_chat_model`` (tests, scripted benchmark runs)."""
    return _override.get() is not None


def transient(exc: BaseException) -> bool:
    """Worth one more try of a graph step: the model unreachable or its connection dropped.

    Not bad output (the model layer already asked again with the schema error shown), bad input,
    nor the run's deadline (nothing may start after it).
    """
    if isinstance(exc, (ModelOutputError, RunTimeout, InputError)):
        return False
    return isinstance(exc, (ModelError, ConnectionError, TimeoutError))


def model_retry() -> Any:
    """The one retry policy of graph steps that call a model or a store: two attempts, on :func:`transient`."""
    from langgraph.types import RetryPolicy

    return RetryPolicy(max_attempts=2, retry_on=transient)


def resolve_role(role: str, overrides: dict[str, Any] | None = None) -> RoleModel:
    """Model settings for ``role``: runtime overrides (context fields) over ``LONGDOC_*`` settings."""
    base = get_settings().role(role)
    overrides = overrides or {}
    model = overrides.get(f"{role}_model") or overrides.get("model") or base.model
    base_url = overrides.get("base_url") or base.base_url
    temperature = overrides.get("temperature")
    return RoleModel(
        model=str(model),
        base_url=base_url or None,
        api_key=base.api_key,
        temperature=float(temperature) if temperature is not None else base.temperature,
    )


def chat_model(role: str, overrides: dict[str, Any] | None = None, *, max_tokens: int | None = None) -> BaseChatModel:
    """The ``ChatOpenAI`` client for ``role`` (starting the bundled server when no endpoint is set).

    Requests to the bundled server are streamed with llama.cpp's prompt progress
    (``return_progress``): :class:`LLM` waits for them while the server makes progress
    (:mod:`stores.liveness`), however long a busy machine makes a prompt batch.
    """
    override = _override.get()
    if override is not None:
        return override(role)
    from langchain_openai import ChatOpenAI

    spec = resolve_role(role, overrides)
    settings = get_settings()
    base_url = spec.base_url
    read_timeout = settings.read_timeout_for(base_url)
    bundled = base_url is None
    if base_url is None:  # the bundled server of the model the role names (stores.local_model)
        from stores.local_model import ensure_server

        base_url = ensure_server(spec.model).base_url
    return ChatOpenAI(
        model=spec.model,
        base_url=base_url,
        api_key=SecretStr(spec.api_key or "not-needed"),
        temperature=spec.temperature,
        max_retries=settings.max_retries,
        timeout=request_timeout(read_timeout, settings.connect_timeout),
        max_completion_tokens=max_tokens,  # the field max_tokens, by its alias
        stream_usage=True,
        streaming=bundled or streaming_wanted(),
        extra_body={"return_progress": True, "cache_prompt": True} if bundled else None,
        http_client=http_client(),
        rate_limiter=None if bundled else rate_limiter(base_url),
    )


def _bundled_server(model: BaseChatModel) -> LocalServer | None:
    """The bundled server of this process when ``model`` calls one."""
    from stores.local_model import server_at

    return server_at(endpoint_of(model)) if is_openai(model) else None


class LLM:
    """One role's model with retries on bad output, the response cache and usage accounting.

    Every request's usage is recorded (:func:`stores.usage.record_usage`), a rejected reply's too; every request
    sent (a reply from the cache is not) takes one call from the request's bound (:func:`stores.usage.spend_call`).
    """

    def __init__(
        self,
        role: str,
        overrides: dict[str, Any] | None = None,
        *,
        cache: bool | None = None,
        max_retries: int | None = None,
    ) -> None:
        self.role = role
        self.overrides = dict(overrides or {})
        settings = get_settings()
        self.use_cache = settings.llm_cache if cache is None else cache
        self.max_retries = settings.max_retries if max_retries is None else max_retries

    def _key(
        self, messages: Sequence[BaseMessage], schema: type[BaseModel] | None, max_tokens: int | None
    ) -> tuple[str, str]:
        """The cache's ``(prompt, llm_string)``: the messages, and what else decides the reply.

        The ``llm_string`` is built here, not by ``BaseChatModel._get_llm_string``: that one leaves out
        the schema of a scripted model and includes settings that do not change a reply (timeouts, retries).
        """
        spec = resolve_role(self.role, self.overrides) if _override.get() is None else None
        llm = {
            "model": spec.model if spec else "override",
            "base_url": spec.base_url if spec else None,
            "temperature": spec.temperature if spec else None,
            "schema": schema.model_json_schema() if schema else None,
            "max_tokens": max_tokens,
        }
        draft = get_settings().draft_model if spec and spec.base_url is None else None
        if draft:  # the same replies, drafted: kept apart, so that timing a draft model never reads them back
            llm["draft"] = draft
        return dumps(list(messages)), json.dumps(llm, sort_keys=True, ensure_ascii=False)

    def _call(
        self, messages: Sequence[BaseMessage], schema: type[BaseModel] | None, max_tokens: int | None
    ) -> tuple[str, Any, Usage]:
        """One request: returns the reply text, the parsed object (a cached structured reply's) and usage."""
        key = self._key(messages, schema, max_tokens) if self.use_cache else None
        if key is not None:
            hit = cached_reply(key, self.role)
            if hit is not None:
                return hit
        check_deadline()  # no model call starts after the run's deadline
        spend_call()  # nor past the request's bound on model calls (LONGDOC_MAX_MODEL_CALLS)
        model = chat_model(self.role, self.overrides, max_tokens=max_tokens)
        endpoint = endpoint_of(model)
        if endpoint:
            endpoint_gate.check(endpoint)
        server = _bundled_server(model)
        if server is None:
            return self._send(model, messages, schema, key)
        # Sent only once the bundled server has a free slot; then it waits while the server makes progress.
        left = deadline_left()
        if not server.slots.acquire(timeout=max(0.0, left) if left is not None else None):
            raise RunTimeout(str(deadline_reached()))
        try:
            with watching(server):
                return self._send(model, messages, schema, key)
        except ServerStalled as exc:
            error = ModelError(f"the {self.role} model call failed: {exc}")
            endpoint_gate.close(endpoint, str(error))
            raise error from None
        finally:
            server.slots.release()

    def _send(
        self,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        schema: type[BaseModel] | None,
        key: tuple[str, str] | None,
    ) -> tuple[str, Any, Usage]:
        import openai

        endpoint = endpoint_of(model)
        raw: BaseMessage
        try:
            if schema is not None and is_openai(model):
                # A plain JSON schema (not the pydantic class): the server's grammar enforces the
                # structure, and validation (bounds, enums) happens below, where it can be retried.
                json_schema = {"title": schema.__name__, **schema.model_json_schema()}
                if getattr(model, "streaming", False):
                    # Streamed: the response format goes in the body as is (the OpenAI client's
                    # parsing stream would merge llama.cpp's progress chunks into one message).
                    from langchain_openai.chat_models.base import _convert_to_openai_response_format

                    body = {
                        **(getattr(model, "extra_body", None) or {}),
                        "response_format": _convert_to_openai_response_format(json_schema),
                    }
                    raw = model.invoke(list(messages), config=call_config(), extra_body=body)
                    text = raw.content if isinstance(raw.content, str) else json.dumps(raw.content)
                else:
                    runnable = model.with_structured_output(json_schema, method="json_schema", include_raw=True)
                    out = cast(
                        dict[str, Any], runnable.invoke(list(messages), config=call_config())
                    )  # include_raw: a dict
                    raw = out["raw"]
                    text = raw.content if isinstance(raw.content, str) else json.dumps(raw.content)
            else:
                raw = model.invoke(list(messages), config=call_config())
                text = raw.content if isinstance(raw.content, str) else json.dumps(raw.content)
        except DeadlineReached as exc:
            raise RunTimeout(str(exc)) from None
        except Exception as exc:
            check_deadline()  # cut by the run's deadline, not failed by the endpoint
            if isinstance(exc, openai.LengthFinishReasonError):
                # The reply hit max_tokens before the JSON closed: report it as truncated output
                # (empty text), which the structured retry answers with a larger budget.
                spent = exc.completion.usage
                n_in = int(getattr(spent, "prompt_tokens", 0) or 0)
                n_out = int(getattr(spent, "completion_tokens", 0) or 0)
                return "", None, {self.role: {"input": n_in, "output": n_out, "calls": 1, "cached": 0, "truncated": 1}}
            error = model_error(exc, self.role, model)
            if endpoint and unavailable(exc):
                endpoint_gate.close(endpoint, str(error))
            raise error from exc
        if endpoint:
            endpoint_gate.open(endpoint)
        n_in, n_out = usage_of(raw, messages)
        if (raw.response_metadata or {}).get("finish_reason") == "length":
            return text, None, {self.role: {"input": n_in, "output": n_out, "calls": 1, "cached": 0, "truncated": 1}}
        used = {self.role: {"input": n_in, "output": n_out, "calls": 1, "cached": 0}}
        if key is not None and schema is None and not cut_reply(text):
            remember(key, self.role, text, None, used)  # a structured reply is kept once it validates
        return text, None, used

    def text(self, messages: Sequence[BaseMessage], *, max_tokens: int | None = None) -> str:
        """Plain text reply.

        A reply cut at ``max_tokens`` is asked again with twice the budget; cut again, it keeps only
        its complete sentences, and with none it is a ModelOutputError: a half sentence is never
        returned. A reply that is visibly cut although the endpoint said it finished (:func:`cut_reply`)
        is a failed call: asked again up to ``max_retries`` times, then a ModelOutputError.
        """
        usage: Usage = {}
        budget = max_tokens
        text = ""
        grown = refused = 0
        while True:
            text, _, used = self._call(messages, None, budget)
            record_usage(used)
            usage = merge_usage(usage, used)
            if not used.get(self.role, {}).get("truncated"):
                cut = cut_reply(text)
                if not cut:
                    return text.strip()
                refused += 1
                if refused > self.max_retries:
                    raise ModelOutputError(
                        f"the {self.role} model's reply is {cut}, although the endpoint said it finished "
                        f"({refused} attempts); check the endpoint or a proxy in front of it",
                        usage,
                    )
                continue
            grown += 1
            if not budget or grown == 2:
                break
            budget = min(budget * 2, 4096)
        whole = complete_sentences(text)
        if not whole:
            raise ModelOutputError(f"the {self.role} model's reply was cut at {budget} tokens mid-sentence", usage)
        return whole

    def structured(self, messages: Sequence[BaseMessage], schema: type[T], *, max_tokens: int | None = None) -> T:
        """A reply validated against ``schema``; retried with the error shown, then ModelOutputError."""
        usage: Usage = {}
        convo = list(messages)
        last_error = ""
        budget = max_tokens
        for _attempt in range(self.max_retries + 1):
            text, _, used = self._call(convo, schema, budget)
            record_usage(used)
            usage = merge_usage(usage, used)
            if used.get(self.role, {}).get("truncated") and budget:
                last_error = f"the reply was cut at {budget} tokens"
                budget = min(budget * 2, 4096)
                continue
            try:
                # Parsed here, strictly: the client's own parser completes a cut object.
                data = parse_json_object(text)
                result = schema.model_validate(data)
            except (ValidationError, ValueError) as exc:
                last_error = str(exc).splitlines()[0][:300]
                convo = [
                    *messages,
                    AIMessage(content=text[:2000]),
                    HumanMessage(
                        content=(
                            "That reply does not match the required JSON schema "
                            f"({last_error}). Reply again with one JSON object only."
                        )
                    ),
                ]
                continue
            if self.use_cache and not used[self.role].get("cached"):
                # Kept as the answer to the request asked, not to the retry that produced it.
                remember(self._key(messages, schema, max_tokens), self.role, text, data, used)
            return result
        raise ModelOutputError(
            f"the {self.role} model did not return valid {schema.__name__} JSON after "
            f"{self.max_retries + 1} attempts: {last_error}",
            usage,
        )


def llm_for(role: str, context: Any = None, *, model: str | None = None, **kwargs: Any) -> LLM:
    """The :class:`LLM` of ``role`` configured from a runtime ``Context`` (or ``None`` for defaults).

    ``model`` (when set) names the model of this one use of the role, over the context's
    ``<role>_model`` (e.g. the summary's ``question_model`` for the editor's questions).
    """
    overrides: dict[str, Any] = {}
    if context is not None:
        for name in ("model", "base_url", "temperature", f"{role}_model"):
            value = getattr(context, name, None)
            if value not in (None, ""):
                overrides[name] = value
        if getattr(context, "llm_cache", None) is not None and "cache" not in kwargs:
            kwargs["cache"] = context.llm_cache
    if model:
        overrides[f"{role}_model"] = model
    return LLM(role, overrides, **kwargs)


def messages(system: str, user: str) -> list[BaseMessage]:
    """A system + user message pair."""
    return [SystemMessage(content=system), HumanMessage(content=user)]
