"""The graphs of ``aegra.json``, imported as modules of the ``graphs`` package, by the names users call them.

``aegra.json`` names this file for every graph. Aegra 0.6 executes a graph file under a module
name of its own that is not in ``sys.modules``, so a graph file that uses postponed annotations
(``from __future__ import annotations``, as every module here does) fails when LangGraph resolves
its state's type hints; importing the graphs normally from here avoids that.

``chain`` and ``offload`` are the former ids of ``ask`` and ``chat`` (:data:`surfaces.registry.ALIASES`):
the same graphs, for assistants and threads stored under them.
"""

from graphs.chain.graph import graph as ask
from graphs.ingest import graph as ingest
from graphs.offload.graph import graph as chat
from graphs.route.graph import graph as route
from graphs.summarize.graph import graph as summarize

chain = ask
offload = chat

__all__ = ["ask", "chain", "chat", "ingest", "offload", "route", "summarize"]
