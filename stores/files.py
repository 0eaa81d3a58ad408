"""Where callers may name files on the server: nowhere, or inside the operator's ``LONGDOC_INGEST_ROOT``.

The servers resolve an input's ``path`` with :class:`IngestRoot` (:mod:`surfaces.access`,
:mod:`deploy.app`), and the chat workflow resolves a file named in a chat message with it, so a
message never reaches a file the ``path`` field could not.
"""

from __future__ import annotations

import os
from pathlib import Path

from stores.errors import InputError
from stores.settings import get_settings


class IngestRoot:
    """Where callers may name files: nowhere (``None``), or inside one operator-chosen folder."""

    REFUSED = "this server does not read its own files: send the document as `text`, or as `data` + `filename`"

    def __init__(self, root: str | Path | None) -> None:
        self.root = Path(root).expanduser().resolve(strict=True) if root else None
        if self.root is not None and not self.root.is_dir():
            raise ValueError(f"LONGDOC_INGEST_ROOT {root} is not a folder")

    @classmethod
    def from_env(cls) -> IngestRoot:
        """The ingest root from the settings."""
        return cls(get_settings().ingest_root)

    def resolve(self, given: str) -> str:
        """The real path of file or folder ``given`` inside the root.

        InputError (one message for every case) otherwise. A folder names a collection: the workflows read its
        files, links out of it left out.
        """
        if self.root is None:
            raise InputError(self.REFUSED)
        message = f"no readable file {given!r} under the ingest root"
        try:
            candidate = (self.root / given).resolve(strict=True)
        except (OSError, RuntimeError, ValueError):
            raise InputError(message) from None
        if not candidate.is_relative_to(self.root) or not (candidate.is_file() or candidate.is_dir()):
            raise InputError(message)
        return str(candidate)

    def scrub(self, message: str) -> str:
        """``message`` with the root's own location removed (paths shown relative to it)."""
        if self.root is None:
            return message
        return message.replace(str(self.root) + os.sep, "").replace(str(self.root), ".")


def shown_source(source: str) -> str:
    """How outputs show a document's recorded ``source``, never a path of the server's own folders.

    With an ingest root, a file under it is shown relative to it (``team/heron.md``) and any other file by its
    name; without one (a local run, whose files are the caller's own) the source is shown as recorded.
    """
    root = get_settings().ingest_root
    if not root or not os.path.isabs(source):
        return source
    path = Path(source)
    for base in dict.fromkeys((Path(root).expanduser(), Path(root).expanduser().resolve())):
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return path.name
