"""What the soak proves is what the unit ships: `soak --recommendation` starts each server with
the argv `server/flags.py` builds for the installed build from the profiles the soak prepares,
and that argv is the unit's ExecStart (binary, model directory, host and port aside), for the
committed recommendation and for a speculating one, with [service]'s slots and prompt cache."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

import pytest
from support.fakegpu import stand_in_smi
from support.soak_summaries import figures_of

from watchkeeper.campaign.defaults import with_recommendation
from watchkeeper.campaign.soak_campaign import soak_servers
from watchkeeper.campaign.soak_deliverable import soaked_unit
from watchkeeper.cli.app import main
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import BenchConfig, Config, ProfileConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.config.service import ServiceConfig
from watchkeeper.errors import SoakError
from watchkeeper.host import gpu as host_gpu
from watchkeeper.publish.deliverable import (
    ArmRecipe,
    RecommendationRecord,
    portable_flags,
    read_record,
    write_record,
)
from watchkeeper.publish.soak_report import render, summary
from watchkeeper.publish.systemd import render_unit
from watchkeeper.server.flags import HelpInfo, build_argv, read_help
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.soak.judgement import SoakUnit
from watchkeeper.soak.verdicts import SoakVerdict

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "reports" / "speculative_recommendation.json"


def exec_start(unit: str) -> list[str]:
    """ExecStart's words as systemd passes them: '%%' and '$$' undone, then its quoting
    (double quotes with C escapes), which shlex reads the same way for these words."""
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart=").replace("%%", "%").replace("$$", "$"))


def soak_argv(
    config: Config, record_path: Path, binary: ServerBinary, info: HelpInfo, depth: int
) -> dict[str, tuple[str, ...]]:
    """Each soaked arm's argv, through the soak's own steps: the recommendation's profiles
    (`with_recommendation`), the soak's server settings (`soak_servers`), the build's argv."""
    soaked, names, record = with_recommendation(config, record_path)
    arms = {a.name: a for a in (record.baseline, record.chosen, record.closest) if a}
    prepared = [PreparedProfile(n, soaked.profiles[n], binary, None, None, info) for n in names]
    out = {}
    for p in soak_servers(soaked, prepared, depth, shipped=True):
        models = [Path("/var/cache/wk/models") / m for m in arms[p.name].models]
        argv = build_argv(
            p.profile,
            info=info,
            binary=binary.path,
            model_path=models[0],
            draft_path=models[1] if len(models) > 1 else None,
            port=41234,
            cuda=binary.variant == "cuda",
        )
        out[p.name] = argv.argv
    return out


def speculating(
    record: RecommendationRecord, binary: ServerBinary, info: HelpInfo
) -> RecommendationRecord:
    """The committed record as a sweep that recommended a draft arm would write it: the arm's
    flags are the measured argv (`build_argv` for this build), cut as the sweep cuts them."""
    profile = ProfileConfig(
        model="qwen2.5-coder-1.5b-instruct-q4_k_m",
        draft_model="qwen2.5-coder-0.5b-instruct-q4_k_m",
        spec_type="draft-simple",
        draft_n_max=4,
        threads=2,
        gpu_layers=0,
    )
    argv = build_argv(
        profile,
        info=info,
        binary=binary.path,
        model_path=Path("/root/.cache/x/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        draft_path=Path("/root/.cache/x/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        port=8081,
    ).argv
    arm = ArmRecipe(
        "qwen-draft4", profile.model_dump(exclude_none=True), portable_flags(argv), True
    )
    return replace(record, chosen=arm, closest=None)


ALIASES = {
    "--gpu-layers": "-ngl",
    "--n-gpu-layers": "-ngl",
    "--spec-draft-ngl": "-ngld",
    "--gpu-layers-draft": "-ngld",
    "--n-gpu-layers-draft": "-ngld",
}
"""The unit spells offload as every build does (-ngl, -ngld); the build's argv may use a
longer spelling of the same flag."""


def same_flags(argv: Sequence[str]) -> list[str]:
    return [ALIASES.get(f, f) for f in portable_flags(argv)]


@pytest.mark.parametrize(
    ("slots", "cache", "depth", "gpu", "kept"),
    [
        (None, 0, 1, "no", False),
        (None, None, 4, "no", True),  # the record's 4 slots and cache off, as committed
        (4, 512, 4, "no", True),
        (2, None, 1, "no", False),
        (2, None, 1, "no", True),  # [service] slots wins over the record's
        (None, 0, 1, "yes", False),
    ],
)
def test_the_soaks_servers_run_exactly_the_units_execstart(
    server_binary: ServerBinary,
    tmp_path: Path,
    slots: int | None,
    cache: int | None,
    depth: int,
    gpu: Literal["yes", "no"],
    kept: bool,
) -> None:
    """`kept`: the record carries the serving settings its unit was rendered with (a sweep
    since 28 Nov); without them, an older record: the measured slot and [service]'s cache."""
    config = Config(bench=BenchConfig(reports_dir=str(tmp_path / "reports")))
    info = read_help(server_binary, config.server.resolved_cache_dir())
    settings: dict[str, object] = {"model_dir": "/srv/models", "gpu": gpu}
    settings |= {k: v for k, v in (("slots", slots), ("cache_ram_mib", cache)) if v is not None}
    service = ServiceConfig.model_validate(settings)
    config = config.model_copy(update={"service": service})
    committed = read_record(COMMITTED)
    served = committed.extra["served"]
    # what examples/speculative-service.toml set, and the port its unit binds (side by side
    # with the code-edit unit's 8081)
    assert served == {"slots": 4, "cache_ram_mib": 0, "port": 8080}
    if not kept:
        committed = replace(committed, extra={"unit": committed.extra["unit"]})
    want_slots = slots or (served["slots"] if kept else 1)
    want_cache = cache if cache is not None or not kept else served["cache_ram_mib"]
    if cache is None and not kept:
        want_cache = service.cache_ram_mib  # [service]'s default: 0
    for record in (committed, speculating(committed, server_binary, info)):
        path = write_record(tmp_path / f"{record.chosen.name}.json", record)
        argv = soak_argv(config, path, server_binary, info, depth)
        subject = record.subject
        assert subject is not None and set(argv) == {subject.name, record.baseline.name}
        for arm in (subject, record.baseline):
            unit = render_unit(replace(record, chosen=arm), service)
            words = exec_start(unit)
            assert words[0] == service.binary and words[-4:] == [
                "--host", "127.0.0.1", "--port", "8080"
            ]  # fmt: skip
            assert all(w.startswith("/srv/models/") for w in words if w.endswith(".gguf"))
            # Binary, model directory, host and port aside, flag for flag and in order.
            assert same_flags(words) == same_flags(argv[arm.name]), arm.name
            shipped = same_flags(words)
            parallel = shipped[shipped.index("--parallel") + 1]
            assert parallel == str(want_slots)
            assert shipped[shipped.index("--ctx-size") + 1] == str(4096 * want_slots)
            assert shipped[shipped.index("--cache-ram") + 1] == str(want_cache)
            if record is committed:  # no offload of its own: the GPU host's unit adds it
                assert ("-ngl" in shipped) == (gpu == "yes"), shipped
        if record is not committed:
            flags = same_flags(argv["qwen-draft4"])
            for flag in ("--spec-type", "--threads", "-ngl", "--spec-draft-n-max"):
                assert flag in flags, (flag, flags)
            # The profile's own gpu_layers = 0 is kept; the draft gets 'all' on a GPU host.
            assert flags[flags.index("-ngl") + 1] == "0"
            assert ("-ngld" in flags) == (gpu == "yes")


def test_a_soak_deeper_than_the_units_slots_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    """The committed unit serves 4 (the record says so, whatever the running config says):
    depth 8 is refused; so is depth 4 of an older record, which kept no slots (1 measured)."""
    config = Config(bench=BenchConfig(reports_dir=str(tmp_path / "reports")))
    old = replace(read_record(COMMITTED), extra={})
    cases = [(COMMITTED, 8, 4), (write_record(tmp_path / "old.json", old), 4, 1)]
    for path, depth, slots in cases:
        with pytest.raises(SoakError) as err:
            soak_command(
                config,
                SoakRequest(recommendation=path, concurrency=[1, depth]),
                database=None,
                progress=lambda _m: None,
            )
        said = f"--concurrency {depth}: the unit serves {slots} request(s) at once"
        assert said in err.value.message
        assert err.value.hint is not None and f"[service] slots = {depth}" in err.value.hint


def test_the_committed_unit_is_what_a_default_config_renders_and_soaks_at_depth_4(
    server_binary: ServerBinary, tmp_path: Path
) -> None:
    """The trap this closes: the committed unit serves 4 slots because the sweep's config
    (examples/speculative-service.toml) said so; a config without [service] slots re-rendered
    it with 1 and refused to soak it at depth 4. Now the record carries its serving settings."""
    config = Config(bench=BenchConfig(reports_dir=str(tmp_path / "reports")))
    record = read_record(COMMITTED)
    committed = (ROOT / str(record.extra["unit"])).read_text(encoding="utf-8")
    rendered = render_unit(record, config.service, filename=Path(str(record.extra["unit"])).name)
    assert exec_start(rendered) == exec_start(committed)
    info = read_help(server_binary, config.server.resolved_cache_dir())
    argv = soak_argv(config, COMMITTED, server_binary, info, 4)
    for arm in (record.baseline, record.subject):
        assert arm is not None
        flags = same_flags(argv[arm.name])
        assert flags[flags.index("--parallel") + 1] == "4", arm.name


def test_the_soak_report_names_the_unit_it_soaked_and_says_its_verdict_once(
    tmp_path: Path,
) -> None:
    config = Config(service=ServiceConfig(cache_ram_mib=1024))
    record = read_record(COMMITTED)
    assert record.subject is not None
    names = [record.subject.name, record.baseline.name]
    unit = soaked_unit(config, record, names)
    verdict = SoakVerdict(
        4,
        True,
        (),
        ("5 requests over 0.03h, 0 errors",),
        figures_of(requests=5, errors=0),
    )
    s = summary(
        verdict, [], subject=names[0], baseline=names[1], duration="2m", sweep_campaign=3,
        command="watchkeeper soak --recommendation r.json", unit=SoakUnit.from_json(unit),
    )  # fmt: skip
    text = render(s)
    assert "\n**stable**: 5 requests over 0.03h, 0 errors\n" in text
    assert "stable: 5" not in text
    assert "Unit soaked: `systemd/llama-server-speculative.service`" in text
    subject_flags = (
        f"- {names[0]}: `--model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf "
        "--ctx-size 16384 --parallel 4 --metrics --slots "  # the record's slots, the config's cache
        f"--spec-type {record.subject.profile['spec_type']} --cache-ram 1024`"
    )
    assert subject_flags in text
    # The same flags as the unit's ExecStart for that arm, binary, paths, host and port aside.
    rendered = render_unit(replace(record, chosen=record.closest or record.chosen), config.service)
    assert " ".join(portable_flags(exec_start(rendered))) in subject_flags
    # A soak recorded before the unit was: said, not guessed.
    assert "Unit: not recorded" in render(replace(s, unit=None))


def verify(unit: Path) -> str:
    """`systemd-analyze verify` as tests/publish/test_service_unit.py runs it: silent when clean."""
    analyze = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"
    if not Path(analyze).exists():
        pytest.fail("systemd-analyze is required: install Debian's `systemd` package")
    done = subprocess.run(
        [analyze, "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=unit.parent,
    )
    assert done.returncode == 0, done.stderr
    return (done.stdout + done.stderr).strip()


def unit_on(
    host: str, gpu: str, record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """`watchkeeper unit --gpu GPU` on a host with an H100 (nvidia-smi answers as the real
    tool does, NVML's binding absent) or without any GPU, written and verified."""
    bin_dir = tmp_path / host / "bin"
    bin_dir.mkdir(parents=True)
    if host == "gpu":
        stand_in_smi(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    host_gpu.reset()
    server = bin_dir / "llama-server"
    server.write_text("#!/bin/sh\nexit 0\n")
    server.chmod(0o755)
    out = tmp_path / host / gpu / "llama-server-speculative.service"
    args = ["unit", "--recommendation", str(record), "--binary", str(server), "--gpu", gpu]
    try:
        assert main([*args, "--output", str(out)]) == 0
    finally:
        host_gpu.reset()
    assert verify(out) == ""
    return out.read_text()


@pytest.mark.parametrize(("host", "gpu"), [("gpu", "yes"), ("gpu", "auto"), ("cpu", "yes")])
def test_a_gpu_hosts_unit_sees_the_gpu_and_offloads_every_arms_layers(
    server_binary: ServerBinary,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    host: str,
    gpu: str,
) -> None:
    """The committed record was measured on 2 CPU cores: `--gpu yes`, or a GPU found with
    `--gpu auto`, still gives a unit that sees /dev/nvidia* and offloads target and draft."""
    config = Config()
    info = read_help(server_binary, config.server.resolved_cache_dir())
    committed = read_record(COMMITTED)
    draft = write_record(tmp_path / "draft.json", speculating(committed, server_binary, info))
    for record, flags in (
        (COMMITTED, "--slots --spec-type none -ngl all --cache-ram 0"),
        (draft, "-ngld all"),
    ):
        text = unit_on(host, gpu, record, tmp_path / record.stem, monkeypatch)
        assert "PrivateDevices=no" in text and "PrivateDevices=yes" not in text
        assert flags in " ".join(exec_start(text)), exec_start(text)


def test_a_cpu_hosts_unit_keeps_its_devices_private_and_offloads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for gpu in ("auto", "no"):
        text = unit_on("cpu", gpu, COMMITTED, tmp_path / gpu, monkeypatch)
        assert "PrivateDevices=yes" in text
        assert not {"-ngl", "-ngld", "--gpu-layers"} & set(exec_start(text))
    # A GPU host told `--gpu no` keeps them private too.
    text = unit_on("gpu", "no", COMMITTED, tmp_path / "told", monkeypatch)
    assert "PrivateDevices=yes" in text and "-ngl" not in exec_start(text)


def test_the_unit_commands_slots_and_cache_options_reach_execstart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["unit", "--recommendation", str(COMMITTED), "--gpu", "no"]
    assert main([*args, "--slots", "4", "--cache-ram", "512"]) == 0
    words = exec_start(capsys.readouterr().out)
    assert " ".join(portable_flags(words)).startswith(
        "--model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --ctx-size 16384 --parallel 4 "
    )
    assert words[-6:-4] == ["--cache-ram", "512"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:  # the parser's range type (1 to 256)
        main([*args, "--slots", "0"])
    assert refused.value.code == 2
    assert "--slots" in capsys.readouterr().err
