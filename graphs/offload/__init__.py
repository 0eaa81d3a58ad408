"""The chat workflow: a multi-turn session over one document with a small working memory (context offloading).

    begin -> [canvas] -> retrieve -> answer -> [recall -> answer] -> offload

- :mod:`nodes.offload.context`: ``OffloadContext`` (the settings, their bounds and checks);
- :mod:`nodes.offload.state`: the input, output and state schemas;
- :mod:`graphs.offload.graph`: ``builder`` and ``graph``, wired as drawn above.

The nodes are the agents of :mod:`nodes.offload`: the canvas writer, the answering call, the offloader.
"""
