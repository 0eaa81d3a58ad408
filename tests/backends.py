"""The two store backends every store test runs on: the local directory and a Chroma server (``chroma run``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.cluster import chroma_binary, chroma_server
from stores.vectorstore import get_client, reset_stores


@pytest.fixture(scope="module")
def chroma_url() -> Iterator[str]:
    if chroma_binary() is None:
        pytest.skip("the chroma command is not installed (make install)")
    with tempfile.TemporaryDirectory(prefix="longdoc-chroma-") as folder, chroma_server(Path(folder)) as url:
        yield url


@pytest.fixture(
    autouse=True, params=["local", pytest.param("server", marks=[pytest.mark.enable_socket, pytest.mark.integration])]
)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Every test once on the local directory, once on a Chroma server (emptied after each test)."""
    if request.param == "local":
        yield "local"
        return
    monkeypatch.setenv("LONGDOC_CHROMA_URL", request.getfixturevalue("chroma_url"))
    reset_stores()
    yield "server"
    client = get_client()
    for collection in client.list_collections():
        client.delete_collection(collection.name)
    reset_stores()
