"""The chat workflow: a multi-turn session over one document with a small working memory (context offloading).

    begin -> [canvas] -> retrieve -> answer -> [recall -> answer] -> offload

- :mod:`graphs.offload.graph`: ``builder`` and ``graph``, wired as drawn above.

The nodes are the agents of :mod:`nodes.offload`: the canvas writer, the answering call, the offloader. The
settings (``OffloadContext``, their bounds and checks: :mod:`nodes.offload.context`) and the input, output and
state schemas (:mod:`nodes.offload.state`) sit beside them, and are re-exported here.
"""

from nodes.offload.context import OffloadContext
from nodes.offload.state import OffloadInput, OffloadOutput, OffloadState

__all__ = ["OffloadContext", "OffloadInput", "OffloadOutput", "OffloadState"]
