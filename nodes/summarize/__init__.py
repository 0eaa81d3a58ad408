"""The agents of the summarize workflow: the editor, the experts and the fact-checker.

- :mod:`nodes.summarize.request`: ``prepare`` (the request, the document, the path taken) and ``finish``;
- :mod:`nodes.summarize.editor`: the editor's nodes (overview, questions, merge, polish);
  :mod:`nodes.summarize.editing` its model calls and helpers;
- :mod:`nodes.summarize.expert`: the experts (one ``Send`` per question, answers from retrieved chunks);
- :mod:`nodes.summarize.fact_checker`: every sentence against the chunks it cites, with
  :mod:`nodes.summarize.grounding` (numbers, names and content words);
- :mod:`nodes.summarize.length`: fitting the summary to the length asked; :mod:`nodes.summarize.gaps` and
  :mod:`nodes.summarize.sentences`: coverage and cited sentences;
- :mod:`nodes.summarize.baselines`: the map-reduce and refine baselines.
"""
