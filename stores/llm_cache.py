"""The LLM response cache: LangChain's ``SQLiteCache`` under ``LONGDOC_HOME``, read and written for each request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.caches import BaseCache
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration

from stores.cache import ProcessCache
from stores.settings import get_settings
from stores.usage import Usage

_caches: ProcessCache[Path, BaseCache] = ProcessCache("LLM response caches", 8)


def response_cache() -> BaseCache:
    """LangChain's ``SQLiteCache`` of the current ``LONGDOC_HOME`` (``llm_cache.sqlite``).

    :class:`stores.models.LLM` calls its ``lookup``/``update`` (through :func:`cached_reply` and
    :func:`remember`) rather than setting it as the chat model's ``cache``: the model's own cache
    would keep replies cut at ``max_tokens`` and knows nothing of the parsed structured output,
    and a global ``set_llm_cache`` would hold for every role and test.
    """
    path = get_settings().home / "llm_cache.sqlite"

    def build() -> BaseCache:
        from langchain_community.cache import SQLiteCache

        path.parent.mkdir(parents=True, exist_ok=True)
        return SQLiteCache(database_path=str(path))

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
