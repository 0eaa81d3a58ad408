"""Start the scale-out deployment on 127.0.0.1: PostgreSQL, a Chroma server and Aegra instances.

    python -m deploy.cluster up [--instances 2] [--folder DIR]

The model endpoint and the tenants' keys come from the environment, as for every server
(``LONGDOC_BASE_URL``, ``LONGDOC_MODEL``, ``LONGDOC_API_KEY``, ``LONGDOC_SERVER_KEYS`` inline or as the path
of a keys file, digests or keys); ``--folder`` keeps the databases and logs in a new folder of that name.

Every piece is a child process on loopback, in one scratch folder, stopped (and the folder removed) on exit.
Each Aegra instance serves a socket bound here on a port the system picked (``uvicorn --fd``); PostgreSQL and
Chroma take no socket from their parent, so each gets a port found free and is started again on another when
that port was taken before it bound it: PostgreSQL from the Debian binaries (``initdb`` / ``pg_ctl``;
as root the cluster belongs to the ``postgres`` user, since PostgreSQL refuses to run as root),
the Chroma server from the virtualenv (``chroma run``), and each Aegra instance as
``uvicorn aegra_api.main:app`` with ``AEGRA_CONFIG=aegra.json``. Each instance has its own empty
``LONGDOC_HOME``: whatever it needs from another instance must come from PostgreSQL or Chroma.
Tests and ``bench.serve`` use the same functions.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from stores.extras import MissingExtra, require_extra
from stores.local_model import free_port, listening_socket

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def postgres_bindir() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl`` (on PATH, else the newest Debian cluster), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


def chroma_binary() -> Path | None:
    """The ``chroma`` command of this virtualenv (or PATH), or None."""
    own = BIN / "chroma"
    if own.exists():
        return own
    found = shutil.which("chroma")
    return Path(found) if found else None


def wait_until(
    url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None, ready: tuple[int, ...] = (200,)
) -> None:
    """Poll ``url`` until it answers with a status of ``ready``.

    RuntimeError when ``proc`` dies, TimeoutError when time runs out.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server process exited with {proc.returncode} before {url} answered")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code in ready:
                return
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout:g} s")


@contextlib.contextmanager
def postgres(folder: Path, database: str = "longdoc") -> Iterator[str]:
    """A throw-away PostgreSQL cluster in ``folder`` (new; its parent readable by all); yields its URL.

    The database user is ``longdoc``, with trust authentication on 127.0.0.1 only.
    """
    bindir = postgres_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL server binaries are not installed (bash .ci/system-deps)")
    data = folder / "pg"
    data.mkdir(parents=True)
    prefix: list[str] = []
    if os.geteuid() == 0:
        for path in (folder, data):
            path.chmod(0o755)
            shutil.chown(path, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]

    def run(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True)

    run(str(bindir / "initdb"), "-D", str(data), "-U", "longdoc", "--auth=trust")
    for attempt in range(PORT_ATTEMPTS):
        port = free_port()
        options = f"-p {port} -h 127.0.0.1 -k {data} -c max_connections=200 -c fsync=off"
        try:
            run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(data / "log"), "-w", "start", "-o", options)
            break
        except subprocess.CalledProcessError:  # the port was taken before PostgreSQL bound it, or another failure
            if attempt == PORT_ATTEMPTS - 1:
                raise
    try:
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "longdoc", database)
        yield f"postgresql://longdoc@127.0.0.1:{port}/{database}"
    finally:
        subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )


@contextlib.contextmanager
def chroma_server(folder: Path, timeout: float = 60) -> Iterator[str]:
    """A Chroma server (``chroma run``) persisting in ``folder``; yields its URL."""
    binary = chroma_binary()
    if binary is None:
        raise FileNotFoundError("the chroma command is not installed (make install)")
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "chroma.log").open("wb")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    try:
        for attempt in range(PORT_ATTEMPTS):
            port = free_port()
            args = [str(binary), "run", "--path", str(folder / "data"), "--host", "127.0.0.1", "--port", str(port)]
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                wait_until(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout, proc)
                break
            except RuntimeError:  # it exited: the port was taken before it bound it, or another failure
                if attempt == PORT_ATTEMPTS - 1:
                    raise
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(proc)
    finally:
        log.close()


PORT_ATTEMPTS = 3
"""How many ports a server that cannot take a socket from its parent is tried on."""


def stop(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


@dataclass
class Instance:
    """One Aegra server process."""

    name: str
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to finish anything."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)

    def rss_kb(self) -> int:
        """Resident set size now (kB), 0 once the process is gone."""
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


@dataclass
class Deployment:
    """Addresses of one running deployment and the environment its instances share."""

    postgres_url: str
    chroma_url: str
    env: dict[str, str]
    folder: Path
    instances: list[Instance] = field(default_factory=list)

    def start_instance(self, name: str, timeout: float = 180, extra_env: dict[str, str] | None = None) -> Instance:
        """Start one Aegra instance (own empty ``LONGDOC_HOME``) and wait until it answers."""
        home = self.folder / f"home-{name}"
        home.mkdir(parents=True, exist_ok=True)
        env = {**self.env, "LONGDOC_HOME": str(home), **(extra_env or {})}
        log = self.folder / f"aegra-{name}.log"
        with listening_socket() as sock:  # the instance's from here on; this process's copy closes
            fd = sock.fileno()
            args = [sys.executable, "-m", "uvicorn", "aegra_api.main:app", "--fd", str(fd)]
            out = log.open("wb")
            proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, pass_fds=(fd,))
            instance = Instance(name, f"http://127.0.0.1:{sock.getsockname()[1]}", proc, log)
        self.instances.append(instance)
        try:
            # uvicorn answers only once the app has started; the tenant guard's 401 to a key-less probe says so
            # as well as a 200 (the probe needs no key, so a keys file of digests alone is enough).
            wait_until(f"{instance.url}/live", timeout, proc, ready=(200, 401))
        except (RuntimeError, TimeoutError) as exc:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"Aegra instance {name} did not start: {exc}\n{tail}") from exc
        return instance


def instance_env(postgres_url: str, chroma_url: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every instance shares: the databases, Aegra's config, no telemetry."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "DATABASE_URL": postgres_url,
            "LONGDOC_POSTGRES_URL": postgres_url,
            "LONGDOC_CHROMA_URL": chroma_url,
            "AEGRA_CONFIG": str(ROOT / "aegra.json"),
            "LOG_LEVEL": env.get("LOG_LEVEL", "WARNING"),
            "ANONYMIZED_TELEMETRY": "False",
            "LANGSMITH_TRACING": "false",
            "PYTHONUNBUFFERED": "1",
            # One run's node threads and DB connections: room for 32 concurrent clients per instance.
            "SQLALCHEMY_POOL_SIZE": env.get("SQLALCHEMY_POOL_SIZE", "10"),
            "SQLALCHEMY_MAX_OVERFLOW": env.get("SQLALCHEMY_MAX_OVERFLOW", "10"),
            "LANGGRAPH_MAX_POOL_SIZE": env.get("LANGGRAPH_MAX_POOL_SIZE", "20"),
        }
    )
    return env


@contextlib.contextmanager
def deployment(env: dict[str, str] | None = None, instances: int = 2, keep: Path | None = None) -> Iterator[Deployment]:
    """PostgreSQL, a Chroma server and ``instances`` Aegra instances; everything stopped on exit.

    Instances start one after the other: the first applies Aegra's database migrations. Without the
    ``scaleout`` extra, :class:`stores.extras.MissingExtra` before anything starts.
    """
    require_extra("scaleout", "the scale-out deployment")
    folder = keep or Path(tempfile.mkdtemp(prefix="longdoc-scaleout-"))
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # the postgres user must reach its cluster inside
    try:
        with postgres(folder / "postgres") as pg_url, chroma_server(folder / "chroma") as chroma_url:
            deploy = Deployment(pg_url, chroma_url, instance_env(pg_url, chroma_url, env), folder)
            try:
                for i in range(instances):
                    deploy.start_instance("ab"[i] if i < 2 else str(i))
                yield deploy
            finally:
                for instance in deploy.instances:
                    stop(instance.proc)
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run the command-line entry point; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up"])
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--folder", type=Path, help="keep the databases and logs in this (new) folder")
    args = parser.parse_args(argv)
    try:
        require_extra("scaleout", "the scale-out deployment")
    except MissingExtra as missing:
        print(f"deploy.cluster: {missing}", file=sys.stderr)
        return 2
    with deployment(instances=args.instances, keep=args.folder) as deploy:
        print(f"PostgreSQL  {deploy.postgres_url}")
        print(f"Chroma      {deploy.chroma_url}")
        for instance in deploy.instances:
            print(f"Aegra {instance.name}     {instance.url}   (log {instance.log})")
        print("Ctrl-C stops everything.", flush=True)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
