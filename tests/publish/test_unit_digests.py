"""The unit runs what was measured: its ExecStartPre= hashes the models the sweep measured (and
the binary `watchkeeper unit` found) and refuses to start, naming the file, when one differs.
The script is run here with /bin/sh on real files, as systemd would run it."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from watchkeeper.commands.unit import unit_command
from watchkeeper.config import BenchConfig, Config
from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish.deliverable import read_record, write_record
from watchkeeper.publish.set_check import exec_words, unit_directives
from watchkeeper.publish.systemd import render_unit

ROOT = Path(__file__).resolve().parents[2]
CODE_EDIT = ROOT / "reports/code-edit/speculative_recommendation.json"
MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def _pre(unit: str) -> list[str]:
    return exec_words(unit_directives(unit)["ExecStartPre"][0])


def _record_for(tmp_path: Path, content: bytes) -> Path:
    """The committed code-edit record, its model's digest that of a file written here."""
    models = tmp_path / "models"
    models.mkdir()
    (models / MODEL).write_bytes(content)
    data = json.loads(CODE_EDIT.read_text(encoding="utf-8"))
    data["extra"]["digests"] = {"models": {MODEL: hashlib.sha256(content).hexdigest()}}
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_the_unit_starts_on_the_measured_model_and_refuses_another(tmp_path: Path) -> None:
    record = read_record(_record_for(tmp_path, b"the measured weights"))
    service = ServiceConfig(model_dir=str(tmp_path / "models"))
    unit = render_unit(record, service, filename="llama-server-code-edit.service")
    assert subprocess.run(_pre(unit), capture_output=True, check=False).returncode == 0
    (tmp_path / "models" / MODEL).write_bytes(b"re-quantised weights, same name")
    done = subprocess.run(_pre(unit), capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"llama-server-code-edit: refusing to start: {tmp_path}/models/{MODEL} is not the model "
        f"that was measured (sha256 {hashlib.sha256(b'the measured weights').hexdigest()} "
        "expected; rerun the sweep or re-render the unit with watchkeeper unit)"
    ]


def test_unit_pins_the_binary_it_finds_and_a_swapped_binary_stops_the_start(
    tmp_path: Path,
) -> None:
    rec = _record_for(tmp_path, b"weights")
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    shutil.copy("/bin/true", binary)
    config = Config(bench=BenchConfig(reports_dir=str(tmp_path)))
    result = unit_command(
        config,
        recommendation=rec,
        overrides={"binary": str(binary), "model_dir": str(tmp_path / "models")},
    )
    assert hashlib.sha256(binary.read_bytes()).hexdigest() in result.text
    assert subprocess.run(_pre(result.text), capture_output=True, check=False).returncode == 0
    shutil.copy("/bin/false", binary)
    done = subprocess.run(_pre(result.text), capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert f"{binary} is not the binary that was measured" in done.stderr


def test_a_record_without_digests_says_so_and_checks_nothing(tmp_path: Path) -> None:
    record = read_record(CODE_EDIT)
    record.extra.pop("digests")
    write_record(tmp_path / "r.json", record)
    unit = render_unit(read_record(tmp_path / "r.json"), ServiceConfig())
    assert "no model digest is checked: the record keeps none" in unit.replace("\n# ", " ")
    assert subprocess.run(_pre(unit), capture_output=True, check=False).returncode == 0


def test_two_sets_render_units_that_install_side_by_side() -> None:
    default = render_unit(
        read_record(ROOT / "reports/speculative_recommendation.json"),
        ServiceConfig(),
        filename="llama-server-speculative.service",
    )
    code = render_unit(
        read_record(CODE_EDIT), ServiceConfig(), filename="llama-server-code-edit.service"
    )
    a, b = unit_directives(default), unit_directives(code)
    assert a["Documentation"] != b["Documentation"]
    assert exec_words(a["ExecStart"][0])[-1] == "8080"
    assert exec_words(b["ExecStart"][0])[-1] == "8081"
