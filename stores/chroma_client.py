"""The Chroma client of the current settings, and the check of a namespace's name.

A persistent local directory under ``LONGDOC_HOME`` by default, a Chroma server when
``LONGDOC_CHROMA_URL`` is set; one client per location per process. The store
(:mod:`stores.vectorstore`), the documents' records (:mod:`stores.documents`) and the shared files
(:mod:`stores.shared_files`) all build on it.
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlparse

from stores.cache import ProcessCache
from stores.errors import InputError
from stores.settings import get_settings
from stores.text import check_name


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if valid (letters, digits, ``_``, ``-``; 1-63 chars) or raise."""
    return check_name(namespace, "namespace")


_clients: ProcessCache[str, Any] = ProcessCache("chroma clients", 8)


def get_client() -> Any:
    """The Chroma client for the current settings (one per location per process)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    importlib.import_module("stores.chroma_embedding")  # registers "longdoc" for collections read back

    settings = get_settings()

    def build() -> Any:
        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        if settings.chroma_url:
            url = urlparse(settings.chroma_url)
            if not url.hostname:
                raise InputError(f"LONGDOC_CHROMA_URL is not a URL: {settings.chroma_url!r}")
            client = chromadb.HttpClient(
                host=url.hostname,
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
        else:
            path = settings.home / "chroma"
            path.mkdir(parents=True, exist_ok=True)
            client = chromadb.PersistentClient(path=str(path), settings=chroma_settings)
        return client

    return _clients.get_or_build(settings.chroma_url or str(settings.home / "chroma"), build, exclusive=True)


def reset_clients() -> None:
    """Forget cached clients, Chroma's own too (tests switch ``LONGDOC_HOME`` or read another process's writes)."""
    from chromadb.api.shared_system_client import SharedSystemClient

    _clients.clear()
    SharedSystemClient.clear_system_cache()
