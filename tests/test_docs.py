"""The documentation is a set of plain Markdown pages; this keeps them a set a newcomer can follow.

Every relative link must reach an existing file (and an `#anchor` an existing heading of it),
the README stays short and is the way into every page of `docs/`, and its command table names
every command the real parser knows, so a new command cannot ship undocumented. The link
checker is tested on a page with a broken link and a broken anchor, so a checker that finds
nothing cannot pass for a clean tree.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from watchkeeper.cli.app import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 150


def pages() -> list[Path]:
    return [
        README,
        ROOT / "CONTRIBUTING.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "benchmarks" / "README.md",
    ]


_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`+[^`\n]*`+")
_LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where `[x](y)` is not a link."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not `-` or `_`), spaces
    to hyphens. Inline code keeps its text, links their label."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, with GitHub's -1, -2 ... for repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    return _LINK.findall(prose(path.read_text(encoding="utf-8")))


def broken_links(path: Path) -> list[str]:
    """Relative links of `path` whose file or heading does not exist, as `page: link (why)`."""
    problems = []
    for link in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I):
            continue  # http:, https:, mailto: ... are not checked (no network in the suite)
        target, _, anchor = link.partition("#")
        resolved = (path.parent / target).resolve() if target else path
        if not resolved.exists():
            problems.append(f"{path.name}: {link} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{path.name}: {link} (no heading #{anchor} in {resolved.name})")
    return problems


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_commands() -> dict[str, set[str]]:
    """Each top-level command of the real parser, with the words that must appear on its line:
    its own sub-commands (`db upgrade`) and the choices of its positional action
    (`findings ack`)."""
    commands: dict[str, set[str]] = {}
    for name, sub in _subparsers(build_parser()).items():
        words = set(_subparsers(sub))
        for action in sub._actions:
            if not action.option_strings and action.choices and not words:
                words |= {str(c) for c in action.choices}
        commands[name] = words
    return commands


def command_table(text: str) -> dict[str, str]:
    """`watchkeeper NAME` -> its row, from the README's table rows whose first cell starts
    with a command."""
    rows = {}
    for line in text.splitlines():
        found = re.match(r"^\|\s*`watchkeeper ([a-z][a-z-]*)", line)
        if found:
            rows[found.group(1)] = line
    return rows


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    assert page.exists(), page
    assert broken_links(page) == []


def test_the_link_check_finds_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## The `bench` step: 1/2\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md) [ok](other.md#the-bench-step-12) [ok](#page) [web](https://x.org/a)\n"
        "`[not a link](gone.md)`\n\n```md\n[not a link](gone.md)\n```\n"
        "[bad file](missing.md) [bad anchor](other.md#nope) [bad self](#nope)\n"
    )
    assert broken_links(page) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nope (no heading #nope in other.md)",
        "page.md: #nope (no heading #nope in page.md)",
    ]


def test_repeated_headings_get_numbered_anchors(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# A\n## Notes\n## Notes\n```\n# not a heading\n```\n")
    assert anchors(page) == {"a", "notes", "notes-1"}


def test_the_readme_is_at_most_150_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines"


def test_every_page_in_docs_is_linked_from_the_readme() -> None:
    linked = {
        (README.parent / link.partition("#")[0]).resolve()
        for link in links(README)
        if link.partition("#")[0]
    }
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert unlinked == [], f"docs pages the README does not link: {unlinked}"


def test_every_cli_command_has_a_line_in_the_readme_command_table() -> None:
    commands = cli_commands()
    assert {"bench", "nightly", "db", "job"} <= set(commands)  # the parser was read
    rows = command_table(README.read_text(encoding="utf-8"))
    missing = sorted(set(commands) - set(rows))
    assert missing == [], f"commands without a line in the README's table: {missing}"
    for name, words in commands.items():
        absent = sorted(w for w in words if not re.search(rf"\b{re.escape(w)}\b", rows[name]))
        assert absent == [], f"`watchkeeper {name}`: its line does not name {absent}"


ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "watchkeeper"


def _map_rows() -> dict[str, str]:
    """The architecture page's module map: first cell (the package, e.g. `server/`) -> row."""
    rows = {}
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) > 2:
            for name in re.findall(r"`([^`]+)`", cells[1]):
                rows[name] = line
    return rows


def test_the_architecture_page_names_every_package_and_module() -> None:
    """The map went stale once (it left out two packages and named one that did not exist):
    every package has a row, every module of it is named in that row, and every top-level
    module is named."""
    rows = _map_rows()
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert packages, "no packages found: the check checks nothing"
    missing = [f"{p}/" for p in packages if f"{p}/" not in rows]
    for package in packages:
        row = rows.get(f"{package}/", "")
        for module in sorted((PACKAGE / package).glob("*.py")):
            if module.stem not in ("__init__", "__main__") and f"`{module.stem}`" not in row:
                missing.append(f"{package}/{module.name}")
    for module in sorted(PACKAGE.glob("*.py")):
        if module.stem != "__init__" and module.name not in rows:
            missing.append(module.name)
    assert missing == [], f"name these in docs/architecture.md's module map: {missing}"
    gone = [name for name in rows if name.endswith("/") and name[:-1] not in packages]
    assert gone == [], f"the module map names packages that do not exist: {gone}"
