"""Loading the multi-hop QA sets (one JSON object per line).

Schema: ``{id, source, question, answers[], paragraphs[{title, text, supporting}]}``; other keys
(``type``, ``level``, ``hops``...) are kept in ``extra``. A long document is the item's paragraphs
joined in order; here each paragraph is one chunk whose text is ``title + ": " + text``.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ITEM_KEYS = ("id", "source", "question", "answers", "paragraphs")


@dataclass(frozen=True)
class Paragraph:
    """One paragraph of a QA item; ``supporting`` marks gold evidence."""

    title: str
    text: str
    supporting: bool = False

    @property
    def chunk_text(self) -> str:
        """The paragraph as one chunk: ``title: text``."""
        return f"{self.title}: {self.text}"


@dataclass(frozen=True)
class QAItem:
    """A question with its gold answers and its paragraphs in document order."""

    id: str
    source: str
    question: str
    answers: list[str]
    paragraphs: list[Paragraph]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def chunks(self) -> list[str]:
        """Chunk texts, one per paragraph, in document order."""
        return [p.chunk_text for p in self.paragraphs]

    @property
    def supporting(self) -> list[int]:
        """Indices of the gold supporting paragraphs."""
        return [i for i, p in enumerate(self.paragraphs) if p.supporting]


def parse_item(data: dict[str, Any], where: str = "item") -> QAItem:
    """Check one decoded JSON object against the schema and build a :class:`QAItem`."""
    missing = [k for k in _ITEM_KEYS if k not in data]
    if missing:
        raise ValueError(f"{where}: missing keys {', '.join(missing)}")
    if not isinstance(data["answers"], list) or not isinstance(data["paragraphs"], list):
        raise ValueError(f"{where}: answers and paragraphs must be lists")
    paragraphs = []
    for pos, para in enumerate(data["paragraphs"]):
        if not isinstance(para, dict) or "text" not in para:
            raise ValueError(f"{where}: paragraph {pos} needs at least a text")
        paragraphs.append(Paragraph(str(para.get("title", "")), str(para["text"]), bool(para.get("supporting", False))))
    extra = {k: v for k, v in data.items() if k not in _ITEM_KEYS}
    return QAItem(
        id=str(data["id"]),
        source=str(data["source"]),
        question=str(data["question"]),
        answers=[str(a) for a in data["answers"]],
        paragraphs=paragraphs,
        extra=extra,
    )


def load_qa(path: str | Path) -> list[QAItem]:
    """All items of one ``.jsonl`` file (blank lines skipped; errors name the line)."""
    path = Path(path)
    items = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path.name}:{lineno}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: invalid JSON ({exc.msg})") from exc
            if not isinstance(data, dict):
                raise ValueError(f"{where}: expected a JSON object")
            items.append(parse_item(data, where))
    return items


def load_qa_dir(directory: str | Path) -> dict[str, list[QAItem]]:
    """Every ``*.jsonl`` file of a folder, keyed by file stem, in name order."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"QA data folder not found: {directory}")
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no *.jsonl files in {directory}")
    return {f.stem: load_qa(f) for f in files}


def split_items(datasets: dict[str, list[QAItem]], split: str) -> list[QAItem]:
    """Items ``[a:b)`` (``split`` is ``"a:b"``) of every data set, interleaved set by set in name order."""
    start, stop = (int(x) for x in split.split(":"))
    files = [data[start:stop] for _, data in sorted(datasets.items())]
    return [item for group in itertools.zip_longest(*files) for item in group if item is not None]
