"""Markdown building blocks shared by every rendered document (bench report, digest).

Text from models, logs and users goes into tables, excerpts and titles; these helpers are
where it is flattened, escaped and fenced so that it can never break the document's structure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from urllib.parse import quote

import jinja2

from watchkeeper.format import MISSING
from watchkeeper.format import fixed as format_fixed

NONE = MISSING


def fixed(value: float | None, decimals: int, suffix: str = "") -> str:
    """The templates' `fixed` filter: `format.fixed` with a number of decimals."""
    return format_fixed(value, f".{decimals}f", suffix)


def text(value: object) -> str:
    return NONE if value is None else str(value)


def inline(text: str) -> str:
    """Model- and user-supplied names must not start a new Markdown line."""
    return " ".join(text.split())


def cell(text: str) -> str:
    return inline(text).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """`align` has one letter per column: l or r (missing letters mean l)."""
    marks = ["---:" if align[i : i + 1] == "r" else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "| " + " | ".join(marks) + " |"]
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def fence_for(text: str) -> str:
    """A fence longer than any backtick run inside, so the content cannot close it early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def fenced(text: str, lang: str = "", indent: int = 0) -> str:
    fence = fence_for(text)
    pad = " " * indent
    body = "\n".join(pad + line if line else "" for line in text.split("\n"))
    return f"{pad}{fence}{lang}\n{body}\n{pad}{fence}"


def cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def link(target: str) -> str:
    return quote(target, safe="/")


@cache
def environment() -> jinja2.Environment:
    # FileSystemLoader next to this package works the same from a wheel and an editable install.
    templates = Path(__file__).resolve().parent.parent / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        # Markdown is not HTML: escaping would turn `<` and `&` in model output into entities.
        autoescape=jinja2.select_autoescape(("html", "htm", "xml"), default=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals["table"] = table
    env.filters["inline"] = inline
    env.filters["fixed"] = fixed
    env.filters["text"] = text
    return env
