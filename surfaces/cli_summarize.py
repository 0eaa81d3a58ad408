"""``longdoc summarize``: summarize a document with the expert-editor workflow or a baseline.

    longdoc summarize report.md --query "what was decided about the budget" --length 100 --format bullets
    longdoc summarize reports/ --query "what was decided about the budget"     # every document of the folder

Progress is shown per round and per expert on stderr. ``--json`` prints one object with the
summary, its sentences and citations, the rounds and the token counts. ``--thread-id`` checkpoints
the run: the same command with the same id resumes a run that was interrupted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, get_args

from langchain_core.runnables import RunnableConfig

from nodes.inputs import check_workflow_input
from nodes.summarize.context import DEFAULT_LENGTH, Method, SummarizeContext
from surfaces.cli import (
    EXIT_OK,
    add_common,
    add_documents_options,
    documents_legend,
    documents_request,
    plain,
    print_json,
    progress,
    run_graph,
)
from surfaces.options import context_option, context_values

METHODS: tuple[str, ...] = get_args(Method)


def register(subparsers: Any) -> None:
    """Add the ``summarize`` command."""
    p = subparsers.add_parser(
        "summarize",
        help="summarize with an editor agent that questions expert agents, then fact-checks",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_documents_options(p)
    p.add_argument("--query", default="", help="focus of the summary, e.g. 'what was decided about the budget'")
    p.add_argument(
        "--length",
        type=int,
        default=DEFAULT_LENGTH,
        help=f"target length in words, characters for Chinese (default {DEFAULT_LENGTH})",
    )
    p.add_argument("--format", choices=("paragraphs", "bullets"), default="paragraphs", help="layout")
    p.add_argument("--language", choices=("zh", "en"), default="", help="output language (default: the document's)")
    p.add_argument("--method", choices=METHODS, default=METHODS[0], help=f"summarizer (default {METHODS[0]})")
    context_option(p, SummarizeContext, "max_rounds")
    context_option(p, SummarizeContext, "questions_per_round", "--questions")
    context_option(p, SummarizeContext, "factcheck")
    context_option(p, SummarizeContext, "length_fit")
    p.add_argument("--thread-id", default=None, help="checkpoint under this id; run again with it to resume")
    add_common(p)
    p.set_defaults(func=_cmd_summarize)


def summarize_command(args: argparse.Namespace) -> dict[str, Any]:
    """Run the summarize graph for parsed arguments and return its output."""
    from graphs.summarize.graph import builder, graph

    asked = {
        "query": args.query,
        "length": args.length,
        "format": args.format,
        "language": args.language,
        "method": args.method,
    }
    check_workflow_input("summarize", asked)  # before the document is ingested or a thread locked
    request = {**documents_request(args), **asked}
    context = context_values(args, SummarizeContext)
    with progress(args.quiet, "summarize") as handle:
        if not args.thread_id:
            return run_graph(graph, request, context=context, on_event=handle)
        from stores.checkpoint import open_checkpointer, thread_lock
        from surfaces.resume import forget_refused, plan

        with thread_lock(args.thread_id), open_checkpointer() as saver:
            checkpointed = builder.compile(checkpointer=saver)
            config: RunnableConfig = {"configurable": {"thread_id": args.thread_id}}
            # The same request resumes an unfinished run; another one starts from the last finished step.
            graph_input, config = plan(checkpointed, request, config)
            if graph_input is None and not args.quiet:
                print(f"resuming the unfinished run of thread {args.thread_id}", file=sys.stderr)
            with forget_refused(checkpointed, config):
                return run_graph(checkpointed, graph_input, context=context, on_event=handle, config=dict(config))


def json_result(out: dict[str, Any]) -> dict[str, Any]:
    """The ``--json`` object."""
    from stores.usage import usage_totals

    totals = usage_totals(out.get("usage", {}))
    return {
        "summary": out["summary"],
        "sentences": out["sentences"],
        "rounds": out["rounds"],
        "tokens": {**totals, "by_role": out.get("usage", {})},
        "doc_id": out["doc_id"],
        "documents": out.get("documents", []),
        "method": out["method"],
        "stop_reason": out["stop_reason"],
        "factcheck": out["factcheck"],
        "fit": out.get("fit", {}),
        "log": out["log"],
    }


def _cmd_summarize(args: argparse.Namespace) -> int:
    from nodes.summarize.sentences import with_citations
    from stores.text import detect_language
    from stores.usage import usage_totals

    out = summarize_command(args)
    if args.json:
        print_json(json_result(out))
        return EXIT_OK
    print(with_citations(out["sentences"], args.format, detect_language(out["summary"])))
    legend = documents_legend(out.get("documents", []), [c for s in out["sentences"] for c in s["citations"]])
    if legend:
        print("\ndocuments:\n" + legend)
    if not out["sentences"]:
        print(
            "longdoc: no sentence of the summary survived the fact-check; run with --factcheck mark to see them",
            file=sys.stderr,
        )
    if not args.quiet:
        totals = usage_totals(out.get("usage", {}))
        check = out["factcheck"]
        print(
            f"\n{out['method']}: {out['rounds']} rounds ({out['stop_reason'] or 'done'}), {totals['calls']} LLM calls, "
            f"tokens in {totals['input']} / out {totals['output']}; fact-check: {check['supported']} supported, "
            f"{check['fixed']} fixed, {check['disputed']} disputed, {check['dropped']} dropped "
            f"of {check['sentences']} sentences; {_length_line(out.get('fit', {}))}",
            file=sys.stderr,
        )
        for sentence in out["sentences"]:
            if sentence.get("flagged_by"):
                why = "; ".join(sentence.get("problems", [])) or "the checker model judged it unsupported"
                flagged = ", ".join(sentence["flagged_by"])
                print(f"{sentence['verdict']} ({flagged}): {sentence['text']} [{why}]", file=sys.stderr)
    return EXIT_OK


def _length_line(fit: dict[str, Any]) -> str:
    """The length reached against the target, and what the fill step added."""
    if not fit:
        return "length not measured"
    added = sum(fit.get("filled", {}).values())
    extra = f", {added} sentences added from answers and chunks" if added else ""
    return f"length {fit['units']} of {fit['target']} ({fit['low']}-{fit['high']}){extra}"
