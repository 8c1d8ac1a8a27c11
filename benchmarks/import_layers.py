"""The package's shape in figures: imports that climb back up a layer, the size of `commands/`,
the longest functions and modules. Reads the source with `ast` (nothing is imported).

    python benchmarks/import_layers.py [--top 10]

Why a script and not only the test: `tests/test_import_graph.py` fails on a new up-arrow, but
a restructuring wants the before and after side by side (issue 40), and the list of arrows by
name is what a reviewer reads. The layer order is the test's (`LAYERS`, `LAYER_EXCEPTIONS`),
read from its source so the two never disagree; the arrows it lists as argued exceptions are
printed apart.
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "watchkeeper"
TEST = ROOT / "tests" / "test_import_graph.py"


def _constant(name: str) -> object | None:
    """A literal module-level constant of the import-graph test, if it defines one."""
    if not TEST.exists():
        return None
    for node in ast.parse(TEST.read_text(encoding="utf-8")).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            for alias in node.names:
                yield f"{node.module}.{alias.name}"


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def up_arrows(layers: list[list[str]]) -> list[tuple[str, str, str, str]]:
    """(importer, imported, importer's package, imported's package) for each import of another
    package in the importer's own layer or a higher one (the test's rule)."""
    rank = {"watchkeeper": 0} | {pkg: i for i, group in enumerate(layers) for pkg in group}
    found = []
    for name, path in MODULES.items():
        here = _top(name)
        for imported in sorted({m for m in _imports(path) if m in MODULES and m != name}):
            there = _top(imported)
            if here != there and here in rank and there in rank and rank[there] >= rank[here]:
                found.append((name, imported, here, there))
    return found


def unranked(layers: list[list[str]]) -> list[str]:
    rank = {pkg for group in layers for pkg in group}
    return sorted({_top(m) for m in MODULES} - rank - {"watchkeeper"})


def command_to_command() -> list[tuple[str, str]]:
    commands = {m for m in MODULES if m.startswith("watchkeeper.commands.")}
    return [
        (name, imported)
        for name in sorted(commands)
        for imported in sorted({m for m in _imports(MODULES[name]) if m in commands} - {name})
    ]


def functions() -> list[tuple[int, str]]:
    """(lines, module:qualname) for every function and method."""
    out: list[tuple[int, str]] = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def visit(node: ast.AST, prefix: str, module: str = name) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    qual = f"{prefix}{child.name}"
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    out.append((lines, f"{module}:{qual}"))
                    visit(child, f"{qual}.", module)
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.", module)

        visit(tree, "")
    return sorted(out, reverse=True)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many functions and modules")
    args = parser.parse_args()

    # The order is the test's own (one list, so the figures and the rule cannot disagree).
    layers = _constant("LAYERS")
    if not isinstance(layers, list):
        raise SystemExit(f"import_layers: no literal LAYERS list in {TEST}")
    exceptions = _constant("LAYER_EXCEPTIONS")
    argued = set(exceptions) if isinstance(exceptions, dict) else set()

    print("layers, lowest first: " + " < ".join("/".join(g) for g in layers))
    missing = unranked(layers)
    if missing:
        print(f"packages in no layer: {', '.join(missing)}")
    arrows = up_arrows(layers)
    plain = [a for a in arrows if (a[0], a[1]) not in argued]
    print(f"\nup-arrows: {len(plain)} (+ {len(arrows) - len(plain)} argued in the test)")
    for importer, imported, here, there in arrows:
        mark = "  (argued)" if (importer, imported) in argued else ""
        print(f"  {here} -> {there}: {importer} -> {imported}{mark}")

    commands = [p for m, p in MODULES.items() if m.startswith("watchkeeper.commands.")]
    cross = command_to_command()
    print(
        f"\ncommands/: {sum(_lines(p) for p in commands)} lines in {len(commands)} modules; "
        f"{len({a for a, _ in cross})} import another commands module ({len(cross)} imports)"
    )
    for a, b in cross:
        print(f"  {a} -> {b}")

    print(f"\nlongest functions (top {args.top}):")
    for lines, where in functions()[: args.top]:
        print(f"  {lines:4d}  {where}")
    sizes = sorted(((_lines(p), m) for m, p in MODULES.items()), reverse=True)
    print(f"\nlongest modules (top {args.top}; over 450: {sum(1 for n, _ in sizes if n > 450)}):")
    for lines, module in sizes[: args.top]:
        print(f"  {lines:4d}  {module}")
    total = sum(n for n, _ in sizes)
    print(f"\npackage: {total} lines in {len(sizes)} modules")


if __name__ == "__main__":
    main()
