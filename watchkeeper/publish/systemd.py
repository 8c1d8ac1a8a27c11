"""systemd unit for the recommended llama-server setting, rendered for the installing host.

A pure builder from the committed recommendation (`publish/deliverable.py`) and the host's
[service] keys (binary, model directory, user, group, host, port, where the report is read),
plus a writer. The unit names no path of the machine that ran the sweep; when the answer is to
keep the baseline, its header says which setting came closest, the flags that would try it and
what would change the answer, so an operator does not read "no speculation" as "it never pays".
"""

from __future__ import annotations

import os
import shlex
import textwrap
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish.deliverable import ArmRecipe, RecommendationRecord

_ENV = Environment(
    loader=PackageLoader("watchkeeper", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # noqa: S701  (a unit file, not HTML)
)
UNIT_NAME = "llama-server-speculative.service"
WIDTH = 96


def exec_argv(arm: ArmRecipe, service: ServiceConfig) -> list[str]:
    """The arm's flags on the installing host: its binary, its model directory, its port."""
    flags = [f"{service.model_dir}/{f}" if f.endswith(".gguf") else f for f in arm.flags]
    return [service.binary, *flags, "--host", service.host, "--port", str(service.port)]


def _unit_quote(argv: list[str]) -> str:
    """shlex quoting, with systemd's specifiers (%) and variables ($) escaped."""
    return shlex.join(argv).replace("%", "%%").replace("$", "$$")


def documentation_url(record: RecommendationRecord, service: ServiceConfig) -> str:
    if service.reports_url:
        return f"{service.reports_url.rstrip('/')}/{record.report}"
    return f"file://{service.docs_dir}/{Path(record.report).name}"


def _comment(text: str) -> list[str]:
    return [
        "# " + line
        for line in textwrap.wrap(text, WIDTH - 2, break_on_hyphens=False, break_long_words=False)
    ]


def notes(record: RecommendationRecord, service: ServiceConfig) -> list[str]:
    """The header's explanation: what runs, and when it is the baseline, what came closest."""
    out = _comment(f"Measured on {record.hardware}; {record.models}; sampler {record.sampler}.")
    out += _comment(f"What it means: {record.meaning}.")
    if record.load:
        out += _comment(
            f"Holds for the load it was measured under: {record.load}. At another load, "
            "measure it there (`watchkeeper bench --load-ladder`, docs/load.md)."
        )
    if not record.speculates:
        closest = record.closest
        if closest is not None:
            out += _comment(
                f"Closest speculative setting: {closest.name}, {closest.speedup}; identity: "
                f"{closest.identity}. To try it, add to ExecStart: "
                f"{shlex.join(closest.spec_flags)}"
            )
        if record.would_change:
            out.append("# What would change the answer:")
        for change in record.would_change:
            out += [
                "#    " + line[2:] if i else "#  - " + line[2:]
                for i, line in enumerate(_comment(f"{change}."))
            ]
    else:
        out += _comment(
            f"Speculation: {shlex.join(record.chosen.spec_flags)} ({record.chosen.speedup}; "
            f"identity: {record.chosen.identity})."
        )
    out += _comment(
        "Memory: beyond the model and its context, a build with --cache-ram (the 11434 build "
        "and later) keeps the prompts its slots let go in host memory, up to 8192 MiB by "
        "default; add --cache-ram N (MiB; 0: off) to ExecStart to bound it. The soak "
        "(speculative_soak.md) measures the server's own RSS growth with it off."
    )
    models = ", ".join(record.chosen.models)
    out += _comment(
        f"This host: {service.binary} (the sweep's build: {record.build}), {models} in "
        f"{service.model_dir}, user {service.user}, port {service.port}. Other paths: set "
        "[service] in watchkeeper.toml or pass them to `watchkeeper unit`."
    )
    if not service.reports_url:
        out += _comment(
            f"Documentation: copy {record.report} from the reports repository to "
            f"{service.docs_dir}/ (or set [service] reports_url)."
        )
    return out


def render_unit(
    record: RecommendationRecord, service: ServiceConfig, *, filename: str = UNIT_NAME
) -> str:
    arm = record.chosen
    argv = exec_argv(arm, service)
    spec = arm.profile.get("spec_type") or "no speculation"
    if arm.profile.get("draft_n_max"):
        spec += f", n_max {arm.profile['draft_n_max']}"
    gpu = record.gpu if service.gpu == "auto" else service.gpu == "yes"
    return _ENV.get_template("llama-server.service.j2").render(
        headline=record.headline,
        campaign_id=record.campaign_id,
        report=record.report,
        filename=filename,
        notes=notes(record, service),
        documentation=documentation_url(record, service),
        profile=arm.name,
        spec_summary=spec,
        user=service.user,
        group=service.resolved_group,
        exec_start=_unit_quote(argv),
        gpu=gpu,
        read_only_paths=" ".join(
            f'"{p}"' if " " in p else p
            for p in dict.fromkeys([str(Path(service.binary).parent), service.model_dir])
        ),
    )


def write_service(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
