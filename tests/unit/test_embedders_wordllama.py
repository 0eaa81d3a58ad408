"""The wordllama embedder: its vectors come from the weights inside its wheel, with the network blocked (its
missing extra is named in test_embedders_mpnet.py)."""

from __future__ import annotations

import numpy as np
import pytest

from stores.embedders import describe_embedder
from stores.extras import installed


def test_the_embedder_id_names_a_truncated_dimension() -> None:
    from stores.wordllama_embed import WordLlamaEmbeddings

    assert WordLlamaEmbeddings().embedder_id == "wordllama-l2-supercat"
    assert WordLlamaEmbeddings(dim=64).embedder_id == "wordllama-l2-supercat-d64"


@pytest.mark.skipif(not installed("wordllama"), reason="the wordllama extra is not installed")
def test_the_shipped_vectors_load_offline_and_rank_a_paraphrase_first() -> None:
    from stores.wordllama_embed import WordLlamaEmbeddings

    embedder = WordLlamaEmbeddings()
    docs = embedder.embed_documents(
        ["write text to a file on disk", "current weather forecast for a city", "convert currency exchange rates"]
    )
    query = embedder.embed_query("save this note into a file")
    matrix = np.asarray(docs)
    assert matrix.shape == (3, 256)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)
    assert int(np.argmax(matrix @ np.asarray(query))) == 0
    assert embedder.embed_query("save this note into a file") == query
    assert embedder.embed_documents([]) == []
    short = WordLlamaEmbeddings(dim=64).embed_query("save this note into a file")
    assert len(short) == 64
    assert describe_embedder("wordllama")["where"].endswith("weights")


@pytest.mark.skipif(not installed("wordllama"), reason="the wordllama extra is not installed")
def test_no_window_cuts_a_long_text() -> None:
    from stores.wordllama_embed import WordLlamaEmbeddings

    filler = "the report covers the quarter in detail. " * 400  # about 3,200 tokens
    a, b = WordLlamaEmbeddings().embed_documents([filler + "weather forecast", filler + "currency exchange"])
    assert a != b  # a window would have cut both at the same token: equal vectors
