"""Process-wide caches: bounded, thread-safe, and all forgotten by ``reset_caches``."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

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


def test_values_the_cache_drops_are_closed_and_a_popped_one_is_handed_back() -> None:
    closed: list[str] = []
    cache: ProcessCache[str, str] = ProcessCache("test close", 2, close=closed.append)
    cache.put("a", "server a")
    cache.put("b", "server b")
    cache.put("c", "server c")  # evicts a
    assert closed == ["server a"]
    assert cache.pop("b") == "server b" and closed == ["server a"]
    reset_caches()
    assert closed == ["server a", "server c"] and len(cache) == 0


def test_a_cache_needs_room_for_one_entry() -> None:
    with pytest.raises(ValueError, match="maxsize must be at least 1"):
        ProcessCache("empty", 0)


# --- no cache outside the registry ----------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("graphs", "nodes", "surfaces", "prompts", "stores", "deploy", "doubles", "bench")
REGISTRY = ROOT / "stores" / "cache.py"
MUTATORS = frozenset(
    {"append", "appendleft", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "clear", "remove"}
    | {"discard", "move_to_end", "__setitem__"}
)
"""Methods that change a container in place."""


CONTAINERS = frozenset({"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter"})


def _is_container(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    return isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in CONTAINERS


def _changed_in_place(node: ast.AST) -> ast.expr | None:
    """The object ``node`` changes in place (item or attribute set or deleted, a mutating method called), if any."""
    if isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        return node.func.value
    return None


def _instance_containers(cls: ast.ClassDef) -> list[str]:
    """Attributes of ``cls`` that hold a container its methods change in place (``self._seen[k] = v``)."""
    held = {
        target.attr
        for node in ast.walk(cls)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _is_container(node.value)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self"
    }
    changed = {
        changed.attr
        for node in ast.walk(cls)
        if isinstance(changed := _changed_in_place(node), ast.Attribute) and ast.unparse(changed.value) == "self"
    }
    return sorted(held & changed)


def _bound_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = function.args
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
    stores = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return {a.arg for a in params} | stores


def unregistered_caches(source: str) -> list[str]:
    """Where ``source`` keeps state across calls outside :mod:`stores.cache`: ``functools.cache`` or
    ``lru_cache``, a ``global`` rebound, a module-level object changed in place by a function, a module-level
    instance of a class of the module whose methods change a container it holds."""
    tree = ast.parse(source)
    found = _caches_and_globals(tree)
    module_names = _module_names(tree, found)
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        local = _bound_names(function)
        for node in ast.walk(function):
            changed = _changed_in_place(node)
            if isinstance(changed, ast.Name) and changed.id in module_names and changed.id not in local:
                found.append(f"{node.lineno}: module-level {changed.id} changed in {function.name}()")
    return found


def _caches_and_globals(tree: ast.Module) -> list[str]:
    """Where ``tree`` imports or names ``functools.cache`` or ``lru_cache``, and where it declares a ``global``."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "functools":
            found += [f"{node.lineno}: functools.{a.name}" for a in node.names if a.name in ("cache", "lru_cache")]
        elif isinstance(node, ast.Attribute) and ast.unparse(node) in ("functools.cache", "functools.lru_cache"):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Global):
            found.append(f"{node.lineno}: global {', '.join(node.names)}")
    return found


def _module_names(tree: ast.Module, found: list[str]) -> set[str]:
    """The names ``tree`` assigns at module level outside a ProcessCache; adds its stateful instances to ``found``."""
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    module_names: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
            value = statement.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "ProcessCache":
                continue  # registered
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            module_names |= {t.id for t in targets if isinstance(t, ast.Name)}
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes:
                found += [
                    f"{statement.lineno}: module-level {value.func.id}() holds {attribute}, changed in place"
                    for attribute in _instance_containers(classes[value.func.id])
                ]
    return module_names


def test_every_process_wide_cache_is_behind_the_registry() -> None:
    found = {
        str(path.relative_to(ROOT)): hits
        for package in SCANNED
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != REGISTRY and (hits := unregistered_caches(path.read_text(encoding="utf-8")))
    }
    assert not found, f"state kept across calls outside stores.cache (use ProcessCache or its lru_cache): {found}"


@pytest.mark.parametrize(
    "source",
    [
        "import functools\n@functools.cache\ndef f(): ...\n",
        "from functools import lru_cache\n@lru_cache(maxsize=2)\ndef f(x): ...\n",
        "_client = None\ndef f():\n    global _client\n    _client = object()\n",
        "_seen = {}\ndef f(k, v):\n    _seen[k] = v\n",
        "_seen: list[int] = []\ndef f(v):\n    _seen.append(v)\n",
        "import types\n_state = types.SimpleNamespace()\ndef f(v):\n    _state.last = v\n",
        "class Gate:\n    def __init__(self):\n        self._closed = {}\n"
        "    def close(self, k):\n        self._closed[k] = 1\ngate = Gate()\n",
    ],
)
def test_the_scan_finds_each_kind_of_hidden_cache(source: str) -> None:
    assert unregistered_caches(source)


def test_the_scan_leaves_registered_caches_constants_and_locals_alone() -> None:
    source = (
        "from stores.cache import ProcessCache, lru_cache\n"
        "_c: ProcessCache[str, int] = ProcessCache('c', 4)\n"
        "NAMES = {'a': 1}\n"
        "class Route:\n    def __init__(self):\n        self.manager = None\n        self.seen = {}\n"
        "    def run(self, m):\n        self.manager = m\nroute = Route()\n"
        "@lru_cache(maxsize=1)\n"
        "def f(NAMES):\n    _c.pop('k')\n    NAMES['b'] = 2\n    local = {}\n    local['x'] = NAMES\n    return local\n"
    )
    assert unregistered_caches(source) == []
