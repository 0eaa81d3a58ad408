"""`.env.example` lists every variable longdoc reads, with the defaults the code has."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices

from stores.settings import ROLES, Settings

ROOT = Path(__file__).resolve().parents[2]
LISTED = re.compile(r"^# (LONGDOC_[A-Z0-9_]+)=(.*)$", re.MULTILINE)
RUNTIME = ("graphs", "nodes", "surfaces", "stores", "prompts", "deploy")
OLDER_NAMES = {"LONGDOC_REQUEST_TIMEOUT"}  # still read, no longer documented: LONGDOC_READ_TIMEOUT replaced it


def _listed() -> dict[str, str]:
    return dict(LISTED.findall((ROOT / ".env.example").read_text(encoding="utf-8")))


def _settings_variables() -> dict[str, str]:
    """Each Settings field's variable name, to the field's name."""
    names = {}
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            alias = alias.choices[0]
        names[str(alias) if alias else f"LONGDOC_{field.upper()}"] = field
    return names


def _read_in_source() -> set[str]:
    """Variables the runtime packages name as string literals (read with ``os.environ`` there)."""
    found: set[str] = set()
    for package in RUNTIME:
        for path in (ROOT / package).rglob("*.py"):
            found |= set(re.findall(r"[\"'](LONGDOC_[A-Z0-9_]+)[\"']", path.read_text(encoding="utf-8")))
    return found


def test_every_variable_read_is_listed() -> None:
    expected = set(_settings_variables()) | (_read_in_source() - OLDER_NAMES)
    assert expected - set(_listed()) == set()


def test_every_listed_variable_is_read() -> None:
    roles = {f"LONGDOC_{role.upper()}_{part}" for role in ROLES for part in ("MODEL", "BASE_URL", "API_KEY")}
    known = set(_settings_variables()) | _read_in_source() | roles
    assert set(_listed()) - known == set()


def test_every_variable_the_docs_name_is_listed() -> None:
    documented: set[str] = set()
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        documented |= set(re.findall(r"\bLONGDOC_[A-Z0-9_]*[A-Z0-9]\b", page.read_text(encoding="utf-8")))
    documented -= OLDER_NAMES
    roles = {name for name in documented if any(name.startswith(f"LONGDOC_{r.upper()}_") for r in ROLES)}
    assert documented - roles - set(_listed()) == set()


def test_listed_defaults_are_the_code_defaults() -> None:
    fields = _settings_variables()
    checked = 0
    for name, value in _listed().items():
        if name not in fields or not value or value.startswith(("~", "http", "postgresql")):
            continue  # no default to compare (unset, computed or an example)
        default = Settings.model_fields[fields[name]].default  # the declared one, whatever the tests' environment
        if isinstance(default, bool):
            assert value == ("on" if default else "off"), name
        elif isinstance(default, (int, float)):
            assert float(value) == default, name
        else:
            assert value == default, name
        checked += 1
    assert checked >= 20
