"""The summarize workflow: an editor agent questions expert agents, then every sentence is fact-checked.

    prepare -+-> overview -> questions -> expert x N (Send) -> merge -+-> questions (the next round)
             |                   +-> polish (no new questions)        +-> polish (the rounds stop)
             +-> polish (a one-chunk document)
             +-> map_reduce | refine (the baselines) -> fit_length
             +-> factcheck (a document no longer than the summary)
    polish -> fit_length -> factcheck -> finish

- :mod:`graphs.summarize.graph`: ``builder`` and ``graph``, wired as drawn above;
- :mod:`graphs.summarize.baselines`: the map-reduce and refine subgraphs.

The nodes are the agents of :mod:`nodes.summarize`: the editor, the experts, the fact-checker. The
settings (``SummarizeContext``, their bounds and checks: :mod:`nodes.summarize.context`) and the input, output
and state schemas (:mod:`nodes.summarize.state`) sit beside them, and are re-exported here.
"""

from nodes.summarize.context import SummarizeContext
from nodes.summarize.state import SummarizeInput, SummarizeOutput, SummarizeState

__all__ = ["SummarizeContext", "SummarizeInput", "SummarizeOutput", "SummarizeState"]
