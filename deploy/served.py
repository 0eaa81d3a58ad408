"""The five graphs of ``langgraph.json``, imported as modules of the ``graphs`` package.

``aegra.json`` names this file for every graph. Aegra 0.6 executes a graph file under a module
name of its own that is not in ``sys.modules``, so a graph file that uses postponed annotations
(``from __future__ import annotations``, as every module here does) fails when LangGraph resolves
its state's type hints; importing the graphs normally from here avoids that.
"""

from graphs.chain.graph import graph as chain
from graphs.ingest import graph as ingest
from graphs.offload.graph import graph as offload
from graphs.route.graph import graph as route
from graphs.summarize.graph import graph as summarize

__all__ = ["chain", "ingest", "offload", "route", "summarize"]
