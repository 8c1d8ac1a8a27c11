"""No module over 450 lines: a longer one holds two jobs, and is split into two modules with
one job each (CONTRIBUTING: house rules). Counted as `wc -l` counts, docstrings and all."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 450

# Modules allowed past the limit, each with its reason. Keep this short: an entry is an
# argument, not a way to make the test pass.
SIZE_EXCEPTIONS: dict[str, str] = {}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _oversized(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root.parent)): n
        for p in sorted(root.rglob("*.py"))
        if (n := _lines(p)) > LIMIT
    }


def test_no_module_of_the_package_is_over_450_lines() -> None:
    over = {m: n for m, n in _oversized(ROOT / "watchkeeper").items() if m not in SIZE_EXCEPTIONS}
    assert over == {}, f"split these into modules with one job each: {over}"


def test_every_size_exception_is_still_needed() -> None:
    """An exception whose module shrank (or went) is a stale argument: remove it."""
    over = _oversized(ROOT / "watchkeeper")
    assert [m for m in SIZE_EXCEPTIONS if m not in over] == []


def test_the_size_rule_sees_a_long_module(tmp_path: Path) -> None:
    """The rule can fail: a 451-line module in a package is reported with its length."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (package / "short.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    assert _oversized(package) == {"pkg/long.py": LIMIT + 1}
