"""Hostile and careless input through the real command line: one line, exit 2, nothing else.

Each case is something a careless or hostile user types (a negative count, NaN, a comma for a
profile list, a file of random bytes where the database should be, a trace of nested
brackets, a credential inside a URL) and goes through `watchkeeper.cli.app.main` as it would
from a shell. Every one must end with exit code 2 and exactly one `error:` line on stderr (plus
at most the `hint:` line the CLI prints under it), no traceback, no secret in the output, no
file created or changed anywhere under the test's folder, and no llama-server started. The
redactor and the private files have their own module, tests/test_nothing_leaked.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.hostile import Case, assert_one_line, llama_servers, run_cli, tree, write

from watchkeeper.cli.app import build_parser

SECRET = "hunter2-s3cret"
DEEP = 100_000
"""Nesting deep enough to exhaust Python's recursion limit in any JSON or TOML parser."""


def _served_record(tmp: Path, slots: object) -> str:
    """The committed recommendation with hostile serving settings (`extra.served`)."""
    root = Path(__file__).resolve().parents[1]
    data = json.loads((root / "reports" / "speculative_recommendation.json").read_text())
    data["extra"]["served"] = {"slots": slots, "cache_ram_mib": 0}
    return str(write(tmp / "in" / "record.json", json.dumps(data)))


def _config(text: str) -> Callable[[Path], str]:
    return lambda tmp: str(write(tmp / "in" / "wk.toml", text))


def _cfg_case(command: list[str], text: str, says: str) -> Case:
    return Case(lambda tmp: [*command, "--config", _config(text)(tmp)], says)


def _trace(lines: str | bytes, fmt: str = "trace") -> Callable[[Path], list[str]]:
    def argv(tmp: Path) -> list[str]:
        src = write(tmp / "in" / "trace.jsonl", lines)
        return ["import-tasks", str(src), "--format", fmt, "--out", str(tmp / "in" / "t.jsonl")]

    return argv


def _jobs(job: str | bytes) -> Callable[[Path], list[str]]:
    def argv(tmp: Path) -> list[str]:
        write(tmp / "in" / "jobs" / "nightly.toml", job)
        config = write(tmp / "in" / "wk.toml", f'[daemon]\njobs_dir = "{tmp / "in" / "jobs"}"\n')
        return ["job", "run", "nightly", "--config", str(config)]

    return argv


def _random_db(tmp: Path) -> str:
    path = write(tmp / "in" / "random.db", hashlib.sha256(b"x").digest() * 256)
    return f"sqlite:///{path}"


def _dir_db(tmp: Path) -> str:
    (tmp / "in" / "dir.db").mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{tmp / 'in' / 'dir.db'}"


def _loop_config(tmp: Path) -> list[str]:
    loop = tmp / "in" / "loop.toml"
    loop.parent.mkdir(parents=True, exist_ok=True)
    loop.symlink_to(loop)
    return ["profiles", "--config", str(loop)]


def _fifo_config(tmp: Path) -> list[str]:
    (tmp / "in").mkdir(parents=True, exist_ok=True)
    os.mkfifo(tmp / "in" / "wk.toml")
    return ["profiles", "--config", str(tmp / "in" / "wk.toml")]


def _dir_config(tmp: Path) -> list[str]:
    (tmp / "in" / "conf.d").mkdir(parents=True, exist_ok=True)
    return ["profiles", "--config", str(tmp / "in" / "conf.d")]


_NESTED_TOML = "a = " + "[" * DEEP + "]" * DEEP + "\n"
_NESTED_JSON = "[" * DEEP + "]" * DEEP + "\n"
_PASSWD = "root:x:0:0:root:/root:/bin/bash\n"
_BAD_BYTES = b"\xff\xfe\x00garbage \xc3\x28\n"
_PROMPT = '"prompt": "hi", "max_tokens": 8'
_HTTPS = 'kind = "gitea"\napi_url = "https://git.example.com/api/v1"\n'

CASES: dict[str, Case] = {
    # -- numbers and lists at the CLI edge (argparse types), before a config is read -----
    "run --limit -5": Case(lambda t: ["run", "--profile", "p", "--limit", "-5"], "--limit"),
    "run --limit 0": Case(lambda t: ["run", "--profile", "p", "--limit", "0"], "--limit"),
    "run --concurrency -1": Case(
        lambda t: ["run", "--profile", "p", "--concurrency", "-1"], "--concurrency"
    ),
    "bench --rounds 0": Case(lambda t: ["bench", "--rounds", "0"], "--rounds"),
    "bench --per-category -1": Case(lambda t: ["bench", "--per-category", "-1"], "--per-cat"),
    "sweep --budget -5": Case(lambda t: ["sweep", "--budget", "-5"], "--budget"),
    "sweep --budget nan": Case(lambda t: ["sweep", "--budget", "nan"], "--budget"),
    "bench --profiles ,": Case(lambda t: ["bench", "--profiles", ","], "at least one name"),
    "soak --profiles ' , '": Case(lambda t: ["soak", "--profiles", " , "], "at least one"),
    "bench --profiles 'a b'": Case(lambda t: ["bench", "--profiles", "a b,c"], "not a name"),
    "bench --rate nan": Case(lambda t: ["bench", "--rate", "nan"], "--rate"),
    "bench --rate inf": Case(lambda t: ["bench", "--rate", "inf"], "--rate"),
    "bench --rate 0": Case(lambda t: ["bench", "--rate", "0"], "--rate"),
    "bench --temperature -1": Case(lambda t: ["bench", "--temperature", "-1"], "--temp"),
    "bench --top-p 1.5": Case(lambda t: ["bench", "--top-p", "1.5"], "--top-p"),
    "bench --max-tokens -1": Case(lambda t: ["bench", "--max-tokens", "-1"], "--max-tokens"),
    "bench --load-ladder ,": Case(lambda t: ["bench", "--load-ladder", ","], "--load-ladder"),
    "bench --load-ladder 1,0": Case(lambda t: ["bench", "--load-ladder", "1,0"], "--load-"),
    "bench --seed 2^40": Case(lambda t: ["bench", "--seed", str(2**40)], "--seed"),
    "bench --fit-context -1": Case(lambda t: ["bench", "--fit-context", "-1"], "--fit"),
    "bench --requests 0": Case(lambda t: ["bench", "--requests", "0"], "--requests"),
    "bench --burstiness 0": Case(lambda t: ["bench", "--burstiness", "0"], "--burstiness"),
    "bench --queue-deadline -1": Case(lambda t: ["bench", "--queue-deadline", "-1"], "--queue"),
    "bench --max-concurrency 257": Case(lambda t: ["bench", "--max-concurrency", "257"], "--max"),
    "soak --concurrency 0,4": Case(lambda t: ["soak", "--concurrency", "0,4"], "--concurrency"),
    "soak --concurrency 1,,4": Case(lambda t: ["soak", "--concurrency", "1,,4"], "not an integer"),
    "soak --resume 0": Case(lambda t: ["soak", "--resume", "0"], "--resume"),
    "sweep --rounds 1e3": Case(lambda t: ["sweep", "--rounds", "1e3"], "not an integer"),
    "sweep --max-tokens 10^6": Case(lambda t: ["sweep", "--max-tokens", "1000000"], "--max-t"),
    "findings ack 10^23": Case(lambda t: ["findings", "ack", "9" * 23], "argument id"),
    "findings ack 4300 digits": Case(lambda t: ["findings", "ack", "9" * 5000], "argument id"),
    "aa --history-runs 0": Case(lambda t: ["aa", "--history-runs", "0"], "--history-runs"),
    "aa --categories ,": Case(lambda t: ["aa", "--categories", ","], "--categories"),
    "review-pr --pr -3": Case(lambda t: ["review-pr", "--pr", "-3"], "--pr"),
    "cache --recent -1": Case(lambda t: ["cache", "--recent", "-1"], "--recent"),
    "cache --keep ,": Case(lambda t: ["cache", "--keep", ","], "--keep"),
    "bisect --jobs 0": Case(
        lambda t: ["bisect", "--good", "1", "--bad", "2", "--jobs", "0"], "--jobs"
    ),
    "upgrade-check --rounds 0": Case(lambda t: ["upgrade-check", "--rounds", "0"], "--rounds"),
    "unit --port 70000": Case(lambda t: ["unit", "--port", "70000"], "--port"),
    "unit --port 0": Case(lambda t: ["unit", "--port", "0"], "--port"),
    "unit from a record whose served slots carry a directive": Case(
        lambda t: ["unit", "--recommendation", _served_record(t, "4\nExecStartPre=/bin/sh")],
        "served settings are invalid",
    ),
    "soak of a record serving 0 slots": Case(
        lambda t: ["soak", "--recommendation", _served_record(t, 0), "--concurrency", "1"],
        "served settings are invalid",
    ),
    "digest --date 2026-13-45": Case(lambda t: ["digest", "--date", "2026-13-45"], "not a date"),
    "digest --date 0001-01-01": Case(lambda t: ["digest", "--date", "0001-01-01"], "a date from"),
    "findings --status ,": Case(lambda t: ["findings", "--status", ","], "--status"),
    "soak --duration nan": Case(lambda t: ["soak", "--duration", "nan"], "--duration"),
    "soak --block 0s": Case(lambda t: ["soak", "--block", "0s"], "--block"),
    "import-tasks --out missing folder": Case(
        lambda t: [
            "import-tasks",
            str(write(t / "in" / "t.jsonl", "{}\n")),
            "--format",
            "trace",
            "--out",
            str(t / "nowhere" / "x.jsonl"),
        ],
        "does not exist",
    ),
    "import-tasks --out a folder": Case(
        lambda t: [
            "import-tasks",
            str(write(t / "in" / "t.jsonl", "{}\n")),
            "--format",
            "trace",
            "--out",
            str(t / "in"),
        ],
        "is a folder",
    ),
    # -- the config file -------------------------------------------------------------------
    "config not UTF-8": Case(
        lambda t: ["profiles", "--config", str(write(t / "in" / "wk.toml", _BAD_BYTES))],
        "not UTF-8",
    ),
    "config nested 10^5 deep": _cfg_case(["profiles"], _NESTED_TOML, "nested too deeply"),
    "config is a folder": Case(_dir_config, "cannot read config file"),
    "config is a symlink loop": Case(_loop_config, "cannot read config file"),
    "config is a FIFO": Case(_fifo_config, "not a regular file"),
    "model file is /etc/passwd": Case(
        lambda t: [
            "run",
            "--profile",
            "p",
            "--config",
            _config(
                f'[models.mine]\npath = "{write(t / "in" / "x.gguf", _PASSWD)}"\n'
                '[profiles.p]\nmodel = "mine"\n'
            )(t),
        ],
        "not a GGUF file",
    ),
    "config NaN threshold": _cfg_case(["profiles"], "[bench]\nmin_effect = nan\n", "min_effect"),
    "config inf timeout": _cfg_case(["profiles"], "[daemon]\nstop_timeout_s = inf\n", "stop_t"),
    "config huge rounds": _cfg_case(["profiles"], f"[bench]\nrounds = {2**70}\n", "rounds"),
    "config soak duration nan": _cfg_case(["profiles"], '[soak]\nduration = "nan"\n', "duration"),
    "config soak duration 10^9 h": _cfg_case(
        ["profiles"], '[soak]\nduration = "1000000000h"\n', "duration"
    ),
    "tracker http api_url": _cfg_case(
        ["profiles"],
        '[tracker]\nkind = "gitea"\napi_url = "http://git.example.com/api/v1"\n',
        "in clear",
    ),
    "tracker allow_http off-host": _cfg_case(
        ["profiles"],
        '[tracker]\nkind = "gitea"\napi_url = "http://10.0.0.8/api/v1"\nallow_http = true\n',
        "on this host",
    ),
    "tracker repository ../evil": _cfg_case(
        ["profiles"], f'[tracker]\n{_HTTPS}repository = "../evil"\n', "owner/name"
    ),
    "tracker repository a/b/c": _cfg_case(
        ["profiles"], f'[tracker]\n{_HTTPS}repository = "a/b/c"\n', "owner/name"
    ),
    "tracker repository %2e%2e": _cfg_case(
        ["profiles"], f'[tracker]\n{_HTTPS}repository = "%2e%2e/x"\n', "owner/name"
    ),
    "review repository ops/..": _cfg_case(
        ["profiles"], '[review]\nrepository = "ops/.."\n', "owner/name"
    ),
    "tracker token file not UTF-8": Case(
        lambda t: [
            "triage",
            "--config",
            _config(
                f'[database]\nurl = "sqlite:///{t / "in" / "no.db"}"\n'
                f'[tracker]\n{_HTTPS}repository = "ops/llm"\n'
                f'token_env = "WK_HOSTILE_UNSET"\ntoken_file = "'
                f'{write(t / "in" / "token", _BAD_BYTES)}"\n'
            )(t),
        ],
        "not UTF-8",
    ),
    # -- task sets and traces ----------------------------------------------------------------
    "trace NaN arrival": Case(_trace(f'{{{_PROMPT}, "arrival_s": NaN}}\n'), "finite"),
    "trace Infinity arrival": Case(_trace(f'{{{_PROMPT}, "arrival_s": Infinity}}\n'), "finite"),
    "trace negative arrival": Case(_trace(f'{{{_PROMPT}, "arrival_s": -3}}\n'), "finite"),
    "trace 10^400 arrival": Case(_trace(f'{{{_PROMPT}, "arrival_s": 1{"0" * 400}}}\n'), "finite"),
    "trace spans 30 years": Case(
        _trace(f'{{{_PROMPT}, "arrival_s": 0}}\n{{{_PROMPT}, "arrival_s": 1e9}}\n'),
        "more than a year",
    ),
    "trace not UTF-8": Case(_trace(_BAD_BYTES), "cannot read the trace"),
    "trace nested 10^5 deep": Case(_trace(_NESTED_JSON), "nested too deeply"),
    "trace empty": Case(_trace(""), "empty"),
    "sharegpt nested 10^5 deep": Case(_trace(_NESTED_JSON, "sharegpt"), "nested too deeply"),
    "task set nested 10^5 deep": Case(
        lambda t: [
            "run",
            "--profile",
            "smollm2-baseline",
            "--taskset",
            str(write(t / "in" / "ts.jsonl", _NESTED_JSON)),
        ],
        "nested too deeply",
    ),
    "task set not UTF-8": Case(
        lambda t: [
            "run",
            "--profile",
            "smollm2-baseline",
            "--taskset",
            str(write(t / "in" / "ts.jsonl", _BAD_BYTES)),
        ],
        "cannot read the task set",
    ),
    # -- job files -------------------------------------------------------------------------
    "job file not UTF-8": Case(_jobs(_BAD_BYTES), "not UTF-8"),
    "job file nested 10^5 deep": Case(_jobs(_NESTED_TOML), "nested too deeply"),
    "job profiles = []": Case(
        _jobs('kind = "nightly"\ncron = "0 1 * * *"\n[args]\nprofiles = []\n'), "profiles"
    ),
    "job rounds huge": Case(
        _jobs(f'kind = "bench"\ncron = "0 1 * * *"\n[args]\nrounds = {2**40}\n'), "rounds"
    ),
    "job health timeout nan": Case(
        _jobs('kind = "health"\ncron = "0 1 * * *"\n[args]\ntimeout_s = nan\n'), "timeout_s"
    ),
}

DB_CASES: dict[str, tuple[Callable[[Path], str], list[str], str]] = {
    "database mysql:// with a password": (
        lambda t: f"mysql://wk:{SECRET}@127.0.0.1/wk",
        ["findings"],
        "unsupported database",
    ),
    "database foo://": (lambda t: "foo://x", ["findings"], "unsupported database"),
    "database mistyped postgresql//": (
        lambda t: f"postgresql//wk:{SECRET}@127.0.0.1/wk",
        ["findings"],
        "invalid database URL",
    ),
    "database mistyped postgresql:/": (
        lambda t: f"postgresql:/wk:{SECRET}@127.0.0.1/wk",
        ["findings"],
        "database",
    ),
    "database file of random bytes": (_random_db, ["findings"], "not a database"),
    "database file is a folder": (_dir_db, ["findings"], "unable to open"),
    "db upgrade nosuchrev": (
        lambda t: f"sqlite:///{t / 'in' / 'new.db'}",
        ["db", "upgrade", "nosuchrev"],
        "unknown database revision",
    ),
}


def _assert_one_line(code: int, err: str, says: str) -> None:
    assert_one_line(code, err, says)
    assert SECRET not in err, err


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder for the case's files, the process working there (so nothing defaults into
    the checkout) and its umask a careless 022."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WK_HOSTILE_UNSET", raising=False)
    old = os.umask(0o022)
    try:
        yield tmp_path
    finally:
        os.umask(old)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input_is_one_line_exit_2_and_changes_nothing(
    name: str, hostile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CASES[name]
    argv = case.argv(hostile)
    before, servers = tree(hostile), llama_servers()
    capsys.readouterr()
    code = run_cli(argv)
    out, err = capsys.readouterr()
    _assert_one_line(code, err, case.says)
    assert out == ""
    assert tree(hostile) == before, "the failed command wrote or changed a file"
    assert llama_servers() == servers


@pytest.mark.parametrize("name", sorted(DB_CASES))
def test_a_hostile_database_url_is_one_line_without_its_password(
    name: str, hostile: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url_of, argv, says = DB_CASES[name]
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", url_of(hostile))
    before = tree(hostile)
    capsys.readouterr()
    code = run_cli(argv)
    _, err = capsys.readouterr()
    _assert_one_line(code, err, says)
    assert tree(hostile) == before, "the failed command wrote or changed a file"


def test_a_metrics_port_in_use_stops_the_daemon_before_it_touches_anything(
    hostile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The port is usually held by this host's running daemon: its runtime file stays, and
    nothing is recovered (marked interrupted) in its database."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        jobs = hostile / "jobs"
        jobs.mkdir()
        config = write(
            hostile / "wk.toml",
            f'[database]\nurl = "sqlite:///{hostile / "wk.db"}"\n'
            f'[daemon]\njobs_dir = "{jobs}"\nmetrics_port = {port}\n',
        )
        before = tree(hostile)
        capsys.readouterr()
        code = run_cli(["daemon", "--config", str(config)])
        _, err = capsys.readouterr()
    _assert_one_line(code, err, f"127.0.0.1:{port}")
    assert tree(hostile) == before


def test_every_numeric_option_of_every_command_is_range_checked() -> None:
    """Walk the real parser: a plain `int` or `float` type lets -5, 0, NaN or 10^30 through to
    a server start; every number has a range type from cli/common.py."""
    unchecked: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())
            elif action.type in (int, float):
                unchecked.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "")
    assert unchecked == []
    assert len(CASES) + len(DB_CASES) + 1 >= 40
