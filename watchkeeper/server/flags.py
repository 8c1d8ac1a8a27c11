"""Profile -> argv, in the dialect of the llama-server build that is actually installed.

llama.cpp renames flags between builds (`--draft-max` became `--spec-draft-n-max`; `-md`
alone stopped implying speculation once `--spec-type` arrived). A hard-coded argv silently
runs a non-speculating server after an upgrade, which is the worst possible failure for a
tool whose job is to measure speculation. So the builder reads the binary's own `--help`
(cached per binary hash), picks the first spelling of each field that this build knows, and
refuses with the list of what it does support when nothing fits.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import FlagError
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.spec_knobs import FIELDS, check_chain, family, speculation_args

_FLAG = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
_DESCRIPTION_GAP = re.compile(r"\s{2,}(?=[^\s-])")
_SPEC_TYPE_LINE = re.compile(r"--spec-type\s+\[?\{?([a-z0-9,|\-]+)")

SPELLINGS: dict[str, tuple[str, ...]] = {
    "model": ("--model", "-m"),
    "draft_model": ("--spec-draft-model", "--model-draft", "-md"),
    "spec_type": ("--spec-type",),
    "ctx_size": ("--ctx-size", "-c"),
    "threads": ("--threads", "-t"),
    "slots": ("--parallel", "-np"),
    "host": ("--host",),
    "port": ("--port",),
    "metrics": ("--metrics",),
    "slots_endpoint": ("--slots",),
    "gpu_layers": ("--gpu-layers", "--n-gpu-layers", "-ngl"),
    "draft_gpu_layers": (
        "--spec-draft-ngl",
        "--gpu-layers-draft",
        "--n-gpu-layers-draft",
        "-ngld",
    ),
    "cache_type_k": ("--cache-type-k", "-ctk"),
    "cache_type_v": ("--cache-type-v", "-ctv"),
    "draft_cache_type_k": ("--spec-draft-type-k", "--cache-type-k-draft", "-ctkd"),
    "draft_cache_type_v": ("--spec-draft-type-v", "--cache-type-v-draft", "-ctvd"),
    "flash_attn": ("--flash-attn", "-fa"),
    "cache_ram": ("--cache-ram", "-cram"),
}
"""Every spelling of each flag watchkeeper writes or looks for, newest first: the one table.
`build_argv` uses the first one the build's --help lists; `publish/served.py` and
`campaign/soak_campaign.py` recognise any of them in measured flags and extra args, and a unit
rendered without the binary writes -ngl/-ngld as their last (oldest) spelling, which every
build has. `cache_ram` is appended to extra_args, never built from a profile field."""

_DRAFT_MODEL_FIELDS = ("draft_gpu_layers", "draft_cache_type_k", "draft_cache_type_v")
_ALLOWED = re.compile(r"allowed values:\s*([\w\s,.-]+?)(?:\(|$)")

LEARNS_ACROSS_REQUESTS = frozenset({"ngram-mod", "ngram-cache"})
"""Spec types whose drafting state outlives a request (llama.cpp 11434, common/speculative.cpp):
ngram-mod's hash pool is shared by every slot and only reset when a quarter full; ngram-cache's
context statistics are never reset (its `begin` is a no-op). A process that answered a task once
drafts that task's answer the next time: a sweep that keeps processes across rounds renews these
arms every round (the figures: docs/measurements.md#figures-behind-the-code). ngram-simple and
ngram-map-* read the current context only; draft models reset per request."""


@dataclass(frozen=True, slots=True)
class HelpInfo:
    """What one build's `--help` says it accepts."""

    flags: frozenset[str]
    spec_types: tuple[str, ...]
    removed: dict[str, str] = field(default_factory=dict)
    """Flags --help still lists only to say they were removed -> what it says to use."""
    descriptions: dict[str, str] = field(default_factory=dict)
    """Flag -> its --help entry (names, argument and description, continuation included)."""

    def allowed_values(self, flag: str) -> tuple[str, ...]:
        """The 'allowed values: a, b, c' the help lists for a flag (empty when it lists none)."""
        match = _ALLOWED.search(self.descriptions.get(flag, ""))
        if not match:
            return ()
        return tuple(v.strip() for v in match.group(1).split(",") if v.strip())


@dataclass(frozen=True, slots=True)
class ServerArgs:
    """The argv to start, plus decisions the user should see (e.g. an implied spec type)."""

    argv: tuple[str, ...]
    notes: tuple[str, ...]


def parse_help(text: str) -> HelpInfo:
    flags: set[str] = set()
    removed: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines):
        stripped = line.lstrip()
        if not stripped.startswith("-"):
            continue
        # "-c,    --ctx-size N      size of ...": the description starts at the first wide
        # gap that is not followed by another flag.
        gap = _DESCRIPTION_GAP.search(stripped)
        head = stripped[: gap.start()] if gap else stripped
        description = stripped[gap.end() :] if gap else ""
        names = _FLAG.findall(head)
        continuation = " ".join(
            ln.strip() for ln in lines[number + 1 : number + 3] if ln.startswith(" ")
        )
        if "has been removed" in description:
            advice = (description + " " + continuation).split("removed.", 1)[-1].strip()
            removed.update(dict.fromkeys(names, advice.split("(env:")[0].strip()))
            continue
        flags.update(names)
        following: list[str] = []
        for ln in lines[number + 1 : number + 6]:
            if not ln.startswith(" ") or ln.lstrip().startswith("-"):
                break
            following.append(ln.strip())
        entry = " ".join([stripped, *following])
        for name in names:
            descriptions.setdefault(name, entry)
    spec_types: tuple[str, ...] = ()
    match = _SPEC_TYPE_LINE.search(text)
    if match:
        spec_types = tuple(t for t in re.split(r"[,|]", match.group(1)) if t)
    return HelpInfo(
        flags=frozenset(flags), spec_types=spec_types, removed=removed, descriptions=descriptions
    )


def read_help(binary: ServerBinary, cache_dir: Path) -> HelpInfo:
    """`--help` of this exact binary, cached by its sha256 (it takes ~0.3 s and never changes)."""
    cached = cache_dir / "help" / f"{binary.sha256}.txt"
    if cached.is_file():
        return parse_help(cached.read_text(encoding="utf-8"))
    try:
        result = subprocess.run(
            [str(binary.path), "--help"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FlagError(f"cannot read {binary.path} --help: {exc}") from exc
    text = result.stdout + result.stderr
    info = parse_help(text)
    if "--port" not in info.flags:
        raise FlagError(f"{binary.path} --help does not look like llama-server's (no --port)")
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(text, encoding="utf-8")
    return info


_devices_seen: dict[str, str] = {}


def list_devices_text(binary: ServerBinary) -> str:
    """`--list-devices` of this binary: the GPUs it can offload to (once per binary and
    process: free memory changes, so it is not cached on disk). The offload check reads it
    (`server/offload.py`) so a CUDA build that finds no GPU is refused before any start."""
    key = f"{binary.path}:{binary.sha256}"
    if key in _devices_seen:
        return _devices_seen[key]
    try:
        result = subprocess.run(
            [str(binary.path), "--list-devices"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FlagError(f"cannot run {binary.path} --list-devices: {exc}") from exc
    _devices_seen[key] = result.stdout + result.stderr
    return _devices_seen[key]


def _pick(field: str, spellings: tuple[str, ...], info: HelpInfo) -> str:
    for flag in spellings:
        if flag in info.flags:
            return flag
    raise FlagError(
        f"profile field {field!r} has no flag in this llama-server build "
        f"(tried {', '.join(spellings)})",
        hint="remove the field from the profile or pass the build's own flag in extra_args",
    )


def resolve_spec_type(profile: ProfileConfig, info: HelpInfo) -> tuple[str | None, list[str]]:
    """The spec type (or comma-separated chain) to pass, and notes. A draft model never
    silently means 'no speculation'; every part of a chain is checked against the build's
    list and gets the drafter it needs (server/spec_knobs.check_chain)."""
    notes: list[str] = []
    spec_type = profile.spec_type
    if profile.draft_model is not None and spec_type is None:
        spec_type = "draft-simple"
        notes.append(
            "draft model given without spec_type: using draft-simple "
            "(in this build -md alone loads the draft but does not speculate)"
        )
    if spec_type is None:
        return None, notes
    if not info.spec_types and spec_type != "none":
        raise FlagError(
            f"spec type {spec_type!r} requested but this llama-server build has no --spec-type"
        )
    parts = check_chain(spec_type, info.spec_types, has_draft=profile.draft_model is not None)
    return ",".join(parts), notes


def build_argv(
    profile: ProfileConfig,
    *,
    info: HelpInfo,
    binary: Path,
    model_path: Path,
    draft_path: Path | None,
    port: int,
    host: str = "127.0.0.1",
    cuda: bool = False,
) -> ServerArgs:
    """``cuda``: the binary is a CUDA build, where unset gpu_layers mean 'all' (this build
    otherwise offloads by its own heuristic: explicit is what gets measured)."""
    spec_type, notes = resolve_spec_type(profile, info)
    argv: list[str] = [str(binary)]

    def add(field: str, value: object | None = None) -> None:
        flag = _pick(field, SPELLINGS[field], info)
        argv.append(flag)
        if value is not None:
            argv.append(str(value))

    add("model", model_path)
    add("host", host)
    add("port", port)
    add("ctx_size", profile.ctx_size)
    add("slots", profile.slots)
    if profile.threads is not None:
        add("threads", profile.threads)
    add("metrics")
    if "--slots" in info.flags:
        argv.append("--slots")
    if spec_type is not None and spec_type != "none":
        if draft_path is not None:
            add("draft_model", draft_path)
        argv.extend(speculation_args(profile, spec_type, info.flags))
        if profile.draft_sampling is not None:
            argv.extend(_draft_sampling_args(profile.draft_sampling, spec_type, info))
    else:
        if profile.draft_sampling is not None:
            raise FlagError(
                "profile field 'draft_sampling' is set but the profile does not speculate"
            )
        for name in (*FIELDS, "spec_knobs"):
            if getattr(profile, name) is not None:
                raise FlagError(f"profile field {name!r} is set but the profile does not speculate")
        argv.extend(no_speculation_args(info))
    argv.extend(offload_and_cache_args(profile, info, cuda=cuda))
    _check_extra_args(profile.extra_args, info)
    argv.extend(profile.extra_args)
    return ServerArgs(argv=tuple(argv), notes=tuple(notes))


def no_speculation_args(info: HelpInfo) -> list[str]:
    """`--spec-type none` where the build lists it: a build whose default speculates (an
    upstream change proposes ngram-mod by default) would otherwise make the baseline draft and
    pull every ratio towards 1. It says what the baseline is in its own argv (and in every
    unit rendered from it). What it cannot do in 11434: `--spec-type` appends its names to
    the default list (common/arg.cpp), so under a speculating default `none` would be added
    beside it, not replace it; the real-server test (tests/server/test_baseline_real.py) is
    what shows the baseline drafts nothing, and runs on every build. A build without
    --spec-type gets nothing."""
    if "--spec-type" in info.flags and "none" in info.spec_types:
        return ["--spec-type", "none"]
    return []


def _draft_sampling_args(value: str, spec_type: str, info: HelpInfo) -> list[str]:
    """--spec-draft-sampling: only a draft model samples its proposals (n-gram types have no
    draft distribution), and only a build that has the flag can be told."""
    if not any(family(p) == "draft" for p in spec_type.split(",")):
        raise FlagError(
            f"profile field 'draft_sampling' needs a draft-* spec type, not {spec_type!r}"
        )
    if "--spec-draft-sampling" not in info.flags:
        raise FlagError(
            "profile field 'draft_sampling' is set but this llama-server build has no "
            "--spec-draft-sampling flag"
        )
    return ["--spec-draft-sampling", value]


def effective_gpu_layers(
    profile: ProfileConfig, *, cuda: bool
) -> tuple[str | int | None, str | int | None]:
    """(target, draft) layers to offload: the profile's, else 'all' on a CUDA build."""
    default = "all" if cuda else None
    target = profile.gpu_layers if profile.gpu_layers is not None else default
    draft: str | int | None = None
    if profile.draft_model is not None:
        draft = profile.draft_gpu_layers if profile.draft_gpu_layers is not None else default
    return target, draft


def offload_and_cache_args(profile: ProfileConfig, info: HelpInfo, *, cuda: bool) -> list[str]:
    """-ngl/-ngld, KV cache types and flash attention, in this build's dialect."""
    if profile.draft_model is None:
        for name in _DRAFT_MODEL_FIELDS:
            if getattr(profile, name) is not None:
                raise FlagError(f"profile field {name!r} is set but the profile has no draft_model")
    args: list[str] = []
    target, draft = effective_gpu_layers(profile, cuda=cuda)
    for name, value in (("gpu_layers", target), ("draft_gpu_layers", draft)):
        if value is None:
            continue
        flag = _pick(name, SPELLINGS[name], info)
        # An older build without 'all': more layers than any model has.
        old_dialect = "'all'" not in info.descriptions.get(flag, "'all'")
        args.extend([flag, "999" if value == "all" and old_dialect else str(value)])
    for name in ("cache_type_k", "cache_type_v", "draft_cache_type_k", "draft_cache_type_v"):
        value = getattr(profile, name)
        if value is None:
            continue
        flag = _pick(name, SPELLINGS[name], info)
        allowed = info.allowed_values(flag)
        if allowed and value not in allowed:
            raise FlagError(
                f"profile field {name!r}: KV cache type {value!r} is not supported by this "
                f"llama-server build; allowed: {', '.join(allowed)}"
            )
        args.extend([flag, value])
    if profile.flash_attn is not None:
        flag = _pick("flash_attn", SPELLINGS["flash_attn"], info)
        entry = info.descriptions.get(flag, "")
        if "on|off" in entry or "'on'" in entry:
            args.extend([flag, profile.flash_attn])
        elif profile.flash_attn == "on":
            args.append(flag)  # the old dialect: a bare switch
        elif profile.flash_attn == "auto":
            raise FlagError(
                "flash_attn = 'auto' is not supported by this llama-server build "
                f"({flag} is an on/off switch); use 'on' or 'off'"
            )
    return args


def _check_extra_args(extra: list[str], info: HelpInfo) -> None:
    managed = {"--host", "--port", "-m", "--model"}
    for arg in extra:
        if not arg.startswith("-") or _is_number(arg):
            continue
        flag = arg.split("=", 1)[0]
        if flag in managed:
            raise FlagError(f"extra_args may not set {flag}: watchkeeper manages it")
        if flag in info.removed:
            raise FlagError(
                f"llama-server flag {flag!r} in extra_args was removed in this build: "
                f"{info.removed[flag] or 'see --help'}"
            )
        if flag not in info.flags:
            close = difflib.get_close_matches(flag, sorted(info.flags), n=3, cutoff=0.6)
            suggestion = f"; did you mean {', '.join(close)}?" if close else ""
            raise FlagError(f"unknown llama-server flag {flag!r} in extra_args{suggestion}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
