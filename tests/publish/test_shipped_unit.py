"""What the soak proves is what the unit ships: `soak --recommendation` starts each server with
the argv `server/flags.py` builds for the installed build from the profiles the soak prepares,
and that argv is the unit's ExecStart (binary, model directory, host and port aside), for the
committed recommendation and for a speculating one, with [service]'s slots and prompt cache."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from watchkeeper.campaign.defaults import with_recommendation
from watchkeeper.campaign.soak_campaign import soak_servers
from watchkeeper.campaign.soak_deliverable import soaked_unit
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import BenchConfig, Config, ProfileConfig
from watchkeeper.config.service import ServiceConfig
from watchkeeper.errors import SoakError
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


@pytest.mark.parametrize(("slots", "cache", "depth"), [(None, 0, 1), (4, 512, 4), (2, None, 1)])
def test_the_soaks_servers_run_exactly_the_units_execstart(
    server_binary: ServerBinary,
    tmp_path: Path,
    slots: int | None,
    cache: int | None,
    depth: int,
) -> None:
    config = Config(bench=BenchConfig(reports_dir=str(tmp_path / "reports")))
    info = read_help(server_binary, config.server.resolved_cache_dir())
    service = ServiceConfig(slots=slots, cache_ram_mib=cache, model_dir="/srv/models")
    config = config.model_copy(update={"service": service})
    committed = read_record(COMMITTED)
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
            assert portable_flags(words) == portable_flags(argv[arm.name]), arm.name
            shipped = portable_flags(words)
            parallel = shipped[shipped.index("--parallel") + 1]
            assert parallel == str(slots or 1)
            assert shipped[shipped.index("--ctx-size") + 1] == str(4096 * (slots or 1))
            if cache is None:
                assert "--cache-ram" not in shipped
            else:
                assert shipped[shipped.index("--cache-ram") + 1] == str(cache)
        if record is not committed:
            flags = portable_flags(argv["qwen-draft4"])
            for flag in ("--spec-type", "--threads", "--gpu-layers", "--spec-draft-n-max"):
                assert flag in flags, (flag, flags)


def test_a_soak_deeper_than_the_units_slots_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    config = Config(bench=BenchConfig(reports_dir=str(tmp_path / "reports")))
    with pytest.raises(SoakError) as err:
        soak_command(
            config,
            recommendation=COMMITTED,
            concurrency=[1, 4],
            database=None,
            progress=lambda _m: None,
        )
    assert "--concurrency 4: the unit serves 1 request(s) at once" in err.value.message
    assert err.value.hint is not None and "[service] slots = 4" in err.value.hint


def test_the_soak_report_names_the_unit_it_soaked_and_says_its_verdict_once(
    tmp_path: Path,
) -> None:
    config = Config(service=ServiceConfig(cache_ram_mib=1024))
    record = read_record(COMMITTED)
    names = ["qwen-sweep-ngram-simple", "qwen-baseline"]
    unit = soaked_unit(config, record, names)
    verdict = {
        "campaign_id": 4,
        "verdict": "stable",
        "headline": "stable: 5 requests over 0.03h, 0 errors",
        "figures": {"requests": 5, "errors": 0, "series": []},
    }
    s = summary(
        verdict, [], subject=names[0], baseline=names[1], duration="2m", sweep_campaign=3,
        command="watchkeeper soak --recommendation r.json", unit=unit,
    )  # fmt: skip
    text = render(s)
    assert "\n**stable**: 5 requests over 0.03h, 0 errors\n" in text
    assert "stable: 5" not in text
    assert "Unit soaked: `systemd/llama-server-speculative.service`" in text
    subject_flags = (
        "- qwen-sweep-ngram-simple: `--model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf "
        "--ctx-size 4096 --parallel 1 --metrics --slots --spec-type ngram-simple "
        "--cache-ram 1024`"
    )
    assert subject_flags in text
    # The same flags as the unit's ExecStart for that arm, binary, paths, host and port aside.
    rendered = render_unit(replace(record, chosen=record.closest or record.chosen), config.service)
    assert " ".join(portable_flags(exec_start(rendered))) in subject_flags
    # A soak recorded before the unit was: said, not guessed.
    assert "Unit: not recorded" in render({**s, "unit": None})
