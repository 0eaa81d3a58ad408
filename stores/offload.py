"""The offload store: raw turns and large step outputs moved out of a prompt, addressable by id.

An offloaded item belongs to one session (a conversation thread) over one document. The model
sees it by a short id (``o3`` for turn 3's exchange, ``o3a`` for a large output of that turn) and
can ask for it back; the session's state keeps only the ids and one-line summaries.

Backends share the small :class:`OffloadStore` interface (put / get / list / search / delete):

* ``chroma`` (default): ``kind="offload"`` records in the shared Chroma store of the namespace,
  with ``doc_id`` = the document and ``session``, ``turn``, ``offload_id``, ``role`` and
  ``summary`` in the metadata. They survive restarts and are visible to every worker of a Chroma
  server, like the rest of the store.
* ``memory``: a per-process dictionary with lexical search, for tests and short-lived scripts.
"""

from __future__ import annotations

import builtins
import re
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from stores.cache import ProcessCache
from stores.errors import InputError
from stores.text import check_name, count_tokens, lexical_tokens, overlap
from stores.vectorstore import Record, VectorStore, check_namespace, get_store

BACKENDS = ("chroma", "memory")
ROLES = ("exchange", "output")
_ITEM_ID = re.compile(r"^o\d{1,6}[a-z]?$")
SUMMARY_CHARS = 400


def check_session(session: str) -> str:
    """Return ``session`` if it is a usable session id (1-128 letters, digits, ``_ . : -``) or raise."""
    return check_name(session, "session id", max_chars=128, marks="_.:-")


def is_offload_id(text: str) -> bool:
    """True for a well-formed offload id such as ``o3`` or ``o3a``."""
    return bool(_ITEM_ID.match(text))


@dataclass
class OffloadItem:
    """One offloaded text."""

    id: str
    """Short id the model sees: ``o<turn>`` for an exchange, ``o<turn><letter>`` for a large output."""
    session: str
    """Session (thread) the item belongs to."""
    doc_id: str
    """Document the session is about."""
    turn: int
    """Turn that produced the item."""
    role: str
    """``exchange`` (a finished question and answer) or ``output`` (a large step output)."""
    text: str
    """The raw text."""
    summary: str = ""
    """One-line conclusion or description shown in place of the text."""

    @property
    def tokens(self) -> int:
        """Estimated tokens of the raw text."""
        return count_tokens(self.text)

    def check(self) -> OffloadItem:
        """Validate the fields (raises :class:`InputError`)."""
        check_session(self.session)
        if not is_offload_id(self.id):
            raise InputError(f"invalid offload id {self.id!r}: use o<turn> or o<turn><letter>")
        if self.role not in ROLES:
            raise InputError(f"unknown offload role {self.role!r}; one of {', '.join(ROLES)}")
        if not self.doc_id:
            raise InputError("an offloaded item needs the id of its document")
        return self

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready fields, with the token count."""
        return {**asdict(self), "tokens": self.tokens}


class OffloadStore(Protocol):
    """Where offloaded texts live, by session."""

    def put(self, item: OffloadItem) -> str:
        """Store (or replace) ``item``; returns its id."""
        ...

    def get(self, session: str, ids: Sequence[str]) -> builtins.list[OffloadItem]:
        """The items of ``session`` with these ids, in the order asked (unknown ids are skipped)."""
        ...

    def list(self, session: str) -> builtins.list[OffloadItem]:
        """Every item of ``session``, by turn then id."""
        ...

    def search(
        self, session: str, query: str, *, k: int = 3, min_score: float | None = None
    ) -> builtins.list[tuple[OffloadItem, float]]:
        """Items of ``session`` most relevant to ``query``, best first, with their scores."""
        ...

    def delete(self, session: str) -> int:
        """Forget every item of ``session``; returns how many there were."""
        ...


def _order(items: list[OffloadItem]) -> list[OffloadItem]:
    return sorted(items, key=lambda i: (i.turn, len(i.id), i.id))


class ChromaOffloadStore:
    """Offloaded items as ``kind="offload"`` records of the shared Chroma store."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store

    @staticmethod
    def record_id(session: str, item_id: str) -> str:
        """The store's record id of a session's item."""
        return f"offload:{session}:{item_id}"

    def put(self, item: OffloadItem) -> str:
        """Store the item; return its id."""
        item.check()
        record = Record(
            id=self.record_id(item.session, item.id),
            text=item.text,
            kind="offload",
            doc_id=item.doc_id,
            position=item.turn,
            extra={
                "session": item.session,
                "turn": item.turn,
                "offload_id": item.id,
                "role": item.role,
                "summary": item.summary[:SUMMARY_CHARS],
            },
        )
        self.store.add([record])
        return item.id

    @staticmethod
    def _as_int(value: object) -> int:
        """A metadata value read as an integer (0 when it is not a number)."""
        return int(value) if isinstance(value, (int, float, str)) else 0

    @staticmethod
    def _item(text: str, meta: dict[str, object]) -> OffloadItem:
        return OffloadItem(
            id=str(meta.get("offload_id", "")),
            session=str(meta.get("session", "")),
            doc_id=str(meta.get("doc_id", "")),
            turn=ChromaOffloadStore._as_int(meta.get("turn", 0)),
            role=str(meta.get("role", "exchange")),
            text=text,
            summary=str(meta.get("summary", "")),
        )

    def get(self, session: str, ids: Sequence[str]) -> builtins.list[OffloadItem]:
        """The session's items with these ids, skipping unknown ones."""
        check_session(session)
        wanted = [i for i in ids if is_offload_id(i)]
        hits = self.store.get([self.record_id(session, i) for i in wanted])
        return [
            self._item(h.text, h.metadata)
            for h in hits
            if h.metadata.get("kind") == "offload" and h.metadata.get("session") == session
        ]

    def list(self, session: str) -> builtins.list[OffloadItem]:
        """Every item of the session, in order."""
        check_session(session)
        res = self.store.collection.get(
            where={"$and": [{"kind": "offload"}, {"session": session}]}, include=["documents", "metadatas"]
        )
        items = [
            self._item(text or "", dict(meta or {}))
            for text, meta in zip(res["documents"], res["metadatas"], strict=True)
        ]
        return _order(items)

    def search(
        self, session: str, query: str, *, k: int = 3, min_score: float | None = None
    ) -> builtins.list[tuple[OffloadItem, float]]:
        """The session's items nearest the query, with their scores."""
        check_session(session)
        hits = self.store.search(query, k=k, kind="offload", where={"session": session}, min_score=min_score)
        return [(self._item(h.text, h.metadata), h.score) for h in hits]

    def delete(self, session: str) -> int:
        """Delete every item of the session; return how many there were."""
        check_session(session)
        items = self.list(session)
        if items:
            self.store.delete(ids=[self.record_id(session, i.id) for i in items])
        return len(items)


class MemoryOffloadStore:
    """Offloaded items in a dictionary (per process); search ranks by shared words."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], OffloadItem] = {}
        self._lock = threading.Lock()

    def put(self, item: OffloadItem) -> str:
        """Store the item; return its id."""
        item.check()
        with self._lock:
            self._items[(item.session, item.id)] = item
        return item.id

    def get(self, session: str, ids: Sequence[str]) -> builtins.list[OffloadItem]:
        """The session's items with these ids, skipping unknown ones."""
        check_session(session)
        with self._lock:
            return [self._items[(session, i)] for i in ids if (session, i) in self._items]

    def list(self, session: str) -> builtins.list[OffloadItem]:
        """Every item of the session, in order."""
        check_session(session)
        with self._lock:
            return _order([item for (s, _), item in self._items.items() if s == session])

    def search(
        self, session: str, query: str, *, k: int = 3, min_score: float | None = None
    ) -> builtins.list[tuple[OffloadItem, float]]:
        """The session's items sharing words with the query, with their scores."""
        terms = set(lexical_tokens(query))
        scored = []
        for item in self.list(session):
            score = overlap(terms, set(lexical_tokens(f"{item.summary} {item.text}")))
            if score > 0 and (min_score is None or score >= min_score):
                scored.append((item, score))
        scored.sort(key=lambda pair: (-pair[1], pair[0].turn, pair[0].id))
        return scored[:k]

    def delete(self, session: str) -> int:
        """Delete every item of the session; return how many there were."""
        check_session(session)
        with self._lock:
            keys = [key for key in self._items if key[0] == session]
            for key in keys:
                del self._items[key]
        return len(keys)


_memory: ProcessCache[str, MemoryOffloadStore] = ProcessCache("memory offload stores", 256)
"""In-memory offload stores by namespace (tests and benchmarks; the least recently used beyond 256 are lost)."""


def get_offload_store(namespace: str = "default", embedder: str | None = None, backend: str = "chroma") -> OffloadStore:
    """The offload store of ``namespace``: ``chroma`` (shared, persistent) or ``memory`` (this process)."""
    check_namespace(namespace)
    if backend == "chroma":
        return ChromaOffloadStore(get_store(namespace, embedder))
    if backend == "memory":
        return _memory.get_or_build(namespace, MemoryOffloadStore, exclusive=True)
    raise InputError(f"unknown offload backend {backend!r}; one of {', '.join(BACKENDS)}")


def reset_memory_stores() -> None:
    """Forget every in-memory offload store (tests)."""
    _memory.clear()
