"""Process-wide caches: bounded, thread-safe, and all forgotten by one call, :func:`reset_caches`.

A pure function of hashable arguments is cached with :func:`lru_cache` (``functools.lru_cache``,
registered here so the reset reaches it). Everything else uses :class:`ProcessCache`: values kept under
a key the caller computes (a document's BM25 index under its collection and chunk count, a client under
its location), built outside the lock or under it, and put or dropped by key; hand-made because
``functools.lru_cache`` keys on a call's arguments and has no per-key get, put or build-once lock.

A cache may close what it drops (the bundled model server is stopped when forgotten). Tests call
:func:`reset_caches` around every test (``tests/conftest.py``), as code that changes the settings a cache was
built under does; ``tests/unit/test_cache.py`` finds state kept across calls anywhere else.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, cast

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])

_registered: list[Callable[[], None]] = []
"""The ``clear`` of every process-wide cache, in the order they were made."""
_registered_lock = threading.Lock()


def _register(clear: Callable[[], None]) -> None:
    with _registered_lock:
        _registered.append(clear)


class ProcessCache(Generic[K, V]):
    """A least-recently-used map of at most ``maxsize`` entries, shared by the threads of the process."""

    def __init__(self, name: str, maxsize: int, *, close: Callable[[V], None] | None = None) -> None:
        """``close``: called on each value the cache drops (evicted or cleared), e.g. to stop a server it held."""
        if maxsize < 1:
            raise ValueError(f"cache {name!r}: maxsize must be at least 1, got {maxsize}")
        self.name = name
        self.maxsize = maxsize
        self._close = close
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.RLock()
        _register(self.clear)

    def _closed(self, dropped: list[V]) -> None:
        if self._close is not None:
            for value in dropped:
                self._close(value)

    def get(self, key: K) -> V | None:
        """The value kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key``, dropping the least recently used entries beyond ``maxsize``."""
        dropped = []
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                dropped.append(self._items.popitem(last=False)[1])
        self._closed(dropped)
        return value

    def get_or_build(self, key: K, build: Callable[[], V], *, exclusive: bool = False) -> V:
        """The value under ``key``, built by ``build()`` when missing.

        ``exclusive``: build under the cache's lock, so a value is built once however many threads ask
        (for values that must not exist twice, e.g. a database client); otherwise threads may build at the
        same time and the first value stored wins (for slow builds that must not hold up other keys).
        """
        if exclusive:
            with self._lock:
                found = self.get(key)
                return found if found is not None else self.put(key, build())
        found = self.get(key)
        if found is not None:
            return found
        value = build()
        with self._lock:
            found = self.get(key)
            return found if found is not None else self.put(key, value)

    def pop(self, key: K) -> V | None:
        """Forget ``key``; its value (handed back, not closed), or None."""
        with self._lock:
            return self._items.pop(key, None)

    def items(self) -> list[tuple[K, V]]:
        """The entries now, least recently used first (a copy: the cache may change meanwhile)."""
        with self._lock:
            return list(self._items.items())

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            dropped = list(self._items.values())
            self._items.clear()
        self._closed(dropped)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items


def lru_cache(maxsize: int) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)``, its ``cache_clear`` registered with :func:`reset_caches`."""

    def decorate(function: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _register(cached.cache_clear)
        return cast(F, cached)  # lru_cache keeps the signature, which its wrapper type does not say

    return decorate


def reset_caches() -> None:
    """Forget every process-wide cache (tests; settings such as ``LONGDOC_HOME`` changed)."""
    with _registered_lock:
        clears = list(_registered)
    for clear in clears:
        clear()
