"""What every request to a model endpoint goes through: the run's deadline, rate limits, the endpoint gate.

The process's deadline-aware HTTP client and per-endpoint rate limiters, the gate that closes an
endpoint after it failed, the translation of OpenAI client errors into :class:`ModelError`, and
:class:`EndpointEmbeddings`, an ``/embeddings`` endpoint held to the same rules as the chat calls.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel

from stores.cache import ProcessCache
from stores.deadlines import DeadlineReached, check_deadline, deadline_left, deadline_reached
from stores.errors import ModelError, RunTimeout
from stores.settings import get_settings

_http_clients: ProcessCache[str, Any] = ProcessCache("deadline-aware HTTP client", 1)


def request_timeout(read: float, connect: float) -> tuple[float, float, float, float]:
    """Connect, read, write and pool timeouts as a tuple, the one form every client in a call takes.

    The OpenAI client's own transport (``httpx2``) refuses ``httpx.Timeout`` and the process's ``httpx`` client
    refuses ``httpx2.Timeout``; both read ``(connect, read, write, pool)``. Write and pool wait as long as a read.
    """
    return (connect, read, read, read)


def http_client() -> Any:
    """The process's HTTP client for model requests, which holds every request to the run's deadline.

    Its transport refuses a request (a first attempt or a retry) once the deadline of the current
    run (:func:`stores.deadlines.run_deadline`) has passed, cuts each request's connect and read
    timeouts to the time left, and stops reading a streamed reply when the time is up. A request
    to the bundled server made inside :func:`stores.liveness.watching` waits as long as the server
    makes progress, not for a fixed silence.
    """
    return _http_clients.get_or_build("model requests", _deadline_client, exclusive=True)


def _deadline_client() -> Any:
    import httpx

    from stores.liveness import Watch, WatchedBackend, current_watch

    class DeadlineStream(httpx.SyncByteStream):
        def __init__(self, inner: Any, watch: Watch | None) -> None:
            self.inner = inner
            self.watch = watch

        def __iter__(self) -> Iterator[bytes]:
            for part in self.inner:
                left = deadline_left()
                if left is not None and left <= 0:
                    raise deadline_reached()
                if self.watch is not None:
                    self.watch.body(part)
                yield part

        def close(self) -> None:
            self.inner.close()

    class DeadlineTransport(httpx.HTTPTransport):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            # httpx has no parameter for httpcore's network backend: its pool's private one is replaced here
            # (tests/unit/test_liveness.py fails when httpcore renames it or stops connecting with it).
            self._pool._network_backend = WatchedBackend(self._pool._network_backend)  # type: ignore[assignment]

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            left = deadline_left()
            if left is not None:
                if left <= 0:
                    raise deadline_reached()
                timeouts = dict(request.extensions.get("timeout") or {})
                request.extensions["timeout"] = {
                    name: left if value is None else min(float(value), left) for name, value in timeouts.items()
                }
            watch = current_watch()
            response = super().handle_request(request)
            if left is not None or watch is not None:
                response.stream = DeadlineStream(response.stream, watch)
            return response

    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)  # the OpenAI client's
    return httpx.Client(transport=DeadlineTransport(limits=limits), follow_redirects=True)


_limiters: ProcessCache[tuple[str, float], Any] = ProcessCache("endpoint rate limiters", 64)


def rate_limiter(endpoint: str) -> Any:
    """The process's ``InMemoryRateLimiter`` of ``endpoint`` under ``LONGDOC_REQUESTS_PER_SECOND`` (None: no limit).

    One per endpoint, shared by every role and request that calls it.
    """
    rate = get_settings().requests_per_second
    if rate <= 0:
        return None
    from langchain_core.rate_limiters import InMemoryRateLimiter

    return _limiters.get_or_build(
        (endpoint.rstrip("/"), rate),
        lambda: InMemoryRateLimiter(requests_per_second=rate, check_every_n_seconds=min(0.1, 0.5 / rate)),
        exclusive=True,
    )


class EndpointGate:
    """Endpoints that just failed, closed for a cool-down so that no layer retries them again.

    The OpenAI client is the one layer that retries a request (``LONGDOC_MAX_RETRIES`` times,
    with back-off and ``Retry-After``). When an endpoint is still unreachable, stalled or failing
    (5xx, 429) after those retries, it is closed for ``LONGDOC_ENDPOINT_COOLDOWN`` seconds: every
    call to it in that time (a graph node's retry, another request of the server) fails at once
    with the same error instead of waiting out its timeouts again.
    """

    def __init__(self) -> None:
        self._closed: ProcessCache[str, tuple[float, str]] = ProcessCache("closed endpoints", 256)
        """Endpoint -> (when it opens again, on ``time.monotonic()``; its last error)."""

    def check(self, endpoint: str) -> None:
        """Raise the endpoint's last error while it is closed."""
        closed = self._closed.get(endpoint)
        if closed is not None:
            left = closed[0] - time.monotonic()
            if left > 0:
                raise ModelError(f"{closed[1]} (not retried for another {left:.0f} s)")

    def close(self, endpoint: str, message: str) -> None:
        """Mark the endpoint failing, with the message, for the cooldown (if any)."""
        cooldown = get_settings().cooldown
        if cooldown > 0:
            self._closed.put(endpoint, (time.monotonic() + cooldown, message))

    def open(self, endpoint: str) -> None:
        """Mark the endpoint working again."""
        self._closed.pop(endpoint)

    def reset(self) -> None:
        """Forget every failure (as :func:`stores.cache.reset_caches` does)."""
        self._closed.clear()


endpoint_gate = EndpointGate()
"""The process's gate (one for every role and request)."""


def is_openai(model: BaseChatModel) -> bool:
    """Whether the chat model is an OpenAI-compatible client."""
    from langchain_openai import ChatOpenAI

    return isinstance(model, ChatOpenAI)


def endpoint_of(model: Any) -> str:
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


def unavailable(exc: Exception) -> bool:
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


def model_error(exc: Exception, role: str, model: Any = None, reply: str = "chat completion") -> Exception:
    """The exception to raise for a model call's failure: ModelError as is, else a ModelError naming the role."""
    if isinstance(exc, ModelError):
        return exc
    import openai

    name = type(exc).__name__
    endpoint = endpoint_of(model) if model is not None else ""
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
        from langchain_openai import OpenAIEmbeddings
        from pydantic import SecretStr

        settings = get_settings()
        self.endpoint = base_url.rstrip("/")
        self.embedder_id = f"openai-{re.sub(r'[^a-z0-9]+', '-', model.lower())}"
        self.inner = OpenAIEmbeddings(
            base_url=base_url,
            api_key=SecretStr(api_key or "not-needed"),
            model=model,
            check_embedding_ctx_length=False,
            max_retries=settings.max_retries,
            timeout=request_timeout(settings.read_timeout_for(base_url), settings.connect_timeout),
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
            error = model_error(exc, "embedding", self.inner, reply="embeddings response")
            if unavailable(exc):
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
        """Embed each text as a document, through the endpoint's guard."""
        return self._run(texts, lambda: self.inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        """Embed the text as a query, through the endpoint's guard."""
        return self._run([text], lambda: [self.inner.embed_query(text)])[0]
