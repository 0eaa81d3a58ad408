"""Tests for nodes.canvas_render: Mermaid text, HTML page, outline fallback.

The tests marked ``needs_mermaid`` feed rendered canvases to Mermaid's own parser
through tests/js/validate_mermaid.mjs; install it with ``npm ci --prefix tests/js``.
One test opens the HTML page in headless Chromium, with name lookups disabled, and
reads the drawn labels back; it skips where Debian's ``chromium`` is not installed.
"""

from __future__ import annotations

import html
import json
import random
import re
import shutil
import subprocess
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
from pydantic import ValidationError

from nodes.canvas_render import (
    EDGE_LABEL_MAX,
    MAX_NODES,
    NODE_LABEL_MAX,
    CanvasEdge,
    CanvasNode,
    CanvasSpec,
    mermaid_ids,
    mermaid_js_source,
    outline_spec,
    render_html,
    render_mermaid,
)

REPO = Path(__file__).resolve().parents[2]
JS_DIR = REPO / "tests" / "js"
VALIDATOR = JS_DIR / "validate_mermaid.mjs"
BUNDLE = REPO / "nodes" / "static" / "mermaid.min.js"
NODE = shutil.which("node")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ZWSP = "\u200b"
INSTALLED_MERMAID = JS_DIR / "node_modules" / "mermaid"

if NODE is None:
    _SKIP_REASON = "`node` is not on PATH: Mermaid's parser runs under Node"
elif not (INSTALLED_MERMAID / "package.json").is_file():
    _SKIP_REASON = "tests/js/node_modules/mermaid is missing: run `npm ci --prefix tests/js`"
else:
    _SKIP_REASON = ""
needs_mermaid = pytest.mark.skipif(bool(_SKIP_REASON), reason=_SKIP_REASON)

# Pieces that break naive Mermaid output, or that Mermaid or HTML interpret.
NASTY = [
    '"',
    "'",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "|",
    ";",
    ":",
    "#",
    "&",
    "<",
    ">",
    "%",
    "%%",
    '%%{init: {"theme": "dark"}}%%',
    "`",
    "```",
    "\\",
    "\\n",
    "/",
    "\n",
    "\r\n",
    "\t",
    "end",
    "END",
    "subgraph",
    "graph TD",
    "-->",
    "---",
    "==>",
    "-.->",
    "o--o",
    "x--x",
    "A-->|x|B",
    "&amp;",
    "&lt;",
    "&#35;",
    "#quot;",
    "#35;",
    "#tag;",
    "<br>",
    "<br/>",
    "<b>bold</b>",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "javascript:alert(1)",
    "click n1 call alert()",
    "style n1 fill:#f00;",
    "classDef x fill:#f00;",
    "\ufb02\u00b0",
    "\u00b6\u00df",
    "中文标签",
    "数据：处理；结果",
    "日本語",
    "Ünïcödé",
    "Cafe\u0301",
    "\U0001f600",
    "\U0001f469\u200d\U0001f4bb",
    "\u200b",
    "\u2028",
    "\u00a0",
    "\ufeff",
    "\x00",
    "\x07",
    "\ud800",
    "\ufffe",
    " ",
    "   ",
    "word",
    "__proto__",
    "constructor",
    "1",
    "-1",
    "*emph*",
    "_under_",
    "~~strike~~",
    "$$x^2$$",
    "@{ shape: rect }",
    ":::cls",
    "fa:fa-car",
    "fab:fa-github ",
]
IDS = ["end", "a b", "ü", "步骤 1", " x ", "1", "", "__proto__", "o", "x", "A-->B", '"q"']
KINDS = ["entity", "step", "section", "STEP", " Entity ", "weird", ""]
FIXED_LABELS = [
    'Say "hi" [x] | a; b # c <d> & e',
    "line one\nline two\r\nline three",
    "end",
    "",
    "   ",
    "`markdown` **not**",
    "%%{init: {'securityLevel': 'loose'}}%%",
    "<script>alert(1)</script>",
    "#quot; #35; #tag; &amp; &lt;",
    "style x fill:#fff;",
    "中文：文档的结构（第一部分）",
    "word " * 60,
    "x" * 500,
    "A" * 59 + " tail",
]


def visible(raw: str) -> str:
    """What a label should read as: one line, spaces collapsed (test oracle)."""
    text = unicodedata.normalize("NFC", raw)
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if cat == "Cs" or ch in "\ufffe\uffff":
            continue
        kept.append(" " if cat in ("Cc", "Zl", "Zp") or ch == "\ufeff" else ch)
    return " ".join("".join(kept).split())


def shows(shown: str, raw: str, limit: int) -> bool:
    """Whether ``shown`` is ``raw`` as displayed: whole, or cut with an ellipsis.

    Zero-width spaces are ignored: the renderer may add them, a reader does not see them.
    """
    shown = shown.replace(ZWSP, "")
    expected = visible(raw).replace(ZWSP, "")
    if len(expected) <= limit:
        return shown == expected
    return shown.endswith("\u2026") and len(shown) <= limit and expected.startswith(shown[:-1])


def run_validator(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NODE or "node", str(VALIDATOR), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=JS_DIR,
    )


def validate(texts: list[str]) -> list[dict]:
    proc = run_validator(stdin=json.dumps(texts))
    assert proc.returncode in (0, 1), proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(texts)
    return results


def random_label(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return " ".join(rng.choice(NASTY) for _ in range(60))
    return "".join(rng.choice(NASTY) for _ in range(rng.randint(0, 8)))


def random_spec(rng: random.Random) -> CanvasSpec:
    ids = rng.sample(IDS, k=rng.randint(1, 8)) + [f"id {i} {rng.choice(NASTY)}" for i in range(7)]
    nodes = [
        CanvasNode(
            id=rng.choice(ids),
            label=random_label(rng),
            kind=rng.choice(KINDS),
            chunk_ids=[f"c{rng.randint(0, 40)}" for _ in range(rng.randint(0, 3))],
        )
        for _ in range(rng.randint(0, MAX_NODES))
    ]
    edges = [
        CanvasEdge(
            source=rng.choice([*ids, "missing"]),
            target=rng.choice([*ids, "missing"]),
            label=random_label(rng) if rng.random() < 0.7 else "",
        )
        for _ in range(rng.randint(0, 25))
    ]
    return CanvasSpec(title=random_label(rng), nodes=nodes, edges=edges)


def label_lines(text: str) -> list[str]:
    return re.findall(r'"(.*?)"', text)


# --------------------------------------------------------------------------- models


def test_models_defaults_and_node_limit():
    node = CanvasNode(id="a", label="A")
    assert node.kind == "entity" and node.chunk_ids == []
    assert CanvasEdge(source="a", target="b").label == ""
    CanvasSpec(title="t", nodes=[CanvasNode(id=str(i), label="x") for i in range(15)], edges=[])
    with pytest.raises(ValidationError):
        CanvasSpec(title="t", nodes=[CanvasNode(id=str(i), label="x") for i in range(16)], edges=[])
    schema = CanvasSpec.model_json_schema()
    assert schema["properties"]["nodes"]["maxItems"] == MAX_NODES
    assert set(schema["required"]) == {"title", "nodes", "edges"}


# --------------------------------------------------------------------------- mermaid text


def simple_spec() -> CanvasSpec:
    return CanvasSpec(
        title="Pipeline",
        nodes=[
            CanvasNode(id="load", label="Load the file", kind="step", chunk_ids=["c1"]),
            CanvasNode(id="parse", label="Parse", kind="step", chunk_ids=["c2"]),
            CanvasNode(id="doc", label="Document", chunk_ids=["c1", "c3"]),
        ],
        edges=[
            CanvasEdge(source="load", target="parse", label="then"),
            CanvasEdge(source="parse", target="doc"),
        ],
    )


def test_render_structure():
    text = render_mermaid(simple_spec())
    assert text == (
        "flowchart TD\n"
        '    n1(["Load the file"])\n'
        '    n2(["Parse"])\n'
        '    n3["Document"]\n'
        '    n1 -->|"then"| n2\n'
        "    n2 --> n3\n"
    )
    assert render_mermaid(simple_spec(), "lr").startswith("flowchart LR\n")
    with pytest.raises(ValueError):
        render_mermaid(simple_spec(), "sideways")


def test_kinds_pick_shapes():
    spec = CanvasSpec(
        title="t",
        nodes=[
            CanvasNode(id="a", label="A", kind=" Step "),
            CanvasNode(id="b", label="B", kind="section"),
            CanvasNode(id="c", label="C", kind="anything"),
        ],
        edges=[],
    )
    assert render_mermaid(spec).splitlines()[1:] == ['    n1(["A"])', '    n2[["B"]]', '    n3("C")']


def test_labels_escaped_one_line():
    nasty = "".join(NASTY)
    pieces = [nasty[i : i + 40] for i in range(0, len(nasty), 40)]
    assert len(pieces) <= MAX_NODES
    spec = CanvasSpec(
        title="t",
        nodes=[CanvasNode(id=str(i), label=piece) for i, piece in enumerate(pieces)],
        edges=[CanvasEdge(source=str(i), target=str(i + 1), label=piece[:30]) for i, piece in enumerate(pieces)],
    )
    text = render_mermaid(spec)
    assert len(text.splitlines()) == 1 + len(pieces) + len(pieces) - 1
    for label in label_lines(text):
        bare = re.sub(r"#\d+;", "", label)
        assert not set(bare) & set('"#&<>%:`$\\'), label
    assert "#34;" in text and "#60;" in text and "#37;#37;{init" in text and "#36;#36;x^2" in text


def test_entity_marker_pairs_broken():
    spec = CanvasSpec(
        title="t", nodes=[CanvasNode(id="a", label="x\ufb02\u00b0y \u00b6\u00dfz \u00b6 \u00df")], edges=[]
    )
    (label,) = label_lines(render_mermaid(spec))
    assert label == "x\ufb02\u200b\u00b0y \u00b6\u200b\u00dfz \u00b6 \u00df"


def test_long_labels_truncated_at_word():
    spec = CanvasSpec(
        title="t",
        nodes=[
            CanvasNode(id="a", label="alpha beta gamma delta " * 10),
            CanvasNode(id="b", label="x" * 300),
        ],
        edges=[CanvasEdge(source="a", target="b", label="relation words " * 10)],
    )
    node_a, node_b, edge = label_lines(render_mermaid(spec))
    assert len(node_a) <= NODE_LABEL_MAX and node_a.endswith("\u2026")
    assert node_a[:-1].split()[-1] in {"alpha", "beta", "gamma", "delta"}
    assert node_b == "x" * (NODE_LABEL_MAX - 1) + "\u2026"
    assert len(edge) <= EDGE_LABEL_MAX and edge.endswith(" relation\u2026")


def test_ids_sanitised_and_stable():
    spec = CanvasSpec(
        title="t",
        nodes=[
            CanvasNode(id="end", label="End"),
            CanvasNode(id="a b", label="Space"),
            CanvasNode(id="ü 中", label="Unicode"),
            CanvasNode(id="graph", label="Keyword"),
        ],
        edges=[CanvasEdge(source=" end ", target="ü 中"), CanvasEdge(source="graph", target="a b")],
    )
    assert mermaid_ids(spec) == {"end": "n1", "a b": "n2", "ü 中": "n3", "graph": "n4"}
    text = render_mermaid(spec)
    assert "    n1 --> n3\n" in text and "    n4 --> n2\n" in text
    assert re.findall(r"^    (\S+)[\[(]", text, re.M) == ["n1", "n2", "n3", "n4"]
    assert render_mermaid(spec) == text


def test_duplicates_merged_unknown_edges_dropped_self_loops_kept():
    spec = CanvasSpec(
        title="t",
        nodes=[
            CanvasNode(id="a", label="", chunk_ids=["c1", "c2"]),
            CanvasNode(id="b", label="B"),
            CanvasNode(id="a ", label="Alpha", kind="step", chunk_ids=["c2", "c3"]),
        ],
        edges=[
            CanvasEdge(source="a", target="b", label="x"),
            CanvasEdge(source="a", target="b", label="x"),
            CanvasEdge(source="a", target="b", label="y"),
            CanvasEdge(source="a", target="ghost"),
            CanvasEdge(source="ghost", target="b"),
            CanvasEdge(source="b", target="b", label="again"),
        ],
    )
    assert mermaid_ids(spec) == {"a": "n1", "b": "n2"}
    assert render_mermaid(spec).splitlines()[1:] == [
        '    n1["Alpha"]',
        '    n2["B"]',
        '    n1 -->|"x"| n2',
        '    n1 -->|"y"| n2',
        '    n2 -->|"again"| n2',
    ]


def test_empty_labels():
    spec = CanvasSpec(
        title="t",
        nodes=[CanvasNode(id="Topic A", label=" \n "), CanvasNode(id="", label="")],
        edges=[CanvasEdge(source="Topic A", target="", label="\t")],
    )
    assert render_mermaid(spec).splitlines()[1:] == [
        '    n1["Topic A"]',
        '    n2["\u2026"]',
        "    n1 --> n2",
    ]


def test_empty_spec_renders_header_only():
    assert render_mermaid(CanvasSpec(title="", nodes=[], edges=[])) == "flowchart TD\n"


# --------------------------------------------------------------------------- outline


def test_outline_one_node_per_section():
    spec = outline_spec("Report", [("Intro", ["c1", "c2"]), ("", ["c3"]), ("End", [])])
    assert [(n.id, n.label, n.kind, n.chunk_ids) for n in spec.nodes] == [
        ("s1", "Intro", "section", ["c1", "c2"]),
        ("s2", "Section 2", "section", ["c3"]),
        ("s3", "End", "section", []),
    ]
    assert [(e.source, e.target) for e in spec.edges] == [("s1", "s2"), ("s2", "s3")]
    assert spec.title == "Report"


@pytest.mark.parametrize("count", [15, 16, 40, 100])
def test_outline_groups_many_sections(count):
    sections = [(f"Part {i}", [f"c{i}a", f"c{i}b"]) for i in range(count)]
    spec = outline_spec("Big", sections)
    assert len(spec.nodes) == min(count, MAX_NODES)
    sizes = [int(m.group(1)) if (m := re.search(r"\((\d+) sections\)", n.label)) else 1 for n in spec.nodes]
    assert sum(sizes) == count and max(sizes) - min(sizes) <= 1
    assert [cid for n in spec.nodes for cid in n.chunk_ids] == [c for _, ids in sections for c in ids]
    assert spec.nodes[0].label.startswith("Part 0")
    assert spec.nodes[-1].label.split(" \u2026 ")[-1].startswith(f"Part {count - 1}")
    assert len(spec.edges) == len(spec.nodes) - 1
    assert all(len(label) <= NODE_LABEL_MAX for label in label_lines(render_mermaid(spec)))


def test_outline_empty():
    spec = outline_spec("Nothing", [])
    assert spec.nodes == [] and spec.edges == []


# --------------------------------------------------------------------------- HTML


def test_html_inlines_script_and_loads_nothing():
    text = render_mermaid(simple_spec())
    js = 'var a = "</script><script>alert(1)</script>"; var b = /<!--x/u; window.mermaid = {};'
    page = render_html(text, 'A <title> & "quotes"', js)

    assert page.startswith("<!doctype html>")
    assert "<title>A &lt;title&gt; &amp; &quot;quotes&quot;</title>" in page
    assert "default-src 'none'" in page
    assert not re.search(r"<script[^>]*\bsrc=|<link\b|<iframe\b|@import|url\(", page, re.I)
    assert not re.search(r"https?://", page)
    # the supplied script is inline, escaped so the HTML parser cannot leave it early
    assert r'var a = "\x3C/script>\x3Cscript>alert(1)\x3C/script>"; var b = /\x3C!--x/u;' in page
    assert page.lower().count("</script>") == 3
    # the diagram text round-trips through the JSON data block
    data = re.search(r'<script type="application/json" id="canvas-source">(.*?)</script>', page, re.S)
    assert data and json.loads(data.group(1)) == text


def test_html_with_bundled_mermaid_has_no_remote_loads():
    bundle = mermaid_js_source()
    page = render_html(render_mermaid(simple_spec()), "Pipeline", bundle)
    assert len(page) > len(bundle)
    assert 'globalThis["mermaid"]' in page
    scripts = re.findall(r"<script\b([^>]*)>", page, re.I)
    assert scripts and all("src" not in attrs for attrs in scripts)
    outside_bundle = page.replace(bundle.replace("<!--", r"\x3C!--"), "")
    assert len(outside_bundle) < 10_000
    assert not re.search(r"https?://", outside_bundle)


def test_bundle_is_pinned_version():
    pinned = json.loads((JS_DIR / "package.json").read_text())["dependencies"]["mermaid"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned)
    assert f'"{pinned}"' in mermaid_js_source()
    licence = (REPO / "nodes" / "static" / "mermaid.LICENSE").read_text()
    assert f"mermaid {pinned}" in licence and "The MIT License" in licence


@pytest.mark.skipif(
    not (INSTALLED_MERMAID / "dist" / "mermaid.min.js").is_file(),
    reason="tests/js/node_modules/mermaid is missing: run `npm ci --prefix tests/js`",
)
def test_bundle_matches_installed_parser():
    installed = json.loads((INSTALLED_MERMAID / "package.json").read_text())["version"]
    pinned = json.loads((JS_DIR / "package.json").read_text())["dependencies"]["mermaid"]
    assert installed == pinned
    assert (INSTALLED_MERMAID / "dist" / "mermaid.min.js").read_bytes() == BUNDLE.read_bytes()


# --------------------------------------------------------------------------- Mermaid's parser


def check_against_parser(spec: CanvasSpec, result: dict) -> None:
    """The parser sees the nodes and edges of ``spec`` with the labels a reader should see."""
    assert result["ok"], result.get("error")
    assert result["diagramType"] == "flowchart-v2"
    ids = mermaid_ids(spec)
    nodes: dict[str, CanvasNode] = {}
    for node in spec.nodes:
        key = unicodedata.normalize("NFC", node.id).strip()
        if key not in nodes or (not visible(nodes[key].label) and visible(node.label)):
            nodes[key] = node
    vertices = {v["id"]: v["display"] for v in result["vertices"]}
    assert list(vertices) == [ids[key] for key in nodes]
    for key, node in nodes.items():
        shown = vertices[ids[key]]
        if visible(node.label):
            assert shows(shown, node.label, NODE_LABEL_MAX), (shown, node.label)
        elif visible(key):
            assert shows(shown, key, NODE_LABEL_MAX), (shown, key)
        else:
            assert shown == "\u2026"

    # Edges come out in order, each (source, target, shown label) once.
    drawn = [(e["start"], e["end"], e["display"]) for e in result["edges"]]
    position = 0
    for edge in spec.edges:
        source = ids.get(unicodedata.normalize("NFC", edge.source).strip())
        target = ids.get(unicodedata.normalize("NFC", edge.target).strip())
        if source is None or target is None:
            continue

        def same(item, source=source, target=target, label=edge.label):
            return item[:2] == (source, target) and shows(item[2], label, EDGE_LABEL_MAX)

        if position < len(drawn) and same(drawn[position]):
            position += 1
        else:
            assert any(same(item) for item in drawn[:position]), (edge, drawn)
    assert position == len(drawn)


@needs_mermaid
def test_parser_accepts_every_rendered_canvas():
    rng = random.Random(20240601)
    specs = [random_spec(rng) for _ in range(300)]
    for i, label in enumerate(FIXED_LABELS):
        other = FIXED_LABELS[-1 - i]
        specs.append(
            CanvasSpec(
                title=label,
                nodes=[
                    CanvasNode(id=label, label=label, kind=KINDS[i % len(KINDS)]),
                    CanvasNode(id="end", label=other),
                ],
                edges=[
                    CanvasEdge(source=label, target="end", label=other),
                    CanvasEdge(source="end", target="end", label=label),
                ],
            )
        )
    specs.append(outline_spec("Outline", [(f"Section {i}: {NASTY[i]}", [f"c{i}"]) for i in range(len(NASTY))]))
    directions = ["TD", "TB", "BT", "LR", "RL"]
    texts = [render_mermaid(spec, directions[i % 5]) for i, spec in enumerate(specs)]

    results = validate(texts)

    failures = [(texts[r["index"]], r["error"]) for r in results if not r["ok"]]
    assert failures == []
    for spec, result in zip(specs, results, strict=True):
        check_against_parser(spec, result)


@needs_mermaid
def test_parser_rejects_broken_text(tmp_path):
    broken = [
        'flowchart TD\n    n1["unterminated] --> n2\n',
        "flowchart TD\n    end --> n1\n",
        'flowchart TD\n    n1["say "hi" loudly"]\n',
        "flowchart TD\n    n1[[[ --> \n",
        "this is not a diagram",
    ]
    results = validate([render_mermaid(simple_spec()), *broken])
    assert results[0]["ok"] and [v["display"] for v in results[0]["vertices"]] == [
        "Load the file",
        "Parse",
        "Document",
    ]
    for result in results[1:]:
        assert result["ok"] is False and result["error"]

    good, bad = tmp_path / "good.mmd", tmp_path / "bad.mmd"
    good.write_text(render_mermaid(simple_spec()), encoding="utf-8")
    bad.write_text(broken[0], encoding="utf-8")
    proc = run_validator(str(good), str(bad))
    assert proc.returncode == 1
    assert [json.loads(line)["ok"] for line in proc.stdout.splitlines()] == [True, False]
    assert run_validator(stdin="not json").returncode == 2


# --------------------------------------------------------------------------- a real browser


class _LabelScraper(HTMLParser):
    """Collects the text of node and edge labels from a rendered Mermaid SVG."""

    def __init__(self) -> None:
        super().__init__()
        self.owner: tuple[str, str] | None = None
        self.capturing: tuple[str, str] | None = None
        self.depth = 0
        self.buffer: list[str] = []
        self.labels: dict[tuple[str, str], list[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "g" and ("id" in attributes or "data-id" in attributes):
            node = re.search(r"flowchart-(n\d+)-\d+$", attributes.get("id") or "")
            edge = re.fullmatch(r"L_(n\d+)_(n\d+)_\d+", attributes.get("data-id") or "")
            if node:
                self.owner = ("node", node.group(1))
            elif edge:
                self.owner = ("edge", f"{edge.group(1)}->{edge.group(2)}")
            else:  # e.g. the helper nodes and edges Mermaid adds to draw a self-loop
                self.owner = None
        elif tag == "span":
            if self.capturing:
                self.depth += 1
            elif self.owner and {"nodeLabel", "edgeLabel"} & set((attributes.get("class") or "").split()):
                self.capturing, self.depth, self.buffer = self.owner, 0, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self.capturing:
            if self.depth:
                self.depth -= 1
                return
            self.labels.setdefault(self.capturing, []).append("".join(self.buffer))
            self.capturing = None

    def handle_data(self, data: str) -> None:
        if self.capturing:
            self.buffer.append(data)


def expected_labels(text: str) -> dict[tuple[str, str], list[str]]:
    """Node and edge labels of a rendered canvas, as a browser should show them."""

    def decode(label: str) -> str:
        return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label)

    labels: dict[tuple[str, str], list[str]] = {}
    for line in text.splitlines()[1:]:
        edge = re.fullmatch(r'    (n\d+) -->(?:\|"(.*)"\|)? (n\d+)', line)
        if edge:
            labels.setdefault(("edge", f"{edge.group(1)}->{edge.group(3)}"), []).append(decode(edge.group(2) or ""))
            continue
        node = re.fullmatch(r'    (n\d+)[\[(]+"(.*)"[\])]+', line)
        assert node, line
        labels[("node", node.group(1))] = [decode(node.group(2))]
    return {key: sorted(value) for key, value in labels.items()}


def chromium_page(path: Path, profile: Path) -> str:
    proc = subprocess.run(
        [
            CHROMIUM or "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package `chromium`)")
def test_html_page_draws_every_label_in_chromium(tmp_path):
    """The page draws offline, and every label reads as written: nothing eaten as markup,
    entities, directives, Markdown or math."""
    rng = random.Random(99)
    pieces = list(NASTY)
    rng.shuffle(pieces)
    specs = []
    while pieces:
        nodes = [CanvasNode(id=str(i), label="".join(pieces[i * 2 : i * 2 + 2]) or "x") for i in range(MAX_NODES)]
        edges = [
            CanvasEdge(source=str(i), target=str(i + 1), label=pieces[30 + i] if 30 + i < len(pieces) else "")
            for i in range(MAX_NODES - 1)
        ]
        edges.append(CanvasEdge(source="3", target="3", label="loop " + "".join(pieces[:2])))
        specs.append(CanvasSpec(title=f"Nasty {len(specs)} <b>&amp;", nodes=nodes, edges=edges))
        pieces = pieces[44:]
    while len(specs) < 5:
        spec = random_spec(rng)
        if len(spec.nodes) >= 8:
            specs.append(spec)

    bundle = mermaid_js_source()
    for i, spec in enumerate(specs):
        text = render_mermaid(spec, "LR")
        page = tmp_path / f"canvas{i}.html"
        page.write_text(render_html(text, spec.title, bundle), encoding="utf-8")
        dom = chromium_page(page, tmp_path / "profile")

        assert '<div id="canvas" data-rendered="ok" data-zoom=' in dom, dom[dom.find('<div id="canvas"') :][:500]
        assert f"<h1>{html.escape(visible(spec.title) or 'Canvas', quote=False)}</h1>" in dom
        drawing = dom[dom.find('<div id="canvas"') : dom.find("<details>")]
        scraper = _LabelScraper()
        scraper.feed(drawing)
        drawn = {key: sorted(value) for key, value in scraper.labels.items()}
        expected = expected_labels(text)
        for key, want in expected.items():
            assert drawn.get(key) == want, (key, want, drawn.get(key))
        assert not re.search(r"class=\"[^\"]*katex", drawing)
