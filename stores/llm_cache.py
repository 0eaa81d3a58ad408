"""The LLM response cache: a LangChain ``BaseCache`` in SQLite under ``LONGDOC_HOME``, read and written per request."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.messages import AIMessage, message_to_dict, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation

from stores.cache import ProcessCache
from stores.settings import get_settings
from stores.usage import Usage


class SQLiteReplyCache(BaseCache):
    """Replies keyed by ``(prompt, llm_string)`` in one SQLite table, each generation's message and info as JSON.

    Hand-made because the ``SQLiteCache`` of langchain-community, the package being sunset (it warns on import),
    is the only one LangChain ships; ``langchain_core`` has the interface and the serializer, not a store.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS replies (prompt TEXT NOT NULL, llm TEXT NOT NULL, generations TEXT NOT NULL,"
            " PRIMARY KEY (prompt, llm))"
        )

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        """The generations kept for ``prompt`` and ``llm_string``, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT generations FROM replies WHERE prompt = ? AND llm = ?", (prompt, llm_string)
            ).fetchone()
        if row is None:
            return None
        kept: list[Generation] = []
        for item in json.loads(row[0]):
            if "message" in item:
                message = messages_from_dict([item["message"]])[0]
                kept.append(ChatGeneration(message=message, generation_info=item.get("info")))
            else:
                kept.append(Generation(text=item["text"], generation_info=item.get("info")))
        return kept or None

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        """Keep ``return_val`` for ``prompt`` and ``llm_string`` (replacing what was kept)."""
        text = json.dumps(
            [
                {"message": message_to_dict(g.message), "info": g.generation_info}
                if isinstance(g, ChatGeneration)
                else {"text": g.text, "info": g.generation_info}
                for g in return_val
            ],
            ensure_ascii=False,
        )
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO replies (prompt, llm, generations) VALUES (?, ?, ?)", (prompt, llm_string, text)
            )

    def clear(self, **kwargs: Any) -> None:
        """Forget every kept reply."""
        with self._lock:
            self._db.execute("DELETE FROM replies")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()


def _close(cache: BaseCache) -> None:
    if isinstance(cache, SQLiteReplyCache):
        cache.close()


_caches: ProcessCache[Path, BaseCache] = ProcessCache("LLM response caches", 8, close=_close)


def response_cache() -> BaseCache:
    """The :class:`SQLiteReplyCache` of the current ``LONGDOC_HOME`` (``llm_cache.sqlite``).

    :class:`stores.models.LLM` calls its ``lookup``/``update`` (through :func:`cached_reply` and
    :func:`remember`) rather than setting it as the chat model's ``cache``: the model's own cache
    would keep replies cut at ``max_tokens`` and knows nothing of the parsed structured output,
    and a global ``set_llm_cache`` would hold for every role and test.
    """
    path = get_settings().home / "llm_cache.sqlite"

    def build() -> BaseCache:
        path.parent.mkdir(parents=True, exist_ok=True)
        return SQLiteReplyCache(path)

    return _caches.get_or_build(path, build, exclusive=True)


def cached_reply(key: tuple[str, str], role: str) -> tuple[str, Any, Usage] | None:
    """The kept reply of ``key`` (``(prompt, llm_string)``): its text, parsed object and original counts."""
    hit = response_cache().lookup(*key)
    kept = hit[0] if hit and isinstance(hit[0], ChatGeneration) else None
    if kept is not None and isinstance(kept.message, AIMessage) and kept.message.usage_metadata:
        counts = kept.message.usage_metadata
        spent = {"input": counts["input_tokens"], "output": counts["output_tokens"], "calls": 1, "cached": 1}
        return kept.text, (kept.generation_info or {}).get("parsed"), {role: spent}
    return None


def remember(key: tuple[str, str], role: str, text: str, parsed: Any, used: Usage) -> None:
    """Keep a complete, accepted reply in the response cache with its token counts."""
    n_in, n_out = used[role]["input"], used[role]["output"]
    reply = AIMessage(
        content=text, usage_metadata={"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
    )
    response_cache().update(*key, [ChatGeneration(message=reply, generation_info={"parsed": parsed})])
