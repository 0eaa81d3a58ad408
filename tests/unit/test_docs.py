"""The README and docs/ say only what is there: links resolve, commands parse, named files and modules exist.

The Python blocks themselves run in ``tests/integration/test_readme.py`` (they need an endpoint).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import unicodedata
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
README_MAX_LINES = 300

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", flags=re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
TOP_LEVEL = (
    "graphs",
    "nodes",
    "surfaces",
    "stores",
    "prompts",
    "bench",
    "deploy",
    "doubles",
    "tests",
    "notebooks",
    "docs",
    ".ci",
)
FILE_PATH = re.compile(r"`((?:" + "|".join(re.escape(t) for t in TOP_LEVEL) + r")/[\w./-]*?)`")
INLINE_COMMAND = re.compile(r"`((?:\.venv/bin/)?python -m [^`]+)`")
DOTTED = re.compile(r"`((?:graphs|nodes|surfaces|stores|prompts|bench|deploy|doubles)(?:\.\w+)+)`")


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _prose(text: str) -> str:
    """The page without its fenced blocks."""
    return FENCE.sub("", text)


def _blocks(kind: str) -> list[tuple[Path, str]]:
    return [
        (page, body) for page in PAGES for lang, body in FENCE.findall(page.read_text(encoding="utf-8")) if lang == kind
    ]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+)$", _prose(page.read_text(encoding="utf-8")), flags=re.M)
    return {slug(h) for h in headings}


def _layout_rows() -> dict[str, str]:
    """The README's layout table: each folder it names and what its row says."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`/]+)/` \| (.*) \|$", section, flags=re.M)}


def test_the_readme_layout_table_names_every_folder_and_each_package_inside() -> None:
    import fnmatch

    ignored = [
        line.strip().rstrip("/")
        for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
        if line.strip().endswith("/") and "/" not in line.strip().rstrip("/")
    ]
    folders = {
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and not path.name.startswith(".") and not any(fnmatch.fnmatch(path.name, i) for i in ignored)
    }
    rows = _layout_rows()
    assert set(rows) == folders
    unnamed = {
        f"{folder}/{package.name}/"
        for folder, row in rows.items()
        for package in (ROOT / folder).iterdir()
        if (package / "__init__.py").is_file() and f"`{package.name}/`" not in row
    }
    assert unnamed == set(), "packages the layout table does not name"


def test_the_readmes_ingest_example_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    from surfaces.cli import main

    blocks = [code for lang, code in FENCE.findall((ROOT / "README.md").read_text(encoding="utf-8")) if lang == "bash"]
    line = next(line for code in blocks for line in code.splitlines() if line.startswith("longdoc ingest notebooks/"))
    command, said = (part.strip() for part in line.split("  # ", 1))
    assert main([*shlex.split(command)[1:], "-q"]) == 0
    assert capsys.readouterr().out.strip() == said


def test_the_readme_is_short_and_the_docs_exist() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/"
    assert {"workflows.md", "deployment.md", "security.md"} <= {p.name for p in (ROOT / "docs").glob("*.md")}
    assert len(list((ROOT / "docs" / "benchmarks").glob("*.md"))) >= 5


def test_the_readme_keeps_the_two_commands_and_the_licences() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "```bash\nmake demo\n```" in text and "```bash\nmake test\n```" in text
    assert "## Licences" in text


def test_the_readmes_command_line_block_names_every_subcommand() -> None:
    from tests.unit.test_cli import _subcommands

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = FENCE.findall(text.split("### Command line", 1)[1])[0][1]
    named = {words[1] for words in _commands(block) if words[:1] == ["longdoc"] and not words[1].startswith("-")}
    assert named == set(_subcommands())


def test_no_line_of_the_readme_is_written_twice() -> None:
    lines = [line.strip() for line in _prose((ROOT / "README.md").read_text(encoding="utf-8")).splitlines()]
    long = [line for line in lines if len(line) >= 50]
    assert sorted({line for line in long if long.count(line) > 1}) == []


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_named_files_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    named = {m for m in FILE_PATH.findall(text) if "*" not in m and ".cache" not in m}
    missing = sorted(path for path in named if not (ROOT / path.rstrip("/")).exists())
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_named_modules_and_objects_exist(page: Path) -> None:
    missing = []
    for dotted in sorted(set(DOTTED.findall(page.read_text(encoding="utf-8")))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            module_name = ".".join(parts[:cut])
            if _is_module(module_name):
                break
        else:
            missing.append(dotted)
            continue
        obj: object = importlib.import_module(module_name)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                missing.append(dotted)
                break
            obj = getattr(obj, attr)
    assert missing == []


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent is a module, not a package
        return False


def _commands(body: str) -> list[list[str]]:
    """The commands of a bash block: continuations joined, comments dropped, split on ``&&``."""
    commands = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            commands.append(words[:cut])
            words = words[cut + 1 :]
    return commands


class _Parser(Exception):
    """Raised in place of parsing: carries the parser a module's ``main`` built."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _module_parser(module: str) -> argparse.ArgumentParser | None:
    """The parser ``module.main(argv)`` builds, taken before it parses anything (so nothing runs)."""
    if not _is_module(module):
        return None
    main = importlib.import_module(module).main
    real = argparse.ArgumentParser.parse_known_args

    def capture(self: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> NoReturn:
        raise _Parser(self)

    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[assignment,method-assign]
    try:
        main([])
    except _Parser as caught:
        return caught.parser
    finally:
        argparse.ArgumentParser.parse_known_args = real  # type: ignore[method-assign]
    raise AssertionError(f"python -m {module}: main() parsed no arguments")


def _parses(parser: argparse.ArgumentParser, args: list[str]) -> str | None:
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            parser.parse_args(args)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return f"{parser.prog} {' '.join(args)}: {err.getvalue().strip().splitlines()[-1]}"
    return None


def _check(command: list[str], makefile: str) -> str | None:
    head, args = command[0], command[1:]
    if head == "longdoc":
        from surfaces.cli import build_parser

        return _parses(build_parser(), args)
    if head.endswith("python") and args[:1] == ["-m"]:
        parser = _module_parser(args[1])
        return _parses(parser, args[2:]) if parser else f"python -m {args[1]}: no such module"
    if head == "make":
        missing = [t for t in args if not re.search(rf"^{re.escape(t)}:", makefile, flags=re.M)]
        return f"make: no target {missing}" if missing else None
    if head == "bash":
        return None if (ROOT / args[0]).exists() else f"bash {args[0]}: no such file"
    return None  # exports and third-party commands are not the project's to check


def test_bash_blocks_name_real_commands_and_options() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    checked, problems = 0, []
    for page, body in _blocks("bash"):
        for command in _commands(body):
            problem = _check(command, makefile)
            checked += command[0] in ("longdoc", "make", "bash") or command[0].endswith("python")
            if problem:
                problems.append(f"{_rel(page)}: {problem}")
    assert problems == []
    assert checked >= 40  # the pages' commands were found and checked, not skipped


def test_inline_commands_parse() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    inline = [
        (page, " ".join(span.split()))
        for page in PAGES
        for span in INLINE_COMMAND.findall(_prose(page.read_text(encoding="utf-8")))
    ]
    problems = [f"{_rel(page)}: {problem}" for page, span in inline if (problem := _check(shlex.split(span), makefile))]
    assert problems == []
    assert len(inline) >= 5


def test_the_command_check_catches_a_wrong_option() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert _check(["longdoc", "ask", "a.txt", "q", "--no-such-option"], makefile)
    assert _check(["python", "-m", "bench.plots", "--no-such-option"], makefile)
    assert _check(["python", "-m", "bench.no_such_module"], makefile)
    assert _check(["make", "no-such-target"], makefile)
    assert _check(["longdoc", "ask", "a.txt", "q", "--budget", "6000"], makefile) is None


def test_security_doc_states_every_caller_bound() -> None:
    """docs/security.md names every setting of ``surfaces.access.CALLER_BOUNDS`` with the top of its range."""
    from surfaces.access import CALLER_BOUNDS

    text = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text(encoding="utf-8")
    table = text.split("### What a caller may set", 1)[1].split("`LONGDOC_SERVER_KEYS`", 1)[0]
    for key, (_low, high) in CALLER_BOUNDS.items():
        row = next((line for line in table.splitlines() if f"`{key}`" in line), "")
        top = f"{int(high):,}" if float(high).is_integer() else f"{high:g}"
        shown = (top, top.replace(",", ""), "2^32-1")
        assert row and any(s in row.split(f"`{key}`", 1)[1].split(";")[0] for s in shown), (key, row)
