"""The agents, one package per workflow, each with the helpers only it uses.

- :mod:`nodes.chain`: the orderer and planner, the worker, the manager (Chain-of-Agents, Chow-Liu ordering);
- :mod:`nodes.summarize`: the editor, the experts, the fact-checker (and length fitting, the baselines);
- :mod:`nodes.offload`: the canvas writer, the answering call, the offloader (context offloading);
- :mod:`nodes.route`: the router (Agent-as-a-Graph);
- shared by several: :mod:`nodes.ingest` (reading and indexing a document), :mod:`nodes.retrieval` (vector,
  BM25 and hybrid search over its chunks), :mod:`nodes.canvas_render` (Mermaid text and offline pages).
"""
