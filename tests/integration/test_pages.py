"""The offline HTML pages (document canvas, Chow-Liu tree) drawn by headless Chromium.

For each page: the DOM after rendering says ``data-rendered="ok"`` and holds the drawn labels,
a screenshot shows the diagram (pixel variance, and the node fill colours Mermaid paints), and the
page writes nothing to the console. Chromium here logs every console message (console.*, uncaught
exceptions, Content-Security-Policy violations) as an ``INFO:CONSOLE`` line on stderr without its
level, so any console line from the page fails the test: a page that works is silent.

Skips where Debian's ``chromium`` is not installed (``make system`` / .ci/system-deps install it).
"""

from __future__ import annotations

import html
import re
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from doubles.chat import ScriptedChatModel
from graphs.chain.graph import graph
from nodes.canvas_render import CanvasEdge, CanvasNode, CanvasSpec, mermaid_js_source, render_html, render_mermaid
from nodes.chain.tree_view import tree_html
from nodes.ingest import ingest
from stores.models import use_chat_model
from stores.vectorstore import get_store
from tests.fakes import quoting

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian package `chromium`: run `make system`)"
)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=15000",
    "--hide-scrollbars",
    "--window-size=1200,1000",
]
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (.*)")
NODE_FILL = (236, 236, 255)  # Mermaid's default node background, #ECECFF
ROOT_FILL = (255, 224, 138)  # the tree's root class, #ffe08a
READ_FILL = (207, 232, 255)  # the tree's read class, #cfe8ff
SKIPPED_FILL = (238, 238, 238)  # the tree's skipped class, #eeeeee


@dataclass
class Shot:
    dom: str
    image: np.ndarray
    console: list[str]


def run_chromium(page: Path, profile: Path, *mode: str) -> tuple[str, list[str]]:
    """Open ``page`` once with a fresh profile; return stdout and the page's console lines."""
    proc = subprocess.run(
        [CHROMIUM or "chromium", *FLAGS, f"--user-data-dir={profile}", *mode, page.as_uri()],
        capture_output=True,
        timeout=240,
    )
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, stderr[-3000:]
    console = [m.group(1) for line in stderr.splitlines() if (m := CONSOLE.search(line))]
    return proc.stdout.decode("utf-8", "replace"), console


def open_page(page: Path, workdir: Path) -> Shot:
    """The rendered DOM, a screenshot and the console output of ``page``."""
    dom, console = run_chromium(page, workdir / f"{page.stem}-profile-dom", "--dump-dom")
    png = workdir / f"{page.stem}.png"
    _, more = run_chromium(page, workdir / f"{page.stem}-profile-shot", f"--screenshot={png}")
    return Shot(dom=dom, image=decode_png(png.read_bytes()), console=console + more)


def decode_png(data: bytes) -> np.ndarray:
    """Pixels of an 8-bit, non-interlaced PNG as a (height, width, channels) array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    assert header is not None, "PNG without IHDR"
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (0, 2, 4, 6), header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    stride = width * channels
    raw = zlib.decompress(b"".join(idat))
    assert len(raw) == height * (stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw, np.uint8, stride, start + 1).astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: running sum per channel
            cur = np.cumsum(line.reshape(-1, channels), axis=0).reshape(-1) & 0xFF
        elif kind == 2:  # Up
            cur = (line + prev) & 0xFF
        elif kind in (3, 4):  # Average, Paeth: each byte depends on the one to its left
            row, up = line.tolist(), prev.tolist()
            for i in range(stride):
                a = row[i - channels] if i >= channels else 0
                b = up[i]
                if kind == 3:
                    row[i] = (row[i] + ((a + b) >> 1)) & 0xFF
                    continue
                c = up[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
            cur = np.array(row, dtype=np.int64)
        else:
            raise AssertionError(f"bad PNG filter {kind} on row {y}")
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)


def pixels_of(image: np.ndarray, colour: tuple[int, int, int], tolerance: int = 6) -> int:
    """How many pixels have ``colour`` (within ``tolerance`` per channel)."""
    rgb = image[:, :, :3].astype(np.int64)
    return int(np.all(np.abs(rgb - np.array(colour)) <= tolerance, axis=2).sum())


def drawing(dom: str) -> str:
    start = dom.find('<div id="canvas"')
    assert start >= 0, dom[:500]
    return dom[start : dom.find("<details>", start)]


def labels(dom: str, kind: str) -> list[str]:
    """Text of the drawn node or edge labels, in document order."""
    found = re.findall(rf'<span [^>]*?class="{kind}Label[^"]*"[^>]*>(.*?)</span>', drawing(dom), re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", text)) for text in found]


def assert_drawn(shot: Shot) -> None:
    assert re.search(r'<div id="canvas" data-rendered="ok"[^>]*><svg', shot.dom), drawing(shot.dom)[:500]
    assert shot.console == [], shot.console
    image = shot.image
    assert image.shape[0] >= 500 and image.shape[1] >= 800
    assert float(image[:, :, :3].std()) > 5.0, "the screenshot is blank"
    assert len(np.unique(image[:, :, :3].reshape(-1, 3), axis=0)) > 50


# --------------------------------------------------------------------------- canvas page


def test_canvas_page_draws_chinese_and_nasty_labels(tmp_path: Path) -> None:
    spec = CanvasSpec(
        title='项目地图 <b>&amp; "Falcon"</b>',
        nodes=[
            CanvasNode(id="doc", label="Project Falcon 项目", kind="section", chunk_ids=["c0"]),
            CanvasNode(id="budget", label='预算："40,000 €" [approved] | end', kind="entity", chunk_ids=["c1"]),
            CanvasNode(id="team", label="团队：Alice Moreau；Bob Chen", kind="entity", chunk_ids=["c2"]),
            CanvasNode(id="trials", label="<script>alert(1)</script> trials", kind="step", chunk_ids=["c3"]),
            CanvasNode(id="risk", label="%%{init: {'theme': 'dark'}}%% dust #35; &lt;", kind="entity"),
            CanvasNode(id="end", label="subgraph end --> graph TD", kind="step"),
        ],
        edges=[
            CanvasEdge(source="doc", target="budget", label="批准于三月"),
            CanvasEdge(source="doc", target="team", label='leads "engineering"'),
            CanvasEdge(source="team", target="trials", label="runs -->"),
            CanvasEdge(source="trials", target="risk", label="risk: dust"),
            CanvasEdge(source="risk", target="end"),
        ],
    )
    page = tmp_path / "canvas.html"
    page.write_text(render_html(render_mermaid(spec), spec.title, mermaid_js_source()), encoding="utf-8")

    shot = open_page(page, tmp_path)

    assert_drawn(shot)
    assert labels(shot.dom, "node") == [
        "Project Falcon 项目",
        '预算："40,000 €" [approved] | end',
        "团队：Alice Moreau；Bob Chen",
        "<script>alert(1)</script> trials",
        "%%{init: {'theme': 'dark'}}%% dust #35; &lt;",
        "subgraph end --> graph TD",
    ]
    assert [label for label in labels(shot.dom, "edge") if label] == [
        "批准于三月",
        'leads "engineering"',
        "runs -->",
        "risk: dust",
    ]
    assert "<script>alert" not in drawing(shot.dom)
    assert pixels_of(shot.image, NODE_FILL) > 6 * 1000, "no Mermaid nodes in the screenshot"


# --------------------------------------------------------------------------- tree page

SECTIONS = ["Overview", "Budget", "预算细节", "Team", "Schedule", "Risks", "风险：灰尘", "Next steps"]


def worker(messages: list) -> str:
    return quoting([("euros", ""), ("", "")])(messages)


def test_tree_page_draws_the_chain_tree(tmp_path: Path) -> None:
    text = "# Falcon\n\n" + "\n\n".join(
        f"## {title}\n\n" + f"Section {i} says something about topic {i % 3} and the pump budget. " * 3
        for i, title in enumerate(SECTIONS)
    )
    doc = ingest(text=text, title="Falcon", chunk_size=60, chunk_overlap=0)
    model = ScriptedChatModel(
        rules=[("manager of a chain", '{"answer": "40,000 euros", "evidence": ["c1"], "explanation": "[c1]"}')],
        default=worker,
    )
    with use_chat_model(model):
        full = graph.invoke({"question": "What is the budget?", "doc_id": doc.doc_id}, context={"read_all": True})
        anytime = graph.invoke({"question": "What is the budget?", "doc_id": doc.doc_id}, context={"floor": 0.0})
    order, edges = full["order"][0], full["tree"]
    assert 7 <= len(order) <= 10 and len(edges) == len(order) - 1
    sections = {hit.chunk_id: hit.section for hit in get_store("default").by_doc(doc.doc_id)}
    page = tmp_path / "tree.html"
    page.write_text(tree_html(order, edges, sections, title="Falcon: What is the budget?"), encoding="utf-8")

    shot = open_page(page, tmp_path)

    assert_drawn(shot)
    drawn = labels(shot.dom, "node")
    assert [label.split(" ")[:2] for label in drawn] == [[f"#{i}", cid] for i, cid in enumerate(order, start=1)]
    assert any("预算细节" in label for label in drawn) and any("风险：灰尘" in label for label in drawn)
    assert sorted(labels(shot.dom, "edge")) == sorted(f"{weight:.2f}" for _, _, weight in edges)
    assert re.search(r'<g class="node default root" id="canvas-svg-flowchart-k0-\d+"', shot.dom)
    assert pixels_of(shot.image, ROOT_FILL) > 1000, "the root is not highlighted"
    assert pixels_of(shot.image, READ_FILL) > (len(order) - 1) * 1000, "the chunks read are not marked"

    # an anytime run: the chunks read in order, the skipped ones greyed out, the rest plain
    assert anytime["skipped"], "nothing was skipped"
    read, skipped = anytime["order"][0], anytime["skipped"]
    page = tmp_path / "anytime.html"
    page.write_text(tree_html(read, edges, sections, title="Falcon", skipped=skipped), encoding="utf-8")
    shot = open_page(page, tmp_path)
    assert_drawn(shot)
    drawn = labels(shot.dom, "node")
    assert [label.split(" ")[0] for label in drawn[: len(read)]] == [f"#{i}" for i in range(1, len(read) + 1)]
    assert sum(label.startswith("skipped ") for label in drawn) == len(skipped), drawn
    assert pixels_of(shot.image, SKIPPED_FILL) > len(skipped) * 1000, "the skipped chunks are not greyed out"


# --------------------------------------------------------------------------- the checks can fail


def test_checks_catch_a_broken_page(tmp_path: Path) -> None:
    """A diagram Mermaid cannot parse is reported as such and draws no nodes; console
    messages, uncaught errors and blocked requests all reach the console check."""
    broken = tmp_path / "broken.html"
    broken.write_text(render_html('flowchart TD\n    n1["unterminated] --> n2\n', "Broken", mermaid_js_source()))
    shot = open_page(broken, tmp_path)
    assert '<div id="canvas" data-rendered="error">' in shot.dom
    assert pixels_of(shot.image, NODE_FILL) < 100

    noisy = tmp_path / "noisy.html"
    noisy.write_text(
        "<!doctype html><html><head>"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'\">"
        "</head><body><p>text</p>"
        '<script>console.error("first failure"); null.boom;</script>'
        '<img src="https://example.invalid/pixel.png">'
        "</body></html>"
    )
    _, console = run_chromium(noisy, tmp_path / "noisy-profile", "--dump-dom")
    assert any('"first failure"' in line for line in console), console
    assert any("Uncaught TypeError" in line for line in console), console
    assert any("Content Security Policy" in line for line in console), console


@pytest.mark.parametrize("chunks", [22, 200])
def test_a_large_tree_stays_legible(chunks: int, tmp_path: Path) -> None:
    """At 20-200 chunks the drawing keeps labels of at least 12 px (fit to the width only when that holds, else
    actual size, panned and zoomed in a scrolling frame): the nodes in view are boxes a person can read."""
    rng = np.random.default_rng(chunks)
    order = [f"c{i}" for i in range(chunks)]
    edges = [[f"c{int(rng.integers(0, i))}", f"c{i}", float(rng.uniform(0.3, 0.9))] for i in range(1, chunks)]
    sections = {cid: f"Section {i // 4}: field notes" for i, cid in enumerate(order)}
    page = tmp_path / f"tree{chunks}.html"
    page.write_text(tree_html(order, edges, sections, title=f"{chunks} chunks"), encoding="utf-8")

    shot = open_page(page, tmp_path)

    assert_drawn(shot)
    assert len(labels(shot.dom, "node")) == chunks
    zoom = float(re.search(r'data-zoom="([\d.]+)"', shot.dom).group(1))  # type: ignore[union-attr]
    svg = re.search(r'<svg[^>]*id="canvas-svg"[^>]*>', shot.dom).group(0)  # type: ignore[union-attr]
    width = float(re.search(r' width="([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    view = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', svg).group(1))  # type: ignore[union-attr]
    assert zoom >= 0.75 and width == pytest.approx(view * zoom, rel=0.01), (zoom, width, view)
    # Mermaid's 16 px labels at that scale: several whole node boxes fill the view (squeezed to the page
    # width, 200 chunks gave boxes of a few pixels and labels of ~4 px)
    assert pixels_of(shot.image, READ_FILL) > 8 * 2500, "the nodes in view are too small to read"


def test_a_long_documents_tree_opens_on_the_first_chunk_read(tmp_path: Path) -> None:
    """82 chunks, 12 read: the page opens with the root (and the reading path below it) in view, unread
    subtrees folded into "+N chunks" nodes, the nodes labelled with their first words, and a legend."""
    rng = np.random.default_rng(82)
    edges = [[f"c{int(rng.integers(max(0, i - 12), i))}", f"c{i}", float(rng.uniform(0.3, 0.9))] for i in range(1, 82)]
    children: dict[str, list[str]] = {}
    for a, b, _ in edges:
        children.setdefault(a, []).append(b)
    order, queue = [], ["c40"]  # hung from the middle of the document, read breadth first
    while queue and len(order) < 12:
        order.append(queue.pop(0))
        queue += children.get(order[-1], [])
    texts = {f"c{i}": f"# Part {i}\n\nChunk {i} says something worth reading." for i in range(82)}
    page = tmp_path / "long.html"
    page.write_text(tree_html(order, edges, {}, title="82 chunks", texts=texts), encoding="utf-8")

    shot = open_page(page, tmp_path)

    assert_drawn(shot)
    assert 'data-focus="k0"' in shot.dom
    drawn = labels(shot.dom, "node")
    assert drawn[0] == "#1 c40 · Chunk 40 says something worth reading." and any(d.endswith(" chunks") for d in drawn)
    assert len(drawn) < 82
    assert pixels_of(shot.image, ROOT_FILL) > 5000, "the first chunk read is not in view"
    assert pixels_of(shot.image, READ_FILL) > 3 * 5000, "the reading path is not in view"
    assert 'id="legend"' in shot.dom
