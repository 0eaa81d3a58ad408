"""What counts as progress of the bundled server (``stores.liveness``), piece by piece."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest

from stores.liveness import native_cpu, slots_signature


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads' CPU time is read from /proc")
def test_a_busy_python_thread_is_not_taken_for_the_server_working() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    busy = threading.Thread(target=spin, daemon=True)
    before = native_cpu()
    busy.start()
    try:
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:
            pass
        after = native_cpu()
    finally:
        stop.set()
        busy.join()
    assert busy.native_id not in after and threading.main_thread().native_id not in after
    assert not any(ticks > before.get(tid, ticks) + 5 for tid, ticks in after.items())  # no Python thread counted


def test_the_slots_signature_moves_with_the_task_and_its_counters_only() -> None:
    slot = {"id": 0, "id_task": 7, "n_ctx": 8192, "n_prompt_tokens_processed": 512, "is_processing": True}
    newer = {**slot, "next_token": [{"n_decoded": 0, "n_remain": -1}]}  # llama.cpp's newer shape
    older = {**slot, "next_token": {"n_decoded": 0, "n_remain": -1}}
    assert slots_signature([newer]) == slots_signature([older])
    assert slots_signature([{**older, "n_ctx": 4096, "params": {"seed": 1}}]) == slots_signature([older])
    for moved in ({"n_prompt_tokens_processed": 1024}, {"id_task": 8}, {"next_token": {"n_decoded": 1}}):
        assert slots_signature([{**older, **moved}]) != slots_signature([older]), moved
    assert slots_signature({"error": "not a list"}) == slots_signature([]) == "[]"


@pytest.mark.enable_socket
def test_the_model_clients_connections_are_made_by_the_watched_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx takes no network backend, so the model client's transport replaces the one its httpcore pool holds,
    a private attribute (``_network_backend``): this fails when httpcore renames it or stops connecting with it."""
    import httpcore

    from doubles import endpoint as fake_endpoint
    from stores.endpoints import http_client
    from stores.liveness import WatchedBackend, WatchedStream

    made: list[WatchedStream] = []
    connect = WatchedBackend.connect_tcp

    def counted(self: WatchedBackend, *args: Any, **kwargs: Any) -> WatchedStream:
        made.append(connect(self, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(WatchedBackend, "connect_tcp", counted)
    pool = http_client()._transport._pool
    assert isinstance(pool, httpcore.ConnectionPool) and isinstance(pool._network_backend, WatchedBackend)
    with fake_endpoint.running(fake_endpoint.create_app()) as url:
        assert http_client().get(f"{url}/health").json() == {"status": "ok"}
    assert len(made) == 1 and isinstance(made[0], WatchedStream)
