"""Stored text is printed as written, and a failed write leaves nothing behind.

A finding's title, a note, a job's error come from models, users and remote servers: a title
holding `[/INST]` (a chat template's closing tag) made rich raise MarkupError, and one holding
`[bold]` was restyled. Every printer escapes stored text. A unit written to a folder used to
leave `<folder>.tmp` behind; the writer refuses a folder and cleans its temporary file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.hostile import run_cli, write

from watchkeeper.errors import ConfigError
from watchkeeper.publish.systemd import write_service
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding

TITLES = [
    "s · all: decode [/INST] -11%",
    "[bold]not bold[/bold] [link=http://x]y[/link]",
    "trailing backslash \\",
    "[/]",
]


@pytest.mark.parametrize("title", TITLES)
def test_a_stored_title_is_printed_as_written_by_every_findings_view(
    title: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'wk.db'}"
    db = Database(url)
    try:
        finding = FindingStore(db).record_recurring(
            NewFinding(
                fingerprint="nightly:x",
                kind="regression",
                label="regression",
                severity="high",
                title=title,
                evidence={},
            )
        )
    finally:
        db.close()
    config = str(write(tmp_path / "wk.toml", f'[database]\nurl = "{url}"\n'))
    for argv in (
        ["findings", "--config", config],
        ["findings", "ack", str(finding), "--note", "[/INST] noted", "--config", config],
        ["findings", "--status", "acknowledged", "--config", config],
        ["status", "--config", config],
    ):
        capsys.readouterr()
        code = run_cli(argv)
        out, err = capsys.readouterr()
        assert code == 0 and "Traceback" not in err, err
        if argv[1] != "--config" or argv[0] == "findings":
            assert title in out.replace("\n", ""), (argv, out)


def test_a_unit_is_not_written_over_a_folder_and_no_temporary_file_stays(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "units"
    folder.mkdir()
    with pytest.raises(ConfigError, match="is a folder"):
        write_service(folder, "[Unit]\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["units"]
    assert list(folder.iterdir()) == []
    written = write_service(folder / "x.service", "[Unit]\n")
    assert written.read_text() == "[Unit]\n" and oct(written.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in folder.iterdir()] == ["x.service"]
