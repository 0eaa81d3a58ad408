"""Chat models per role, one call path for every LLM request, token accounting and a response cache.

Every chat call goes through ``langchain_openai.ChatOpenAI`` against an OpenAI-compatible
endpoint: the bundled llama.cpp server when no base URL is configured, anything else
(OpenAI, vLLM, Ollama, a llama.cpp server) when ``LONGDOC_BASE_URL`` / ``LONGDOC_MODEL`` /
``LONGDOC_API_KEY`` (or the per-role ``LONGDOC_<ROLE>_*``) are set.

Nodes use :func:`llm_for` and get back results together with a usage dict
``{role: {"input": n, "output": m, "calls": 1, "cached": 0}}`` that graph states merge with
:func:`merge_usage`.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from langchain_core.caches import BaseCache
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumps
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration
from pydantic import BaseModel, ValidationError

from stores.settings import (
    InputError,
    ModelError,
    RoleModel,
    RunTimeout,
    check_deadline,
    deadline_left,
    get_settings,
)
from stores.text import count_tokens

T = TypeVar("T", bound=BaseModel)
Usage = dict[str, dict[str, int]]
ChatFactory = Callable[[str], BaseChatModel]


class ModelOutputError(ModelError):
    """The model kept answering with output that does not fit the required schema."""

    def __init__(self, message: str, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.usage: Usage = usage or {}
        """Tokens spent on the rejected attempts."""


_override: ChatFactory | None = None


@contextlib.contextmanager
def use_chat_model(factory: ChatFactory | BaseChatModel) -> Iterator[None]:
    """Route every role to ``factory(role)`` (or one model) inside the block; used by tests and benches."""
    global _override
    previous = _override
    _override = factory if callable(factory) and not isinstance(factory, BaseChatModel) else (lambda _role: factory)  # type: ignore[assignment]
    try:
        yield
    finally:
        _override = previous


def model_overridden() -> bool:
    """True inside ``use_chat_model`` (tests, scripted benchmark runs)."""
    return _override is not None


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


def merge_usage(left: Usage | None, right: Usage | None) -> Usage:
    """Reducer: add token counts per role."""
    out: Usage = {role: dict(v) for role, v in (left or {}).items()}
    for role, counts in (right or {}).items():
        mine = out.setdefault(role, {})
        for key, value in counts.items():
            mine[key] = mine.get(key, 0) + int(value)
    return out


def relabel_usage(usage: Usage, label: str) -> Usage:
    """The same counts gathered under one label (e.g. the graph step that spent them)."""
    out: Usage = {}
    for counts in usage.values():
        out = merge_usage(out, {label: counts})
    return out


def usage_totals(usage: Usage) -> dict[str, int]:
    """Sum of input/output tokens and calls over every role."""
    total = {"input": 0, "output": 0, "calls": 0, "cached": 0}
    for counts in usage.values():
        for key in total:
            total[key] += int(counts.get(key, 0))
    return total


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


class DeadlineReached(BaseException):
    """The run's deadline passed while a model request was being sent or read.

    A ``BaseException``: the OpenAI client's retry loop must not catch it and send the request
    again. :class:`LLM` turns it into a :class:`RunTimeout`.
    """


def _deadline_reached() -> DeadlineReached:
    try:
        check_deadline()
    except RunTimeout as exc:
        return DeadlineReached(str(exc))
    return DeadlineReached("the run's deadline has passed")


_http_client: Any = None
_http_lock = threading.Lock()


def http_client() -> Any:
    """The process's HTTP client for model requests, which holds every request to the run's deadline.

    Its transport refuses a request (a first attempt or a retry) once the deadline of the current
    run (:func:`stores.settings.run_deadline`) has passed, cuts each request's connect and read
    timeouts to the time left, and stops reading a streamed reply when the time is up.
    """
    global _http_client
    with _http_lock:
        if _http_client is None:
            import httpx

            class DeadlineStream(httpx.SyncByteStream):
                def __init__(self, inner: Any) -> None:
                    self.inner = inner

                def __iter__(self) -> Iterator[bytes]:
                    for part in self.inner:
                        left = deadline_left()
                        if left is not None and left <= 0:
                            raise _deadline_reached()
                        yield part

                def close(self) -> None:
                    self.inner.close()

            class DeadlineTransport(httpx.HTTPTransport):
                def handle_request(self, request: httpx.Request) -> httpx.Response:
                    left = deadline_left()
                    if left is None:
                        return super().handle_request(request)
                    if left <= 0:
                        raise _deadline_reached()
                    timeouts = dict(request.extensions.get("timeout") or {})
                    request.extensions["timeout"] = {
                        name: left if value is None else min(float(value), left) for name, value in timeouts.items()
                    }
                    response = super().handle_request(request)
                    response.stream = DeadlineStream(response.stream)
                    return response

            limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)  # the OpenAI client's
            _http_client = httpx.Client(transport=DeadlineTransport(limits=limits), follow_redirects=True)
        return _http_client


_limiters: dict[tuple[str, float], Any] = {}
_limiters_lock = threading.Lock()


def rate_limiter(endpoint: str) -> Any:
    """The process's ``InMemoryRateLimiter`` of ``endpoint`` under ``LONGDOC_REQUESTS_PER_SECOND`` (None: no limit).

    One per endpoint, shared by every role and request that calls it.
    """
    rate = get_settings().requests_per_second
    if rate <= 0:
        return None
    from langchain_core.rate_limiters import InMemoryRateLimiter

    key = (endpoint.rstrip("/"), rate)
    with _limiters_lock:
        if key not in _limiters:
            _limiters[key] = InMemoryRateLimiter(requests_per_second=rate, check_every_n_seconds=min(0.1, 0.5 / rate))
        return _limiters[key]


def run_config(config: dict[str, Any] | None = None) -> dict[str, Any]:
    """``config`` bounded by ``LONGDOC_MAX_CONCURRENCY`` (a caller's own lower ``max_concurrency`` kept).

    LangGraph runs at most that many steps of a run at once, the tasks of a ``Send`` fan-out included.
    """
    out = dict(config or {})
    limit = get_settings().max_concurrency
    if limit:
        own = out.get("max_concurrency")
        out["max_concurrency"] = min(int(own), limit) if own else limit
    return out


def chat_model(role: str, overrides: dict[str, Any] | None = None, *, max_tokens: int | None = None) -> BaseChatModel:
    """The ``ChatOpenAI`` client for ``role`` (starting the bundled server when no endpoint is set).

    Requests to the bundled server are streamed with llama.cpp's prompt progress
    (``return_progress``), so the read timeout bounds every silence of the reply, not its length.
    """
    if _override is not None:
        return _override(role)
    import httpx
    from langchain_openai import ChatOpenAI

    spec = resolve_role(role, overrides)
    settings = get_settings()
    base_url = spec.base_url
    read_timeout = settings.read_timeout_for(base_url)
    bundled = base_url is None
    if base_url is None:
        from stores.local_model import ensure_server

        base_url = ensure_server().base_url
    return ChatOpenAI(
        model=spec.model,
        base_url=base_url,
        api_key=spec.api_key or "not-needed",  # type: ignore[arg-type]
        temperature=spec.temperature,
        max_retries=settings.max_retries,
        timeout=httpx.Timeout(read_timeout, connect=settings.connect_timeout),
        max_tokens=max_tokens,  # type: ignore[call-arg]
        stream_usage=True,
        streaming=bundled,
        extra_body={"return_progress": True} if bundled else None,
        http_client=http_client(),
        rate_limiter=None if bundled else rate_limiter(base_url),
    )


def _bundled_slots(model: BaseChatModel) -> threading.BoundedSemaphore | None:
    """The bundled server's slots when ``model`` calls the bundled server of this process."""
    from stores.local_model import running_server

    server = running_server()
    if server is None or not _is_openai(model) or _endpoint_of(model).rstrip("/") != server.base_url:
        return None
    return server.slots


class EndpointGate:
    """Endpoints that just failed, closed for a cool-down so that no layer retries them again.

    The OpenAI client is the one layer that retries a request (``LONGDOC_MAX_RETRIES`` times,
    with back-off and ``Retry-After``). When an endpoint is still unreachable, stalled or failing
    (5xx, 429) after those retries, it is closed for ``LONGDOC_ENDPOINT_COOLDOWN`` seconds: every
    call to it in that time (a graph node's retry, another request of the server) fails at once
    with the same error instead of waiting out its timeouts again.
    """

    def __init__(self) -> None:
        self._closed: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def check(self, endpoint: str) -> None:
        """Raise the endpoint's last error while it is closed."""
        with self._lock:
            closed = self._closed.get(endpoint)
        if closed is not None:
            left = closed[0] - time.monotonic()
            if left > 0:
                raise ModelError(f"{closed[1]} (not retried for another {left:.0f} s)")

    def close(self, endpoint: str, message: str) -> None:
        cooldown = get_settings().cooldown
        if cooldown > 0:
            with self._lock:
                self._closed[endpoint] = (time.monotonic() + cooldown, message)

    def open(self, endpoint: str) -> None:
        with self._lock:
            self._closed.pop(endpoint, None)

    def reset(self) -> None:
        """Forget every failure (tests)."""
        with self._lock:
            self._closed.clear()


endpoint_gate = EndpointGate()
"""The process's gate (one for every role and request)."""


_caches: dict[Path, BaseCache] = {}
_caches_lock = threading.Lock()


def response_cache() -> BaseCache:
    """LangChain's ``SQLiteCache`` of the current ``LONGDOC_HOME`` (``llm_cache.sqlite``).

    :class:`LLM` calls its ``lookup``/``update`` itself rather than setting it as the chat model's
    ``cache``: the model's own cache would keep replies cut at ``max_tokens`` and knows nothing of
    the parsed structured output, and a global ``set_llm_cache`` would hold for every role and test.
    """
    path = get_settings().home / "llm_cache.sqlite"
    with _caches_lock:
        if path not in _caches:
            from langchain_community.cache import SQLiteCache

            path.parent.mkdir(parents=True, exist_ok=True)
            _caches[path] = SQLiteCache(database_path=str(path))
        return _caches[path]


def _usage_of(message: BaseMessage, messages: Sequence[BaseMessage]) -> tuple[int, int]:
    meta = getattr(message, "usage_metadata", None) or {}
    if meta.get("input_tokens") is not None:
        return int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))
    prompt = sum(count_tokens(str(m.content)) for m in messages)
    return prompt, count_tokens(str(message.content))


_SENTENCE_END = re.compile(r"[.!?][\"')\]\u201d]*(?=\s|$)|[\u3002\uff01\uff1f][\u201d\u300d\uff09]*")


def complete_sentences(text: str) -> str:
    """``text`` up to the end of its last complete sentence (empty when it has none)."""
    ends = list(_SENTENCE_END.finditer(text.strip()))
    return text.strip()[: ends[-1].end()] if ends else ""


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse_json_object(text: str) -> Any:
    """Parse the first JSON object or array in ``text`` (code fences and chatter around it allowed)."""
    cleaned = _FENCE.sub("", text.strip()).strip()
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(cleaned):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(cleaned[i:])
                return value
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object found in the reply")


class LLM:
    """One role's model with retries on bad output, the response cache and usage accounting."""

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
        spec = resolve_role(self.role, self.overrides) if _override is None else None
        llm = {
            "model": spec.model if spec else "override",
            "base_url": spec.base_url if spec else None,
            "temperature": spec.temperature if spec else None,
            "schema": schema.model_json_schema() if schema else None,
            "max_tokens": max_tokens,
        }
        return dumps(list(messages)), json.dumps(llm, sort_keys=True, ensure_ascii=False)

    def _call(
        self, messages: Sequence[BaseMessage], schema: type[BaseModel] | None, max_tokens: int | None
    ) -> tuple[str, Any, Usage]:
        """One request: returns the reply text, the parsed object (schema calls) and usage."""
        key = self._key(messages, schema, max_tokens) if self.use_cache else None
        if key is not None:
            hit = response_cache().lookup(*key)
            kept = hit[0] if hit and isinstance(hit[0], ChatGeneration) else None
            if kept is not None and isinstance(kept.message, AIMessage) and kept.message.usage_metadata:
                counts = kept.message.usage_metadata
                spent = {"input": counts["input_tokens"], "output": counts["output_tokens"], "calls": 1, "cached": 1}
                return kept.text, (kept.generation_info or {}).get("parsed"), {self.role: spent}
        check_deadline()  # no model call starts after the run's deadline
        model = chat_model(self.role, self.overrides, max_tokens=max_tokens)
        endpoint = _endpoint_of(model)
        if endpoint:
            endpoint_gate.check(endpoint)
        slots = _bundled_slots(model)
        if slots is not None:
            # Sent only once the bundled server has a free slot: its read timeout starts then.
            left = deadline_left()
            if not slots.acquire(timeout=max(0.0, left) if left is not None else None):
                raise RunTimeout(str(_deadline_reached()))
        try:
            return self._send(model, messages, schema, key)
        finally:
            if slots is not None:
                slots.release()

    def _send(
        self,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        schema: type[BaseModel] | None,
        key: tuple[str, str] | None,
    ) -> tuple[str, Any, Usage]:
        import openai

        endpoint = _endpoint_of(model)
        parsed: Any = None
        raw: BaseMessage
        try:
            if schema is not None and _is_openai(model):
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
                    raw = model.invoke(list(messages), extra_body=body)
                    text = raw.content if isinstance(raw.content, str) else json.dumps(raw.content)
                else:
                    runnable = model.with_structured_output(json_schema, method="json_schema", include_raw=True)
                    out = cast(dict[str, Any], runnable.invoke(list(messages)))  # include_raw: a dict
                    raw = out["raw"]
                    text = raw.content if isinstance(raw.content, str) else json.dumps(raw.content)
                    if isinstance(out.get("parsed"), dict):
                        parsed = out["parsed"]
            else:
                raw = model.invoke(list(messages))
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
            error = _model_error(exc, self.role, model)
            if endpoint and _unavailable(exc):
                endpoint_gate.close(endpoint, str(error))
            raise error from exc
        if endpoint:
            endpoint_gate.open(endpoint)
        n_in, n_out = _usage_of(raw, messages)
        if (raw.response_metadata or {}).get("finish_reason") == "length":
            return text, None, {self.role: {"input": n_in, "output": n_out, "calls": 1, "cached": 0, "truncated": 1}}
        used = {self.role: {"input": n_in, "output": n_out, "calls": 1, "cached": 0}}
        if key is not None and schema is None:
            self._remember(key, text, None, used)  # a structured reply is kept once it validates
        return text, parsed, used

    def _remember(self, key: tuple[str, str], text: str, parsed: Any, used: Usage) -> None:
        """Keep a complete, accepted reply in the response cache with its token counts."""
        n_in, n_out = used[self.role]["input"], used[self.role]["output"]
        reply = AIMessage(
            content=text, usage_metadata={"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
        )
        response_cache().update(*key, [ChatGeneration(message=reply, generation_info={"parsed": parsed})])

    def text(self, messages: Sequence[BaseMessage], *, max_tokens: int | None = None) -> tuple[str, Usage]:
        """Plain text reply and its usage.

        A reply cut at ``max_tokens`` is asked again with twice the budget; cut again, it keeps only
        its complete sentences, and with none it is a ModelOutputError: a half sentence is never
        returned.
        """
        usage: Usage = {}
        budget = max_tokens
        text = ""
        for attempt in range(2):
            text, _, used = self._call(messages, None, budget)
            usage = merge_usage(usage, used)
            if not used.get(self.role, {}).get("truncated"):
                return text.strip(), usage
            if not budget or attempt == 1:
                break
            budget = min(budget * 2, 4096)
        whole = complete_sentences(text)
        if not whole:
            raise ModelOutputError(f"the {self.role} model's reply was cut at {budget} tokens mid-sentence", usage)
        return whole, usage

    def structured(
        self, messages: Sequence[BaseMessage], schema: type[T], *, max_tokens: int | None = None
    ) -> tuple[T, Usage]:
        """A reply validated against ``schema``; retried with the error shown, then ModelOutputError."""
        usage: Usage = {}
        convo = list(messages)
        last_error = ""
        budget = max_tokens
        for _attempt in range(self.max_retries + 1):
            text, parsed, used = self._call(convo, schema, budget)
            usage = merge_usage(usage, used)
            if used.get(self.role, {}).get("truncated") and budget:
                last_error = f"the reply was cut at {budget} tokens"
                budget = min(budget * 2, 4096)
                continue
            try:
                data = parsed if parsed is not None else parse_json_object(text)
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
                self._remember(self._key(messages, schema, max_tokens), text, data, used)
            return result, usage
        raise ModelOutputError(
            f"the {self.role} model did not return valid {schema.__name__} JSON after "
            f"{self.max_retries + 1} attempts: {last_error}",
            usage,
        )


def _is_openai(model: BaseChatModel) -> bool:
    from langchain_openai import ChatOpenAI

    return isinstance(model, ChatOpenAI)


def _endpoint_of(model: Any) -> str:
    """The base URL an OpenAI client (``ChatOpenAI``, ``OpenAIEmbeddings``) calls (empty for other models)."""
    return str(getattr(model, "openai_api_base", "") or "")


def _transport_errors() -> tuple[tuple[type[BaseException], ...], ...]:
    """Timeouts, connection failures and dropped replies, as the OpenAI client and its HTTP layers raise them.

    ``openai`` wraps transport failures of a request in ``APITimeoutError`` / ``APIConnectionError``;
    a streamed reply read after the request returned raises the HTTP library's own errors
    (``httpx`` for the process's client, ``httpx2`` for the OpenAI client's default one).
    """
    import http.client

    import httpx
    import httpx2
    import openai

    timeouts = (openai.APITimeoutError, httpx.TimeoutException, httpx2.TimeoutException, TimeoutError)
    connection = (openai.APIConnectionError, httpx.TransportError, httpx2.TransportError, ConnectionError)
    dropped = (
        httpx.RemoteProtocolError,
        httpx.ReadError,
        httpx2.RemoteProtocolError,
        httpx2.ReadError,
        http.client.IncompleteRead,
    )
    return timeouts, connection, dropped


def _unavailable(exc: Exception) -> bool:
    """True for failures that close the endpoint: unreachable, stalled, 5xx, rate-limited."""
    import openai

    timeouts, connection, _ = _transport_errors()
    if isinstance(exc, (*timeouts, *connection, openai.RateLimitError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def _dropped_mid_reply(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a connection closed by the peer during a reply."""
    _, _, dropped = _transport_errors()
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, dropped):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _model_error(exc: Exception, role: str, model: Any = None, reply: str = "chat completion") -> Exception:
    if isinstance(exc, ModelError):
        return exc
    import openai

    name = type(exc).__name__
    endpoint = _endpoint_of(model) if model is not None else ""
    where = f" {endpoint}" if endpoint else ""
    attempts = int(getattr(model, "max_retries", None) or 0) + 1
    timeouts, connection, _ = _transport_errors()
    if isinstance(exc, timeouts):
        timeout: Any = getattr(model, "request_timeout", None)
        limits = ""
        if getattr(timeout, "read", None) is not None:
            limits = f", {timeout.connect:g} s to connect, {timeout.read:g} s to read"
        return ModelError(
            f"the {role} model endpoint{where} did not answer in time ({attempts} attempts{limits}); "
            "check it, or raise LONGDOC_READ_TIMEOUT"
        )
    if isinstance(exc, connection) and _dropped_mid_reply(exc):
        return ModelError(
            f"the {role} model endpoint{where} dropped the connection before its reply was complete "
            f"({attempts} attempts); check the endpoint or a proxy in front of it"
        )
    if isinstance(exc, connection):
        return ModelError(
            f"the {role} model endpoint{where} cannot be reached ({name}: {exc}); check LONGDOC_BASE_URL "
            "or unset it to use the bundled model"
        )
    if isinstance(exc, openai.RateLimitError):
        return ModelError(
            f"the {role} model endpoint{where} kept refusing with 429 (rate limit) after {attempts} attempts"
        )
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return ModelError(f"the {role} model endpoint refused the API key ({exc}); check LONGDOC_API_KEY")
    if isinstance(exc, openai.NotFoundError):
        return ModelError(f"the {role} model was not found at the endpoint ({exc}); check LONGDOC_MODEL")
    text = str(exc)
    # A 200 reply that is not JSON has no error type of its own: the client fails parsing it.
    if "Unexpected response type" in text or "'str' object has no attribute" in text:
        return ModelError(
            f"the {role} model endpoint{where} answered with something that is not an OpenAI-compatible "
            f"{reply} (an HTML page? check the endpoint's URL, which usually ends in /v1)"
        )
    if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
        return ModelError(
            f"the {role} model endpoint{where} failed with HTTP {exc.status_code} after {attempts} attempts"
        )
    to = f" to {endpoint}" if endpoint else ""
    return ModelError(f"the {role} model call{to} failed ({name}: {str(exc)[:300]})")


class EndpointEmbeddings(Embeddings):
    """An OpenAI-compatible ``/embeddings`` endpoint held to the rules of the chat calls.

    ``OpenAIEmbeddings`` with the connect and read timeouts and the retries of ``LONGDOC_*``, the
    process's deadline-aware HTTP client (:func:`http_client`) and the endpoint gate; a failure
    is a :class:`ModelError` naming the endpoint (a :class:`RunTimeout` past the run's deadline),
    and a reply without one vector per text is refused. A LangChain ``Embeddings``.
    """

    def __init__(self, base_url: str, api_key: str | None, model: str) -> None:
        import httpx
        from langchain_openai import OpenAIEmbeddings

        settings = get_settings()
        self.endpoint = base_url.rstrip("/")
        self.embedder_id = f"openai-{re.sub(r'[^a-z0-9]+', '-', model.lower())}"
        self.inner = OpenAIEmbeddings(
            base_url=base_url,
            api_key=api_key or "not-needed",  # type: ignore[arg-type]
            model=model,
            check_embedding_ctx_length=False,
            max_retries=settings.max_retries,
            timeout=httpx.Timeout(settings.read_timeout_for(base_url), connect=settings.connect_timeout),
            http_client=http_client(),
        )

    def _run(self, texts: list[str], call: Callable[[], Any]) -> list[list[float]]:
        check_deadline()
        endpoint_gate.check(self.endpoint)
        try:
            vectors = call()
        except DeadlineReached as exc:
            raise RunTimeout(str(exc)) from None
        except Exception as exc:
            check_deadline()
            error = _model_error(exc, "embedding", self.inner, reply="embeddings response")
            if _unavailable(exc):
                endpoint_gate.close(self.endpoint, str(error))
            raise error from exc
        endpoint_gate.open(self.endpoint)
        if not isinstance(vectors, list) or len(vectors) != len(texts) or not all(vectors):
            count = len(vectors) if isinstance(vectors, list) else 0
            raise ModelError(
                f"the embedding model endpoint {self.endpoint} answered with {count} vectors for {len(texts)} texts"
            )
        return vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, lambda: self.inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._run([text], lambda: [self.inner.embed_query(text)])[0]


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
