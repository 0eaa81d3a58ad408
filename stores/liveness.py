"""Whether the bundled llama.cpp server is still working on a request: decided by progress, not by silence.

A request to the bundled server (:func:`watching`) is read in steps of ``LONGDOC_BUNDLED_CHECK``
seconds (:class:`stores.endpoints` reads its socket through :func:`current_watch`). Every byte the
server sends (a prompt-progress report, a token) is progress. When a step passes in silence,
:meth:`Watch.silent` looks for progress elsewhere:

- the threads of the in-process server (not Python's own) got CPU time since the last look: the
  model is computing, however slowly a busy machine lets it (one prompt batch can take minutes);
- where those threads cannot be looked at (a server not in this process, no ``/proc``): the
  server's ``/slots`` counters moved (the task's prompt tokens read, tokens decoded).

The request fails with :class:`ServerStalled` when no progress of any kind was seen for
``LONGDOC_BUNDLED_STALL`` seconds, or at once when the server is gone (stopped in this process, or
its ``/health`` refuses connections). The run's deadline (``LONGDOC_RUN_TIMEOUT``) holds throughout.
Long prompts are reported as status lines (:func:`stores.status.report_status`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.deadlines import deadline_left, deadline_reached
from stores.settings import get_settings
from stores.status import report_status

if TYPE_CHECKING:
    from stores.local_model import LocalServer

STATUS_EVERY = 15.0
"""Seconds between two "still working" status lines of a silent request."""


class ServerStalled(BaseException):
    """The bundled server made no progress for ``LONGDOC_BUNDLED_STALL`` seconds, or is gone.

    A ``BaseException``: the OpenAI client's retry loop must not send the request again to a server
    that stopped working. :class:`stores.models.LLM` turns it into a :class:`ModelError`.
    """


def native_cpu(pid: int | None = None) -> dict[int, int]:
    """CPU clock ticks used so far by each thread of llama.cpp.

    Those of this process that Python did not start, or every thread of the server process ``pid``. Read from
    ``/proc/<pid>/task``; empty where there is none (the evidence is then the server's counters).
    """
    tasks = Path(f"/proc/{pid or 'self'}/task")
    if not tasks.is_dir():
        return {}
    own = {thread.native_id for thread in threading.enumerate()} if pid is None else set()
    ticks: dict[int, int] = {}
    for entry in os.scandir(tasks):
        tid = int(entry.name)
        if tid in own:
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
        ticks[tid] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks


def slots_signature(slots: Any) -> str:
    """What in llama.cpp's ``/slots`` reply changes while a slot makes progress (its task and counters)."""
    marks = []
    for slot in slots if isinstance(slots, list) else []:
        nxt = slot.get("next_token") or {}
        nxt = nxt[0] if isinstance(nxt, list) and nxt else nxt
        marks.append(
            [
                slot.get("id_task"),
                slot.get("n_prompt_tokens_processed"),
                slot.get("n_past"),
                nxt.get("n_decoded") if isinstance(nxt, dict) else None,
            ]
        )
    return json.dumps(marks)


@dataclass
class Watch:
    """The progress of one request to the bundled server ``server``."""

    server: LocalServer
    stall: float
    check: float
    # The module's clock is read when a watch starts (not bound here), so that a test can count time in looks.
    last_progress: float = field(default_factory=lambda: time.monotonic())
    last_status: float = field(default_factory=lambda: time.monotonic())
    prompt: tuple[int, int] | None = None
    """The last prompt-progress report: (tokens read, tokens in all)."""
    _line: bytes = b""
    _cpu: dict[int, int] = field(default_factory=dict)
    _slots: str | None = None

    def __post_init__(self) -> None:
        # A running server's threads are looked at: this process's, or its own process's (none without /proc).
        self._cpu = native_cpu(self.server.pid) if self.server.handle is not None else {}

    @property
    def origin(self) -> str:
        """The server's address, for probes and messages."""
        return f"http://127.0.0.1:{self.server.port}"

    def heard(self) -> None:
        """Bytes came from the server: progress."""
        self.last_progress = time.monotonic()

    def body(self, part: bytes) -> None:
        """Read the streamed reply's prompt-progress reports (``return_progress``) and show long prompts' as status."""
        lines = (self._line + part).split(b"\n")
        self._line = lines.pop()
        for line in lines:
            if b'"prompt_progress"' not in line or not line.startswith(b"data:"):
                continue
            try:
                report = json.loads(line[5:])["prompt_progress"]
                done, total = int(report["processed"]), int(report["total"])
            except (ValueError, KeyError, TypeError):
                continue
            self.prompt = (done, total)
            if 0 < done < total:
                self.last_status = time.monotonic()
                message = f"reading the prompt: {done:,}/{total:,} tokens"
                report_status("model", message, prompt={"read": done, "total": total})

    def silent(self) -> None:
        """A check interval passed without a byte: go on waiting while the server makes progress, else fail.

        Raises:
            ServerStalled: the server is gone, or made no progress for ``stall`` seconds.
            DeadlineReached: the run's deadline passed.
        """
        left = deadline_left()
        if left is not None and left <= 0:
            raise deadline_reached()
        now = time.monotonic()
        gone = self._gone()
        if gone:
            raise ServerStalled(f"the bundled model server {self.origin}/v1 stopped while answering ({gone})")
        # llama.cpp answers /slots only between two batches, each unanswered look waiting in its HTTP pool:
        # the in-process server's threads are looked at instead (its counters when they cannot be read).
        moved = self._cpu_moved() if self._cpu else self._slots_moved()
        if moved:
            self.last_progress = now
            if now - self.last_status >= STATUS_EVERY:
                self.last_status = now
                report_status("model", self._doing())
            return
        if now - self.last_progress >= self.stall:
            raise ServerStalled(
                f"the bundled model server {self.origin}/v1 made no progress for {self.stall:g} s "
                "(no prompt batch, no token, no work on its threads); check the machine, or raise "
                "LONGDOC_BUNDLED_STALL"
            )

    def _doing(self) -> str:
        """What the model is busy with, for a status line."""
        if self.prompt is None:
            return "the model is starting on the prompt (slowly: the machine is busy)"
        done, total = self.prompt
        if done < total:
            return f"the model is still reading the prompt: {done:,}/{total:,} tokens (slowly: the machine is busy)"
        return "the model is writing its reply (slowly: the machine is busy)"

    def _gone(self) -> str:
        """Why the server is gone (empty while it is there)."""
        import httpx

        from stores.local_model import server_at

        if server_at(self.server.base_url) is not self.server:
            return "the server was stopped"
        try:
            httpx.get(f"{self.origin}/health", timeout=self.check)
        except httpx.ConnectError:
            return "its /health refuses connections"
        except httpx.HTTPError:
            pass  # slow to answer on a busy machine: not gone
        return ""

    def _cpu_moved(self) -> bool:
        before, self._cpu = self._cpu, native_cpu(self.server.pid)
        return any(ticks > before.get(tid, ticks) for tid, ticks in self._cpu.items())

    def _slots_now(self) -> str | None:
        import httpx

        try:
            reply = httpx.get(f"{self.origin}/slots", timeout=self.check)
            return slots_signature(reply.json()) if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None  # llama.cpp answers /slots between batches: none while one is being read

    def _slots_moved(self) -> bool:
        before, self._slots = self._slots, self._slots_now()
        return self._slots is not None and before is not None and self._slots != before


class WatchedStream:
    """A connection (an httpcore network stream) whose reads, inside :func:`watching`, wait while the server works.

    Outside a watch it reads as the stream it wraps. Inside one it reads in steps of the watch's
    check interval and asks the watch after each silent step (which fails the read once the
    server stopped making progress, is gone, or the run's deadline passed).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """The next bytes from the server."""
        import httpcore

        watch = current_watch()
        if watch is None:
            return bytes(self.inner.read(max_bytes, timeout))
        step = watch.check if timeout is None else min(watch.check, timeout)
        while True:
            try:
                data = bytes(self.inner.read(max_bytes, step))
            except httpcore.ReadTimeout:
                watch.silent()
                continue
            watch.heard()
            return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Send ``buffer``."""
        self.inner.write(buffer, timeout)

    def close(self) -> None:
        """Close the connection."""
        self.inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        """Upgrade to TLS (the wrapped stream's)."""
        return self.inner.start_tls(ssl_context, server_hostname, timeout)

    def get_extra_info(self, info: str) -> Any:
        """The wrapped stream's extra information (its socket, addresses)."""
        return self.inner.get_extra_info(info)


class WatchedBackend:
    """An httpcore network backend whose connections are :class:`WatchedStream` (httpx takes no other hook)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> WatchedStream:
        """A watched TCP connection."""
        return WatchedStream(self.inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> WatchedStream:
        """A watched Unix-socket connection."""
        return WatchedStream(self.inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        """Sleep as the wrapped backend does."""
        self.inner.sleep(seconds)


_watch: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("bundled_request_watch", default=None)


def current_watch() -> Watch | None:
    """The watch of the bundled-server request being made in this context, if any."""
    return _watch.get()


@contextlib.contextmanager
def watching(server: LocalServer) -> Iterator[Watch]:
    """Requests made inside the block go to the bundled ``server``: their silences are judged by its progress."""
    settings = get_settings()
    watch = Watch(server, stall=settings.bundled_stall, check=settings.bundled_check)
    token = _watch.set(watch)
    try:
        yield watch
    finally:
        _watch.reset(token)
