"""Prompt templates: one file per role and language, rendered strictly.

Templates live beside this module as ``<workflow>/<role>.<lang>.txt`` and use ``$name``
placeholders (``$$`` for a literal dollar). Rendering a template with a missing variable raises
``KeyError``; an unknown template or language raises ``FileNotFoundError``.

Every role's system prompt is also a field of its workflow's ``Context`` (e.g. ``worker_prompt``), whose
default is the English file's text. The rule for languages (:func:`chosen`): a field left at its default
gives the file in the document's language (a Chinese document gets the ``zh`` file); a field a caller
changed is used as it is, whatever the document's language.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from string import Template


def load(name: str, lang: str = "en") -> Template:
    """The template ``name`` (e.g. ``"chain/worker"``) in ``lang``, falling back to English.

    Read from the package each time (a few kilobytes, next to a model call): no cache to keep or forget.
    """
    root = resources.files(__package__)
    for candidate in (lang, "en"):
        path = root.joinpath(*f"{name}.{candidate}.txt".split("/"))
        if path.is_file():
            return Template(path.read_text(encoding="utf-8"))
    raise FileNotFoundError(f"no prompt template {name!r} for language {lang!r}")


def chosen(name: str, lang: str = "en", template: str | None = None) -> Template:
    """The template ``name`` in ``lang``; or ``template``, a caller's text for it.

    ``template`` is taken unless it is the English file's text (a Context field left at its default), which stands
    for the file in every language.
    """
    if template is None or template == load(name).template:
        return load(name, lang)
    return Template(template)


def render(name: str, lang: str = "en", *, template: str | None = None, **values: object) -> str:
    """Render template ``name`` (or a caller's ``template`` for it, see :func:`chosen`) with ``values``.

    Every placeholder must be given.
    """
    return chosen(name, lang, template).substitute({k: str(v) for k, v in values.items()}).strip()


def placeholders(name: str, lang: str = "en") -> set[str]:
    """Names of the placeholders used by a template."""
    template = load(name, lang)
    names = set()
    for match in template.pattern.finditer(template.template):
        named = match.group("named") or match.group("braced")
        if named:
            names.add(named)
    return names


def all_templates() -> list[tuple[str, str]]:
    """Every ``(name, lang)`` pair shipped."""
    root = resources.files(__package__)
    found: list[tuple[str, str]] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir() and not child.name.startswith("__"):
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".txt"):
                stem, lang, _ = child.name.rsplit(".", 2)
                found.append((prefix + stem, lang))

    walk(root, "")
    return sorted(found)
