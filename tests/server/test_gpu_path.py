"""The GPU path installs and needs NVML: a GPU listed without the binding is refused up front,
in one line with the fix (exit 2), never measured as n/a; VRAM is attributed by the device's
growth over a server's start where NVML lists no process of it (a container)."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.fakegpu import FakeDevice, Proc, fake_nvml, stand_in_smi

from watchkeeper.cli.app import main
from watchkeeper.commands.setup import default_setup_models, require_nvml
from watchkeeper.config import Config, ModelConfig, ProfileConfig, ServerConfig
from watchkeeper.errors import GpuError
from watchkeeper.host import gpu

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_probe() -> Iterator[None]:
    gpu.reset()
    yield
    gpu.reset()


@pytest.fixture
def gpu_listed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """nvidia-smi lists an H100; NVML's binding is not installed (the `gpu` extra missing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in_smi(bin_dir)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setitem(sys.modules, "pynvml", None)


def test_nvml_problem_says_which_part_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert "not installed" in (gpu.nvml_problem() or "")
    gpu.reset()
    broken = types.ModuleType("pynvml")

    def init() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    broken.nvmlInit = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    assert "did not initialise" in (gpu.nvml_problem() or "")
    gpu.reset()
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(FakeDevice()))
    assert gpu.nvml_problem() is None


@pytest.mark.usefixtures("gpu_listed")
def test_a_cuda_setup_with_a_gpu_and_no_nvml_is_refused_with_the_fix() -> None:
    with pytest.raises(GpuError) as caught:
        require_nvml(Config(server=ServerConfig(cuda=True)))
    assert "nvidia-ml-py" in caught.value.message
    assert "pip install 'watchkeeper[gpu]'" in (caught.value.hint or "")
    require_nvml(Config(server=ServerConfig(cuda=False)))  # the CPU path never needs it


def test_a_cuda_build_box_without_a_gpu_builds_without_nvml(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", "/nonexistent")
    require_nvml(Config(server=ServerConfig(cuda=True)))


@pytest.mark.usefixtures("gpu_listed")
def test_setup_cuda_refuses_in_one_line_and_exit_2_before_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "wk.toml"
    # An index nobody answers on: were the refusal gone, the build would fail fast, not fetch.
    config.write_text(
        f'[server]\ncache_dir = "{tmp_path / "cache"}"\npackage_index = "http://127.0.0.1:9/"\n'
    )
    assert main(["setup", "--cuda", "--config", str(config)]) == 2
    text = capsys.readouterr().err
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines[0].startswith("error: a GPU is listed but NVML's Python binding")
    assert lines[1].startswith("hint: install the NVML binding: pip install 'watchkeeper[gpu]'")
    assert not (tmp_path / "cache" / "llama.cpp").exists()  # nothing was built


def test_make_installs_the_gpu_extra_where_nvidia_smi_lists_a_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import subprocess

    stand_in_smi(tmp_path)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    dry = subprocess.run(
        ["make", "-n", "-B", "venv", "VENV=/nonexistent-venv"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "pip install --quiet -e '.[dev,gpu]'" in dry
    env["PATH"] = "/usr/bin:/bin"
    dry = subprocess.run(
        ["make", "-n", "-B", "venv", "VENV=/nonexistent-venv"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "pip install --quiet -e '.[dev]'" in dry


def test_setup_fetches_the_configs_own_models_not_smollm2(tmp_path: Path) -> None:
    mine = Config(
        models={"t": ModelConfig(path=str(tmp_path / "t.gguf"))},
        profiles={"a": ProfileConfig(model="t"), "b": ProfileConfig(model="t", draft_model="t")},
    )
    assert default_setup_models(mine) == ["t"]
    assert default_setup_models(Config()) == ["smollm2-135m-instruct-q4_1"]


def test_vram_falls_back_to_the_devices_growth_when_nvml_lists_no_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    device = FakeDevice(used=512 << 20)
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(device))
    before = gpu.memory_used_bytes()
    device.used += 901 << 20  # the server started; NVML lists none of its processes
    me = os.getpid()
    assert gpu.attribute_vram(me, before) == (901 << 20, gpu.BY_DEVICE)
    reading = gpu.read_for_tree(me, datetime(2026, 11, 27, tzinfo=UTC), fallback_vram_bytes=7)
    assert reading is not None and reading.tree_vram_bytes == 7
    device.procs = [Proc(me, 300 << 20)]  # where NVML does list the process, it wins
    assert gpu.attribute_vram(me, before) == (300 << 20, gpu.BY_PROCESS)
    device.procs = []
    device.used = before or 0  # memory freed meanwhile: no attribution, never negative
    assert gpu.attribute_vram(me, before) == (0, "")
    assert gpu.attribute_vram(me, None) == (0, "")
