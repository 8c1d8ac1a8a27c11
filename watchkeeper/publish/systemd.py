"""systemd unit for the recommended llama-server setting, rendered for the installing host.

A pure builder from the committed recommendation (`publish/deliverable.py`) and the host's
[service] keys (binary, model directory, user, group, host, port, where the report is read),
plus a writer. The unit names no path of the machine that ran the sweep; when the answer is to
keep the baseline, its header says which setting came closest, the flags that would try it and
what would change the answer, so an operator does not read "no speculation" as "it never pays".
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
import textwrap
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined

from watchkeeper.config.service import ServiceConfig
from watchkeeper.errors import ConfigError
from watchkeeper.publish.deliverable import ArmRecipe, RecommendationRecord
from watchkeeper.publish.ladder_claim import load_note
from watchkeeper.publish.served import as_rendered, served_arm, wants_gpu
from watchkeeper.publish.verify import pinned_files, pins_note, verify_argv

_ENV = Environment(
    loader=PackageLoader("watchkeeper", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # noqa: S701  (a unit file, not HTML)
)
UNIT_NAME = "llama-server-speculative.service"
WIDTH = 96


def exec_argv(arm: ArmRecipe, service: ServiceConfig, *, gpu: bool = False) -> list[str]:
    """The arm's flags on the installing host: its binary, its model directory, its port, and
    the slots, prompt cache and GPU offload [service] ships (publish/served.py: the soak runs
    the same)."""
    shipped = served_arm(arm, service, gpu=gpu).flags
    flags = [f"{service.model_dir}/{f}" if f.endswith(".gguf") else f for f in shipped]
    return [service.binary, *flags, "--host", service.host, "--port", str(service.port)]


_BARE = re.compile(r"[A-Za-z0-9/._+=:,@-]+")
"""What a word may hold unquoted in any setting: no whitespace, quote, backslash, ';', '%' or
'$' (systemd.syntax(7) splits and unquotes; systemd.unit(5) expands '%' specifiers)."""


def exec_word(arg: str) -> str:
    """One ExecStart= argument as systemd reads it (systemd.service(5), "Command lines"):
    double quotes with C escapes inside, '%%' for '%' (specifiers are expanded first, in the
    whole line) and '$$' for '$' (variables are expanded in each argument when it runs).
    Shell quoting is no help: systemd parses no `'"'"'`, and reads `\\` as an escape."""
    body = []
    for c in arg:
        if c in '\\"':
            body.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            body.append(f"\\x{ord(c):02x}")
        else:
            body.append({"%": "%%", "$": "$$"}.get(c, c))
    text = "".join(body)
    return text if _BARE.fullmatch(arg) else f'"{text}"'


def exec_line(argv: list[str]) -> str:
    return " ".join(exec_word(a) for a in argv)


def path_word(path: str) -> str:
    """One path of ReadOnlyPaths= and its kin (systemd.exec(5)): unquoted without C escapes (a
    backslash escapes the next character), then specifiers expanded. Control characters have
    no spelling there; the config refuses them."""
    text = path.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return text if _BARE.fullmatch(path) else f'"{text}"'


def specifiers(text: str) -> str:
    """A one-line value where systemd expands specifiers (Description=, Documentation=)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ConfigError(
            f"unit: {text!r} holds a control character, which no unit line can carry",
            hint="check the recommendation record and [service] for stray newlines",
        )
    return text.replace("%", "%%")


def unit_name(record: RecommendationRecord) -> str:
    """The unit's own file name, as its sweep wrote it (`extra.unit`), else the default's."""
    return Path(str(record.extra.get("unit") or UNIT_NAME)).name


def own_docs_dir(service: ServiceConfig, filename: str) -> ServiceConfig:
    """Each unit its own documentation folder (`/usr/share/doc/<unit>/`) unless [service]
    docs_dir says where: two units sharing one folder overwrite each other's report."""
    if "docs_dir" in service.model_fields_set:
        return service
    return service.model_copy(update={"docs_dir": f"/usr/share/doc/{Path(filename).stem}"})


def documentation_url(record: RecommendationRecord, service: ServiceConfig) -> str:
    """Percent-encoded (a space would split the list; systemd wants one URL per word)."""
    if service.reports_url:
        return f"{service.reports_url.rstrip('/')}/{quote(record.report)}"
    return "file://" + quote(f"{service.docs_dir}/{Path(record.report).name}")


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
            load_note(
                record.load,
                record.extra,
                speculates=record.speculates,
                sweep_hardware=record.hardware,
            )
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
    out += _comment(_memory_note(service))
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


def _memory_note(service: ServiceConfig) -> str:
    """What bounds the server's memory beyond the model and its context, as shipped."""
    cache = (
        "the build's default, up to 8192 MiB in the 11434 build"
        if service.cache_ram_mib is None
        else "off (--cache-ram 0)"
        if service.cache_ram_mib == 0
        else f"bounded by --cache-ram {service.cache_ram_mib} (MiB)"
    )
    return (
        "Memory: a build with --cache-ram (the 11434 build and later) keeps the prompts its "
        f"slots let go in host memory; here {cache} ([service] cache_ram_mib). "
        "`watchkeeper soak --recommendation` runs exactly this ExecStart's flags, so its "
        "memory verdict (speculative_soak.md) is the shipped server's."
    )


def render_unit(
    record: RecommendationRecord,
    service: ServiceConfig,
    *,
    filename: str = UNIT_NAME,
    gpu_detected: bool = False,
    binary_sha256: str = "",
) -> str:
    """`gpu_detected`: the installing host has a GPU (with [service] gpu = auto, the unit
    then offloads and sees the device nodes, whatever the sweep's host had).
    `binary_sha256`: the binary's digest where `watchkeeper unit` found it (publish/verify.py)."""
    arm = record.chosen
    service = own_docs_dir(as_rendered(record, service), filename)
    gpu = wants_gpu(record.gpu, service, detected=gpu_detected)
    argv = exec_argv(arm, service, gpu=gpu)
    spec = arm.profile.get("spec_type") or "no speculation"
    if arm.profile.get("draft_n_max"):
        spec += f", n_max {arm.profile['draft_n_max']}"
    pins = pinned_files(record, service, binary_sha256)
    text = _ENV.get_template("llama-server.service.j2").render(
        exec_start_pre=exec_line(verify_argv(pins, Path(filename).stem)),
        headline=record.headline,
        campaign_id=record.campaign_id,
        report=record.report,
        filename=filename,
        notes=notes(record, service) + _comment(pins_note(pins, record, service)),
        documentation=specifiers(documentation_url(record, service)),
        profile=specifiers(arm.name),
        spec_summary=specifiers(spec),
        user=specifiers(service.user),
        group=specifiers(service.resolved_group),
        exec_start=exec_line(argv),
        gpu=gpu,
        read_only_paths=" ".join(
            path_word(p)
            for p in dict.fromkeys([str(Path(service.binary).parent), service.model_dir])
        ),
    )
    return checked(text)


def checked(text: str) -> str:
    """The rendered unit holds exactly the template's directives, once each, and no line that
    continues into the next (a trailing backslash joins lines, even a comment's): anything else
    means a value escaped its line, and the unit is refused rather than written."""
    stray = sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7F})
    if stray:
        raise ConfigError(
            f"unit: the rendered unit holds control characters {stray!r} (from the "
            "recommendation record or [service]); systemd would read them as line ends",
            hint="check the recommendation record and [service] for stray control characters",
        )
    found: list[str] = []
    for line in text.split("\n"):
        if line.rstrip().endswith("\\"):
            raise ConfigError(
                f"unit: a line ends in a backslash, which would join it to the next: {line!r}",
                hint="choose a file name and paths that do not end in '\\'",
            )
        if line and not line.startswith(("#", "[")):
            found.append(line.split("=", 1)[0])
    if found != _expected_keys():
        raise ConfigError(
            "unit: the rendered unit's directives are not the template's",
            hint="a value reached the unit unescaped; report it with the command you ran",
        )
    return text


def _expected_keys() -> list[str]:
    assert _ENV.loader is not None
    source, _, _ = _ENV.loader.get_source(_ENV, "llama-server.service.j2")
    return [
        line.split("=", 1)[0]
        for line in source.splitlines()
        if line and not line.startswith(("#", "[", "{"))
    ]


def write_service(path: Path, text: str) -> Path:
    """`text` in `path`, all or nothing: no `.tmp` stays behind when the write fails."""
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder", hint="name the unit file to write in it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # a unit is read by systemd and by whoever installs it
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return path
