"""The agents of the chat workflow (context offloading): the canvas writer, the answering call, the offloader.

A turn about the documents reads them with ask's reading (:mod:`nodes.offload.reading`: its question made
standalone first when it refers back to the conversation; a turn about the conversation itself reads nothing).
Working memory of one answering call, in order: system prompt, canvas (the document's map), pinned state (goal,
confirmed facts), history, the quotes the reading kept, anything recalled, and the question. How history looks
depends on the memory policy:

* ``full``: every earlier turn verbatim (the quotes it answered from, the question, the answer);
* ``last_k``: the last ``keep_turns`` turns verbatim, older ones forgotten;
* ``offload`` / ``offload_canvas``: one-line conclusions of the last ``keep_turns`` turns, the
  older turns most relevant to the question (retrieved from the offload store), and the ids of
  the rest; the raw text of each turn lives in the offload store and can be recalled by id.
  ``offload_canvas`` adds the canvas.

:func:`~nodes.offload.memory.build_memory` enforces a token budget per call: when the
assembled prompt is over it, the least important parts are cut first (older turns, then quotes
shortened and dropped, then recalled texts shortened, then recent turns), and every cut is recorded.

After each turn the offloader (:func:`~nodes.offload.offloader.compress_turn`) turns the finished
exchange into a one-line conclusion and the facts to pin;
:func:`~nodes.offload.offloader.update_pinned` keeps the pinned state small.

Modules, in the order a turn meets them:

- :mod:`nodes.offload.session`: ``begin`` (the turn checked, the session bound to the documents it names), ``refuse``;
- :mod:`nodes.offload.canvas_writer`: the canvas writer (``canvas``), once per document;
  :mod:`nodes.offload.canvas`: the canvas as stored and read (``load_canvas``);
  :mod:`nodes.offload.collection_canvas`: the session's canvas composed from its documents' (``session_canvas``);
- :mod:`nodes.offload.reading`: ``focus`` (whether the turn reads, and for what standalone question) and
  ``read`` (ask's reading over the session's documents: the quotes);
- :mod:`nodes.offload.pieces`: the cuttable pieces of the working memory (pinned state, history per policy,
  the quotes);
- :mod:`nodes.offload.memory`: the memory policies, ``Piece`` and ``Memory``, and
  ``build_memory``, which renders the pieces within the token budget;
- :mod:`nodes.offload.answer`: ``answer`` and ``recall``: the answering call (``ask``), its citations and
  sources (``quote_sources``), and the recall round (``normalise_ids``, ``resolve_recall``);
- :mod:`nodes.offload.offloader`: the offloader agent (``offload``: ``compress_turn``, ``update_pinned``).
"""
