"""Drawing a Chow-Liu tree and the order the workers read the chunks in, as Mermaid.

Nodes are chunks, labelled with their reading position, id and section; edges are tree edges
labelled with their similarity weight; the root is highlighted. The text uses the same escaping as
the canvas, so it is valid Mermaid whatever the section titles hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodes.canvas_render import mermaid_js_source, mermaid_label, render_html


def tree_mermaid(
    order: Sequence[str],
    edges: Sequence[Sequence[Any]],
    sections: Mapping[str, str] | None = None,
    direction: str = "TD",
    skipped: Sequence[str] = (),
) -> str:
    """Mermaid flowchart of the tree ``edges`` (``[chunk, chunk, weight]``): read chunks by position, skipped marked."""
    sections = sections or {}
    passed = set(skipped)
    position = {cid: i for i, cid in enumerate(order, start=1)}
    nodes = list(dict.fromkeys([*order, *(str(e[0]) for e in edges), *(str(e[1]) for e in edges)]))
    ids = {cid: f"k{i}" for i, cid in enumerate(nodes)}
    lines = [f"flowchart {direction}"]
    for cid in nodes:
        where = f"#{position[cid]} " if cid in position else ("skipped " if cid in passed else "unread ")
        section = sections.get(cid, "")
        text = f"{where}{cid}" + (f" · {section}" if section else "")
        lines.append(f'    {ids[cid]}["{mermaid_label(text, 70)}"]')
    for a, b, weight in edges:
        lines.append(f'    {ids[str(a)]} ---|"{float(weight):.2f}"| {ids[str(b)]}')
    if order:
        lines.append("    classDef root fill:#ffe08a,stroke:#b8860b,stroke-width:2px")
        rest = [ids[cid] for cid in order[1:]]
        if rest:
            lines.append("    classDef read fill:#cfe8ff,stroke:#1f6fb2")
            lines.append(f"    class {','.join(rest)} read")
        lines.append(f"    class {ids[order[0]]} root")
    gone = [ids[cid] for cid in nodes if cid in passed and cid not in position]
    if gone:
        lines.append("    classDef skipped fill:#eeeeee,stroke:#999999,color:#777777,stroke-dasharray:4 3")
        lines.append(f"    class {','.join(gone)} skipped")
    return "\n".join(lines) + "\n"


def tree_html(
    order: Sequence[str],
    edges: Sequence[Sequence[Any]],
    sections: Mapping[str, str] | None = None,
    title: str = "",
    skipped: Sequence[str] = (),
) -> str:
    """A standalone offline page drawing the tree, the chunks read (in order) and the chunks skipped."""
    text = tree_mermaid(order, edges, sections, skipped=skipped)
    return render_html(text, title or "Chow-Liu tree and reading order", mermaid_js_source())
