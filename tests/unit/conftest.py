"""Fixtures of the unit tests beyond the suite's own (``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture
def served() -> Iterator[Callable[[str], Any]]:
    """A served workflow by name, compiled with the SQLite checkpointer under ``LONGDOC_HOME``."""
    from stores.checkpoint import open_checkpointer
    from surfaces import registry
    from surfaces.serve import ServedGraph

    with open_checkpointer() as saver:
        yield lambda name: ServedGraph(bound=registry.compile_with(name, saver), name=name)
