"""Command-line values shared by the benchmarks."""

from __future__ import annotations

from collections.abc import Iterable


def chosen(text: str, allowed: Iterable[str], what: str) -> list[str]:
    """The comma-separated names of ``text`` (blanks dropped); SystemExit naming ``what`` when one is not allowed."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    known = list(allowed)
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    return names
