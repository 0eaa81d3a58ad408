"""Drawing a Chow-Liu tree and the order the workers read the chunks in, as Mermaid.

Nodes are chunks, labelled with their reading position, id and the first words of their text (their
section heading shows on hover; without the texts, the heading is the label); edges are tree edges
labelled with their similarity weight, drawn thicker the heavier they are; the root is highlighted. A
tree wider than it is deep is laid out left to right. Past :data:`COLLAPSE_OVER` chunks, each subtree
of chunks nobody read (neither read nor skipped) is one node, ``+65``. The page opens on the reading
path (the root in view) and has a legend. The text uses the same escaping as the canvas, so it is
valid Mermaid whatever the section titles and texts hold.
"""

from __future__ import annotations

import html
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodes.canvas_render import mermaid_js_source, mermaid_label, render_html

COLLAPSE_OVER = 50
"""Chunks past which the unread subtrees are drawn collapsed."""

FIRST_WORDS = 8
"""Words of a chunk's text a node shows."""

LABEL_MAX = 64
"""Characters of a node's label."""

FILLS = {
    "root": ("#ffe08a", "#b8860b", "the first chunk read (the root)"),
    "read": ("#cfe8ff", "#1f6fb2", "read, numbered in reading order"),
    "skipped": ("#eeeeee", "#999999", "skipped: judged not worth reading"),
    "unread": ("#ececff", "#9370db", "not reached"),
    "folded": ("#ffffff", "#9370db", "+N: a subtree of N chunks not reached, folded"),
}
"""Fill, stroke and meaning of each kind of node (``unread`` is Mermaid's own default)."""


@dataclass
class _Drawing:
    """What a tree page draws: the Mermaid text, a hover text per Mermaid node id, the node to open on."""

    text: str
    hover: dict[str, str] = field(default_factory=dict)
    focus: str = ""


def first_words(text: str, words: int = FIRST_WORDS) -> str:
    """The first ``words`` words of a chunk's text, its heading lines (shown on hover) and Markdown marks dropped."""
    body = " ".join(line for line in text.splitlines() if not line.lstrip().startswith("#")) or text
    kept = [w for w in body.split() if w.strip("#*_>`-|")]
    cut = [w.strip("*_`") for w in kept[:words]]
    return " ".join(cut) + (" …" if len(kept) > words else "")


def _adjacency(edges: Sequence[Sequence[Any]]) -> dict[str, list[tuple[str, float]]]:
    near: dict[str, list[tuple[str, float]]] = {}
    for a, b, weight in edges:
        near.setdefault(str(a), []).append((str(b), float(weight)))
        near.setdefault(str(b), []).append((str(a), float(weight)))
    return near


def _rooted(nodes: Sequence[str], edges: Sequence[Sequence[Any]], root: str) -> dict[str, str]:
    """Each node's parent in the tree hung from ``root`` (nodes of other components from their first node)."""
    near = _adjacency(edges)
    parent: dict[str, str] = {}
    seen: set[str] = set()
    for start in [root, *nodes]:
        if start in seen:
            continue
        seen.add(start)
        queue = deque([start])
        while queue:
            here = queue.popleft()
            for there, _ in near.get(here, []):
                if there not in seen:
                    seen.add(there)
                    parent[there] = here
                    queue.append(there)
    return parent


def tree_direction(nodes: Sequence[str], parent: Mapping[str, str]) -> str:
    """``LR`` for a tree wider (most nodes at one depth) than it is deep, else ``TD``."""
    depth: dict[str, int] = {}

    def level(node: str) -> int:
        chain = []
        while node not in depth and node in parent:
            chain.append(node)
            node = parent[node]
        base = depth.setdefault(node, 0)
        for i, step in enumerate(reversed(chain), start=1):
            depth[step] = base + i
        return depth[chain[0]] if chain else base

    levels = [level(n) for n in nodes]
    widest = max((levels.count(d) for d in set(levels)), default=0)
    return "LR" if widest > max(levels, default=0) + 1 else "TD"


def _folds(nodes: Sequence[str], parent: Mapping[str, str], seen: set[str]) -> dict[str, list[str]]:
    """Subtrees without a read or skipped chunk, by their top node (hung from a node on the reading path)."""
    children: dict[str, list[str]] = {}
    for node in nodes:
        if node in parent:
            children.setdefault(parent[node], []).append(node)
    reached: set[str] = set()
    for node in seen:
        while node not in reached:
            reached.add(node)
            if node not in parent:
                break
            node = parent[node]
    folds: dict[str, list[str]] = {}
    for node in nodes:
        if node in reached or (node in parent and parent[node] not in reached):
            continue
        members, stack = [], [node]
        while stack:
            here = stack.pop()
            members.append(here)
            stack.extend(children.get(here, []))
        if len(members) > 1:
            folds[node] = members
    return folds


def _tree_drawing(
    order: Sequence[str],
    edges: Sequence[Sequence[Any]],
    sections: Mapping[str, str],
    texts: Mapping[str, str],
    direction: str | None,
    skipped: Sequence[str],
    collapse_over: int,
) -> _Drawing:
    passed = set(skipped)
    position = {cid: i for i, cid in enumerate(order, start=1)}
    nodes = list(dict.fromkeys([*order, *(str(e[0]) for e in edges), *(str(e[1]) for e in edges)]))
    parent = _rooted(nodes, edges, order[0] if order else (nodes[0] if nodes else ""))
    folds = _folds(nodes, parent, set(order) | passed) if len(nodes) > collapse_over else {}
    folded = {m: top for top, members in folds.items() for m in members}
    shown = [n for n in nodes if n not in folded or n in folds]
    ids = {cid: f"k{i}" for i, cid in enumerate(shown)}
    drawing = _Drawing("", focus=ids[order[0]] if order else "")
    lines = [f"flowchart {direction or tree_direction(nodes, parent)}"]
    for cid in shown:
        if cid in folds:
            members = folds[cid]
            lines.append(f'    {ids[cid]}["{mermaid_label(f"+{len(members)} chunks", LABEL_MAX)}"]')
            drawing.hover[ids[cid]] = f"{len(members)} chunks not reached: " + ", ".join(members)
            continue
        where = f"#{position[cid]} " if cid in position else ("skipped " if cid in passed else "unread ")
        section = sections.get(cid, "")
        said = first_words(texts[cid]) if texts.get(cid) else section
        lines.append(f'    {ids[cid]}["{mermaid_label(f"{where}{cid}" + (f" · {said}" if said else ""), LABEL_MAX)}"]')
        drawing.hover[ids[cid]] = " · ".join(p for p in (cid, section) if p)
    weights: list[float] = []
    for a, b, weight in edges:
        a, b = (str(b), str(a)) if parent.get(str(a)) == str(b) else (str(a), str(b))  # hung from the root
        if a in folded and b in folded and folded[a] == folded[b]:
            continue
        lines.append(f'    {ids[folded.get(a, a)]} ---|"{float(weight):.2f}"| {ids[folded.get(b, b)]}')
        weights.append(float(weight))
    low, high = min(weights, default=0.0), max(weights, default=0.0)
    for i, weight in enumerate(weights):
        width = 1.0 + 3.0 * ((weight - low) / (high - low) if high > low else 0.5)
        lines.append(f"    linkStyle {i} stroke-width:{width:.1f}px")
    lines += _classes(order, shown, ids, passed, set(folds))
    drawing.text = "\n".join(lines) + "\n"
    return drawing


def _classes(
    order: Sequence[str], shown: Sequence[str], ids: Mapping[str, str], passed: set[str], folds: set[str]
) -> list[str]:
    """The ``classDef`` and ``class`` lines: root, read, skipped, folded."""
    lines: list[str] = []

    def paint(kind: str, members: Sequence[str], extra: str = "") -> None:
        if members:
            fill, stroke, _ = FILLS[kind]
            lines.append(f"    classDef {kind} fill:{fill},stroke:{stroke}{extra}")
            lines.append(f"    class {','.join(ids[m] for m in members)} {kind}")

    if order:
        paint("read", order[1:])
        paint("root", order[:1], ",stroke-width:2px")
    paint("skipped", [c for c in shown if c in passed and c not in order], ",color:#777777,stroke-dasharray:4 3")
    paint("folded", [c for c in shown if c in folds], ",stroke-dasharray:2 2")
    return lines


def tree_mermaid(
    order: Sequence[str],
    edges: Sequence[Sequence[Any]],
    sections: Mapping[str, str] | None = None,
    direction: str | None = None,
    skipped: Sequence[str] = (),
    texts: Mapping[str, str] | None = None,
    collapse_over: int = COLLAPSE_OVER,
) -> str:
    """Mermaid flowchart of the tree ``edges`` (``[chunk, chunk, weight]``): read chunks by position, skipped marked.

    ``texts``: each chunk's text, whose first words label its node (else its section does); ``direction``
    None lays a wide tree out left to right (:func:`tree_direction`); past ``collapse_over`` chunks, the
    subtrees nobody reached are folded into one node each.
    """
    return _tree_drawing(order, edges, sections or {}, texts or {}, direction, skipped, collapse_over).text


_LEGEND_STYLE = """<style>
#legend { display: flex; flex-wrap: wrap; gap: 0.3rem 1.1rem; margin: 0 0 0.5rem; font-size: 0.85rem; color: #57606a; }
#legend .key { display: inline-flex; align-items: center; gap: 0.35rem; }
#legend .swatch { width: 1.1rem; height: 0.8rem; border: 1px solid; border-radius: 2px; }
#legend .edge { width: 1.4rem; height: 0; border-top: 3px solid #333333; }
</style>"""


def legend_html(weights: Sequence[float]) -> str:
    """The page's legend: what each fill means and what the edges' numbers and widths say."""
    items = [
        f'<span class="key"><span class="swatch" style="background:{fill};border-color:{stroke}"></span>'
        f"{html.escape(meaning)}</span>"
        for fill, stroke, meaning in FILLS.values()
    ]
    span = f" ({min(weights):.2f}-{max(weights):.2f} here)" if weights else ""
    edges = (
        '<span class="key"><span class="edge"></span>edge: the two chunks are neighbours in the Chow-Liu tree; '
        f"its number is how similar they are{span}, and heavier edges are drawn thicker</span>"
    )
    return (
        _LEGEND_STYLE
        + '<div id="legend">'
        + "".join(items)
        + edges
        + '<span class="key">hover a node for its section</span></div>'
    )


def tree_html(
    order: Sequence[str],
    edges: Sequence[Sequence[Any]],
    sections: Mapping[str, str] | None = None,
    title: str = "",
    skipped: Sequence[str] = (),
    texts: Mapping[str, str] | None = None,
) -> str:
    """A standalone offline page drawing the tree, the chunks read (in order) and the chunks skipped.

    It opens on the first chunk read, with a legend; ``texts`` label the nodes with their first words.
    """
    drawing = _tree_drawing(order, edges, sections or {}, texts or {}, None, skipped, COLLAPSE_OVER)
    return render_html(
        drawing.text,
        title or "Chow-Liu tree and reading order",
        mermaid_js_source(),
        hover=drawing.hover,
        focus=drawing.focus,
        legend=legend_html([float(e[2]) for e in edges]),
    )
