"""The errors every layer raises and every surface maps to an exit code or an HTTP status.

:class:`InputError` (exit 2, HTTP 400; :class:`TooLarge` 413) is bad input; :class:`ModelError` (exit 3, HTTP
503) a chat model that could not be reached or kept answering badly; :class:`RunTimeout` a run past its deadline.
"""

from __future__ import annotations

from typing import Any

from stores.cache import ProcessCache

_raised: ProcessCache[str, int] = ProcessCache("statuses of the errors raised", 1024)
"""The HTTP status of each error raised lately in this process, by its message."""


def raised_status(message: str) -> int | None:
    """The HTTP status of an :class:`InputError` or :class:`ModelError` this process raised with ``message``.

    For a server that keeps only a failed run's message (Aegra's run record): its graphs run in this process.
    """
    return _raised.get(message)


class InputError(ValueError):
    """Bad input given to the product (file, text, question, registry...)."""

    status = 400
    """The HTTP status a request refused with this error answers with."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        _raised.put(str(self), self.status)

    notes: dict[int, str] | None = None
    """For a chat turn's attachments: what the turn says of each (None: the error is not about attachments)."""
    kept: Any = None
    """For a chat turn refused after its attachments were read: the human message it keeps in their place."""


class TooLarge(InputError):
    """Input over one of the size bounds (bytes, characters, chunks, pages, archive members, batch): HTTP 413."""

    status = 413


class Gone(InputError):
    """What the input names was there and has been removed: HTTP 410, the message saying what changed.

    A document replaced by a newer version of its file, a thread deleted with a document it read.
    """

    status = 410


class ModelError(RuntimeError):
    """The chat model could not be reached or kept answering badly after retries."""

    status = 503

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        _raised.put(str(self), self.status)


class RunTimeout(ModelError):
    """A run went past ``LONGDOC_RUN_TIMEOUT``: HTTP 503, exit code 3."""
