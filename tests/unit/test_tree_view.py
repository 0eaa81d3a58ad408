"""Tests for nodes.chain.tree_view (the Chow-Liu tree as Mermaid) and ``longdoc ask --tree-html``.

The test marked ``needs_mermaid`` feeds the text to Mermaid's own parser through
tests/js/validate_mermaid.mjs; install it with ``npm ci --prefix tests/js``.
"""

from __future__ import annotations

import html
import json
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from doubles.chat import ScriptedChatModel
from nodes.canvas_render import mermaid_js_source
from nodes.chain.tree_view import tree_html, tree_mermaid
from stores.models import use_chat_model
from surfaces.cli import EXIT_INPUT, EXIT_OK, main
from tests.fakes import quoting

REPO = Path(__file__).resolve().parents[2]
JS_DIR = REPO / "tests" / "js"
VALIDATOR = JS_DIR / "validate_mermaid.mjs"
NODE = shutil.which("node")
INSTALLED_MERMAID = JS_DIR / "node_modules" / "mermaid"

if NODE is None:
    _SKIP_REASON = "`node` is not on PATH: Mermaid's parser runs under Node"
elif not (INSTALLED_MERMAID / "package.json").is_file():
    _SKIP_REASON = "tests/js/node_modules/mermaid is missing: run `npm ci --prefix tests/js`"
else:
    _SKIP_REASON = ""
needs_mermaid = pytest.mark.skipif(bool(_SKIP_REASON), reason=_SKIP_REASON)

ORDER = ["c2", "c0", "c1", "c3"]
EDGES = [["c2", "c0", 0.91234], ["c0", "c1", 0.5], ["c2", "c3", 0.333333], ["c3", "c4", 0.0751]]
SECTIONS = {
    "c0": "Intro",
    "c1": 'Budget > "2024" [draft] | end',
    "c2": "数据：处理；结果",
    "c4": "<script>alert(1)</script> %%{init: {}}%%",
}

MANAGER = json.dumps({"answer": "40,000 euros", "evidence": ["c1"], "explanation": "Approved in March [c1]."})
WORKER = quoting([("euros", "nothing")])


def fake() -> ScriptedChatModel:
    """The manager answers; every worker reports the budget."""
    return ScriptedChatModel(rules=[("manager of a chain", MANAGER)], default=WORKER)


NODE_LINE = re.compile(r'    (k\d+)\["(.*)"\]')
EDGE_LINE = re.compile(r'    (k\d+) ---\|"(.*)"\| (k\d+)')


def parse(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]], list[str]]:
    """Node labels by Mermaid id, edges (source, label, target), and the remaining lines."""
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    rest: list[str] = []
    for line in text.splitlines()[1:]:
        if node := NODE_LINE.fullmatch(line):
            assert node.group(1) not in nodes, line
            nodes[node.group(1)] = node.group(2)
        elif edge := EDGE_LINE.fullmatch(line):
            edges.append((edge.group(1), edge.group(2), edge.group(3)))
        else:
            rest.append(line)
    return nodes, edges, rest


def decode(label: str) -> str:
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label)


def test_one_node_per_chunk_edges_weighted_root_marked() -> None:
    text = tree_mermaid(ORDER, EDGES, SECTIONS)
    assert text.startswith("flowchart TD\n") and text.endswith("\n")
    nodes, edges, rest = parse(text)

    # one node per chunk: the read ones in reading order, then the unread one from the edges
    labels = [decode(label) for label in nodes.values()]
    assert len(nodes) == 5
    assert [label.split(" ")[1] for label in labels[:4]] == ORDER
    assert labels[0] == "#1 c2 · 数据：处理；结果"
    assert labels[1] == "#2 c0 · Intro"
    assert labels[2] == '#3 c1 · Budget > "2024" [draft] | end'
    assert labels[3] == "#4 c3"
    assert labels[4].startswith("unread c4 · ")
    ids = {label.split(" ")[1]: key for key, label in zip(nodes, labels, strict=True)}

    # one edge per tree edge, labelled with its weight to two decimals
    assert edges == [
        (ids["c2"], "0.91", ids["c0"]),
        (ids["c0"], "0.50", ids["c1"]),
        (ids["c2"], "0.33", ids["c3"]),
        (ids["c3"], "0.08", ids["c4"]),
    ]

    # heavier edges are drawn thicker (1 to 4 px, by weight)
    styles = [line for line in rest if line.startswith("    linkStyle ")]
    assert styles == [f"    linkStyle {i} stroke-width:{w}px" for i, w in enumerate(["4.0", "2.5", "1.9", "1.0"])]

    # the root (first chunk read) carries the root class, the other read chunks the read class
    classes = [line for line in rest if not line.startswith("    linkStyle ")]
    assert classes[0].startswith("    classDef read ") and classes[2].startswith("    classDef root ")
    assert classes[1] == f"    class {ids['c0']},{ids['c1']},{ids['c3']} read"
    assert classes[3] == f"    class {ids['c2']} root"

    # labels cannot break out of their quotes or be read as markup or directives
    for label in nodes.values():
        assert not set(re.sub(r"#\d+;", "", label)) & set('"<>%:'), label


def test_skipped_chunks_are_marked() -> None:
    nodes, _, rest = parse(tree_mermaid(["c2", "c0"], EDGES, SECTIONS, skipped=["c3", "c4"]))
    labels = {decode(label).split(" ")[1]: (key, decode(label)) for key, label in nodes.items()}
    assert labels["c3"][1] == "skipped c3" and labels["c4"][1].startswith("skipped c4 · ")
    assert labels["c1"][1].startswith("unread c1")
    assert rest[-1] == f"    class {labels['c3'][0]},{labels['c4'][0]} skipped"
    assert any(line.startswith("    classDef skipped ") for line in rest)


def test_direction_and_empty_tree() -> None:
    assert tree_mermaid(["c0"], [], direction="LR") == (
        'flowchart LR\n    k0["#35;1 c0"]\n'
        "    classDef root fill:#ffe08a,stroke:#b8860b,stroke-width:2px\n"
        "    class k0 root\n"
    )
    assert tree_mermaid([], []) == "flowchart TD\n"


@needs_mermaid
def test_mermaid_parser_reads_the_tree() -> None:
    many = [f"c{i}" for i in range(12)]
    edges = [[f"c{i}", f"c{(i - 1) // 2}", 1 / (i + 1)] for i in range(1, 12)]
    sections = {cid: f"Part {cid}: {piece}" for cid, piece in zip(many, ["中文", "a > b", '"q"', "#x;"], strict=False)}
    texts = [
        tree_mermaid(ORDER, EDGES, SECTIONS),
        tree_mermaid(many[::-1][:5], edges, sections, direction="LR", skipped=many[:4]),
    ]
    proc = subprocess.run(
        [NODE or "node", str(VALIDATOR)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=JS_DIR,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())

    assert first["ok"] and first["diagramType"] == "flowchart-v2"
    shown = [v["display"] for v in first["vertices"]]
    assert shown[:4] == ["#1 c2 · 数据：处理；结果", "#2 c0 · Intro", '#3 c1 · Budget > "2024" [draft] | end', "#4 c3"]
    assert shown[4].startswith("unread c4 · <script>alert(1)</script>")
    assert [(e["start"], e["end"], e["display"]) for e in first["edges"]] == [
        ("k0", "k1", "0.91"),
        ("k1", "k2", "0.50"),
        ("k0", "k3", "0.33"),
        ("k3", "k4", "0.08"),
    ]

    assert second["ok"]
    assert len(second["vertices"]) == 12 and len(second["edges"]) == 11
    assert second["vertices"][0]["display"] == "#1 c11"
    assert sum(v["display"].startswith("skipped ") for v in second["vertices"]) == 4
    assert second["vertices"][11]["display"] == "skipped c0 · Part c0: 中文"


def test_tree_html_inlines_mermaid_and_loads_nothing() -> None:
    page = tree_html(ORDER, EDGES, SECTIONS, title="Falcon <tree>")
    bundle = mermaid_js_source()
    assert "<title>Falcon &lt;tree&gt;</title>" in page
    source = re.search(r'<script type="application/json" id="canvas-source">(.*?)</script>', page, re.S)
    assert source and json.loads(source.group(1)) == tree_mermaid(ORDER, EDGES, SECTIONS)
    assert_offline(page, bundle)
    assert "Chow-Liu tree and reading order" in tree_html(ORDER, EDGES)


def assert_offline(page: str, bundle: str) -> None:
    """The page inlines the bundled mermaid.js and asks for nothing over the network."""
    inlined = bundle.replace("<!--", r"\x3C!--")
    assert inlined in page and len(page) > len(bundle)
    assert not re.search(r"<script[^>]*\bsrc=|<link\b|<iframe\b|<img\b|@import|url\(", page.replace(inlined, ""), re.I)
    assert not re.search(r"https?://", page.replace(inlined, ""))
    assert "default-src 'none'" in page


def test_cli_ask_writes_the_tree_page(sample_markdown: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    target = tmp_path / "pages" / "tree.html"
    question = "What budget was approved?"
    args = ["ask", str(sample_markdown), question, "-q", "--chunk-size", "50", "--tree-html", str(target)]
    with use_chat_model(fake()):
        assert main([*args, "--json"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["tree_html"] == str(target) and out["answer"] == "40,000 euros"

    page = target.read_text(encoding="utf-8")
    assert_offline(page, mermaid_js_source())
    assert f"<title>Project Falcon: {question}</title>" in page
    source = re.search(r'<script type="application/json" id="canvas-source">(.*?)</script>', page, re.S)
    assert source
    nodes, edges, rest = parse(json.loads(source.group(1)))
    labels = [decode(label) for label in nodes.values()]
    # every chunk once: the ones read first, in reading order, then the skipped and unread ones
    read = out["read"]
    assert [label.split(" ")[1] for label in labels][: len(read)] == read == out["order"]
    assert [label.split(" ")[0] for label in labels][: len(read)] == [f"#{i}" for i in range(1, len(read) + 1)]
    assert {label.split(" ")[0] for label in labels[len(read) :]} <= {"skipped", "unread"}
    assert sum(label.startswith("skipped ") for label in labels) == len(out["skipped"])
    # each node shows its chunk's first words; its section shows on hover
    assert any(" · The committee approved a budget of 40,000 euros …" in label for label in labels), labels
    notes = re.search(r'<meta name="canvas-notes" content="([^"]*)">', page)
    assert notes
    hover = json.loads(html.unescape(notes.group(1)))
    assert any(text.endswith(" · Project Falcon > Budget") for text in hover["hover"].values())
    assert hover["focus"] == "k0"  # the page opens on the first chunk read
    assert len(edges) == len(nodes) - 1
    assert all(re.fullmatch(r"[01]\.\d\d", weight) for _, weight, _ in edges)
    assert "    class k0 root" in rest

    # text output names the page; a directory is refused before any model call
    with use_chat_model(fake()):
        assert main(args) == EXIT_OK
    assert f"tree page: {target}" in capsys.readouterr().out
    model = fake()
    with use_chat_model(model):
        assert main([*args[:-1], str(tmp_path)]) == EXIT_INPUT
    assert model.calls == []
    assert "is a directory" in capsys.readouterr().err


def _long_tree(chunks: int = 82, read: int = 12) -> tuple[list[str], list[list[Any]], dict[str, str]]:
    """A tree over ``chunks`` chunks hung from c40, read along its heaviest edges for ``read`` chunks."""
    rng = random.Random(chunks)
    edges: list[list[Any]] = []
    for i in range(1, chunks):
        edges.append([f"c{rng.randrange(max(0, i - 12), i)}", f"c{i}", round(rng.uniform(0.3, 0.95), 3)])
    near: dict[str, list[tuple[float, str]]] = {}
    for a, b, w in edges:
        near.setdefault(a, []).append((w, b))
        near.setdefault(b, []).append((w, a))
    order, frontier = ["c40"], list(near["c40"])
    while len(order) < read:
        frontier.sort(reverse=True)
        nxt = frontier.pop(0)[1]
        if nxt not in order:
            order.append(nxt)
            frontier += near[nxt]
    texts = {
        f"c{i}": f"## Part {i}\n\nChunk {i} opens with these words and goes on for a while." for i in range(chunks)
    }
    return order, edges, texts


def test_a_long_documents_tree_opens_on_the_reading_path_with_unread_subtrees_folded() -> None:
    order, edges, texts = _long_tree()
    sections = {cid: f"Report > Part {cid[1:]}" for cid in texts}
    text = tree_mermaid(order, edges, sections, texts=texts, skipped=["c3"])
    nodes, drawn, rest = parse(text)
    labels = {key: decode(label) for key, label in nodes.items()}
    folds = {key: int(label[1:].split(" ")[0]) for key, label in labels.items() if label.startswith("+")}
    # past 50 chunks every subtree nobody reached is one node, "+N chunks"; every chunk is drawn once
    assert folds and all(labels[k] == f"+{n} chunks" for k, n in folds.items())
    assert len(nodes) - len(folds) + sum(folds.values()) == 82 and len(nodes) < 40
    assert len(drawn) == len(nodes) - 1  # still a tree
    # each chunk's node shows its first words (its heading is on hover, below), read ones by position
    first = labels["k0"]
    assert first == f"#1 {order[0]} · Chunk {order[0][1:]} opens with these words and goes …"
    assert [labels[f"k{i}"].split(" ")[:2] for i in range(len(order))] == [
        [f"#{i}", cid] for i, cid in enumerate(order, 1)
    ]
    # the tree hangs from the first chunk read: every edge points away from it
    children = [b for _, _, b in drawn]
    assert "k0" not in children and len(set(children)) == len(children)
    assert any(line.startswith("    classDef folded ") for line in rest)
    # a short document is drawn whole
    short_nodes, _, _ = parse(tree_mermaid(order[:5], edges[:29], texts=texts))
    assert not any(decode(label).startswith("+") for label in short_nodes.values())


def test_a_wide_tree_is_laid_out_left_to_right() -> None:
    star = [["c0", f"c{i}", 0.5] for i in range(1, 30)]
    chain = [[f"c{i}", f"c{i + 1}", 0.5] for i in range(29)]
    assert tree_mermaid(["c0"], star, collapse_over=100).startswith("flowchart LR\n")
    assert tree_mermaid(["c0"], chain, collapse_over=100).startswith("flowchart TD\n")
    assert tree_mermaid(["c0"], star, direction="TD").startswith("flowchart TD\n")  # asked for


def test_the_tree_page_has_a_legend_hover_texts_and_opens_on_the_first_chunk_read() -> None:
    order, edges, texts = _long_tree()
    sections = {cid: f"Report > Part {cid[1:]}" for cid in texts}
    page = tree_html(order, edges, sections, title="Long report", texts=texts, skipped=["c3"])
    notes = re.search(r'<meta name="canvas-notes" content="([^"]*)">', page)
    assert notes
    extra = json.loads(html.unescape(notes.group(1)))
    assert extra["focus"] == "k0"
    assert extra["hover"]["k0"] == f"{order[0]} · Report > Part {order[0][1:]}"
    assert any(v.startswith(tuple(f"{n} chunks not reached: c" for n in range(2, 82))) for v in extra["hover"].values())
    legend = re.search(r'<div id="legend">(.*?)</div>', page, re.S)
    assert legend
    for words in ("the first chunk read", "read, numbered in reading order", "skipped", "not reached", "+N"):
        assert words in legend.group(1), words
    assert "how similar they are (0.3" in legend.group(1) and "thicker" in legend.group(1)
    for kind in ("root", "read", "skipped", "folded"):  # the legend's colours are the drawing's
        fill = re.search(rf"classDef {kind} fill:(#[0-9a-f]{{6}})", page)
        assert fill and f"background:{fill.group(1)}" in legend.group(1), kind
    # "fit" keeps labels legible; the page scrolls to the focused node once drawn
    assert "Math.max(fit(), Math.min(1, LEGIBLE))" in page and "target.dataset.focus = extra.focus" in page
    assert_offline(page, mermaid_js_source())
