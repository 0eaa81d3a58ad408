"""Benchmark journals: one JSON line per finished run, keyed by item, method and setup.

A benchmark appends each run as soon as it finishes and, on start, reads back the runs whose key it
would write, so a killed run resumes where it stopped and runs accumulate across sittings. The setup
part of a key is a short digest of what the runs depend on besides the item (prompts, settings,
code), so a changed setup is run afresh instead of being read back. :func:`write_report` writes a finished
benchmark's result file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any


def digest(parts: Iterable[bytes | str]) -> str:
    """Short hash (8 hex digits) of ``parts`` in order: file contents, JSON of settings."""
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part.encode() if isinstance(part, str) else part)
    return sha.hexdigest()[:8]


def append(path: Path, row: dict[str, Any]) -> None:
    """Add one finished run to the journal (on a line of its own, even after a line cut off by a kill)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cut = False
    if path.exists() and path.stat().st_size:
        with path.open("rb") as fh:
            fh.seek(-1, 2)
            cut = fh.read(1) != b"\n"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(("\n" if cut else "") + json.dumps(row, ensure_ascii=False) + "\n")


def read(path: Path, upgrade: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Journal rows by key (later rows win); ``upgrade`` rewrites rows written under an older key format.

    A last line cut off by a kill is skipped.
    """
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if upgrade is not None:
            row = upgrade(row)
        out[row["key"]] = row
    return out


def recorded(
    path: Path, done: dict[str, dict[str, Any]], key: str, run: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The row of ``key`` in ``done`` (a journal :func:`read` back), else the one ``run`` makes, journalled at once."""
    row = done.get(key)
    if row is None:
        row = {"key": key, **run()}
        append(path, row)
        done[key] = row
    return row


def paired(rows: Sequence[dict[str, Any]], methods: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of the items every one of ``methods`` has a result for (so figures compare like with like)."""
    by_item: dict[str, set[str]] = {}
    for r in rows:
        by_item.setdefault(r["item"], set()).add(r["method"])
    keep = {item for item, done in by_item.items() if set(methods) <= done}
    return [r for r in rows if r["item"] in keep and r["method"] in methods]


def write_report(out: Path, result: dict[str, Any]) -> None:
    """Write ``result`` as indented JSON to ``out`` (creating its folder) and print it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
