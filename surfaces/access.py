"""Who may do what over HTTP: tenants from API keys, the served config fields, the ingest root, thread owners.

The LangServe app (:mod:`surfaces.serve`) applies these rules to every request:

- **Tenants.** ``LONGDOC_SERVER_KEYS`` (inline JSON, or the path of a JSON file) maps tenant names to
  keys: ``{"team1": "sha256:<hex digest of the key>", "team2": {"key_sha256": "<hex>", "namespaces":
  ["team2", "team2-archive"]}}`` (a plain key instead of a digest is accepted too). A tenant's
  namespaces default to ``[its name]``; ``"*"`` allows every namespace. ``LONGDOC_SERVER_API_KEY``
  adds one tenant, ``default``, allowed every namespace (a single-key server). Keys are compared as
  SHA-256 digests in constant time. With no key at all the server is open: one anonymous tenant.
- **Namespaces** come from the tenant: a request without one gets the tenant's first namespace,
  one outside the tenant's list is refused (403), in ``configurable`` and in the input alike.
- **Threads** are the tenant's own: the id a caller sends names a thread of its tenant only
  (:func:`thread_key`), so the answer is the same whether or not another tenant uses that id. A
  thread is bound to the namespace of the request that first used it; using it in another is
  refused (403).
- **Requests** are JSON (415 otherwise), nested at most ``LONGDOC_MAX_JSON_DEPTH`` deep, with
  standard numbers only (no ``NaN`` / ``Infinity``): :func:`check_request_json` (400).
- **Files.** Inputs that name a server file (``path``, ``registry_path``) are refused unless the
  operator sets ``LONGDOC_INGEST_ROOT``; then they are resolved inside that folder (symlinks
  followed, and refused when they lead out), and every refusal says the same thing.
- **Settings.** Callers may set only the fields of :data:`SERVED_FIELDS` in ``configurable``:
  models, endpoints, keys, embedders and caches stay the operator's.
- **Sessions.** A chat's session is the thread the server resolved; an input ``session`` is refused
  (:data:`SERVER_INPUTS`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import math
import os
import re
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from stores.cache import lru_cache
from stores.errors import Gone, InputError
from stores.extras import require_postgres
from stores.files import IngestRoot
from stores.settings import get_settings
from stores.vectorstore import check_namespace

COMMON_FIELDS = frozenset({"namespace", "chunk_size", "chunk_overlap"})
"""Context fields every workflow serves."""

SERVED_FIELDS: dict[str, frozenset[str]] = {
    "ingest": COMMON_FIELDS,
    "ask": COMMON_FIELDS
    | {
        "order",
        "root",
        "children",
        "roots",
        "max_chunks",
        "sharpen",
        "seed",
        "quotes",
        "evidence_tokens",
        "batch_tokens",
        "passage_tokens",
        "hop_budget",
        "worker_max_tokens",
        "manager_max_tokens",
        "budget",
        "floor",
        "early_stop",
        "confirm",
        "read_all",
        "tree_weight",
        "jump_penalty",
        "shortlist",
    },
    "summarize": COMMON_FIELDS
    | {
        "collapse_token_limit",
        "max_collapses",
        "map_max_tokens",
        "max_rounds",
        "min_rounds",
        "questions_per_round",
        "experts",
        "expert_routing",
        "expert_k",
        "expert_chunk_tokens",
        "expert_max_tokens",
        "rerank",
        "answer_cache",
        "factcheck",
        "factcheck_batch",
        "direct_tokens",
    },
    "chat": COMMON_FIELDS
    | {
        "policy",
        "keep_turns",
        "token_budget",
        "read_budget",
        "canvas_max_nodes",
        "canvas_input_tokens",
        "canvas_max_tokens",
        "history_hits",
        "history_min_score",
        "large_output_tokens",
        "recall_tokens",
        "conclusion_tokens",
        "max_facts",
        "answer_max_tokens",
        "offloader_max_tokens",
        "offload_backend",
        "doc_id",
    },
    "route": COMMON_FIELDS
    | {
        "registry",
        "k",
        "candidates_factor",
        "rrf_k",
        "profile",
        "agent_weight",
        "tool_weight",
        "retrieval",
        "aggregate",
        "bm25_weight",
        "index",
        "evidence_tools",
        "top_tools",
    },
}
"""Per workflow, the ``configurable`` keys a caller of the server may set (besides ``thread_id``).

An explicit allow-list: a context field added later is not served until it is listed here. Model
names, endpoints (``base_url``), temperatures, embedders and the LLM cache are never listed.
"""


@lru_cache(maxsize=1)
def operator_fields() -> frozenset[str]:
    """The shared ``Context`` fields no caller of a server sets.

    Model names, endpoints, temperatures, the embedder and the LLM cache (every field of
    :class:`graphs.context.Context` but :data:`COMMON_FIELDS`).
    """
    from nodes.context import Context

    return frozenset(f.name for f in fields(Context)) - COMMON_FIELDS


CALLER_BOUNDS: dict[str, tuple[float, float]] = {
    # every workflow
    "chunk_size": (50, 4000),
    "chunk_overlap": (0, 2000),
    # chain
    "budget": (0, 50_000),
    "batch_tokens": (20, 6000),
    "passage_tokens": (20, 2000),
    "hop_budget": (0, 50_000),
    "floor": (-10, 10),
    "confirm": (0, 10),
    "tree_weight": (0, 10),
    "jump_penalty": (0, 10),
    "roots": (1, 10),
    "max_chunks": (0, 5000),
    "sharpen": (0, 10),
    "seed": (0, 2**32 - 1),
    "quotes": (1, 50),
    "evidence_tokens": (50, 6000),
    "worker_max_tokens": (16, 2000),
    "manager_max_tokens": (16, 2000),
    # summarize
    "collapse_token_limit": (100, 6000),
    "max_collapses": (0, 10),
    "map_max_tokens": (16, 2000),
    "max_rounds": (1, 10),
    "min_rounds": (0, 10),
    "questions_per_round": (1, 8),
    "expert_k": (1, 20),
    "expert_chunk_tokens": (20, 2000),
    "expert_max_tokens": (16, 2000),
    "factcheck_batch": (1, 50),
    "direct_tokens": (0, 6000),
    # offload
    "keep_turns": (0, 50),
    "token_budget": (0, 7000),
    "read_budget": (0, 50_000),
    "canvas_max_nodes": (1, 15),
    "canvas_input_tokens": (100, 6000),
    "canvas_max_tokens": (100, 4000),
    "history_hits": (0, 20),
    "history_min_score": (-1, 1),
    "large_output_tokens": (20, 6000),
    "recall_tokens": (20, 4000),
    "conclusion_tokens": (10, 500),
    "max_facts": (0, 50),
    "answer_max_tokens": (20, 4000),
    "offloader_max_tokens": (20, 2000),
    # route
    "k": (1, 50),
    "candidates_factor": (1, 50),
    "rrf_k": (0, 1000),
    "agent_weight": (0, 100),
    "tool_weight": (0, 100),
    "bm25_weight": (0, 100),
    "evidence_tools": (0, 50),
    "top_tools": (0, 100),
}
"""The range each numeric setting a caller of a server may set must fall in (400 outside it): no knob asks an
endpoint for 10^9 tokens or a run for 60,000 results. The workflows' own checks (each field's ``min`` and ``max``,
the rules across fields) come on top (:func:`check_settings`)."""

MAX_EXPERTS = 12
"""Experts a summarize caller may name (each description at most :data:`MAX_EXPERT_CHARS` characters)."""

MAX_EXPERT_CHARS = 1000

MAX_THREAD_ID_CHARS = 100
"""Longest thread id a caller may name (letters, digits, ``_ . : -``: a thread is also a chat session's id)."""


def check_thread_id(thread_id: str) -> str:
    """``thread_id`` if a caller may name a thread with it, else InputError."""
    from stores.text import check_name

    return check_name(thread_id, "thread_id", max_chars=MAX_THREAD_ID_CHARS, marks="_.:-")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def check_caller_settings(values: Any, where: str = "configurable") -> None:
    """InputError when a setting in ``values`` falls outside :data:`CALLER_BOUNDS` (or names too many experts)."""
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        if key in CALLER_BOUNDS and value is not None:
            low, high = CALLER_BOUNDS[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise InputError(f"{where}.{key} must be a number from {_number(low)} to {_number(high)}")
    experts = values.get("experts")
    if experts is not None and (
        not isinstance(experts, dict)
        or len(experts) > MAX_EXPERTS
        or any(not isinstance(v, str) or len(v) > MAX_EXPERT_CHARS for v in experts.values())
    ):
        raise InputError(
            f"{where}.experts must map at most {MAX_EXPERTS} names to descriptions of at most {MAX_EXPERT_CHARS} "
            "characters"
        )


def check_settings(workflow: str, values: dict[str, Any], where: str = "configurable") -> None:
    """Every check a run's settings get, made at the server's door, before anything is ingested or checkpointed.

    :func:`check_caller_settings`, then the workflow's context built from ``values`` and checked as its nodes
    would check it (each field's bounds and choices, the workflow's own ``check_context``, the chunking).
    """
    import sys

    from nodes.context import validate
    from stores.chunking import effective_overlap
    from surfaces import registry

    check_caller_settings(values, where)
    schema = registry.context_schema(workflow)
    if schema is None:
        return
    ctx = schema.from_mapping({k: v for k, v in values.items() if k != TENANT_KEY})
    validate(ctx)
    own = getattr(sys.modules[schema.__module__], "check_context", None)
    if own is not None:
        own(ctx)
    effective_overlap(ctx.chunk_size, ctx.chunk_overlap)


FILE_INPUTS = ("path", "registry_path")
"""Input keys that name a file on the server."""

SERVER_INPUTS = ("session",)
"""Input keys only the server sets: a chat's ``session`` (whose offloaded items a turn reads and writes) is the
thread the server resolved for the caller, so a caller sending one is refused (400)."""


def refuse_server_inputs(value: Any) -> None:
    """InputError when input ``value`` sets a key of :data:`SERVER_INPUTS`."""
    if isinstance(value, dict):
        for key in SERVER_INPUTS:
            if key in value:
                raise InputError(
                    f"{key} is not taken from callers: a chat session is its thread "
                    "(send thread_id, or create a thread, to start or go on with one)"
                )


TENANT_KEY = "longdoc_tenant"
"""``configurable`` key under which the server records the request's tenant (never the caller's)."""

ANY_NAMESPACE = "*"


class AccessError(PermissionError):
    """The caller's tenant may not do this (a foreign namespace or thread): HTTP 403."""


_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|[-+]?[0-9.][0-9.eE+-]*|[A-Za-z]+')
"""A JSON string (skipped whole), a bracket, a number, or a bare word (``true``, ``NaN``...)."""

_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A JSON escape of a UTF-16 surrogate (``\\ud800`` to ``\\udfff``): text only when a high one precedes a low one."""

MAX_NUMBER_CHARS = 40
"""Longest number a request's JSON may write (Python refuses integers past 4,300 digits with a ValueError)."""


def check_request_json(raw: bytes, max_depth: int | None = None) -> None:
    r"""InputError when request body ``raw`` is not plain JSON text a parser reads safely.

    Refused: bytes that are not UTF-8, nesting deeper than ``max_depth``, ``NaN`` / ``Infinity`` or a
    number that overflows to one, a number longer than :data:`MAX_NUMBER_CHARS`, and a string holding a
    lone surrogate (``"\ud800"``, which no text can be written with). One pass over the bytes before any
    parser sees them: the standard library's parser has no depth limit (a RecursionError), reads ``NaN``
    as a number, fails on a 5,000-digit integer and takes lone surrogates, which fail only later where the
    text is written (each a 500).
    """
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"the request body is not UTF-8 text (an invalid byte at offset {exc.start})") from None
    limit = get_settings().max_json_depth if max_depth is None else max_depth
    depth = 0
    for match in _JSON_TOKEN.finditer(raw):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                raise InputError(f"the request's JSON nests deeper than {limit} levels (LONGDOC_MAX_JSON_DEPTH)")
        elif token in (b"]", b"}"):
            depth -= 1
        elif token[:1] == b'"':
            if _SURROGATE.search(token):
                _check_text(token)
        elif token[:1] in b"+-.0123456789":
            _check_number(token)
        elif token not in (b"true", b"false", b"null"):
            raise InputError(f"the request's JSON holds {token[:20].decode()!r}, which is not a JSON value")


def _check_text(token: bytes) -> None:
    try:
        json.loads(token).encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        raise InputError("the request's JSON holds a lone surrogate escape (\\ud800-\\udfff): not text") from None


def _check_number(token: bytes) -> None:
    if len(token) > MAX_NUMBER_CHARS:
        raise InputError(f"the request's JSON holds a number of {len(token)} characters; at most {MAX_NUMBER_CHARS}")
    try:
        value = float(token)
    except ValueError:
        raise InputError(f"the request's JSON holds {token[:20].decode()!r}, which is not a JSON number") from None
    if not math.isfinite(value):
        raise InputError(f"the request's JSON holds {token.decode()}, which is not a finite number")


def check_finite(values: Any, where: str = "configurable") -> None:
    """InputError when a number in ``values`` (a mapping, list or scalar) is NaN or infinite."""
    if isinstance(values, float) and not math.isfinite(values):
        raise InputError(f"{where} holds {values!r}, which is not a finite number")
    if isinstance(values, dict):
        for key, value in values.items():
            check_finite(value, f"{where}.{key}")
    elif isinstance(values, (list, tuple)):
        for value in values:
            check_finite(value, where)


def json_media_type(content_type: str) -> bool:
    """True for ``application/json`` and ``application/*+json`` (parameters such as ``charset`` allowed)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


async def read_body(receive: Callable[[], Awaitable[Any]], limit: int) -> bytes | None:
    """A request's whole body from ASGI ``receive``, or None as soon as it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None
        if not message.get("more_body"):
            break
    return b"".join(chunks)


class Refused(Exception):
    """A request refused with HTTP ``status``; the message is the caller's to read."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def max_request_bytes() -> int:
    """``LONGDOC_MAX_REQUEST_BYTES``: the largest request body either server reads."""
    return get_settings().max_request_bytes


async def read_json_body(
    headers: Any, receive: Callable[[], Awaitable[Any]], limit: int | None = None, *, untyped: bool = False
) -> bytes:
    """The body of a request that writes, read and checked before any parser sees it.

    :class:`Refused` with 415 when it is not sent as JSON, 413 when it is (or says it is) over ``limit``
    bytes (default: :func:`max_request_bytes`), 400 when :func:`check_request_json` finds it nested too deep or
    holding a non-JSON number.

    ``untyped``: a body sent without a type of its own (no ``Content-Type``, or ``text/plain``, which
    ``fetch`` gives any string it sends) is taken when it parses as JSON (an empty one too), and refused
    with 415 when it does not; a body of another type is refused all the same.
    """
    limit = max_request_bytes() if limit is None else limit
    declared_type = str(headers.get("content-type") or "")
    unlabelled = untyped and declared_type.split(";", 1)[0].strip().lower() in ("", "text/plain")
    if not json_media_type(declared_type) and not unlabelled:
        raise Refused(415, "send the request as JSON (Content-Type: application/json)")
    declared = str(headers.get("content-length") or "")
    if declared.isdigit() and int(declared) > limit:
        raise Refused(413, f"request body over {limit} bytes")
    raw = await read_body(receive, limit)
    if raw is None:
        raise Refused(413, f"request body over {limit} bytes")
    if unlabelled and raw.strip():
        try:
            json.loads(raw)
        except ValueError:
            raise Refused(415, "send the request as JSON (Content-Type: application/json)") from None
        except RecursionError:
            pass  # JSON nested too deep for the parser: check_request_json says so
    try:
        check_request_json(raw)
    except InputError as exc:
        raise Refused(400, str(exc)) from None
    return raw


def with_length(scope: Any, payload: bytes) -> Any:
    """ASGI ``scope`` with its ``Content-Length`` that of ``payload`` (a body rewritten before the app reads it)."""
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(len(payload)).encode())]}


def replay_body(body: bytes, receive: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
    """An ASGI ``receive`` that hands the app ``body`` (already read), then what comes after it."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def thread_key(tenant: str, thread_id: str) -> str:
    """The checkpoint thread that ``thread_id`` names for ``tenant``: its own, whoever else uses the id.

    Unchanged on a server without keys (one anonymous tenant); else prefixed with a digest of the
    tenant's name (letters, digits and ``:``, so it is a valid session id as well).
    """
    if not tenant:
        return thread_id
    return f"t{hashlib.sha256(tenant.encode('utf-8')).hexdigest()[:12]}:{thread_id}"


def served_fields(workflow: str) -> frozenset[str]:
    """The ``configurable`` keys callers may set on ``workflow`` or its former id (thread_id aside)."""
    from surfaces.registry import ALIASES

    return SERVED_FIELDS.get(ALIASES.get(workflow, workflow), COMMON_FIELDS)


@dataclass(frozen=True)
class Tenant:
    """One holder of a server key, and the namespaces it may use."""

    name: str
    namespaces: tuple[str, ...]

    def allows(self, namespace: str) -> bool:
        """Whether this tenant may use the namespace."""
        return ANY_NAMESPACE in self.namespaces or namespace in self.namespaces

    def namespace_for(self, requested: str) -> str:
        """The namespace a request runs in: the requested one if the tenant owns it, else its first."""
        if not requested:
            own = [n for n in self.namespaces if n != ANY_NAMESPACE]
            return own[0] if own else "default"
        if not self.allows(requested):
            raise AccessError(f"namespace {requested!r} is not open to this API key")
        return check_namespace(requested)


OPEN = Tenant("", (ANY_NAMESPACE,))
"""The tenant of every request on a server without keys."""


def key_digest(key: str) -> str:
    """Hex SHA-256 of an API key: what a keys file stores (``sha256:<digest>``)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class KeyRing:
    """Key digests and their tenants."""

    entries: tuple[tuple[bytes, Tenant], ...] = ()

    @property
    def open(self) -> bool:
        """True when no key is configured (every request is the anonymous tenant)."""
        return not self.entries

    def tenant_for(self, key: str) -> Tenant | None:
        """The tenant holding ``key`` (every digest compared, in constant time), or ``None``."""
        if self.open:
            return OPEN
        given = hashlib.sha256(key.encode("utf-8")).digest()
        found: Tenant | None = None
        for digest, tenant in self.entries:
            if hmac.compare_digest(digest, given) and found is None:
                found = tenant
        return found if key else None

    def tenant_of(self, headers: Any) -> Tenant | None:
        """The tenant of a request's headers: the holder of the key it presents (:func:`presented_key`)."""
        return self.tenant_for(presented_key(headers))


def _entry(name: str, value: Any) -> tuple[bytes, Tenant]:
    where = f"LONGDOC_SERVER_KEYS: tenant {name!r}"
    namespaces: list[str] = [name]
    if isinstance(value, dict):
        namespaces = list(value.get("namespaces") or [name])
        secret = f"sha256:{value['key_sha256']}" if value.get("key_sha256") else value.get("key")
    else:
        secret = value
    if not isinstance(secret, str) or not secret:
        raise ValueError(f"{where} needs a key (a string, or key / key_sha256)")
    if secret.startswith("sha256:"):
        hexdigest = secret[7:].strip().lower()
        if len(hexdigest) != 64 or any(c not in "0123456789abcdef" for c in hexdigest):
            raise ValueError(f"{where}: sha256 digest must be 64 hex digits")
        digest = bytes.fromhex(hexdigest)
    else:
        digest = hashlib.sha256(secret.encode("utf-8")).digest()
    for namespace in namespaces:
        if namespace != ANY_NAMESPACE:
            try:
                check_namespace(namespace)
            except InputError as exc:
                raise ValueError(f"{where}: {exc}") from exc
    return digest, Tenant(name, tuple(namespaces))


def load_keyring(environ: dict[str, str] | None = None) -> KeyRing:
    """Tenants and keys from ``LONGDOC_SERVER_KEYS`` and ``LONGDOC_SERVER_API_KEY`` (ValueError when malformed)."""
    env = os.environ if environ is None else environ
    entries: list[tuple[bytes, Tenant]] = []
    raw = env.get("LONGDOC_SERVER_KEYS", "").strip()
    if raw:
        try:
            text = raw if raw.startswith(("{", "[")) else Path(raw).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"LONGDOC_SERVER_KEYS: cannot read the keys file ({exc.strerror})") from exc
        try:
            table = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"LONGDOC_SERVER_KEYS is not valid JSON ({exc})") from exc
        if not isinstance(table, dict):
            raise ValueError("LONGDOC_SERVER_KEYS must be a JSON object: tenant -> key")
        entries.extend(_entry(str(name), value) for name, value in table.items())
    single = env.get("LONGDOC_SERVER_API_KEY", "").strip()
    if single:
        entries.append((hashlib.sha256(single.encode("utf-8")).digest(), Tenant("default", (ANY_NAMESPACE,))))
    digests = [d for d, _ in entries]
    if len(set(digests)) != len(digests):
        raise ValueError("LONGDOC_SERVER_KEYS: two tenants share one key")
    return KeyRing(tuple(entries))


def presented_key(headers: Any) -> str:
    """The key a request sends as ``X-API-Key`` or ``Authorization: Bearer``."""
    given = str(headers.get("x-api-key") or "")
    auth = str(headers.get("authorization") or "")
    if not given and auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    return given


class ThreadOwners:
    """Which tenant and namespace each served thread id belongs to.

    In PostgreSQL when ``LONGDOC_POSTGRES_URL`` is set (every server instance then sees the same
    owners), else in SQLite under ``LONGDOC_HOME``.
    """

    def __init__(self, path: Path | None = None, url: str | None = None) -> None:
        self.url = url or (None if path else get_settings().postgres_url)
        self.path = path or get_settings().home / "server_threads.sqlite"
        self._lock = threading.Lock()
        # The SQLite file keeps its first table name; the shared database names the table after the product.
        self.table = "longdoc_thread_owners" if self.url is not None else "threads"
        if self.url is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (thread_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
                "namespace TEXT NOT NULL)"
            )
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table}_gone (thread_id TEXT PRIMARY KEY, reason TEXT NOT NULL)"
            )

    @contextlib.contextmanager
    def _db(self) -> Any:
        if self.url is not None:
            require_postgres()
            from stores.postgres import connect

            with connect(self.url) as conn:
                yield conn
            return
        with self._lock, contextlib.closing(sqlite3.connect(self.path, timeout=30)) as db:
            yield db
            db.commit()

    def claim(self, thread_id: str, tenant: str, namespace: str) -> None:
        """Bind ``thread_id`` to the tenant and namespace on first use; AccessError when bound elsewhere.

        The LangServe app claims tenant-scoped ids (:func:`thread_key`), which no other tenant can name.
        """
        self.refuse_buried(thread_id)
        mark = "%s" if self.url is not None else "?"
        with self._db() as db:
            db.execute(
                f"INSERT INTO {self.table} VALUES ({mark}, {mark}, {mark}) ON CONFLICT DO NOTHING",
                (thread_id, tenant, namespace),
            )
            row = db.execute(
                f"SELECT tenant, namespace FROM {self.table} WHERE thread_id = {mark}", (thread_id,)
            ).fetchone()
        if tuple(row) != (tenant, namespace):
            raise AccessError(f"thread {thread_id!r} belongs to another API key or namespace")

    def owner(self, thread_id: str) -> tuple[str, str] | None:
        """``(tenant, namespace)`` of ``thread_id``, or None when it has no owner record."""
        mark = "%s" if self.url is not None else "?"
        with self._db() as db:
            row = db.execute(
                f"SELECT tenant, namespace FROM {self.table} WHERE thread_id = {mark}", (thread_id,)
            ).fetchone()
        return (str(row[0]), str(row[1])) if row else None

    def named(self, thread_id: str) -> list[str]:
        """The served threads a caller knows as ``thread_id``: the ids :func:`thread_key` stored it under."""
        mark = "%s" if self.url is not None else "?"
        with self._db() as db:
            rows = db.execute(
                f"SELECT thread_id FROM {self.table} WHERE substr(thread_id, 15) = {mark}", (thread_id,)
            ).fetchall()
        return [str(r[0]) for r in rows if re.fullmatch(r"t[0-9a-f]{12}:", str(r[0])[:14])]

    def forget(self, thread_id: str) -> None:
        """Drop the owner record of ``thread_id`` (the thread is being deleted), and the record of why it went."""
        mark = "%s" if self.url is not None else "?"
        with self._db() as db:
            db.execute(f"DELETE FROM {self.table} WHERE thread_id = {mark}", (thread_id,))
            db.execute(f"DELETE FROM {self.table}_gone WHERE thread_id = {mark}", (thread_id,))

    def bury(self, thread_id: str, reason: str) -> None:
        """Record why ``thread_id`` was deleted by someone else: its next claim is :class:`Gone` (410) saying so."""
        mark = "%s" if self.url is not None else "?"
        with self._db() as db:
            db.execute(
                f"INSERT INTO {self.table}_gone VALUES ({mark}, {mark}) ON CONFLICT (thread_id) DO UPDATE "
                "SET reason = excluded.reason",
                (thread_id, reason),
            )

    def buried(self, thread_id: str) -> str | None:
        """Why ``thread_id`` was deleted by someone else (None: it was not, or its owner forgot it since)."""
        mark = "%s" if self.url is not None else "?"
        with self._db() as db:
            row = db.execute(f"SELECT reason FROM {self.table}_gone WHERE thread_id = {mark}", (thread_id,)).fetchone()
        return None if row is None else str(row[0])

    def refuse_buried(self, thread_id: str) -> None:
        """:class:`Gone` (410) saying why, when ``thread_id`` was deleted by someone else."""
        reason = self.buried(thread_id)
        if reason is not None:
            raise Gone(
                f"thread {thread_id[-80:].split(':', 1)[-1]!r} was deleted: {reason}; forget it "
                "(POST /forget with its thread_id) to use its id again"
            )

    def in_namespace(self, namespace: str) -> list[str]:
        """Ids of the threads bound to ``namespace``."""
        mark = "%s" if self.url is not None else "?"
        with self._db() as db:
            rows = db.execute(f"SELECT thread_id FROM {self.table} WHERE namespace = {mark}", (namespace,)).fetchall()
        return [str(row[0]) for row in rows]


@dataclass
class Access:
    """The rules one server applies: its key ring, ingest root and thread owners."""

    keys: KeyRing
    files: IngestRoot
    threads: ThreadOwners

    @classmethod
    def from_env(cls) -> Access:
        """The access rules from the keyring, the ingest root and the thread owners."""
        return cls(load_keyring(), IngestRoot.from_env(), ThreadOwners())

    def tenant(self, name: str) -> Tenant:
        """The tenant called ``name`` (the anonymous one on an open server)."""
        if self.keys.open:
            return OPEN
        for _, tenant in self.keys.entries:
            if tenant.name == name:
                return tenant
        raise AccessError("unknown tenant")

    def check_input(self, value: Any, tenant: Tenant) -> Any:
        """``value`` with file names resolved inside the ingest root; refuses foreign namespaces."""
        if not isinstance(value, dict):
            return value
        refuse_server_inputs(value)
        out = dict(value)
        if out.get("namespace"):
            tenant.namespace_for(str(out["namespace"]))
        for key in FILE_INPUTS:
            if out.get(key):
                out[key] = self.files.resolve(str(out[key]))
        return out

    def check_inputs(self, values: Iterable[Any], tenant: Tenant) -> None:
        """Refuse early (before a stream starts) what :meth:`check_input` would refuse."""
        for value in values:
            self.check_input(value, tenant)
