"""Test fixtures: every test gets a fresh LONGDOC_HOME, the hash embedder and no network."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stores.cache import reset_caches


@pytest.fixture(autouse=True)
def longdoc_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point every run at a fresh data directory and the deterministic hash embedder."""
    home = tmp_path / "home"
    monkeypatch.setenv("LONGDOC_HOME", str(home))
    monkeypatch.setenv("LONGDOC_EMBEDDER", "hash")
    for name in ("LONGDOC_BASE_URL", "LONGDOC_MODEL", "LONGDOC_API_KEY", "LONGDOC_CHROMA_URL", "LONGDOC_POSTGRES_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    reset_caches()
    yield home
    reset_caches()


@pytest.fixture
def sample_markdown(tmp_path: Path) -> Path:
    """A small markdown document with sections."""
    path = tmp_path / "sample.md"
    path.write_text(
        "# Project Falcon\n\n"
        "Project Falcon builds a solar-powered water pump for farms in dry regions.\n\n"
        "## Budget\n\n"
        "The committee approved a budget of 40,000 euros in March. Most of it pays for panels.\n\n"
        "## Team\n\n"
        "Alice Moreau leads the engineering team. Bob Chen manages procurement.\n\n"
        "## Schedule\n\n"
        "Field trials start in June in Kenya and end in September.\n",
        encoding="utf-8",
    )
    return path
