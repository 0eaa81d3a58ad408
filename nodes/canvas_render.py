"""Turn a document's structure into a Mermaid flowchart and a standalone HTML page.

The LLM only returns a :class:`CanvasSpec` (schema-enforced JSON); every byte of
Mermaid syntax is written here, so the diagram is valid whatever the labels hold.

Rules that :func:`render_mermaid` applies:

* Node ids are never written as given. Each distinct id gets ``n1``, ``n2``, ...
  in the order nodes first appear (see :func:`mermaid_ids`), so ids with spaces,
  unicode, or Mermaid keywords such as ``end`` cannot break the syntax, and the
  same spec always gets the same mapping. Ids are matched after trimming spaces
  and NFC normalisation.
* Nodes that share an id are merged: the first non-empty label and the first
  kind win, chunk ids are joined in order without repeats.
* Edges whose source or target is not a node are dropped, and so are repeats
  of the same (source, target, label). Self-loops are kept: a step that repeats
  is real structure, and Mermaid draws a loop for it.
* Labels are cleaned (control characters and line breaks become spaces, runs of
  spaces collapse), shortened at a word boundary with an ellipsis when too
  long, then written as quoted strings in which every character that Mermaid or
  HTML would interpret (``" # & < > % : ` $`` and backslash) is written as a Mermaid entity
  code ``#NN;``; the browser shows the original character. The two character
  pairs Mermaid uses internally as entity markers get a zero-width space inside.
* A node with an empty label shows its id instead; an edge with an empty label
  is drawn without one.
* The title is not written into the Mermaid text: Mermaid passes a diagram
  title through its HTML sanitiser and then shows the result as plain text, so
  ``<``, ``>`` and ``&`` in a title come out mangled. :func:`render_html` shows
  the title as the page heading instead.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import unicodedata
from collections.abc import Mapping
from importlib import resources

from pydantic import BaseModel, Field

from stores.cache import lru_cache

__all__ = [
    "MAX_NODES",
    "CanvasEdge",
    "CanvasNode",
    "CanvasSpec",
    "mermaid_ids",
    "mermaid_js_source",
    "outline_spec",
    "render_html",
    "render_mermaid",
]

MAX_NODES = 15
NODE_LABEL_MAX = 60
EDGE_LABEL_MAX = 40
DIRECTIONS = ("TD", "TB", "BT", "LR", "RL")

# Mermaid shape delimiters by node kind; any other kind is drawn with rounded corners.
_SHAPES = {
    "entity": ('["', '"]'),
    "step": ('(["', '"])'),
    "section": ('[["', '"]]'),
}
_DEFAULT_SHAPE = ('("', '")')

# Characters written as Mermaid entity codes inside labels:
#   "        ends the quoted string
#   #        starts an entity code; a literal "#word;" would become an HTML entity
#   & < >    HTML labels would read them as markup or entities
#   %        "%%{...}%%" anywhere in the text is taken as a config directive
#   :        Mermaid rewrites lines matching "style...:...#...;" before parsing
#   `        a label starting with a backtick is read as Markdown
#   $        "$$...$$" is drawn as KaTeX math
#   \        a backslash before "n" is drawn as a line break
_ESCAPED = frozenset('"#&<>%:`$\\')
# Mermaid marks entity codes with "ﬂ°" ... "¶ß" and turns every such pair in the
# finished SVG back into "&" / ";"; a zero-width space keeps text from forming one.
_MARKER_PAIRS = (("\ufb02\u00b0", "\ufb02\u200b\u00b0"), ("\u00b6\u00df", "\u00b6\u200b\u00df"))
_SPACES = re.compile(r"\s+")
_ELLIPSIS = "\u2026"


class CanvasNode(BaseModel):
    """One entity or step of the document."""

    id: str = Field(description="Short identifier, unique within the canvas; edges refer to it.")
    label: str = Field(description="Text shown in the box: a few words.")
    kind: str = Field(default="entity", description='"entity" or "step".')
    chunk_ids: list[str] = Field(default_factory=list, description="Ids of the chunks this node was taken from.")


class CanvasEdge(BaseModel):
    """A labelled relation between two nodes, by node id."""

    source: str = Field(description="Id of the node the relation starts from.")
    target: str = Field(description="Id of the node the relation points to.")
    label: str = Field(default="", description="The relation in a few words, or empty.")


class CanvasSpec(BaseModel):
    """The structure of a document: at most 15 nodes and the relations between them."""

    title: str = Field(description="Title of the canvas.")
    nodes: list[CanvasNode] = Field(max_length=MAX_NODES, description="At most 15 nodes.")
    edges: list[CanvasEdge] = Field(description="Relations between the nodes.")


def _key(node_id: str) -> str:
    return unicodedata.normalize("NFC", node_id).strip()


def _clean(text: str) -> str:
    """Printable one-line text: line breaks, controls and U+FEFF become spaces, runs collapse."""
    text = unicodedata.normalize("NFC", str(text))
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Zl", "Zp") or ch.isspace() or ch == "\ufeff":
            out.append(" ")
        elif cat == "Cs" or ch in "\ufffe\uffff":
            continue  # lone surrogates and non-characters cannot be encoded
        else:
            out.append(ch)
    return _SPACES.sub(" ", "".join(out)).strip()


def _truncate(text: str, limit: int) -> str:
    """Shorten to at most ``limit`` characters, at a word boundary when one is near."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space >= int(limit * 0.6):
        cut = cut[:space]
    return cut.rstrip(" ,;:.-\u2013\u2014") + _ELLIPSIS


def _escape(text: str) -> str:
    for pair, broken in _MARKER_PAIRS:
        text = text.replace(pair, broken)
    return "".join(f"#{ord(ch)};" if ch in _ESCAPED else ch for ch in text)


def _label(text: str, limit: int) -> str:
    return _escape(_truncate(_clean(text), limit))


def mermaid_label(text: str, limit: int = NODE_LABEL_MAX) -> str:
    """``text`` as a label safe inside a quoted Mermaid label (cleaned, shortened, escaped)."""
    return _label(text, limit)


def _merged_nodes(spec: CanvasSpec) -> dict[str, CanvasNode]:
    merged: dict[str, CanvasNode] = {}
    for node in spec.nodes:
        key = _key(node.id)
        seen = merged.get(key)
        if seen is None:
            merged[key] = node.model_copy(update={"chunk_ids": list(dict.fromkeys(node.chunk_ids))})
            continue
        update: dict[str, object] = {"chunk_ids": list(dict.fromkeys([*seen.chunk_ids, *node.chunk_ids]))}
        if not _clean(seen.label) and _clean(node.label):
            update["label"] = node.label
        merged[key] = seen.model_copy(update=update)
    return merged


def mermaid_ids(spec: CanvasSpec) -> dict[str, str]:
    """Map each node id of ``spec`` (trimmed, NFC) to the id used in the Mermaid text."""
    return {key: f"n{i}" for i, key in enumerate(_merged_nodes(spec), start=1)}


def render_mermaid(spec: CanvasSpec, direction: str = "TD") -> str:
    """Render ``spec`` as Mermaid ``flowchart`` text that Mermaid's parser accepts."""
    direction = direction.upper()
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")

    nodes = _merged_nodes(spec)
    ids = {key: f"n{i}" for i, key in enumerate(nodes, start=1)}

    lines = [f"flowchart {direction}"]

    for key, node in nodes.items():
        label = _label(node.label, NODE_LABEL_MAX) or _label(key, NODE_LABEL_MAX) or _ELLIPSIS
        start, end = _SHAPES.get(node.kind.strip().lower(), _DEFAULT_SHAPE)
        lines.append(f"    {ids[key]}{start}{label}{end}")

    seen_edges: set[tuple[str, str, str]] = set()
    for edge in spec.edges:
        source, target = ids.get(_key(edge.source)), ids.get(_key(edge.target))
        if source is None or target is None:
            continue
        label = _label(edge.label, EDGE_LABEL_MAX)
        if (source, target, label) in seen_edges:
            continue
        seen_edges.add((source, target, label))
        arrow = f'-->|"{label}"|' if label else "-->"
        lines.append(f"    {source} {arrow} {target}")

    return "\n".join(lines) + "\n"


def _short(text: str, limit: int) -> str:
    return _truncate(_clean(text), limit)


def outline_spec(title: str, sections: list[tuple[str, list[str]]]) -> CanvasSpec:
    """A fallback canvas from section titles, in document order.

    Each section becomes a node pointing to its chunk ids, linked to the next one.
    With more than :data:`MAX_NODES` sections, consecutive sections are grouped
    into :data:`MAX_NODES` runs of near-equal size; a group is labelled with its
    first and last titles and how many sections it holds.
    """
    count = len(sections)
    groups = min(count, MAX_NODES)
    nodes = []
    start = 0
    for g in range(groups):
        size = count // groups + (1 if g < count % groups else 0)
        run = sections[start : start + size]
        names = [_clean(name) or f"Section {start + i + 1}" for i, (name, _) in enumerate(run)]
        if len(run) == 1:
            label = names[0]
        else:
            label = f"{_short(names[0], 24)} {_ELLIPSIS} {_short(names[-1], 24)} ({len(run)} sections)"
        chunk_ids = list(dict.fromkeys(cid for _, ids in run for cid in ids))
        nodes.append(CanvasNode(id=f"s{g + 1}", label=label, kind="section", chunk_ids=chunk_ids))
        start += size
    edges = [CanvasEdge(source=a.id, target=b.id) for a, b in itertools.pairwise(nodes)]
    return CanvasSpec(title=title, nodes=nodes, edges=edges)


def _inline_script(source: str) -> str:
    r"""Make JavaScript source safe inside <script>...</script>.

    The HTML parser ends a script at "</script" and changes state at "<!--" and
    "<script"; writing "<" as the escape \x3C keeps the same meaning in strings,
    template literals and regular expressions (with or without the u flag).
    """
    return re.sub(r"<(?=!--|/?script)", r"\\x3C", source, flags=re.IGNORECASE)


def _json_for_script(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="canvas-notes" content="{notes}">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5rem; color: #1f2328; }}
h1 {{ font-size: 1.3rem; }}
#canvas {{ overflow: auto; max-height: calc(100vh - 9rem); border: 1px solid #d0d7de; cursor: grab; }}
#canvas.panning {{ cursor: grabbing; user-select: none; }}
#canvas svg {{ display: block; max-width: none !important; }}
#canvas[data-rendered="error"] {{ color: #b42318; white-space: pre-wrap; cursor: auto; }}
#zoom {{ margin: 0 0 0.5rem; font-size: 0.9rem; }}
#zoom button {{ min-width: 2.2rem; }}
details pre {{ background: #f6f8fa; padding: 0.75rem; overflow-x: auto; }}
</style>
</head>
<body>
<h1>{title}</h1>
<div id="zoom"><button id="zoom-out" title="Zoom out">−</button> <button id="zoom-in" title="Zoom in">+</button> \
<button id="zoom-fit" title="Fit the width, labels kept at 12 px or more">fit</button> \
<button id="zoom-one" title="Actual size">1:1</button> \
<span id="zoom-level"></span> <small>drag to pan, Ctrl + wheel to zoom</small></div>
{legend}
<div id="canvas" data-rendered="pending">Rendering…</div>
<details><summary>Mermaid source</summary><pre>{source_text}</pre></details>
<script type="application/json" id="canvas-source">{source_json}</script>
<script>
{mermaid_js}
</script>
<script>
// The drawing keeps its own size (labels at Mermaid's 16 px) and the page scrolls, pans and zooms it:
// at first it fits the width when that keeps labels at 12 px or more, else it is shown at actual size;
// "fit" never makes labels smaller than 12 px either.
var LEGIBLE = 0.75;
function zoomable(target, svg) {{
  var box = svg.viewBox && svg.viewBox.baseVal;
  var width = box && box.width ? box.width : svg.getBoundingClientRect().width;
  var height = box && box.height ? box.height : svg.getBoundingClientRect().height;
  var level = document.getElementById("zoom-level");
  function zoom(scale) {{
    scale = Math.min(4, Math.max(0.1, scale));
    svg.setAttribute("width", (width * scale).toFixed(1));
    svg.setAttribute("height", (height * scale).toFixed(1));
    svg.style.maxWidth = "none";
    target.dataset.zoom = scale.toFixed(3);
    level.textContent = Math.round(scale * 100) + "%";
  }}
  function fit() {{ return Math.min(1, (target.clientWidth - 2) / width); }}
  zoom(fit() >= LEGIBLE ? fit() : 1);
  document.getElementById("zoom-in").onclick = function () {{ zoom(Number(target.dataset.zoom) * 1.25); }};
  document.getElementById("zoom-out").onclick = function () {{ zoom(Number(target.dataset.zoom) / 1.25); }};
  document.getElementById("zoom-fit").onclick = function () {{ zoom(Math.max(fit(), Math.min(1, LEGIBLE))); }};
  document.getElementById("zoom-one").onclick = function () {{ zoom(1); }};
  target.addEventListener("wheel", function (event) {{
    if (!event.ctrlKey) {{ return; }}
    event.preventDefault();
    zoom(Number(target.dataset.zoom) * (event.deltaY < 0 ? 1.1 : 1 / 1.1));
  }}, {{ passive: false }});
  var start = null;
  target.addEventListener("pointerdown", function (event) {{
    start = {{ x: event.clientX, y: event.clientY, left: target.scrollLeft, top: target.scrollTop }};
    target.classList.add("panning");
  }});
  window.addEventListener("pointermove", function (event) {{
    if (!start) {{ return; }}
    target.scrollLeft = start.left - (event.clientX - start.x);
    target.scrollTop = start.top - (event.clientY - start.y);
  }});
  window.addEventListener("pointerup", function () {{ start = null; target.classList.remove("panning"); }});
}}
// Hover texts (an SVG title per node), then the node to open on, centred in the frame.
function annotate(target, extra) {{
  function node(id) {{ return target.querySelector('[id^="canvas-svg-flowchart-' + id + '-"]'); }}
  Object.keys(extra.hover || {{}}).forEach(function (id) {{
    var element = node(id);
    if (!element) {{ return; }}
    var hint = document.createElementNS(element.namespaceURI, "title");
    hint.textContent = extra.hover[id];
    element.insertBefore(hint, element.firstChild);
  }});
  var focus = extra.focus ? node(extra.focus) : null;
  if (!focus) {{ return; }}
  var box = focus.getBoundingClientRect(), frame = target.getBoundingClientRect();
  target.scrollLeft += box.left - frame.left - (target.clientWidth - box.width) / 2;
  target.scrollTop += box.top - frame.top - (target.clientHeight - box.height) / 2;
  target.dataset.focus = extra.focus;
}}
(function () {{
  var target = document.getElementById("canvas");
  var source = JSON.parse(document.getElementById("canvas-source").textContent);
  mermaid.initialize({{ startOnLoad: false, securityLevel: "strict", suppressErrorRendering: true }});
  mermaid.render("canvas-svg", source).then(function (result) {{
    target.innerHTML = result.svg;
    if (result.bindFunctions) {{ result.bindFunctions(target); }}
    zoomable(target, target.querySelector("svg"));
    annotate(target, JSON.parse(document.querySelector('meta[name="canvas-notes"]').content));
    target.dataset.rendered = "ok";
  }}).catch(function (err) {{
    target.textContent = "Could not draw the canvas: " + (err && err.message ? err.message : err);
    target.dataset.rendered = "error";
  }});
}})();
</script>
</body>
</html>
"""


def render_html(
    mermaid_text: str,
    title: str,
    mermaid_js: str,
    *,
    hover: Mapping[str, str] | None = None,
    focus: str = "",
    legend: str = "",
) -> str:
    """A standalone page that draws ``mermaid_text`` with the inlined ``mermaid_js``.

    The page loads nothing: mermaid.js and the diagram are inline, and its
    Content-Security-Policy forbids any request. Once drawn, ``#canvas`` gets
    ``data-rendered="ok"`` (or ``"error"`` with the message shown).

    ``hover``: a text shown when the pointer rests on a node, by Mermaid node id; ``focus``: the node
    the page opens on (scrolled to the middle of the frame, then ``data-focus`` names it); ``legend``:
    HTML shown above the drawing (the caller's, already escaped, with any style of its own).
    """
    return _PAGE.format(
        title=html.escape(_clean(title) or "Canvas"),
        source_text=html.escape(mermaid_text),
        source_json=_json_for_script(mermaid_text),
        notes=html.escape(json.dumps({"hover": dict(hover or {}), "focus": focus}, ensure_ascii=False)),
        legend=legend,
        mermaid_js=_inline_script(mermaid_js),
    )


@lru_cache(maxsize=1)
def mermaid_js_source() -> str:
    """The bundled mermaid.min.js (npm ``mermaid``, MIT; see static/mermaid.LICENSE)."""
    return resources.files("nodes").joinpath("static/mermaid.min.js").read_text(encoding="utf-8")
