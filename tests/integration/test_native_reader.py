"""The llama.cpp build for this CPU (``make fast-reader``) serves the bundled model as xllamacpp does, with the
instruction sets of this CPU, streams its prompt progress, and ends with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from stores import llama_server as reader
from stores.local_model import ensure_server, running_server

pytestmark = pytest.mark.skipif(reader.native_binary() is None, reason="no llama.cpp build for this CPU installed")


def test_the_native_build_serves_the_bundled_model_with_this_cpus_instructions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LONGDOC_READER", "native")
    server = ensure_server()
    assert server.backend == "native" and server.pid is not None and running_server() is server
    built = reader.system_info(server.handle)
    assert "AVX2 = 1" in built
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        if " avx512_vnni" in info.read():
            assert "AVX512_VNNI = 1" in built
    body = {
        "messages": [{"role": "user", "content": "What is the capital of France? One word."}],
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
        "return_progress": True,
    }
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=600) as reply:
        lines = [line for line in reply.iter_lines() if line.startswith("data:")]
    assert any('"prompt_progress"' in line for line in lines)  # the status lines' source
    assert "paris" in "".join(lines).lower()


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_native_server_ends_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    script = "from stores.local_model import ensure_server; print(ensure_server().pid, flush=True); input()"
    env = {**os.environ, "LONGDOC_READER": "native"}
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert child in _children_of(parent.pid)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    for _ in range(300):  # the parent-death signal reaches it at once; it stops within a few seconds
        if not _running(child):
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the llama.cpp server outlived the process that started it")
