"""The bundled all-mpnet-base-v2 (the ``mpnet`` extra) is assembled from its parts and embeds offline."""

from __future__ import annotations

import numpy as np
import pytest

from stores.extras import missing_module

pytestmark = pytest.mark.skipif(missing_module("mpnet") is not None, reason="the mpnet extra is not installed")


def test_mpnet_embeds_offline_and_ranks_the_matching_tool_first() -> None:
    from stores.mpnet import MpnetEmbeddings, mpnet_path

    assert (mpnet_path() / "model.safetensors").stat().st_size > 400_000_000
    emb = MpnetEmbeddings()
    tools = emb.embed_documents(
        ["read_file: Read a file from the local file system.", "get_weather: Current weather for a city."]
    )
    query = np.asarray(emb.embed_query("will it rain in Paris tomorrow?"))
    vecs = np.asarray(tools)
    assert vecs.shape == (2, 768)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert float(vecs[1] @ query) > float(vecs[0] @ query) + 0.1
