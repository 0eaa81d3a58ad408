"""``longdoc``: the command line of the product.

Commands: ``ingest``, ``models``, ``serve``, ``forget`` here, and one module per workflow
(``surfaces/cli_<name>.py`` with a ``register(subparsers)`` function) for ``ask``,
``summarize``, ``chat``, ``canvas`` and ``route``.

``serve`` needs the ``serve`` extra and says so when it is missing (:mod:`stores.extras`), as does an embedder
or a PostgreSQL URL whose extra is missing; the other commands need only the plain install.

Exit codes: 0 success, 1 unexpected failure, 2 bad input or a missing extra, 3 model unreachable or unusable or
the run past its deadline (``LONGDOC_RUN_TIMEOUT``, 1800 s by default, as for the server),
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from nodes.context import DOC_ID, Context
from stores.chat_stream import partial_field
from stores.deadlines import run_deadline, run_timeout, run_timeout_message
from stores.errors import InputError, ModelError, RunTimeout
from stores.extras import require_extra
from stores.status import is_status
from stores.usage import call_budget
from surfaces.options import context_option, context_values

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_MODEL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
WORKFLOW_CLI_MODULES = ("surfaces.cli_chain", "surfaces.cli_summarize", "surfaces.cli_offload", "surfaces.cli_route")

DESCRIPTION = """\
longdoc works with documents far longer than a model's context window, offline by default: the commands
below ingest a document or a folder once, then answer, summarize or chat over one document or a whole
collection, list what a namespace holds, draw a document's canvas or route requests.

By default the bundled Qwen2.5-Coder-1.5B-Instruct model runs in-process through llama.cpp and the bundled
multilingual-e5-small embeds text: no API key, no network. Point at any OpenAI-compatible
endpoint with LONGDOC_BASE_URL, LONGDOC_MODEL and LONGDOC_API_KEY. Data lives in LONGDOC_HOME.
"""


def plain(doc: str | None) -> str:
    """A module docstring as a command's ``--help`` prints it: reST markup (``code``, :role:`target`) dropped.

    Hand-made: docutils has no plain-text writer, and these docstrings use only those two marks.
    """
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc or "")
    return text.replace("``", "")


def add_common(parser: argparse.ArgumentParser, *, namespace: bool = True, context: type[Context] = Context) -> None:
    """Flags every workflow command shares (``--embedder`` as ``context`` describes it)."""
    if namespace:
        context_option(parser, Context, "namespace", "--namespace", "-n", default="default")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    context_option(parser, context, "embedder")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bars")


def print_json(value: Any) -> None:
    """Print ``value`` as one line of JSON on stdout."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    sys.stdout.flush()


@contextmanager
def progress(quiet: bool, desc: str) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A handler for the custom progress events graphs stream, drawing tqdm bars on stderr."""
    from tqdm import tqdm

    bars: dict[str, Any] = {}

    def handle(event: dict[str, Any]) -> None:
        if quiet or not isinstance(event, dict):
            return
        total, done = event.get("total"), event.get("done")
        stage = str(event.get("stage", desc))
        if total is not None and done is not None:
            bar = bars.get(stage)
            if bar is None:
                bar = bars[stage] = tqdm(total=int(total), desc=stage, unit="step", file=sys.stderr, leave=False)
            bar.total = int(total)
            bar.n = int(done)
            if event.get("postfix"):
                bar.set_postfix_str(str(event["postfix"]), refresh=False)
            bar.refresh()
        elif event.get("message"):
            tqdm.write(str(event["message"]), file=sys.stderr)

    try:
        yield handle
    finally:
        for bar in bars.values():
            bar.close()


class AnswerPrinter:
    """Prints an answer on stdout as the model writes it, from the graph's ``messages`` stream.

    Only replies of ``nodes`` are shown; ``field`` names the JSON string field that holds the
    answer (``None`` for plain-text replies). A node that calls the model again (a schema retry)
    starts a new line. ``finish(final)`` ends the output: nothing more when what was streamed
    is the final answer, otherwise the final answer on its own line (cached replies stream nothing).
    """

    def __init__(self, nodes: set[str], field: str | None = "answer") -> None:
        self.nodes = nodes
        self.field = field
        self.reply = ""
        self.shown = ""
        self.current: str | None = None

    def on_message(self, chunk: Any, metadata: dict[str, Any]) -> None:
        """Write the streamed text of the shown nodes as it comes."""
        if metadata.get("langgraph_node") not in self.nodes or is_status(getattr(chunk, "id", None)):
            return  # statuses are drawn on stderr from the custom stream
        content = getattr(chunk, "content", "")
        if not isinstance(content, str) or not content:
            return
        key = str(getattr(chunk, "id", None) or metadata.get("langgraph_checkpoint_ns", ""))
        if key != self.current:
            if self.shown:
                sys.stdout.write("\n")
            self.current, self.reply, self.shown = key, "", ""
        self.reply += content
        text = self.reply if self.field is None else partial_field(self.reply, self.field)
        if text and text.startswith(self.shown) and len(text) > len(self.shown):
            sys.stdout.write(text[len(self.shown) :])
            sys.stdout.flush()
            self.shown = text

    def finish(self, final: str) -> None:
        """End the output with the final answer, unless it was already streamed."""
        if self.shown and self.shown.strip() == final.strip():
            sys.stdout.write("\n")
        else:
            if self.shown:
                sys.stdout.write("\n")
            sys.stdout.write(final + "\n")
        sys.stdout.flush()


def wants_stream(args: argparse.Namespace) -> bool:
    """Stream answer tokens: ``--stream``/``--no-stream``, by default when stdout is a terminal."""
    if getattr(args, "json", False):
        return False
    choice = getattr(args, "stream", None)
    return sys.stdout.isatty() if choice is None else bool(choice)


def add_stream_flag(parser: argparse.ArgumentParser) -> None:
    """The ``--stream/--no-stream`` flag of commands whose answer can be shown as it is written."""
    parser.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print the answer token by token as the model writes it (default: when stdout is a terminal)",
    )


def run_graph(
    graph: Any,
    graph_input: dict[str, Any],
    *,
    context: dict[str, Any],
    on_event: Callable[[dict[str, Any]], None],
    config: dict[str, Any] | None = None,
    printer: AnswerPrinter | None = None,
) -> dict[str, Any]:
    """Stream ``graph``: custom events to ``on_event``, model tokens to ``printer``; return the final values.

    The run holds its namespace as a reader (:func:`stores.readers.reading`): no earlier version of a changed file
    is removed under it by another process.
    """
    from stores.readers import reading
    from stores.settings import run_config

    final: dict[str, Any] = {}
    modes = ["custom", "values", "messages"] if printer is not None else ["custom", "values"]
    given = graph_input if isinstance(graph_input, dict) else {}  # None: a resumed run
    namespace = str(given.get("namespace") or context.get("namespace") or "default")
    with reading(namespace):
        for mode, chunk in graph.stream(graph_input, config=run_config(config), context=context, stream_mode=modes):
            if mode == "custom":
                on_event(chunk)
            elif mode == "messages":
                assert printer is not None
                printer.on_message(*chunk)
            else:
                final = chunk
    return final


def ensure_document(
    args: argparse.Namespace, path: str, *, encoding: str | None = None, **context: Any
) -> dict[str, Any]:
    """Ingest ``path`` (a file or a folder) if needed, with a progress bar, and return the ingest graph's output.

    The earlier versions of the files it supersedes are removed then (:func:`surfaces.superseded.retire_superseded`).
    """
    from graphs.ingest import IngestOutput, graph
    from surfaces.superseded import retire_superseded

    request: dict[str, Any] = {"path": path, **({"encoding": encoding} if encoding else {})}
    values = {**context_values(args), **context}
    with progress(args.quiet, "ingest") as handle:
        out = run_graph(graph, request, context=values, on_event=handle)
    retired = retire_superseded(Context.from_mapping(values).namespace)
    out = {k: v for k, v in out.items() if k in IngestOutput.__annotations__}
    return {**out, "superseded": retired["superseded"], **({"kept": retired["kept"]} if retired["kept"] else {})}


def document_id(args: argparse.Namespace, **context: Any) -> str:
    """The doc id of ``args.path``: ingested if needed, or the path itself when it names an ingested document."""
    from pathlib import Path

    if not Path(args.path).exists() and re.fullmatch(DOC_ID, args.path):
        from stores.documents import get_document

        return get_document(args.namespace, args.path).doc_id
    return str(ensure_document(args, args.path, **context)["doc_id"])


def add_documents_options(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """``PATH`` (optional: none reads every document of ``--namespace``) and ``--doc-ids``."""
    if positional:
        parser.add_argument(
            "path",
            nargs="?",
            default=None,
            help="a file (txt, md, pdf, docx, pptx, epub, html), a folder (its files as one collection: new ones "
            "ingested first) or the id of an ingested document; none: every document of --namespace",
        )
    parser.add_argument(
        "--doc-ids", default="", metavar="ID,ID", help="ids of ingested documents read as one collection, not PATH"
    )


def documents_request(args: argparse.Namespace, **context: Any) -> dict[str, Any]:
    """The input fields naming a command's documents: ``doc_id`` for one, ``doc_ids`` for a collection.

    A folder is ingested here (new and changed files only, with a progress bar); no path and no
    ``--doc-ids`` is every document of the namespace.
    """
    from pathlib import Path

    from nodes.collection.resolve import resolve_documents
    from surfaces.superseded import retire_superseded

    given = [d.strip() for d in str(getattr(args, "doc_ids", "") or "").split(",") if d.strip()]
    if given and args.path:
        raise InputError("give PATH or --doc-ids, not both")
    settings = Context.from_mapping({**context_values(args), **context})
    if given:
        values: dict[str, Any] = {"doc_ids": given}
    elif not args.path:
        values = {"whole_namespace": True}
    elif Path(args.path).is_dir():
        values = {"path": args.path}
    else:
        return {"doc_id": document_id(args, **context)}
    with progress(args.quiet, "ingest") as handle:
        docs = resolve_documents({**values, "namespace": args.namespace}, settings, handle)
    retire_superseded(args.namespace)
    return {"doc_ids": docs}  # a collection of one runs as its document


def documents_legend(documents: list[dict[str, Any]], citations: list[str]) -> str:
    """``[2] Title (file.md)`` lines for the documents the citations name (empty for one document)."""
    from nodes.collection.sources import document_name
    from stores.labels import split_label

    tags = []
    for label in citations:
        try:
            tag = split_label(label)[0]
        except InputError:
            continue
        if tag is not None and tag not in tags:
            tags.append(tag)
    by_tag = {int(d["tag"]): d for d in documents}
    lines = []
    for tag in sorted(t for t in tags if t in by_tag):
        doc = by_tag[tag]
        source = str(doc.get("source") or "")
        where = f" ({source})" if source and source != "text" and document_name(doc) != source else ""
        lines.append(f"  [{tag}] {document_name(doc)}{where}")
    return "\n".join(lines)


def _cmd_ingest(args: argparse.Namespace) -> int:
    chunking = {"chunk_size": args.chunk_size} if args.chunk_size else {}
    out = ensure_document(args, args.path, encoding=args.encoding, **chunking)
    if args.json:
        print_json(out)
        return EXIT_INPUT if out.get("failed") else EXIT_OK
    for doc in [d for d in out["documents"] if not d["cached"]] if "files" in out else []:
        print(f"{doc['doc_id']}  {doc['chunks']} chunks, indexed: {doc['source']}")
    for item in out.get("failed", []):
        print(f"failed: {item['path']}: {item['error']}", file=sys.stderr)
    if "files" in out:
        fresh = sum(1 for doc in out["documents"] if not doc["cached"])
        print(
            f"{out['files']} files: {fresh} indexed, {len(out['documents']) - fresh} unchanged, "
            f"{len(out['failed'])} failed; {out['chunks']} chunks"
        )
    else:
        state = "already indexed" if out["cached"] else "indexed"
        print(f"{out['doc_id']}  {out['chunks']} chunks, {state}: {out.get('title', '')}")
    for doc_id in out["superseded"]:
        print(f"{doc_id}  superseded by the file's new version: removed")
    for doc_id in out.get("kept", []):
        print(f"{doc_id}  superseded, kept until the run that reads it ends")
    return EXIT_INPUT if out.get("failed") else EXIT_OK


def describe_models() -> dict[str, Any]:
    """Which chat model (per role) and embedder are active, and where they live."""
    from stores import llama_server as reader
    from stores.embedders import describe_embedder, route_embedder
    from stores.local_model import bundled_file, bundled_where
    from stores.settings import ROLES, get_settings

    settings = get_settings()
    roles = {}
    for role in ROLES:
        spec = settings.role(role)
        where = spec.base_url or bundled_where(spec.model)
        roles[role] = {"model": spec.model, "endpoint": where, "temperature": spec.temperature}
    from stores.checkpoint import checkpoint_location

    return {
        "chat": roles,
        "draft": {"model": settings.draft_model, "file": bundled_file(settings.draft_model)}
        if settings.draft_model
        else None,
        "reader": reader.describe() if any(spec.base_url is None for spec in map(settings.role, ROLES)) else None,
        "embedder": describe_embedder(),
        "route_embedder": describe_embedder(route_embedder()),
        "data_home": str(settings.home),
        "model_cache": str(settings.cache_dir),
        "chroma": settings.chroma_url or str(settings.home / "chroma"),
        "checkpoints": checkpoint_location(),
    }


def _cmd_forget(args: argparse.Namespace) -> int:
    from surfaces.retention import forget_document, forget_namespace, forget_thread

    if args.tenant and not args.thread:
        raise InputError("--tenant narrows --thread to the served thread one tenant knows by that id")
    if args.thread and not (args.doc or args.namespace):
        report = forget_thread(args.thread, tenant=args.tenant or None)
    elif args.doc and not args.thread:
        report = forget_document(args.namespace or "default", args.doc)
    elif args.namespace and not args.thread:
        report = forget_namespace(args.namespace)
    else:
        raise InputError("give --thread ID, --doc ID (with --namespace NS) or --namespace NS alone")
    print_json(report)
    return EXIT_OK


def _cmd_docs(args: argparse.Namespace) -> int:
    from surfaces.listing import namespace_listing

    rows = namespace_listing(args.namespace)
    if args.json:
        print_json({"namespace": args.namespace, "documents": rows})
        return EXIT_OK
    if not rows:
        print(f"no documents in namespace {args.namespace!r}; add some with: longdoc ingest PATH -n {args.namespace}")
        return EXIT_OK
    print(document_table(rows))
    words = sum(int(r["words"]) for r in rows)
    print(f"{len(rows)} documents, {words:,} words, {sum(int(r['chunks']) for r in rows):,} chunks")
    return EXIT_OK


DOCUMENT_COLUMNS = ("id", "title", "words", "chunks", "embedder", "ingested", "source")
"""The columns of ``longdoc docs``."""


def document_table(rows: list[dict[str, Any]], title_chars: int = 40) -> str:
    """The rows of :func:`stores.documents.document_listing` as an aligned text table."""

    def cut(text: str, most: int) -> str:
        text = " ".join(str(text).split())
        return text if len(text) <= most else text[: most - 1] + "…"

    head = DOCUMENT_COLUMNS
    lines = [
        (
            r["doc_id"],
            cut(r["title"], title_chars),
            f"{int(r['words']):,}",
            str(r["chunks"]),
            r["embedder"],
            r["ingested_at"].replace("T", " ").removesuffix("Z") or "-",
            r["source"],
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head) - 1)]
    right = {2, 3}  # numbers
    out = []
    for row in [head, *lines]:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))]
        out.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(out)


def _cmd_models(args: argparse.Namespace) -> int:
    if args.prepare is not None:
        from stores.local_model import prepare_models

        for name, path in prepare_models(args.prepare).items():
            print(f"{name}  {path}")
        return EXIT_OK
    info = describe_models()
    if args.json:
        print_json(info)
        return EXIT_OK
    specs = list(info["chat"].values())
    default = max(specs, key=specs.count)  # the model most roles use
    print(f"chat model   {default['model']}  ->  {default['endpoint']}")
    for role, spec in info["chat"].items():
        if spec != default:
            print(f"  {role:<10} {spec['model']}  ->  {spec['endpoint']}")
    if info["draft"]:
        print(f"  draft      {info['draft']['model']}  ({info['draft']['file']}), for speculative decoding")
    if info["reader"]:
        built = info["reader"]
        print(f"reader       {built['backend']}: {built['reason']}\n             {built['system_info']}")
    emb = info["embedder"]
    print(f"embedder     {emb['name']}: {emb['model']}  ({emb['where']})")
    routing = info["route_embedder"]
    if routing != emb:
        print(f"  router     {routing['name']}: {routing['model']}  ({routing['where']})")
    print(f"data home    {info['data_home']}")
    print(f"model cache  {info['model_cache']}")
    print(f"vector store {info['chroma']}")
    print(f"checkpoints  {info['checkpoints']}")
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    require_extra("serve", "longdoc serve")
    from surfaces.serve import run

    run(args.host, args.port)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The full ``longdoc`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="longdoc", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    p = sub.add_parser("ingest", help="chunk and embed a document, or every document in a folder, into the store")
    p.add_argument(
        "path",
        help="txt, md, pdf, docx, pptx, epub or html file, or a folder: its files of those types, unchanged ones "
        "skipped",
    )
    p.add_argument("--encoding", default=None, help="encoding of a text or html file (default: UTF-8, or a sure guess)")
    context_option(p, Context, "chunk_size")
    add_common(p)
    p.set_defaults(func=_cmd_ingest)

    listed = f"list the documents of a namespace: {', '.join(DOCUMENT_COLUMNS)}"
    p = sub.add_parser("docs", help=listed, description=f"{listed[0].upper()}{listed[1:]}; then the totals.")
    context_option(p, Context, "namespace", "--namespace", "-n", default="default")
    p.add_argument("--json", action="store_true", help="print one JSON object: the namespace and its documents")
    p.set_defaults(func=_cmd_docs)
    for name in WORKFLOW_CLI_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(sub)

    p = sub.add_parser("forget", help="delete a thread, a document or a namespace and everything kept about it")
    p.add_argument(
        "--thread",
        default="",
        help="a thread: its checkpoints, chat items and owner record (and every served thread a caller knows by it)",
    )
    p.add_argument("--tenant", default="", help="with --thread: only the served thread of this tenant")
    p.add_argument("--doc", default="", help="a document (of --namespace, default 'default') and its threads")
    p.add_argument("--namespace", default="", help="alone: the whole namespace, its documents and threads")
    p.set_defaults(func=_cmd_forget)

    p = sub.add_parser("models", help="show the active chat model, embedder and data locations")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--prepare",
        nargs="*",
        metavar="MODEL",
        help="join and check the files of these bundled models (none named: those the settings use) and print them",
    )
    p.set_defaults(func=_cmd_models)

    p = sub.add_parser("serve", help="serve every workflow over HTTP (LangServe)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(func=_cmd_serve)
    return parser


class DeadlinePassed(BaseException):
    """The run went past ``LONGDOC_RUN_TIMEOUT``.

    A ``BaseException``, like ``KeyboardInterrupt``: no retry loop (the HTTP client's, a graph's
    retry policy) may catch it and try again.
    """


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """End the run inside the block once ``seconds`` have passed, in whatever thread it runs.

    Every model call of the run, on this thread or on the graph's worker threads, is held to the
    deadline (:func:`stores.deadlines.run_deadline`): none starts after it, and one in flight is
    cut when it comes, with a :class:`RunTimeout`. On the main thread, where the platform has
    interval timers, a timer signal also raises :class:`DeadlinePassed` in whatever else the run
    is waiting on (a worker thread, a file), again every second until the run has stopped.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not seconds:
        yield
        return
    if not usable:
        with run_deadline(seconds):
            yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise DeadlinePassed(run_timeout_message(seconds))

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        with run_deadline(seconds):
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


UNTIMED_COMMANDS = ("serve", "models")
"""Commands without an overall deadline (a server's runs have their own)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``longdoc`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_INPUT
    # An interactive chat waits on its user: each of its turns has the deadline instead.
    interactive = args.command == "chat" and not getattr(args, "script", None)
    seconds = None if args.command in UNTIMED_COMMANDS or interactive else run_timeout()
    # One bound on model calls for the command (LONGDOC_MAX_MODEL_CALLS); an interactive chat's turns have one each.
    calls = 0 if args.command in UNTIMED_COMMANDS or interactive else None
    try:
        with deadline(seconds), call_budget(calls):
            return int(args.func(args) or EXIT_OK)
    except DeadlinePassed as exc:
        print(f"longdoc: {exc}; raise LONGDOC_RUN_TIMEOUT (0 for no limit) for longer runs", file=sys.stderr)
        if argv is None:
            # The process's own command line: end it now rather than wait for model requests still
            # in flight on worker threads (each would run to its read timeout and retries).
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_MODEL)
        return EXIT_MODEL
    except InputError as exc:
        print(f"longdoc: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except RunTimeout as exc:
        print(f"longdoc: {exc}; raise LONGDOC_RUN_TIMEOUT (0 for no limit) for longer runs", file=sys.stderr)
        return EXIT_MODEL
    except ModelError as exc:
        print(f"longdoc: model error: {exc}", file=sys.stderr)
        return EXIT_MODEL
    except KeyboardInterrupt:
        print("longdoc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
