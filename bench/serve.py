"""Serving benchmark: the scale-out deployment (Aegra) on one and two instances, and LangServe, on one load.

    python -m bench.serve --out bench/results/serve.json [--clients 1 8 32] [--delay 0.05]

The model is the scripted endpoint of :mod:`doubles.endpoint` with a fixed ``--delay`` per
call, so the figures measure the serving stack, not a model. PostgreSQL and a Chroma server run
on loopback (:mod:`deploy.cluster`); every server uses both (LangServe too: checkpoints in
PostgreSQL, documents in Chroma). Each client runs mixed runs in turn on its own connection:
an ingest of a new small document, a question (ask) over a document ingested beforehand, and a
turn of its own chat thread. Per server and number of clients: runs per second, p50/p95
latency of a run, errors (any answer but 200 with a result), the peak RSS of each server
process, and for Aegra the runs its database recorded for the phase by status (a lost or
duplicated run shows as a count that differs from the runs sent).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
FALCON = (ROOT / "notebooks" / "data" / "falcon.md").read_text(encoding="utf-8")
KEY = "bench-key"
QUESTIONS = ("Who manages procurement?", "When do field trials start?", "What did the committee approve?")
OPS = ("ingest", "ask", "chat")
STOP = threading.Event()
"""Set on Ctrl-C or SIGTERM: clients start no new run."""


def plan(clients: int, rounds: int) -> list[list[str]]:
    """The operations of each client: ``rounds`` times the mix, each client starting at another point of it."""
    return [[OPS[(c + i) % len(OPS)] for i in range(rounds * len(OPS))] for c in range(clients)]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def summary(latencies: Sequence[float], errors: Sequence[str], seconds: float) -> dict[str, Any]:
    """Throughput and latency figures of one phase."""
    done = len(latencies)
    return {
        "runs": done + len(errors),
        "errors": len(errors),
        "error_samples": list(errors[:5]),
        "seconds": round(seconds, 2),
        "runs_per_s": round(done / seconds, 2) if seconds else 0.0,
        "p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "p95_s": round(percentile(latencies, 95), 3) if latencies else None,
    }


class RssWatch:
    """Samples the resident set size of some processes every ``every`` seconds; keeps each one's peak (MB)."""

    def __init__(self, pids: dict[str, int], every: float = 0.2) -> None:
        self.pids, self.every = pids, every
        self.peak = dict.fromkeys(pids, 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, pid in self.pids.items():
                with contextlib.suppress(OSError, ValueError):
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            self.peak[name] = max(self.peak[name], int(line.split()[1]) / 1024)
            self._stop.wait(self.every)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Target(ABC):
    """How one server runs the three operations."""

    name: str
    urls: list[str]
    doc_id: str = ""
    threads: dict[int, str] = field(default_factory=dict)

    @abstractmethod
    def call(self, http: httpx.Client, client: int, op: str, n: int) -> None:
        """Run operation ``op`` (its ``n``-th time) for ``client``."""


class Aegra(Target):
    """Agent Protocol: ``POST /threads/{id}/runs/wait``; client ``c`` uses instance ``c % len(urls)``."""

    def _run(self, http: httpx.Client, url: str, thread: str, graph: str, value: dict[str, Any]) -> dict[str, Any]:
        reply = http.post(f"{url}/threads/{thread}/runs/wait", json={"assistant_id": graph, "input": value})
        reply.raise_for_status()
        out = reply.json()
        if not out:
            raise RuntimeError(f"{graph}: the run ended without a result")
        return out  # type: ignore[no-any-return]

    def new_thread(self, http: httpx.Client, url: str) -> str:
        reply = http.post(f"{url}/threads", json={})
        reply.raise_for_status()
        return str(reply.json()["thread_id"])

    def call(self, http: httpx.Client, client: int, op: str, n: int) -> None:
        url = self.urls[client % len(self.urls)]
        if op == "ingest":
            text = f"{FALCON}\n\nNote {client}-{n}: copy {uuid.uuid4().hex[:8]}."
            self._run(http, url, self.new_thread(http, url), "ingest", {"text": text})
        elif op == "ask":
            value = {"doc_id": self.doc_id, "question": QUESTIONS[n % len(QUESTIONS)]}
            self._run(http, url, self.new_thread(http, url), "chain", value)
        else:
            if client not in self.threads:
                self.threads[client] = self.new_thread(http, url)
            value = {"doc_id": self.doc_id, "question": QUESTIONS[n % len(QUESTIONS)]}
            self._run(http, url, self.threads[client], "offload", value)


class LangServe(Target):
    """The LangServe app: ``POST /{workflow}/invoke``; chat turns on thread ``bench-<run>-<client>``."""

    run_tag: str = ""

    def _invoke(self, http: httpx.Client, graph: str, value: dict[str, Any], thread: str = "") -> None:
        body: dict[str, Any] = {"input": value}
        if thread:
            body["config"] = {"configurable": {"thread_id": thread}}
        reply = http.post(f"{self.urls[0]}/{graph}/invoke", json=body)
        reply.raise_for_status()
        if not reply.json().get("output"):
            raise RuntimeError(f"{graph}: no output")

    def call(self, http: httpx.Client, client: int, op: str, n: int) -> None:
        if op == "ingest":
            self._invoke(http, "ingest", {"text": f"{FALCON}\n\nNote {client}-{n}: copy {uuid.uuid4().hex[:8]}."})
        elif op == "ask":
            self._invoke(http, "chain", {"doc_id": self.doc_id, "question": QUESTIONS[n % len(QUESTIONS)]})
        else:
            value = {"doc_id": self.doc_id, "question": QUESTIONS[n % len(QUESTIONS)]}
            self._invoke(http, "offload", value, thread=f"bench-{self.run_tag}-{client}")


def load(target: Target, clients: int, rounds: int) -> dict[str, Any]:
    """Run ``plan(clients, rounds)`` against ``target``; the phase's figures."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def one_client(client: int, ops: list[str]) -> None:
        with httpx.Client(headers={"X-API-Key": KEY}, timeout=600) as http:
            for n, op in enumerate(ops):
                if STOP.is_set():
                    return
                start = time.perf_counter()
                try:
                    target.call(http, client, op, n)
                except (httpx.HTTPError, RuntimeError, ValueError) as exc:
                    with lock:
                        errors.append(f"{op}: {str(exc)[:160]}")
                    continue
                with lock:
                    latencies.append(time.perf_counter() - start)

    target.threads.clear()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        try:
            list(pool.map(one_client, range(clients), plan(clients, rounds)))
        except KeyboardInterrupt:
            STOP.set()  # the clients stop after their current run; the servers are then stopped
            raise
    return summary(latencies, errors, time.perf_counter() - start)


def recorded_runs(postgres_url: str, since: float) -> dict[str, int]:
    """Aegra's runs created since ``since`` (epoch seconds), counted by status."""
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute(
            "SELECT status, count(*) FROM runs WHERE created_at >= to_timestamp(%s) GROUP BY status", (since,)
        ).fetchall()
    return {str(status): int(count) for status, count in rows}


@contextlib.contextmanager
def langserve(env: dict[str, str], folder: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``longdoc serve`` on a free loopback port with ``env``."""
    from deploy.cluster import stop, wait_until
    from doubles.endpoint import free_port

    port = free_port()
    log = (folder / "langserve.log").open("wb")
    args = [str(Path(sys.executable).parent / "longdoc"), "serve", "--port", str(port)]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(f"http://127.0.0.1:{port}/health", 180, proc)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop(proc)
        log.close()


def _prepare(target: Target) -> None:
    """Ingest the document the questions and chats use, and run each operation once per server (not timed)."""
    with httpx.Client(headers={"X-API-Key": KEY}, timeout=600) as http:
        if isinstance(target, Aegra):
            url = target.urls[0]
            target.doc_id = target._run(http, url, target.new_thread(http, url), "ingest", {"text": FALCON})["doc_id"]
        else:
            reply = http.post(f"{target.urls[0]}/ingest/invoke", json={"input": {"text": FALCON}})
            reply.raise_for_status()
            target.doc_id = reply.json()["output"]["doc_id"]
        for client in range(len(target.urls)):
            for n, op in enumerate(OPS):
                target.call(http, client, op, n)


def run(args: argparse.Namespace, progress: Callable[[str], None] = print) -> dict[str, Any]:
    from deploy.cluster import deployment
    from doubles.endpoint import Script, create_app, running

    rows: list[dict[str, Any]] = []
    with running(create_app(Script(prompt_seconds=args.delay))) as endpoint:
        env = dict(os.environ)
        env.update(
            {
                "LONGDOC_BASE_URL": f"{endpoint}/v1",
                "LONGDOC_MODEL": "scripted",
                "LONGDOC_EMBEDDER": "hash",
                "LONGDOC_SERVER_API_KEY": KEY,
                "LONGDOC_SERVER_KEYS": "",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "LOG_LEVEL": "WARNING",
            }
        )
        with deployment(env, instances=1) as deploy:
            for instances in (1, 2):
                if instances == 2:
                    deploy.start_instance("b")
                live = deploy.instances[:instances]
                target = Aegra(f"aegra-{instances}", [i.url for i in live])
                _prepare(target)
                for clients in args.clients:
                    since = time.time()
                    with RssWatch({i.name: i.proc.pid for i in live}) as rss:
                        row = load(target, clients, args.rounds)
                    time.sleep(0.5)
                    row.update(
                        server="aegra",
                        instances=instances,
                        clients=clients,
                        peak_rss_mb={k: round(v, 1) for k, v in rss.peak.items()},
                        recorded=recorded_runs(deploy.postgres_url, since),
                    )
                    rows.append(row)
                    progress(json.dumps(row))
            serve_env = {**deploy.env, "LONGDOC_HOME": str(deploy.folder / "home-langserve")}
            with langserve(serve_env, deploy.folder) as (url, proc):
                served = LangServe("langserve", [url])
                _prepare(served)
                for clients in args.clients:
                    served.run_tag = uuid.uuid4().hex[:6]
                    with RssWatch({"langserve": proc.pid}) as rss:
                        row = load(served, clients, args.rounds)
                    row.update(
                        server="langserve",
                        instances=1,
                        clients=clients,
                        peak_rss_mb={k: round(v, 1) for k, v in rss.peak.items()},
                    )
                    rows.append(row)
                    progress(json.dumps(row))
    return {
        "settings": {
            "model_delay_s": args.delay,
            "clients": args.clients,
            "runs_per_client": args.rounds * len(OPS),
            "mix": list(OPS),
            "machine_cpus": os.cpu_count(),
        },
        "results": rows,
    }


def failures(report: dict[str, Any]) -> list[str]:
    """What falls short: errors, Aegra runs lost, duplicated or failed, two instances no faster at the most clients."""
    out = []
    for row in report["results"]:
        where = f"{row['server']} x{row['instances']} at {row['clients']} clients"
        if row["errors"]:
            out.append(f"{where}: {row['errors']} errors")
        if "recorded" in row and row["recorded"] != {"success": row["runs"]}:
            out.append(f"{where}: {row['runs']} runs sent, recorded {row['recorded']}")
    most = max(report["settings"]["clients"])
    speed = {
        r["instances"]: r["runs_per_s"] for r in report["results"] if r["server"] == "aegra" and r["clients"] == most
    }
    if len(speed) == 2 and speed[2] <= speed[1]:
        out.append(f"two instances ({speed[2]} runs/s) are not faster than one ({speed[1]}) at {most} clients")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=2, help="times each client runs the mix of three runs")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds the scripted model takes per call")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the servers on SIGTERM too
    report = run(args)
    report["failures"] = failures(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    for line in report["failures"]:
        print("FALLS SHORT:", line)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
