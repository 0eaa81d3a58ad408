"""Plots of the committed benchmark results, one or two per workflow, drawn without any model.

    python -m bench.plots --results bench/results --out docs/img

reads the result JSON files the benchmarks wrote and draws:

- ``chain_cost.png``: tokens per question and evidence recall against document length, the anytime
  chain beside the full chain (``chain_long.json``, ``long_curve``);
- ``chain_accuracy.png``: F1 against tokens per question for each method (``chain_long.json``,
  ``long``, the previous reading; ``chain_long_b6000.json``, and the evidence-carrying reading's
  ``chain_long_passages.json`` and ``chain_long_batches.json``, when present);
- ``factcheck_frontier.png``: recall against false alarms of every grounding setting and their
  frontier (each ``factcheck_grounding_frontier_*.json``);
- ``route_recall.png``: agent recall at k = 1, 5, 10 per routing method (``route.json``);
- ``offload_tokens.png``: input tokens per turn under each memory policy (``offload.json``).

Only the fields drawn are read, each checked by a pydantic model: a missing or malformed file or
field stops the command with a message naming the file. Nothing is written outside ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PLOTS = ("chain_cost", "chain_accuracy", "factcheck_frontier", "route_recall", "offload_tokens")
"""The files written, without ``.png``."""


class PlotInputError(ValueError):
    """A result file is missing, not JSON, or lacks a field a plot needs."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, allow_inf_nan=False)


class ChainMethod(_Model):
    items: int = Field(gt=0)
    f1: float
    tokens: float
    evidence_recall: float
    words: int = Field(gt=0)


class ChainReport(_Model):
    long: dict[str, ChainMethod]
    long_curve: dict[str, dict[str, ChainMethod]]


class ChainBudgetReport(_Model):
    long: dict[str, ChainMethod]


class GroundingScore(_Model):
    recall: float
    false_alarms: float


class GridPoint(_Model):
    grounding: GroundingScore


class FactcheckFigures(_Model):
    sentences: int
    planted: dict[str, int]
    grounding: GroundingScore


class FactcheckConfig(_Model):
    items: str


class FactcheckReport(_Model):
    figures: FactcheckFigures
    grounding_grid: list[GridPoint] = Field(min_length=1)
    grounding_frontier: list[GroundingScore] = Field(min_length=1)
    config: FactcheckConfig


class RouteMethod(_Model):
    recall_1: float = Field(alias="agent_recall@1")
    recall_5: float = Field(alias="agent_recall@5")
    recall_10: float = Field(alias="agent_recall@10")


class RouteConfig(_Model):
    agents: int
    tools: int
    queries_evaluated: int


class RouteSeed(_Model):
    recall_5: float = Field(alias="agent_recall@5")


class RouteMethods(_Model):
    """The methods drawn; only the product's default must be there."""

    default: RouteMethod
    no_entities: RouteMethod | None = None
    hybrid: RouteMethod | None = None
    bm25: RouteMethod | None = None
    rrf: RouteMethod | None = None
    tool_only: RouteMethod | None = None
    agent_only: RouteMethod | None = None


class RouteReport(RouteMethods):
    config: RouteConfig
    seed_claim: RouteSeed | None = None
    expanded: RouteMethods | None = None


class OffloadPolicy(_Model):
    turns: int
    input_tokens_per_call: float
    input_tokens_per_turn: float
    input_tokens_by_turn: dict[int, float] = Field(min_length=1)


class OffloadConfig(_Model):
    meetings: list[str]
    model: str


class OffloadReport(_Model):
    config: OffloadConfig
    full: OffloadPolicy
    last_k: OffloadPolicy | None = None
    offload: OffloadPolicy
    offload_canvas: OffloadPolicy | None = None


_Report = TypeVar("_Report", bound=BaseModel)


def load(path: Path, model: type[_Report]) -> _Report:
    """``path`` read as JSON and checked against ``model``; any failure is a :class:`PlotInputError`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlotInputError(f"{path}: no such result file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlotInputError(f"{path}: not a readable JSON file ({exc})") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise PlotInputError(f"{path}: {problems}") from None


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display), imported when a plot is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3, "font.size": 10})
    return plt


def _save(fig: Any, out: Path, name: str) -> Path:
    path = out / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})  # no version stamp: same data, same bytes
    _pyplot().close(fig)
    return path


def _log_axis(axis: Any, ticks: Sequence[float]) -> None:
    """A log axis labelled with plain numbers at ``ticks`` (no minor labels)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    axis.set_major_locator(FixedLocator(list(ticks)))
    axis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}"))
    axis.set_minor_formatter(NullFormatter())


def _method_label(name: str) -> str:
    return {"chow-liu-bfs": "full chain (chow-liu-bfs)", "anytime": "anytime (default)"}.get(name, name)


def plot_chain_cost(report: ChainReport, out: Path) -> Path:
    """Tokens per question and evidence recall against words, for each method measured at several lengths."""
    plt = _pyplot()
    series: dict[str, list[ChainMethod]] = {}
    for methods in report.long_curve.values():
        for name, row in methods.items():
            series.setdefault(name, []).append(row)
    fig, (cost, recall) = plt.subplots(1, 2, figsize=(10, 4))
    for name in ("anytime", "chow-liu-bfs", *sorted(set(series) - {"anytime", "chow-liu-bfs"})):
        rows = sorted(series.get(name, []), key=lambda r: r.words)
        if len(rows) < 2 and name != "chow-liu-bfs":
            continue  # one length is no curve
        if not rows:
            continue
        words = [r.words for r in rows]
        line = cost.plot(words, [r.tokens for r in rows], marker="o", label=_method_label(name))[0]
        recall.plot(words, [r.evidence_recall for r in rows], marker="o", color=line.get_color())
        for r in rows:
            cost.annotate(f"n={r.items}", (r.words, r.tokens), textcoords="offset points", xytext=(4, 4), fontsize=8)
    for ax in (cost, recall):
        ax.set_xscale("log")
        _log_axis(ax.xaxis, (2_500, 5_000, 10_000, 20_000, 40_000))
        ax.set_xlabel("document length (words)")
    cost.set_yscale("log")
    _log_axis(cost.yaxis, (2_000, 5_000, 10_000, 20_000, 50_000))
    cost.set_ylabel("tokens per question")
    cost.set_title("Cost of a question")
    cost.legend(fontsize=8)
    recall.set_ylabel("evidence recall (supporting paragraphs read)")
    recall.set_ylim(0, 1.05)
    recall.set_title("Evidence found")
    return _save(fig, out, "chain_cost")


def plot_chain_accuracy(
    report: ChainReport,
    budget: ChainBudgetReport | None,
    out: Path,
    readings: Sequence[tuple[str, ChainBudgetReport]] = (),
) -> Path:
    """F1 against tokens per question, one point per method (and the doubled budget, and each
    evidence-carrying reading measured, labelled by its setting)."""
    plt = _pyplot()

    def before(name: str) -> str:  # the previous reading's label once a later one is drawn too
        return _method_label(name) if not readings or name == "topk" else f"{name}, previous reading"

    points = [(before(name), row) for name, row in report.long.items()]
    if budget is not None:
        points += [(f"{before(name)}, budget 6,000", row) for name, row in budget.long.items()]
    for setting, current in readings:
        points += [(f"{name}, {setting}", row) for name, row in current.long.items() if name != "topk"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, row in sorted(points, key=lambda p: p[1].tokens):  # a legend: neighbours' labels would overlap
        ax.scatter(row.tokens, row.f1, s=40, label=f"{label} (n={row.items}): F1 {row.f1:.2f}")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xscale("log")
    _log_axis(ax.xaxis, (2_000, 5_000, 10_000, 20_000, 50_000))
    ax.set_xlabel("tokens per question")
    ax.set_ylabel("token F1")
    top = max(row.f1 for _, row in points)
    ax.set_ylim(0, max(0.1, top * 1.25))
    lo, hi = min(r.tokens for _, r in points), max(r.tokens for _, r in points)
    ax.set_xlim(lo / 1.5, hi * 3)
    ax.set_title("Questions over long documents: accuracy against tokens")
    return _save(fig, out, "chain_accuracy")


def plot_factcheck_frontier(reports: Sequence[tuple[str, FactcheckReport]], out: Path) -> Path:
    """Every grounding setting's recall against false alarms, the frontier of each split and the default."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, report in reports:
        planted = sum(report.figures.planted.values())
        grid = [p.grounding for p in report.grounding_grid]
        dots = ax.scatter(
            [g.false_alarms for g in grid], [g.recall for g in grid], s=10, alpha=0.3, label=f"settings, {label}"
        )
        color = dots.get_facecolor()[0][:3]
        frontier = sorted(report.grounding_frontier, key=lambda g: g.false_alarms)
        ax.step(
            [g.false_alarms for g in frontier],
            [g.recall for g in frontier],
            where="post",
            color=color,
            label=f"frontier, {label} ({report.figures.sentences} sentences, {planted} errors)",
        )
        default = report.figures.grounding
        star = {"marker": "*", "s": 160, "edgecolors": "black", "zorder": 5}
        ax.scatter(default.false_alarms, default.recall, color=color, label=f"default setting, {label}", **star)
    ax.set_xlabel("false alarms (share of faithful sentences flagged)")
    ax.set_ylabel("recall (share of planted errors caught)")
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1.02)
    ax.set_title("Grounding check: recall against false alarms")
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, out, "factcheck_frontier")


def plot_route_recall(report: RouteReport, out: Path) -> Path:
    """Agent recall at k = 1, 5, 10 for each routing method, with the model-written examples dashed."""
    plt = _pyplot()
    ks = (1, 5, 10)
    fig, ax = plt.subplots(figsize=(7, 4.5))

    def draw(name: str, row: RouteMethod, style: str, color: Any = None) -> Any:
        values = (row.recall_1, row.recall_5, row.recall_10)
        width = 2.5 if name.startswith("default") else 1.2
        return ax.plot(ks, values, style, marker="o", linewidth=width, label=name, color=color)[0]

    color = None
    for name in RouteMethods.model_fields:  # the product's default first
        row = getattr(report, name)
        if row is not None:
            line = draw(name, row, "-")
            color = color or line.get_color()
    if report.expanded is not None:
        draw("default + model-written examples", report.expanded.default, "--", color)
    if report.seed_claim is not None:
        seed = "the seed's reported R@5 (another embedder and split)"
        ax.scatter([5], [report.seed_claim.recall_5], marker="*", s=160, color="black", zorder=5, label=seed)
    ax.set_xticks(ks)
    ax.set_xlabel("k (agents returned)")
    ax.set_ylabel("agent recall@k")
    ax.set_ylim(0, 1)
    cfg = report.config
    ax.set_title(f"Routing: {cfg.queries_evaluated} requests, {cfg.agents} agents, {cfg.tools} tools")
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, out, "route_recall")


def plot_offload_tokens(report: OffloadReport, out: Path) -> Path:
    """Input tokens of the answering call by turn, and per call against per turn, for each memory policy."""
    plt = _pyplot()
    policies = {
        name: policy
        for name, policy in (
            ("full history", report.full),
            ("last-k turns", report.last_k),
            ("offload", report.offload),
            ("offload + canvas", report.offload_canvas),
        )
        if policy is not None
    }
    fig, (by_turn, bars) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, policy in policies.items():
        turns = sorted(policy.input_tokens_by_turn)
        by_turn.plot(turns, [policy.input_tokens_by_turn[t] for t in turns], marker="o", label=name)
    by_turn.set_xlabel("turn of the session")
    by_turn.set_ylabel("input tokens of the answering call")
    by_turn.set_title("Working memory by turn")
    by_turn.legend(fontsize=8)
    names = list(policies)
    x = range(len(names))
    per_call = [policies[n].input_tokens_per_call for n in names]
    per_turn = [policies[n].input_tokens_per_turn for n in names]
    bars.bar([i - 0.2 for i in x], per_call, width=0.4, label="per answering call")
    bars.bar([i + 0.2 for i in x], per_turn, width=0.4, label="per turn, offloader calls included")
    bars.set_xticks(list(x), names, fontsize=8)
    bars.set_ylabel("mean input tokens")
    setup = f"{report.full.turns} turns, {len(report.config.meetings)} meetings, {report.config.model}"
    bars.set_title(setup, fontsize=9)
    bars.legend(fontsize=8)
    return _save(fig, out, "offload_tokens")


READINGS = {
    "chain_long_passages.json": "quotes, 1,000-token batches (previous default)",
    "chain_long_batches.json": "quotes, two 1,500-token batches (default)",
}
"""Result files of the evidence-carrying reading, each drawn when present, with the setting it ran under."""


def draw_all(results: Path, out: Path) -> list[Path]:
    """Every plot from the result files under ``results``, written into ``out``; returns the files."""
    chain = load(results / "chain_long.json", ChainReport)
    budget_file = results / "chain_long_b6000.json"
    budget = load(budget_file, ChainBudgetReport) if budget_file.exists() else None
    readings = [
        (setting, load(results / name, ChainBudgetReport))
        for name, setting in READINGS.items()
        if (results / name).exists()
    ]
    frontier_files = sorted(results.glob("factcheck_grounding_frontier_*.json"))
    if not frontier_files:
        raise PlotInputError(f"{results}: no factcheck_grounding_frontier_*.json")
    frontiers = [(f"items {r.config.items}", r) for r in (load(f, FactcheckReport) for f in frontier_files)]
    route = load(results / "route.json", RouteReport)
    offload = load(results / "offload.json", OffloadReport)
    out.mkdir(parents=True, exist_ok=True)
    return [
        plot_chain_cost(chain, out),
        plot_chain_accuracy(chain, budget, out, readings),
        plot_factcheck_frontier(frontiers, out),
        plot_route_recall(route, out),
        plot_offload_tokens(offload, out),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plots", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("bench/results"), help="folder of the result JSON files")
    parser.add_argument("--out", type=Path, default=Path("docs/img"), help="folder the PNG files are written to")
    args = parser.parse_args(argv)
    try:
        written = draw_all(args.results, args.out)
    except PlotInputError as exc:
        print(f"bench.plots: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
