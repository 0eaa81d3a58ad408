"""``longdoc chat`` and ``longdoc canvas``: a small-memory session over a document, and its Mermaid canvas.

    longdoc chat report.md                              interactive; an empty line or Ctrl-D ends
    longdoc chat report.md --script questions.txt       one question per line, JSON lines out
    longdoc chat report.md --session s1                 resume session s1 (pinned state, offloaded turns)
    longdoc chat reports/                               talk about every document of a folder at once
    longdoc canvas report.md --out report.html          the canvas as an offline HTML page (or .mmd)

A chat session is one checkpointed thread: run the same command with ``--session ID`` to go on
with it after a restart. ``--script FILE`` reads questions (one per line; blank lines and lines
starting with ``#`` are skipped; a ``.json`` file may hold a list of strings) and prints one JSON
object per turn: ``{"turn", "asked", "answer", "sources", "input_tokens", "citations", "documents", "offloaded",
"recalled", "cut"}`` (``asked``: the question the documents were read for, the turn's made standalone; empty when
the turn only needed the conversation).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from nodes.inputs import check_workflow_input
from nodes.offload.context import OffloadContext
from stores.deadlines import run_timeout
from stores.errors import InputError
from stores.usage import call_budget
from surfaces.cli import (
    EXIT_OK,
    AnswerPrinter,
    add_common,
    add_documents_options,
    add_stream_flag,
    deadline,
    document_id,
    documents_request,
    plain,
    print_json,
    progress,
    run_graph,
    wants_stream,
)
from surfaces.options import context_option, context_values


def register(subparsers: Any) -> None:
    """Add the ``chat`` and ``canvas`` commands."""
    p = subparsers.add_parser(
        "chat",
        help="a multi-turn session that keeps its working memory small (Mermaid canvas + offloading)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_documents_options(p)
    p.add_argument("--script", default=None, help="run the questions of FILE non-interactively (JSON lines out)")
    p.add_argument("--session", default=None, help="session id; the same id resumes the session")
    context_option(p, OffloadContext, "policy")
    p.add_argument("--goal", default="", help="a goal to pin for the whole session")
    context_option(p, OffloadContext, "token_budget")
    context_option(p, OffloadContext, "keep_turns")
    add_common(p)
    add_stream_flag(p)
    p.set_defaults(func=_cmd_chat)

    p = subparsers.add_parser(
        "canvas",
        help="draw the document's structure as a Mermaid canvas",
        description="Write the document's canvas (made once per document, then cached) as Mermaid text or "
        "as an HTML page that draws it offline with the bundled mermaid.js.",
    )
    p.add_argument("path", help="file (txt, md, pdf, docx, pptx, epub, html) or the id of an ingested document")
    p.add_argument("--out", default=None, help="FILE.html (offline page) or FILE.mmd (Mermaid text); default: stdout")
    context_option(p, OffloadContext, "canvas_max_nodes", "--max-nodes")
    p.add_argument("--rebuild", action="store_true", help="ask the model again instead of using the cached canvas")
    add_common(p)
    p.set_defaults(func=_cmd_canvas)


def read_script(path: str) -> list[str]:
    """Questions of a script file: a JSON list of strings, or one question per line."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"no such script file: {path}")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not a UTF-8 text file of questions ({exc.reason} at byte {exc.start})") from exc
    if file.suffix.lower() == ".json":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(items, list) or not all(isinstance(q, str) for q in items):
            raise InputError(f"{path} must hold a JSON list of questions (strings)")
        questions = [q.strip() for q in items if q.strip()]
    else:
        questions = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not questions:
        raise InputError(f"{path} holds no question")
    return questions


def _chat_context(args: argparse.Namespace) -> dict[str, Any]:
    return context_values(args, OffloadContext)


def turn_json(out: dict[str, Any]) -> dict[str, Any]:
    """The JSON line of one turn."""
    return {
        "turn": out["turn"],
        "asked": out.get("asked", ""),
        "answer": out["answer"],
        "sources": out.get("sources", []),
        "input_tokens": out["input_tokens"],
        "citations": out["citations"],
        "documents": out.get("documents", []),
        "offloaded": [o["id"] for o in out["offloaded"]],
        "recalled": [r["id"] for r in out["recalled"]],
        "cut": out["cut"],
    }


def _status(out: dict[str, Any]) -> str:
    offloaded = ", ".join(o["id"] for o in out["offloaded"]) or "-"
    recalled = ", ".join(r["id"] + ("" if r["found"] else "?") for r in out["recalled"]) or "-"
    cut = f" · budget cut {len(out['cut'])}" if out["cut"] else ""
    asked = out.get("asked") or ""
    read = f'read for "{asked}"' if asked else "read nothing"
    return (
        f"[turn {out['turn']} · {read} · {out['input_tokens']} input tokens · offloaded {offloaded} · "
        f"recalled {recalled}{cut}]"
    )


def _interactive() -> Any:
    """Questions typed on stdin, until an empty line, ``exit`` or end of input."""
    while True:
        print("you> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line or not line.strip() or line.strip().lower() in ("exit", "quit"):
            return
        yield line.strip()


def _cmd_chat(args: argparse.Namespace) -> int:
    from graphs.offload.graph import builder
    from stores.checkpoint import open_checkpointer, thread_lock
    from surfaces.resume import forget_refused, plan

    questions = read_script(args.script) if args.script else None
    for question in questions or ():  # every scripted question, before the document is ingested or a thread locked
        check_workflow_input("chat", {"question": question})
    session = args.session or f"chat-{uuid.uuid4().hex[:12]}"
    config: dict[str, Any] = {"configurable": {"thread_id": session}}
    context = _chat_context(args)
    stream = wants_stream(args) and not args.script
    turn_seconds = None if args.script else run_timeout()
    # One run at a time per session: another `longdoc chat --session` (or a server) on it is refused.
    with thread_lock(session), open_checkpointer() as saver:
        graph = builder.compile(checkpointer=saver)
        previous = graph.get_state(cast(RunnableConfig, config)).values
        started = bool(previous.get("turn"))
        if started and args.policy is None and previous.get("policy"):
            context["policy"] = previous["policy"]
        # the first turn names the documents; a resumed session goes on with them unless others are named
        documents = documents_request(args) if not started or args.path or args.doc_ids else {}
        if not args.quiet and not args.script:
            state = f"resuming session {session} at turn {previous['turn'] + 1}" if started else f"session {session}"
            print(f"{state} (resume it later with --session {session})", file=sys.stderr)
        for question in questions if questions is not None else _interactive():
            request: dict[str, Any] = {"question": question, **documents}
            if args.goal and not started:
                request["goal"] = args.goal
            printer = AnswerPrinter({"answer"}, field=None) if stream else None
            # A turn that died half-way is resumed when asked again, rolled back when another comes.
            turn_input, turn_config = plan(graph, request, cast(RunnableConfig, config))
            # A scripted session has one deadline and one bound on model calls in all (set by ``longdoc``); an
            # interactive one, one of each per turn.
            with (
                progress(args.quiet or bool(args.script), "chat") as handle,
                deadline(turn_seconds),
                call_budget(0 if args.script else None),
                forget_refused(graph, turn_config),
            ):
                out = run_graph(
                    graph, turn_input, context=context, on_event=handle, config=dict(turn_config), printer=printer
                )
            started = True
            if args.script or args.json:
                print_json(turn_json(out))
                continue
            reply = str(out["messages"][-1].content) if out.get("messages") else out["answer"]
            if printer is not None:  # the answer, then the sources it cites (document, sentence, quoted words)
                printer.finish(reply)
            else:
                print(reply)
            if not args.quiet:
                print(_status(out), file=sys.stderr)
    return EXIT_OK


def _cmd_canvas(args: argparse.Namespace) -> int:
    from nodes.canvas_render import mermaid_js_source, render_html
    from nodes.offload.canvas_writer import ensure_canvas
    from nodes.offload.context import check_context
    from stores.documents import get_document, write_atomic
    from stores.models import llm_for
    from stores.usage import track_usage
    from stores.vectorstore import get_store

    out_path = Path(args.out) if args.out else None
    if out_path is not None and out_path.suffix.lower() not in (".html", ".htm", ".mmd"):
        raise InputError(f"--out must end in .html or .mmd, got {out_path.name!r}")
    if out_path is not None and (out_path.is_dir() or not out_path.parent.is_dir()):
        where = "is a folder" if out_path.is_dir() else "is in a folder that does not exist"
        raise InputError(f"--out {out_path} {where}")
    ctx = OffloadContext.from_mapping(context_values(args, OffloadContext))
    check_context(ctx)
    doc_id = document_id(args)
    info = get_document(ctx.namespace, doc_id)
    with progress(args.quiet, "canvas") as handle, track_usage() as usage:
        handle({"stage": "canvas", "message": f"canvas of {info.title or doc_id}"})
        canvas, cached = ensure_canvas(
            get_store(ctx.namespace, ctx.embedder),
            info,
            llm_for("offloader", ctx, model=ctx.canvas_model),
            max_nodes=ctx.canvas_max_nodes,
            input_tokens=ctx.canvas_input_tokens,
            max_tokens=ctx.canvas_max_tokens,
            refresh=args.rebuild,
            system_prompt=ctx.canvas_prompt,
        )
    if out_path is not None:
        if out_path.suffix.lower() == ".mmd":
            write_atomic(out_path, canvas.mermaid)
        else:
            write_atomic(out_path, render_html(canvas.mermaid, canvas.title or info.title, mermaid_js_source()))
    if args.json:
        print_json(
            {
                "doc_id": doc_id,
                "title": canvas.title,
                "source": canvas.source,
                "error": canvas.error,
                "cached": cached,
                "nodes": len(canvas.spec.nodes),
                "edges": canvas.mermaid.count("-->"),
                "mermaid": canvas.mermaid,
                "out": str(out_path) if out_path else None,
                "usage": usage,
            }
        )
    elif out_path is None:
        sys.stdout.write(canvas.mermaid)
    if not args.quiet:
        how = "cached" if cached else ("outline fallback: " + canvas.error if canvas.error else "drawn by the model")
        where = f" -> {out_path}" if out_path else ""
        print(f"canvas of {doc_id}: {len(canvas.spec.nodes)} nodes ({how}){where}", file=sys.stderr)
    return EXIT_OK
