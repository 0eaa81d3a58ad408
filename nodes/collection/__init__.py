"""Collections: what a workflow reads when its input names several documents, and how it names them.

A workflow's input names its documents in one of five ways (exactly one): ``doc_id``, ``path`` or
``text`` name one document (:func:`nodes.ingest.resolve_document`); ``doc_ids`` lists documents
ingested in the input's namespace; ``whole_namespace`` takes every document of the namespace
indexed with the run's embedder; and a ``path`` that is a folder ingests what is new under it
(:func:`nodes.ingest_dir.ingest_directory`) and takes every document of the folder. A collection
of one document runs as that document.

In a collection run every chunk (and sentence) label names its document with a short tag, kept for
the life of a thread (:func:`nodes.collection.resolve.thread_tags`): ``2:c12`` is chunk ``c12`` of the
run's document 2, ``2:c12.3`` its sentence 3. Every run's output lists its documents (``documents``:
tag, id, title, and source relative to the ingest root), one or several, so every label maps to a
title or a file name. A one-document run keeps its plain labels (``c12``) and its ``doc_id``.

On a thread, each run's input names its documents afresh, replacing the last run's; an input that
names none reads them again (:func:`nodes.collection.resolve.run_documents`).

Modules: :mod:`nodes.collection.resolve` (which documents an input names), :mod:`nodes.collection.index`
(retrieval across them: vector search fused with BM25 from per-document term counts),
:mod:`nodes.collection.sources` (labels and :class:`~nodes.collection.sources.Sources`, what summaries
and chat read through).
"""
