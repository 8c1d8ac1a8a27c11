"""Planted secrets, walked through every command: none may reach output, errors, logs, JSON,
stored rows or written files.

Every kind of secret the project takes is planted at once: a password in the database URL
(with a quote in it, which the pattern-based redactor used to stop at), in a url profile, in
`server.external_url`, in a health job's URL, and a tracker token from the environment and
from a file. Then every command of the real parser runs against that config (plain and with
`--json` where it has one), once with a SQLite database that answers (so the commands print,
store and write what they do) and once with an unreachable Postgres whose URL holds the
password (so they fail, and their errors are checked). Afterwards every file the commands
wrote (the SQLite database, reports, logs, task sets) is searched too.

The walk covers len(WALK) commands x 2 databases x (plain, --json) with six secret kinds;
`test_the_walk_covers_every_command` fails when a command is added without a row here.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import structlog
from support.hostile import run_cli, write

from watchkeeper import redaction
from watchkeeper.cli.app import build_parser

SECRETS = {
    "database password": "dbPW'5ecret-q",
    "url profile password": "profPW-5ecret",
    "external server password": "extPW-5ecret",
    "health job password": "hlthPW-5ecret",
    "tracker token (env)": "tokENV-5ecret",
    "tracker token (file)": "tokFILE-5ecret",
}
ROOT = Path(__file__).resolve().parents[1]

WALK: dict[str, list[str]] = {
    "setup": ["setup"],
    "gpu-check": ["gpu-check", "--dry-run"],
    "bundle": ["bundle", "--out", "{tmp}/bundle", "--model", "nosuch"],
    "run": ["run", "--profile", "ext", "--limit", "1"],
    "bench": ["bench", "--profiles", "ext,ext2"],
    "import-tasks": ["import-tasks", "{tmp}/trace.jsonl", "--format", "trace", "--out", "{tmp}/t"],
    "profiles": ["profiles"],
    "sweep": ["sweep", "--profile", "ext"],
    "unit": ["unit", "--recommendation", str(ROOT / "reports" / "speculative_recommendation.json")],
    "check-set": ["check-set", "--root", str(ROOT)],
    "served-ladder": ["served-ladder", "--recommendation", "{tmp}/nosuch.json"],
    "deliver-set": [
        "deliver-set",
        "--budget",
        "1",
        "--profile",
        "ext",
        "--out",
        "{tmp}/set",
        "--service-file",
        "{tmp}/set.service",
        "--root",
        "{tmp}",
    ],
    "soak": ["soak", "--profiles", "ext", "--duration", "1m"],
    "report": ["report", "--campaign", "1"],
    "db": ["db", "upgrade"],
    "nightly": ["nightly"],
    "reference": ["reference", "history"],
    "digest": ["digest", "--date", "2026-12-01"],
    "findings": ["findings"],
    "aa": ["aa", "--profile", "ext"],
    "triage": ["triage"],
    "review-pr": ["review-pr", "--pr", "1"],
    "daemon": ["daemon"],
    "status": ["status"],
    "job": ["job", "run", "health"],
    "cache": ["cache"],
    "bisect": ["bisect", "--good", "9000.0.0", "--bad", "9001.0.0"],
    "upgrade-check": ["upgrade-check", "--to", "9001.0.0"],
}
CONFIG_AFTER = {"db": 1, "job": 2}
"""Commands whose --config sits after the first N words (it belongs to a subcommand)."""


def _config(tmp: Path, name: str, database: str, tracker_token: str, held_port: int) -> Path:
    s = SECRETS
    return write(
        tmp / "in" / name,
        f"""[database]
url = "{database}"
[server]
external_url = "http://ext:{s["external server password"]}@127.0.0.1:9"
cache_dir = "{tmp}/cache"
package_index = "http://127.0.0.1:9"
[profiles.ext]
url = "http://prof:{s["url profile password"]}@127.0.0.1:9"
[profiles.ext2]
url = "http://prof:{s["url profile password"]}@127.0.0.1:9/"
[bench]
reports_dir = "{tmp}/reports"
[nightly]
profiles = ["ext"]
[tracker]
kind = "gitea"
api_url = "http://127.0.0.1:9/api/v1"
allow_http = true
repository = "ops/llm"
max_attempts = 1
{tracker_token}
[daemon]
jobs_dir = "{tmp}/in/jobs"
metrics_port = {held_port}
""",
    )


@pytest.fixture
def planted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, dict[str, Path]]]:
    """Both configs, the job file and the token file, in a folder the process works in; the
    metrics port held (the daemon refuses to start instead of running until SIGTERM)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WATCHKEEPER_DATABASE_URL", raising=False)
    monkeypatch.delenv("WATCHKEEPER_SERVER_URL", raising=False)
    monkeypatch.setenv("WATCHKEEPER_SERVER_BINARY", str(tmp_path / "no-llama-server"))
    monkeypatch.setenv("WATCHKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WK_WALK_TOKEN", SECRETS["tracker token (env)"])
    redaction.forget_all()  # nothing remembered from an earlier test helps this one
    write(
        tmp_path / "in" / "jobs" / "health.toml",
        'kind = "health"\ncron = "*/5 * * * *"\n[args]\n'
        f'url = "http://h:{SECRETS["health job password"]}@127.0.0.1:9/"\n',
    )
    write(tmp_path / "trace.jsonl", '{"prompt": "hi", "arrival_s": 0}\n')
    token_file = write(tmp_path / "in" / "token", SECRETS["tracker token (file)"] + "\n")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        configs = {
            "sqlite": _config(
                tmp_path,
                "sqlite.toml",
                f"sqlite:///{tmp_path}/wk.db",
                'token_env = "WK_WALK_TOKEN"',
                port,
            ),
            "postgres": _config(
                tmp_path,
                "pg.toml",
                f"postgresql://wk:{SECRETS['database password']}@127.0.0.1:1/wk",
                f'token_env = "WK_WALK_UNSET"\ntoken_file = "{token_file}"',
                port,
            ),
        }
        handlers, level = list(logging.root.handlers), logging.root.level
        try:
            yield tmp_path, configs
        finally:
            # `job run` and `daemon` point the root logger at this test's captured stderr.
            logging.root.handlers[:] = handlers
            logging.root.setLevel(level)
            structlog.reset_defaults()
            redaction.forget_all()


def _argv(command: str, tmp: Path, config: Path, json: bool) -> list[str]:
    words = [w.replace("{tmp}", str(tmp)) for w in WALK[command]]
    at = CONFIG_AFTER.get(command, len(words))
    words = [*words[:at], "--config", str(config), *words[at:]]
    return [*words, "--json"] if json else words


def _has_json(command: str) -> bool:
    sub = _subparsers()[command]
    while not any("--json" in a.option_strings for a in sub._actions):
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        if not nested:
            return False
        sub = nested[0].choices[WALK[command][1]]
    return True


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _leaks(text: str) -> list[str]:
    return [kind for kind, secret in SECRETS.items() if secret in text]


def test_the_walk_covers_every_command() -> None:
    assert sorted(WALK) == sorted(_subparsers())


@pytest.mark.parametrize("command", sorted(WALK))
def test_no_planted_secret_reaches_a_commands_output_or_its_files(
    command: str,
    planted: tuple[Path, dict[str, Path]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    tmp, configs = planted
    ran = []
    for database, config in configs.items():
        for as_json in (False, True) if _has_json(command) else (False,):
            argv = _argv(command, tmp, config, as_json)
            capsys.readouterr()
            code = run_cli(argv)
            out, err = capsys.readouterr()
            assert "Traceback" not in err, (argv, err)
            assert _leaks(out + err) == [], (database, argv, out, err)
            ran.append(code)
    assert ran
    for path in tmp.rglob("*"):  # the database, reports, logs, task sets the walk wrote
        if path.is_file() and path.parent != tmp / "in" and tmp / "in" / "jobs" not in path.parents:
            assert _leaks(path.read_bytes().decode("utf-8", "replace")) == [], path


def test_a_two_line_token_file_is_refused_without_echoing_either_line(
    planted: tuple[Path, dict[str, Path]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tmp, configs = planted
    token = write(tmp / "two-lines", "first-L1ne-5ecret\nsecond-L1ne-5ecret\n")
    monkeypatch.delenv("WK_WALK_TOKEN")
    monkeypatch.setenv("WK_WALK_TOKEN_FILE", str(token))
    for command in ("triage", "review-pr"):
        capsys.readouterr()
        code = run_cli(_argv(command, tmp, configs["sqlite"], False))
        _, err = capsys.readouterr()
        assert code == 2 and "more than one line" in err, err
        assert "L1ne-5ecret" not in err


@pytest.mark.parametrize(
    "password", ["quo'te-5ecret", 'dq"uote-5ecret', "sp ace-5ecret", "at@sign-5ecret"]
)
def test_a_health_job_password_of_any_spelling_is_masked_in_output_status_and_rows(
    password: str, planted: tuple[Path, dict[str, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp, configs = planted
    toml_password = password.replace('"', '\\"')
    write(
        tmp / "in" / "jobs" / "health.toml",
        f'kind = "health"\ncron = "*/5 * * * *"\n[args]\nurl = "http://h:{toml_password}@127.0.0.1:9/"\n',
    )
    capsys.readouterr()
    run_cli(["job", "run", "health", "--config", str(configs["sqlite"])])
    run_cli(["status", "--json", "--config", str(configs["sqlite"])])
    run_cli(["status", "--config", str(configs["sqlite"])])
    out, err = capsys.readouterr()
    assert "5ecret" not in out + err, out + err
    assert "job_run" in (tmp / "wk.db").read_bytes().decode("latin-1")
    assert b"5ecret" not in (tmp / "wk.db").read_bytes()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://wk:it's-5ecret@db/wk",
        'postgresql://wk:d"q-5ecret@db/wk',
        "postgresql://wk:sp ace-5ecret@db/wk",
        "postgresql://wk:a@b-5ecret@db/wk",
        "postgresql://wk:pct%2F-5ecret@db/wk",
        "https://ghp-tok-5ecret-0123456789@git.example.com/x.git",
    ],
)
def test_a_remembered_password_is_masked_in_every_spelling(url: str) -> None:
    redaction.forget_all()
    try:
        redaction.remember_url(url)
        password = url.split("://", 1)[1].rsplit("@", 1)[0].split(":", 1)[-1]
        for text in (
            url,
            f"error: {url} is unreachable",
            json.dumps({"url": url}),
            quote(password, safe=""),
            unquote(password),
            f"the password was {password!r}",
        ):
            assert "5ecret" not in redaction.redact(text), text
        assert redaction.redact("nothing secret here") == "nothing secret here"
    finally:
        redaction.forget_all()


def test_a_short_password_is_not_remembered_but_still_masked_in_its_url() -> None:
    redaction.forget_all()
    redaction.remember_url("postgresql://wk:pw@db/wk")
    assert redaction.redact("a pw in prose") == "a pw in prose"
    assert redaction.redact("postgresql://wk:pw@db/wk") == "postgresql://wk:***@db/wk"


def test_a_remembered_secret_is_masked_as_a_word_never_inside_other_words() -> None:
    """A reviewer's cases: `postgres:postgres` remembered turned "postgresql" into "***ql", a
    password of digits cut a JSON number in two, a bare user `true` rewrote JSON's `true`."""
    redaction.forget_all()
    try:
        for url in (
            "postgresql://postgres:postgres@db/postgres",
            "postgresql://u:20261206@db/x",
            "https://true@git.example.com/x.git",
        ):
            redaction.remember_url(url)
        text = json.dumps({"backend": "postgresql", "n": 202612061, "ok": True})
        assert redaction.redact(text) == text
        assert json.loads(redaction.redact(json.dumps({"n": 202612061})))["n"] == 202612061
        assert redaction.redact("password was 20261206.") == "password was ***."
        assert "true@" not in redaction.redact("https://true@git.example.com/x.git")
    finally:
        redaction.forget_all()


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_a_traceback_in_the_daemons_log_is_redacted(log_format: str) -> None:
    """A reviewer's case: the log's redactor ran before the traceback was rendered, so a
    library's exception that quoted a URL reached the journal with its password."""
    import io

    from watchkeeper.daemon import logs

    redaction.forget_all()
    stream = io.StringIO()
    try:
        redaction.remember_url("postgresql://wk:tb-5ecret-pw@db/wk")
        logs.configure(log_format, "info", stream)
        try:
            raise RuntimeError("cannot reach postgresql://wk:tb-5ecret-pw@db/wk")
        except RuntimeError:
            logging.getLogger("some.library").exception("failed")
            structlog.get_logger("watchkeeper").error("job_crashed", exc_info=True)
    finally:
        structlog.reset_defaults()
        redaction.forget_all()
    text = stream.getvalue()
    assert text.count("Traceback") == 2 and "5ecret" not in text
