"""Nothing leaked: the one redactor masks credentials (and nothing else), an external server's
password never reaches the screen, and the files that hold prompts, outputs or clone
credentials are created 0600 in 0700 folders whatever the umask."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.cli.app import main
from watchkeeper.redaction import redact
from watchkeeper.soak.spool import Journal
from watchkeeper.store.db import Database
from watchkeeper.tracker.checkout import Mirror

SECRET = "hunter2-s3cret"


@pytest.fixture
def careless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The test's folder as the working directory, under a careless umask of 022."""
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o022)
    try:
        yield tmp_path
    finally:
        os.umask(old)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"postgresql://wk:{SECRET}@db.internal/wk", "postgresql://wk:***@db.internal/wk"),
        (f"postgresql:/wk:{SECRET}@db/wk", "postgresql:/wk:***@db/wk"),
        (f"https://{SECRET}@github.com/o/r.git", "https://***@github.com/o/r.git"),
        (f"http://h/api?x=1&access_token={SECRET}&y=2", "http://h/api?x=1&access_token=***&y=2"),
        (f"host=db password={SECRET} dbname=wk", "host=db password=*** dbname=wk"),
        (
            f"git could not fetch https://u:{SECRET}@h/r: 403",
            "git could not fetch https://u:***@h/r: 403",
        ),
        (
            "max_tokens=64 token_env=WK http://127.0.0.1:8080/v1",
            "max_tokens=64 token_env=WK http://127.0.0.1:8080/v1",
        ),
    ],
)
def test_the_one_redactor_masks_credentials_and_nothing_else(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_an_external_server_url_with_a_password_is_never_printed(
    careless: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = careless / "wk.toml"
    config.write_text(f'[profiles.prod]\nurl = "http://ops:{SECRET}@127.0.0.1:{port}"\n')
    capsys.readouterr()
    code = main(["run", "--profile", "prod", "--config", str(config)])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err
    assert SECRET not in out + err and "ops:***@127.0.0.1" in err


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_database_the_spool_and_the_mirror_config_are_private(careless: Path) -> None:
    """Prompts and outputs (the database, the spool) and clone credentials (the mirror's git
    config) are 0600 in 0700 folders, under a umask of 022."""
    db_path = careless / "data" / "deep" / "wk.db"
    db = Database(f"sqlite:///{db_path}")
    db.close()
    assert _mode(db_path) == 0o600
    assert _mode(db_path.parent) == 0o700 and _mode(db_path.parent.parent) == 0o700

    journal = Journal(careless / "spool" / "campaign-1")
    try:
        assert _mode(careless / "spool") == 0o700
        assert _mode(careless / "spool" / "campaign-1") == 0o700
        assert _mode(careless / "spool" / "campaign-1" / "journal.jsonl") == 0o600
    finally:
        journal.close()

    mirror = Mirror(careless / "review", f"https://ops:{SECRET}@127.0.0.1:1/o/r.git")
    mirror.repo.close()
    assert _mode(careless / "review" / "mirror.git") == 0o700
    assert _mode(careless / "review" / "mirror.git" / "config") == 0o600


def test_folders_and_files_that_exist_keep_their_mode(careless: Path) -> None:
    """A database put in a shared folder (`/tmp`, a data disk) must not change that folder:
    only what watchkeeper creates is made private."""
    shared = careless / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o1777)
    Database(f"sqlite:///{shared / 'wk.db'}").close()
    assert _mode(shared) == 0o1777
    assert _mode(shared / "wk.db") == 0o600
