"""The ways in: the ``longdoc`` command line, the LangServe app, the key ring, resume planning, the graph registry.

- :mod:`surfaces.cli` (with ``cli_chain``, ``cli_summarize``, ``cli_offload``, ``cli_route``): ``longdoc``;
- :mod:`surfaces.serve`: the LangServe app; :mod:`surfaces.access`: API keys, tenants, served fields;
- :mod:`surfaces.resume`: what to do with a thread whose last run did not finish;
- :mod:`surfaces.registry`: the workflows by name, compiled with a checkpointer.
"""
