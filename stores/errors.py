"""The errors every layer raises and every surface maps to an exit code or an HTTP status.

:class:`InputError` (exit 2, HTTP 400; :class:`TooLarge` 413) is bad input; :class:`ModelError` (exit 3, HTTP
503) a chat model that could not be reached or kept answering badly; :class:`RunTimeout` a run past its deadline.
"""

from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """Bad input given to the product (file, text, question, registry...)."""

    notes: dict[int, str] | None = None
    """For a chat turn's attachments: what the turn says of each (None: the error is not about attachments)."""
    kept: Any = None
    """For a chat turn refused after its attachments were read: the human message it keeps in their place."""


class TooLarge(InputError):
    """Input over one of the size bounds (bytes, characters, chunks, pages, archive members, batch): HTTP 413."""


class ModelError(RuntimeError):
    """The chat model could not be reached or kept answering badly after retries."""


class RunTimeout(ModelError):
    """A run went past ``LONGDOC_RUN_TIMEOUT``: HTTP 503, exit code 3."""
