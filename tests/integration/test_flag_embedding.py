"""FlagEmbedding loads the bundled all-MiniLM-L6-v2 folder offline and embeds sensibly."""

from __future__ import annotations

import numpy as np

from stores.flag_embed import FlagEmbeddings, bundled_minilm_path
from stores.vectorstore import VectorStore


def test_flag_embedding_loads_bundled_minilm_offline() -> None:
    emb = FlagEmbeddings(bundled_minilm_path())
    docs = emb.embed_documents(["A kitten is sleeping on the sofa.", "Quarterly revenue grew by ten percent."])
    query = np.asarray(emb.embed_query("a small cat naps"))
    vecs = np.asarray(docs)
    assert vecs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert float(vecs[0] @ query) > float(vecs[1] @ query) + 0.2


def test_flag_embedder_in_the_store() -> None:
    store = VectorStore("flagtest", FlagEmbeddings(bundled_minilm_path()))
    from stores.vectorstore import Record

    store.add(
        [
            Record(id="d:c0", text="The meeting approved the new budget.", kind="chunk", doc_id="d", chunk_id="c0"),
            Record(id="d:c1", text="Penguins live in Antarctica.", kind="chunk", doc_id="d", chunk_id="c1"),
        ]
    )
    assert store.search("where do penguins live", k=1)[0].chunk_id == "c1"
