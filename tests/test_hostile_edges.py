"""Hostile input at the edges, by class: names that become paths, refusals that must come
before anything starts, inputs that used to end in a traceback, special files.

Each case goes through the real command line and must end with exit 2 and one `error:` line
(plus a `hint:`), no traceback, nothing written or changed under the case's folder (a cache
with two releases in it included, so a prune that removes anything fails), and no
llama-server started. The classes and what was tried:

- path: a model or profile name, a release version, a job's `to` that would climb out of its
  folder (`../`, `a/b`, `..`); `--out`, `--output`, `--service-file`, `--state` naming a folder,
  a file, a FIFO, or a path under a file; `cache --prune --keep` of a release that is not cached; a bundle
  of an unknown model or a missing GGUF (no half-built bundle);
- refuse early: a trace replay longer than a year at `--rate`; `gpu-check --dry-run` with an
  unknown, empty, single or repeated profile list; crons no date matches (30 February,
  31 April, 31 November); a trace whose lines share an id; an empty digest window; an unknown
  or mixed findings status;
- no traceback: a 5001-digit number in a config, a job file, a task set, a trace and a
  ShareGPT file; `--mix` weights whose sum overflows; a Postgres URL whose port is a word;
- special files: `/dev/zero` and a FIFO as a task set, a trace, a ShareGPT file, a
  recommendation record and a token file; a FIFO as a job file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.hostile import Case, assert_one_line, fifo, llama_servers, run_cli, tree, write

BIG = "9" * 5001
"""Past Python's 4300-digit int conversion limit: json and tomllib raise a bare ValueError."""
_PROMPT = '"prompt": "hi"'
_RECORD = Path(__file__).resolve().parents[1] / "reports" / "speculative_recommendation.json"


def _cfg(command: list[str], text: str, says: str) -> Case:
    return Case(lambda t: [*command, "--config", str(write(t / "in" / "wk.toml", text))], says)


def _import(source: Callable[[Path], Path], fmt: str, says: str) -> Case:
    return Case(
        lambda t: ["import-tasks", str(source(t)), "--format", fmt, "--out", str(t / "o.jsonl")],
        says,
    )


def _taskset(source: Callable[[Path], Path], says: str) -> Case:
    return Case(
        lambda t: ["run", "--profile", "smollm2-baseline", "--taskset", str(source(t))], says
    )


def _job(text: str, says: str, name: str = "nightly") -> Case:
    def argv(t: Path) -> list[str]:
        jobs = t / "in" / "jobs"
        if text == "FIFO":
            fifo(jobs / f"{name}.toml")
        else:
            write(jobs / f"{name}.toml", text)
        config = write(t / "in" / "wk.toml", f'[daemon]\njobs_dir = "{jobs}"\n')
        return ["job", "run", name, "--config", str(config)]

    return Case(argv, says)


def _token(make: Callable[[Path], Path], says: str) -> Case:
    def argv(t: Path) -> list[str]:
        config = write(
            t / "in" / "wk.toml",
            f'[database]\nurl = "sqlite:///{t / "in" / "no.db"}"\n'
            '[tracker]\nkind = "gitea"\napi_url = "https://git.example.com/api/v1"\n'
            f'repository = "ops/llm"\ntoken_env = "WK_HOSTILE_UNSET"\n'
            f'token_file = "{make(t)}"\n',
        )
        return ["triage", "--config", str(config)]

    return Case(argv, says)


def _trace_file(lines: str) -> Callable[[Path], Path]:
    return lambda t: write(t / "in" / "trace.jsonl", lines)


def _fifo_at(name: str) -> Callable[[Path], Path]:
    return lambda t: fifo(t / "in" / name)


def _zero(_: Path) -> Path:
    return Path("/dev/zero")


def _cached(t: Path) -> Path:
    """A cache holding two releases, for `cache --prune`."""
    cache = t / "cache"
    for version in ("9000.0.0", "9001.0.0"):
        write(cache / "llama.cpp" / version / "build" / "bin" / "llama-server", "stand-in")
    return cache


def _default_unit_under_a_file(t: Path) -> list[str]:
    """The sweep's default `systemd/...service`, where `systemd` is a file in the working
    folder: refused before the sweep, as an explicit --service-file is."""
    write(t / "systemd", "x")
    return ["sweep", "--family", "smollm2"]


def _cache_prune(keep: str) -> Case:
    def argv(t: Path) -> list[str]:
        config = write(t / "in" / "wk.toml", f'[server]\ncache_dir = "{_cached(t)}"\n')
        return ["cache", "--prune", "--recent", "0", "--keep", keep, "--config", str(config)]

    return Case(argv, "not a cached release")


def _rows() -> Case:
    """A job of an unknown kind's field: the args of one kind are not another's."""
    return _job('kind = "health"\ncron = "0 1 * * *"\n[args]\nrounds = 3\n', "rounds")


_TWO_DAYS = f'{{{_PROMPT}, "arrival_s": 0}}\n{{{_PROMPT}, "arrival_s": 60}}\n'

CASES: dict[str, Case] = {
    # -- path: names and versions that become file names ------------------------------------
    "profile named ../evil": _cfg(
        ["profiles"], '[profiles."../evil"]\nmodel = "x"\n', "profiles.../evil"
    ),
    "profile named ..": _cfg(["profiles"], '[profiles.".."]\nmodel = "x"\n', "profiles"),
    "model named a/b": _cfg(["profiles"], '[models."a/b"]\npath = "/x.gguf"\n', "models.a/b"),
    "model named .hidden": _cfg(["profiles"], '[models.".x"]\npath = "/x.gguf"\n', "models"),
    "llama_cpp_version ../../x": _cfg(
        ["profiles"], '[server]\nllama_cpp_version = "../../x"\n', "llama_cpp_version"
    ),
    "bisect --good ../../etc": Case(
        lambda t: ["bisect", "--good", "../../etc", "--bad", "2"], "not a release version"
    ),
    "bisect --bad 1/2": Case(
        lambda t: ["bisect", "--good", "1", "--bad", "1/2"], "not a release version"
    ),
    "upgrade-check --to ../x": Case(lambda t: ["upgrade-check", "--to", "../x"], "release"),
    "upgrade-check --to 1..2": Case(lambda t: ["upgrade-check", "--to", "1..2"], "release"),
    "upgrade job to = ../x": _job(
        'kind = "upgrade"\ncron = "0 1 * * *"\n[args]\nto = "../x"\n', "to", "upgrade"
    ),
    # -- path: outputs ------------------------------------------------------------------
    "unit --output a folder": Case(lambda t: ["unit", "--output", str(t)], "is a folder"),
    "unit --output under a file": Case(
        lambda t: ["unit", "--output", str(write(t / "in" / "f", "x") / "u" / "x.service")],
        "is not a folder",
    ),
    "sweep --service-file under a file": Case(
        lambda t: ["sweep", "--service-file", str(write(t / "in" / "f", "x") / "x.service")],
        "is not a folder",
    ),
    "sweep's default service file under a file": Case(_default_unit_under_a_file, "systemd is"),
    "sweep --max-arms 1 races nothing": Case(
        lambda t: ["sweep", "--dry-run", "--family", "smollm2", "--max-arms", "1"], "--max-arms"
    ),
    "sweep --dry-run with nothing built": Case(
        lambda t: ["sweep", "--dry-run", "--family", "smollm2"], "is built yet"
    ),
    "sweep --service-file a folder": Case(
        lambda t: ["sweep", "--service-file", str(t)], "is a folder"
    ),
    "bisect --state under a file": Case(
        lambda t: [
            "bisect",
            "--good",
            "1",
            "--bad",
            "2",
            "--state",
            str(write(t / "in" / "f", "x") / "s.json"),
        ],
        "is not a folder",
    ),
    "bundle --out a file": Case(
        lambda t: ["bundle", "--out", str(write(t / "in" / "f", "x"))], "not a folder"
    ),
    "bundle --out in a missing folder": Case(
        lambda t: ["bundle", "--out", str(t / "no" / "b")], "does not exist"
    ),
    "bundle --model unknown": Case(
        lambda t: ["bundle", "--out", str(t / "b"), "--model", "nosuch"], "not a catalog model"
    ),
    "bundle --gguf missing": Case(
        lambda t: ["bundle", "--out", str(t / "b"), "--gguf", str(t / "no.gguf")], "no such file"
    ),
    "bundle --gguf a FIFO": Case(
        lambda t: ["bundle", "--out", str(t / "b"), "--gguf", str(_fifo_at("m.gguf")(t))],
        "no such file",
    ),
    "cache --prune --keep an uncached release": _cache_prune("9.9.9"),
    "cache --prune --keep one cached, one not": _cache_prune("9000.0.0,9002.0.0"),
    # -- refused before anything starts ----------------------------------------------------
    "bench --trace at --rate 1e-9": Case(
        lambda t: ["bench", "--trace", str(_trace_file(_TWO_DAYS)(t)), "--rate", "1e-9"],
        "more than a year",
    ),
    "bench --trace at --rate 1e-6, --requests set": Case(
        lambda t: [
            "bench",
            "--trace",
            str(_trace_file(_TWO_DAYS)(t)),
            "--rate",
            "1e-6",
            "--requests",
            "2",
        ],
        "more than a year",
    ),
    "gpu-check --dry-run --profiles nosuch,other": Case(
        lambda t: ["gpu-check", "--dry-run", "--profiles", "nosuch,other"], "unknown profile"
    ),
    "gpu-check --dry-run --profiles ,": Case(
        lambda t: ["gpu-check", "--dry-run", "--profiles", ","], "at least one name"
    ),
    "gpu-check --dry-run one arm": Case(
        lambda t: ["gpu-check", "--dry-run", "--profiles", "smollm2-baseline"], "baseline and"
    ),
    "gpu-check --dry-run an arm twice": Case(
        lambda t: ["gpu-check", "--dry-run", "--profiles", "smollm2-ngram,smollm2-ngram"],
        "each named once",
    ),
    "cron 30 February": _job('kind = "nightly"\ncron = "0 1 30 2 *"\n', "never run"),
    "cron 31 April": _job('kind = "nightly"\ncron = "0 1 31 4 *"\n', "never run"),
    "cron 31 November": _job('kind = "digest"\ncron = "0 1 31 11 *"\n', "never run"),
    "trace two lines, one id": _import(
        _trace_file(f'{{"id": "a", {_PROMPT}}}\n{{"id": "a", {_PROMPT}}}\n'), "trace", "also"
    ),
    "digest --since after --date": Case(
        lambda t: ["digest", "--date", "2026-01-01", "--since", "2026-02-01"], "window"
    ),
    "digest --since the day after --date": Case(
        lambda t: ["digest", "--date", "2026-01-01", "--since", "2026-01-02"], "window"
    ),
    "findings --status bogus": Case(lambda t: ["findings", "--status", "bogus"], "unknown"),
    "findings --status all,active": Case(
        lambda t: ["findings", "--status", "all,active"], "stands alone"
    ),
    # -- no traceback: numbers past every bound --------------------------------------------
    "config 5001-digit integer": _cfg(["profiles"], f"[bench]\nrounds = {BIG}\n", "digits"),
    "config 5001-digit port": _cfg(["profiles"], f"[server]\nport = {BIG}\n", "digits"),
    "job file 5001-digit integer": _job(
        f'kind = "bench"\ncron = "0 1 * * *"\n[args]\nrounds = {BIG}\n', "digits"
    ),
    "task set 5001-digit max_tokens": _taskset(
        lambda t: write(
            t / "in" / "ts.jsonl",
            '{"id": "a", "category": "prose", "messages": [{"role": "user", "content": "x"}], '
            f'"max_tokens": {BIG}}}\n',
        ),
        "digits",
    ),
    "trace 5001-digit arrival": _import(
        _trace_file(f'{{{_PROMPT}, "arrival_s": {BIG}}}\n'), "trace", "digits"
    ),
    "ShareGPT 5001-digit id": _import(
        lambda t: write(
            t / "in" / "sg.json", f'[{{"id": {BIG}, "conversations": [{{"from": "human"}}]}}]'
        ),
        "sharegpt",
        "digits",
    ),
    "config float 1e400": _cfg(["profiles"], "[bench]\nmin_effect = 1e400\n", "min_effect"),
    "ShareGPT /dev/zero": _import(_zero, "sharegpt", "not a regular file"),
    "bundle --out a FIFO": Case(
        lambda t: ["bundle", "--out", str(_fifo_at("b")(t))], "not a folder"
    ),
    "--mix weights that overflow": Case(
        lambda t: ["sweep", "--mix", "code_edit=1e308,prose=1e308"], "above"
    ),
    # -- special files as inputs -------------------------------------------------------------
    "task set /dev/zero": _taskset(_zero, "not a regular file"),
    "task set a FIFO": _taskset(_fifo_at("ts.jsonl"), "not a regular file"),
    "trace /dev/zero": _import(_zero, "trace", "not a regular file"),
    "trace a FIFO": _import(_fifo_at("trace.jsonl"), "trace", "not a regular file"),
    "ShareGPT a FIFO": _import(_fifo_at("sg.json"), "sharegpt", "not a regular file"),
    "bench --trace a FIFO": Case(
        lambda t: ["bench", "--trace", str(_fifo_at("tr.jsonl")(t))], "not a regular file"
    ),
    "recommendation a FIFO": Case(
        lambda t: ["unit", "--recommendation", str(_fifo_at("rec.json")(t))], "not a regular"
    ),
    "recommendation /dev/zero": Case(
        lambda t: ["unit", "--recommendation", "/dev/zero"], "not a regular file"
    ),
    "token file a FIFO": _token(_fifo_at("token"), "not a regular file"),
    "token file /dev/zero": _token(_zero, "not a regular file"),
    "token file two lines": _token(
        lambda t: write(t / "in" / "token", "first\nsecond\n"), "more than one line"
    ),
    "token file with a space": _token(
        lambda t: write(t / "in" / "token", "tok en\n"), "not a token"
    ),
    "job file a FIFO": _job("FIFO", "not a regular file"),
    "health job given a bench field": _rows(),
}

DB_CASES: dict[str, tuple[str, str]] = {
    "Postgres URL, port a word": ("postgresql://wk:pw-5ecret@127.0.0.1:abc/wk", "port"),
    "Postgres URL, port 5001 digits": (f"postgresql://wk:pw-5ecret@127.0.0.1:{BIG}/wk", "URL"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input_is_refused_in_one_line_before_anything_is_written_or_started(
    name: str, hostile_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = CASES[name].argv(hostile_dir)
    before, servers = tree(hostile_dir), llama_servers()
    capsys.readouterr()
    code = run_cli(argv)
    out, err = capsys.readouterr()
    assert_one_line(code, err, CASES[name].says)
    assert out == ""
    assert tree(hostile_dir) == before, "the refused command wrote, changed or removed a file"
    assert llama_servers() == servers


@pytest.mark.parametrize("name", sorted(DB_CASES))
def test_a_hostile_database_url_is_one_line_without_a_traceback(
    name: str,
    hostile_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, says = DB_CASES[name]
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", url)
    for argv in (["findings"], ["status"], ["db", "upgrade"]):
        capsys.readouterr()
        code = run_cli(argv)
        _, err = capsys.readouterr()
        assert_one_line(code, err, says)
        assert "5ecret" not in err


def test_the_classes_hold_what_the_issue_listed() -> None:
    """The tally the closing note reports: at least this many cases per class."""
    assert len(CASES) + len(DB_CASES) >= 60


def test_cache_prune_keeps_a_release_named_by_version_or_folder_and_removes_the_rest(
    hostile_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal's positive side: a --keep that names cached releases prunes exactly the
    others (the configured release is not cached here, so it keeps nothing by itself)."""
    cache = _cached(hostile_dir)
    write(cache / "llama.cpp" / "9002.0.0-cuda" / "build" / "bin" / "llama-server", "x")
    config = write(hostile_dir / "in" / "wk.toml", f'[server]\ncache_dir = "{cache}"\n')
    argv = ["cache", "--prune", "--recent", "0", "--keep", "9000.0.0,9002.0.0-cuda"]
    assert run_cli([*argv, "--config", str(config)]) == 0, capsys.readouterr().err
    left = sorted(p.name for p in (cache / "llama.cpp").iterdir() if p.is_dir())
    assert left == ["9000.0.0", "9002.0.0-cuda"]
