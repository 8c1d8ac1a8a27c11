"""`watchkeeper gpu-check`: its summary on real bench output (the H100 bench of 26 Nov, which
had none of the GPU figures, two rounds and no controls: every gap is named) and on a complete
result; its refusals on this CPU host (no GPU; a GPU without NVML) and its dry-run plan,
including a fit check planned at the model's own context where that is shorter than asked."""

from __future__ import annotations

import gzip
import json
import struct
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from support.fakegpu import FakeDevice, fake_nvml, stand_in_smi

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.analysis.gpu_cost import ArmGpuCost
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.cli.app import main
from watchkeeper.commands.gpu_check import plan_check, plan_lines
from watchkeeper.config import Config, ServerConfig
from watchkeeper.host import gpu
from watchkeeper.publish.gpu_check_lines import gpu_check_summary, verdict_lines
from watchkeeper.server.models import ModelStore
from watchkeeper.server.profiles import SMOLLM2

FIXTURE = Path(__file__).parent / "data" / "cuda_bench.json.gz"  # ../shared/gpu/bench.json.gz


@pytest.fixture(autouse=True)
def _fresh_probe() -> Iterator[None]:
    gpu.reset()
    yield
    gpu.reset()


def test_the_real_h100_bench_is_summarised_with_every_gap_named() -> None:
    with gzip.open(FIXTURE) as handle:
        data = json.load(handle)
    summary = gpu_check_summary(data)
    assert not summary.complete
    text = "\n".join(summary.lines)
    assert "smollm2-selfdraft (candidate): 331.9 tok/s median" in text
    assert "speed-up 0.42x (no CI: insufficient replicates)" in text
    assert "identity: batch_variance 3, mismatch 1, near_tie 2; n/a" in text
    assert "A/A floor on the baseline server: noise floor underpowered: 40 replayed" in text
    assert "live positive control: not run" in text
    for gap in (
        "smollm2-baseline: offload not recorded",
        "smollm2-baseline: VRAM",
        "smollm2-selfdraft: energy ratio with a CI",
        "smollm2-ngram: speed-up with a CI",
        "smollm2-selfdraft-q8kv: identity mode",
        "live positive control",
        "offline positive control",
    ):
        assert gap in summary.missing
    closing = verdict_lines(summary, 31.0, 600.0)
    assert (
        closing[0] == f"gpu-check: 31 s wall (budget 600 s): {len(summary.missing)} not measured:"
    )


def _complete(result: BenchResult) -> BenchResult:
    """The report fixture with what a GPU run adds: costs, offload verdicts, both controls."""
    stats = []
    for s in result.arm_stats:
        ratio = (
            None
            if s.arm == "baseline"
            else RatioCI(1.21, 1.12, 1.30, 48, 12, 4, verdict="slower", threshold=0.03)
        )
        cost = ArmGpuCost(950 << 20, 930 << 20, 71.0, 312.5, 0.412, ratio)
        stats.append(replace(s, gpu=cost))
    offload = {
        a.name: {"seen": "full", "detail": "server holds 901 MiB of VRAM >= 63 MiB of weights"}
        for a in result.arms
    }
    power = {
        **result.extras["identity_power"],
        "live": {
            "smallest_detected": 1.0,
            "summary": "live positive control (logit_bias on ' the'): smallest bias detected +1",
        },
    }
    extras = {**result.extras, "offload": offload, "identity_power": power}
    return replace(result, arm_stats=tuple(stats), extras=extras)


def test_a_complete_gpu_result_passes_and_prints_every_figure(result: BenchResult) -> None:
    summary = gpu_check_summary(_complete(result).to_json())
    assert summary.complete, summary.missing
    text = "\n".join(summary.lines)
    assert "  offload full: server holds 901 MiB of VRAM >= 63 MiB of weights" in text
    assert "VRAM peak 950 MiB, steady 930 MiB; power 312 W; 0.412 J/token" in text
    assert "energy/token vs baseline 1.21x [1.12, 1.30] slower" in text
    assert "speed-up 1.38x [1.22, 1.55]" in text
    assert "identity: batch_variance 1, identical 46, near_tie 1; batched mode (ubatch 1" in text
    assert "\nlive positive control (logit_bias on ' the'): smallest bias detected +1" in text
    assert verdict_lines(summary, 412.0, 600.0) == [
        "gpu-check: 412 s wall (budget 600 s): every figure measured"
    ]


def test_one_missing_figure_fails_the_check_and_is_named(result: BenchResult) -> None:
    full = _complete(result)
    no_power = replace(
        full,
        arm_stats=tuple(
            replace(s, gpu=replace(s.gpu, power_watts=None)) if s.arm == "ngram" else s
            for s in full.arm_stats
            if s.gpu is not None
        ),
    )
    assert gpu_check_summary(no_power.to_json()).missing == ("ngram: power",)
    partial = {"seen": "not measured", "detail": "no NVML"}
    unverified = replace(full, extras={**full.extras, "offload": {"draft4": partial}})
    missing = gpu_check_summary(unverified.to_json()).missing
    assert "draft4: offload not measured" in missing
    assert "baseline: offload not recorded" in missing


@pytest.fixture
def cpu_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    config = tmp_path / "wk.toml"
    config.write_text(f'[server]\ncache_dir = "{tmp_path / "cache"}"\n')
    return config


def test_on_this_cpu_host_it_refuses_in_one_line_with_exit_2(
    cpu_host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gpu-check", "--config", str(cpu_host)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("error: no GPU on this host: nvidia-smi and NVML list none")
    assert lines[1] == "hint: `watchkeeper gpu-check --dry-run` prints what it would run"


def test_a_gpu_without_nvml_is_refused_with_the_fix(
    cpu_host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    stand_in_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert main(["gpu-check", "--config", str(cpu_host)]) == 2
    err = capsys.readouterr().err
    assert "error: a GPU is listed but NVML's Python binding (nvidia-ml-py" in err
    assert "hint: install the NVML binding: pip install 'watchkeeper[gpu]'" in err


def test_fewer_than_three_rounds_is_refused(
    cpu_host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gpu-check", "--dry-run", "--rounds", "2", "--config", str(cpu_host)]) == 2
    assert "at least 3 rounds" in capsys.readouterr().err


def test_the_dry_run_prints_the_plan_on_a_cpu_host(
    cpu_host: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gpu-check", "--dry-run", "--config", str(cpu_host)]) == 0
    text = capsys.readouterr().out
    assert "GPU: none on this host (a run would refuse: exit 2)" in text
    assert "NVML: NVML's Python binding (nvidia-ml-py, the `gpu` extra) is not installed" in text
    assert (
        "arms: smollm2-baseline, smollm2-selfdraft, smollm2-ngram, smollm2-selfdraft-q8kv" in text
    )
    assert "bench: 3 measured rounds + warm-up x 6 tasks (1 per category)" in text
    assert "the live positive control (logit bias" in text
    assert "expected: " in text


def _tiny_gguf(path: Path, context_length: int) -> None:
    """A GGUF v3 header with two keys and no tensors: what the context reader reads."""

    def string(text: str) -> bytes:
        return struct.pack("<Q", len(text)) + text.encode()

    kv = string("general.architecture") + struct.pack("<I", 8) + string("llama")
    kv += string("llama.context_length") + struct.pack("<II", 4, context_length)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv)


def test_the_plan_measures_fit_at_the_models_own_context_on_a_gpu_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stand_in_smi(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(FakeDevice()))
    config = Config(server=ServerConfig(cache_dir=str(tmp_path / "cache")))
    _tiny_gguf(ModelStore(config).path_for(SMOLLM2), 8192)
    plan = plan_check(config, cores=16)
    assert plan.devices == ("NVIDIA H100 80GB HBM3, 81920 MiB",)
    assert plan.nvml is None and plan.model_context == 8192
    assert 290 <= plan.expected_s < 600  # the build at -j16 and the bench fit the budget
    lines = plan_lines(plan)
    assert lines[0] == "GPU: NVIDIA H100 80GB HBM3, 81920 MiB"
    fit = next(line for line in lines if line.startswith("fit check"))
    assert "SmolLM2's own context is 8192, so each is measured at 8192" in fit
    slow = plan_lines(plan_check(config, cores=2))
    assert "OVER the budget" in slow[-1]
