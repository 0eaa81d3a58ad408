"""Process-wide caches: bounded, thread-safe, and all forgotten by ``reset_caches``."""

from __future__ import annotations

import threading
import time

import pytest

from stores.cache import ProcessCache, lru_cache, reset_caches


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: ProcessCache[str, int] = ProcessCache("test lru", 2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now the most recently used
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3 and len(cache) == 2
    assert cache.pop("a") == 1 and cache.get("a") is None


def test_an_exclusive_build_runs_once_however_many_threads_ask() -> None:
    cache: ProcessCache[str, object] = ProcessCache("test exclusive", 4)
    builds: list[int] = []

    def build() -> object:
        builds.append(1)
        time.sleep(0.05)
        return object()

    got: list[object] = []
    threads = [
        threading.Thread(target=lambda: got.append(cache.get_or_build("k", build, exclusive=True))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len({id(v) for v in got}) == 1


def test_concurrent_builds_keep_the_first_value_stored() -> None:
    cache: ProcessCache[str, int] = ProcessCache("test shared", 4)
    start = threading.Barrier(4, timeout=10)
    values = iter(range(100))
    lock = threading.Lock()

    def build() -> int:
        start.wait()
        with lock:
            return next(values)

    got: list[int] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get_or_build("k", build))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and cache.get("k") == got[0]


def test_reset_forgets_every_cache_and_lru_cached_function() -> None:
    cache: ProcessCache[str, int] = ProcessCache("test reset", 4)
    calls: list[int] = []

    @lru_cache(maxsize=4)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    cache.put("a", 1)
    assert square(3) == 9 and square(3) == 9 and calls == [3]
    reset_caches()
    assert cache.get("a") is None
    assert square(3) == 9 and calls == [3, 3]


def test_a_cache_needs_room_for_one_entry() -> None:
    with pytest.raises(ValueError, match="maxsize must be at least 1"):
        ProcessCache("empty", 0)
