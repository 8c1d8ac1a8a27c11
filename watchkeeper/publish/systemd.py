"""systemd unit for the recommended llama-server profile. A pure builder plus a writer."""

from __future__ import annotations

import getpass
import os
import shlex
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from watchkeeper.analysis.benchmark import ArmSpec

_ENV = Environment(
    loader=PackageLoader("watchkeeper", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # noqa: S701  (a unit file, not HTML)
)
SERVICE_PORT = 8080


def service_argv(arm: ArmSpec, *, port: int = SERVICE_PORT) -> list[str]:
    """The arm's measured argv with the ephemeral bench port replaced by a fixed one."""
    argv = list(arm.argv)
    if "--port" in argv:
        argv[argv.index("--port") + 1] = str(port)
    return argv


def render_service(
    arm: ArmSpec,
    *,
    headline: str,
    campaign_id: int,
    report: Path,
    filename: str,
    user: str,
    gpu: bool,
) -> str:
    argv = service_argv(arm)
    model_dirs = sorted({str(Path(a).parent) for a in argv if a.endswith(".gguf")})
    spec = arm.spec_type or "no speculation"
    if arm.draft_n_max:
        spec += f", n_max {arm.draft_n_max}"
    return _ENV.get_template("llama-server.service.j2").render(
        headline=headline,
        campaign_id=campaign_id,
        report=str(report.resolve()),
        filename=filename,
        profile=arm.name,
        spec_summary=spec,
        user=user,
        exec_start=shlex.join(argv),
        gpu=gpu,
        read_only_paths=" ".join([str(Path(argv[0]).resolve().parent), *model_dirs]),
    )


def write_service(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def current_user() -> str:
    try:
        return getpass.getuser()
    except OSError:
        return "llama"
