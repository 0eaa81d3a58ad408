"""``longdoc ask``: answer a question about a document, or a collection of them, with the Chow-Liu Chain-of-Agents.

longdoc ask report.pdf "Who approved the budget?"
longdoc ask reports/ "Who approved the budget?"          every document of the folder (new files ingested)
longdoc ask -n team1 "Who approved the budget?"          every document of the namespace
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from nodes.chain.context import ChainContext
from nodes.context import DOC_ID
from nodes.inputs import check_workflow_input
from stores.errors import InputError
from stores.labels import QUOTE_LINE
from stores.usage import usage_totals
from surfaces.cli import (
    EXIT_OK,
    AnswerPrinter,
    add_common,
    add_documents_options,
    add_stream_flag,
    documents_legend,
    documents_request,
    plain,
    print_json,
    progress,
    run_graph,
    wants_stream,
)
from surfaces.options import context_option, context_values

CHAIN_OPTIONS = (
    "order",
    "budget",
    "hop_budget",
    "batch_tokens",
    "confirm",
    "read_all",
    "root",
    "children",
    "roots",
    "max_chunks",
    "shortlist",
    "floor",
    "tree_weight",
    "jump_penalty",
)
"""The chain settings ``ask`` offers as options, made from their ``ChainContext`` fields. The other fields
(passage and evidence sizes, quotes, sharpening, extra embedders, seed, token caps) are tuning knobs of the
benchmarks, set with ``context=`` in Python or in LangGraph Studio."""


def register(sub: Any) -> None:
    """Add the ``ask`` command."""
    p = sub.add_parser(
        "ask",
        help="answer a question with a Chow-Liu ordered chain of worker agents",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "words",
        nargs="+",
        metavar="[PATH] QUESTION",
        help="a file, a folder (its documents as one collection) or an ingested document's id, then the question; "
        "the question alone asks every document of --namespace",
    )
    add_documents_options(p, positional=False)
    for name in CHAIN_OPTIONS:
        context_option(p, ChainContext, name)
    context_option(p, ChainContext, "chunk_size")
    p.add_argument("--thread-id", default=None, help="checkpoint under this id; run again with it to resume")
    p.add_argument(
        "--tree-html",
        metavar="FILE",
        default=None,
        help="write an offline HTML page drawing the Chow-Liu tree and the (first chain's) reading order",
    )
    add_common(p)
    add_stream_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Ingest if needed, run the chain, print the answer."""
    from graphs.chain.graph import graph

    page = _page_path(args.tree_html)
    context: dict[str, Any] = {**context_values(args), **context_values(args, ChainContext)}
    size = context.pop("chunk_size", None)
    ingest_context = {"chunk_size": size} if size else {}
    context.update(ingest_context)
    if len(args.words) > 2:
        raise InputError("give the path (optional) and the question, in quotes if it has spaces")
    if len(args.words) == 1 and names_a_document(args.words[0]):
        raise InputError(
            f"the question is missing: longdoc ask {args.words[0]} QUESTION (a question alone asks every document "
            "of --namespace)"
        )
    args.path, args.question = (None, args.words[0]) if len(args.words) == 1 else args.words
    check_workflow_input("ask", {"question": args.question})  # before the document is ingested or a thread locked
    documents = documents_request(args, **ingest_context)
    printer = AnswerPrinter({"manager"}) if wants_stream(args) else None
    request = {"question": args.question, **documents}
    with progress(args.quiet, "reading") as handle:
        if not args.thread_id:
            out = run_graph(graph, request, context=context, on_event=handle, printer=printer)
        else:
            out = _run_on_thread(args.thread_id, request, context, handle, printer, quiet=args.quiet)
    if page is not None:
        _write_tree_page(page, out, args)
    tokens = {role: {"input": u.get("input", 0), "output": u.get("output", 0)} for role, u in out["usage"].items()}
    if args.json:
        print_json(
            {
                "answer": out["answer"],
                "citations": out["citations"],
                "quotes": out.get("quotes", []),
                "sources": out.get("sources", []),
                "inferred": out.get("inferred", False),
                "order": out["order"][0] if len(out["order"]) == 1 else out["order"],
                "read": out["read"],
                "skipped": out["skipped"],
                "stopped": out["stopped"],
                "tokens": tokens,
                "explanation": out.get("explanation", ""),
                "calls": out.get("calls", 0),
                "doc_id": out["doc_id"],
                "documents": out.get("documents", []),
                **({"tree_html": str(page)} if page is not None else {}),
            }
        )
        return EXIT_OK
    totals = usage_totals(out["usage"])
    if printer is not None:
        printer.finish(out["answer"])
    else:
        print(out["answer"])
    if out.get("explanation"):
        print(out["explanation"])
    cited = ", ".join(out["citations"]) or "none"
    print(f"\ncitations: {cited}{' (inferred from the quotes)' if out.get('inferred') else ''}")
    for quote in quote_lines(out):
        print(f"  {quote}")
    legend = documents_legend(out.get("documents", []), out["citations"])
    if legend:
        print("documents:\n" + legend)
    chunks = len({cid for edge in out["tree"] for cid in edge[:2]}) or len(out["read"])
    print(f"read ({args.order or ChainContext().order}): {' -> '.join(out['order'][0]) if out['order'] else 'nothing'}")
    print(f"stopped: {out['stopped']} after {len(out['read'])} of {chunks} chunks, {len(out['skipped'])} skipped")
    print(f"tokens: {totals['input']} in, {totals['output']} out, {totals['calls']} LLM calls")
    if page is not None:
        print(f"tree page: {page}")
    return EXIT_OK


def names_a_document(word: str) -> bool:
    """Whether ``word`` names documents rather than asks a question.

    It does when it is an existing file or folder, a file name of a type ``ingest`` reads, or a document id.
    """
    from stores.loaders import SUPPORTED

    path = Path(word).expanduser()
    return path.exists() or path.suffix.lower() in SUPPORTED or re.fullmatch(DOC_ID, word) is not None


def quote_lines(out: dict[str, Any]) -> list[str]:
    """The answer's quote lines as the text output shows them, each after the page it stands on in a PDF (p. 58)."""
    where = {s["label"]: s for s in out.get("sources", [])}
    lines = []
    for quote in out.get("quotes", []):
        found = QUOTE_LINE.match(quote)
        source = where.get(found.group(1), {}) if found else {}
        lines.append(f"{quote} (p. {source['page_label']})" if source.get("page_label") else quote)
    return lines


def _run_on_thread(
    thread_id: str,
    request: dict[str, Any],
    context: dict[str, Any],
    handle: Any,
    printer: AnswerPrinter | None,
    *,
    quiet: bool,
) -> dict[str, Any]:
    """Run the chain checkpointed on ``thread_id``.

    The same request resumes an unfinished run (finished workers are not asked again, ``calls`` counts each
    once); another one starts over from the thread's last finished step.
    """
    from graphs.chain.graph import RECURSION_LIMIT, builder
    from stores.checkpoint import open_checkpointer, thread_lock
    from surfaces.resume import forget_refused, plan

    with thread_lock(thread_id), open_checkpointer() as saver:
        checkpointed = builder.compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}, "recursion_limit": RECURSION_LIMIT}
        graph_input, config = plan(checkpointed, request, config)
        if graph_input is None and not quiet:
            print(f"resuming the unfinished run of thread {thread_id}", file=sys.stderr)
        with forget_refused(checkpointed, config):
            return run_graph(
                checkpointed, graph_input, context=context, on_event=handle, config=dict(config), printer=printer
            )


def _page_path(value: str | None) -> Path | None:
    """Where ``--tree-html`` writes, checked before any model call."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.is_dir():
        raise InputError(f"--tree-html {value!r} is a directory; give a file name")
    if path.parent.exists() and not path.parent.is_dir():
        raise InputError(f"--tree-html: {str(path.parent)!r} is not a directory")
    return path


def _write_tree_page(path: Path, out: dict[str, Any], args: argparse.Namespace) -> None:
    """Draw the run's tree and first reading order, nodes labelled with their chunks' first words.

    Their sections show on hover, and the pages they span in a PDF (pp. 57-58); in a collection, with their
    document's title.
    """
    from nodes.chain.tree_view import tree_html
    from nodes.collection.sources import document_name
    from stores.documents import get_document, write_atomic
    from stores.pages import chunk_span, decode_marks
    from stores.vectorstore import get_store

    def hover(*parts: str) -> str:
        return " · ".join(p for p in parts if p)

    store = get_store(args.namespace, args.embedder)
    texts: dict[str, str] = {}
    if len(out.get("documents") or []) > 1:
        sections = {}
        for doc in out["documents"]:
            for hit in store.by_doc(doc["doc_id"]):
                label = f"{doc['tag']}:{hit.chunk_id}"
                sections[label] = hover(
                    document_name(doc), hit.section, chunk_span(decode_marks(hit.metadata.get("pages")))
                )
                texts[label] = hit.text
        name = f"{len(out['documents'])} documents"
    else:
        hits = store.by_doc(out["doc_id"])
        spans = {hit.chunk_id: hover(hit.section, chunk_span(decode_marks(hit.metadata.get("pages")))) for hit in hits}
        sections = {label: shown for label, shown in spans.items() if shown}
        texts = {hit.chunk_id: hit.text for hit in hits}
        name = get_document(args.namespace, out["doc_id"]).title or out["doc_id"]
    order = out["order"][0] if out["order"] else []
    title = f"{name}: {args.question}"
    page = tree_html(order, out["tree"], sections, title=title, skipped=out["skipped"], texts=texts)
    write_atomic(path, page)
