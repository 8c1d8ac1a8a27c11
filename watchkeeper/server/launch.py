"""From a profile name to a server answering on 127.0.0.1 (or an external URL).

`prepare` does everything slow and fallible before any load starts (binary, models, argv), so
a missing model or an unsupported flag fails in seconds; `serve` then starts the process and
yields its URL, always stopping it afterwards. A profile with a `url` names a server somebody
else runs (`server/external.py`): `prepare` checks that it answers and reads its identity,
`serve` and `attach` only check it again; nothing here ever starts or stops it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import ServerError
from watchkeeper.host import gpu
from watchkeeper.host.gpu_monitor import GpuMonitor, monitor_for
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.external import ExternalIdentity, check_answers, read_identity
from watchkeeper.server.flags import (
    HelpInfo,
    ServerArgs,
    build_argv,
    effective_gpu_layers,
    list_devices_text,
    read_help,
    resolve_spec_type,
)
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.models import ModelFile, ModelStore
from watchkeeper.server.offload import (
    ListedDevice,
    OffloadEvidence,
    OffloadVerdict,
    draft_loaded,
    gpu_weights_bytes,
    parse_list_devices,
    verify_offload,
)
from watchkeeper.server.process import ManagedServer, OffloadReport, check_external, free_port
from watchkeeper.server.profiles import get_profile

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class PreparedProfile:
    """A profile with everything resolved: ready to start."""

    name: str
    profile: ProfileConfig
    binary: ServerBinary | None
    model: ModelFile | None
    draft: ModelFile | None
    help: HelpInfo | None
    external_url: str = ""
    identity: ExternalIdentity | None = None
    """What a url profile's server said about itself at `prepare` (None for the others)."""
    devices: tuple[ListedDevice, ...] | None = None
    """`--list-devices` of a CUDA build whose profile asks for GPU layers (else None)."""

    @property
    def cuda(self) -> bool:
        return self.binary is not None and self.binary.variant == "cuda"

    def wants_gpu(self) -> bool:
        """Whether the server is asked to put any layer on the GPU."""
        target, draft = effective_gpu_layers(self.profile, cuda=self.cuda)
        return any(w not in (None, 0) for w in (target, draft))

    @property
    def speculative(self) -> bool:
        """Whether the arm drafts, so its outputs are judged for identity. A url profile's
        server says so in /slots or /props; where it does not, it is judged as a speculative
        arm would be (a check that may not apply beats one silently skipped)."""
        if self.identity is not None:
            return self.identity.speculative is not False
        return self.profile.speculative

    @property
    def spec_type(self) -> str | None:
        if self.help is None:
            return self.profile.spec_type
        return resolve_spec_type(self.profile, self.help)[0]

    def args(self, port: int) -> ServerArgs:
        assert self.binary is not None and self.model is not None and self.help is not None
        return build_argv(
            self.profile,
            info=self.help,
            binary=self.binary.path,
            model_path=self.model.path,
            draft_path=self.draft.path if self.draft else None,
            port=port,
            cuda=self.binary.variant == "cuda",
        )


@dataclass(frozen=True, slots=True)
class RunningServer:
    base_url: str
    argv: tuple[str, ...]
    managed: ManagedServer | None
    offload_verdict: OffloadVerdict | None = None
    """How the offload check saw this start (None for an external server)."""
    gpu: GpuMonitor | None = None
    """The GPU cost sampler of a CUDA build's process tree where NVML answers (else None)."""
    vram_before_bytes: int | None = None
    """The device memory in use just before this server started (a CUDA build): its VRAM is
    what the device grew by where NVML lists none of its processes (`gpu.attribute_vram`)."""

    def vram(self) -> tuple[int | None, str]:
        """The VRAM of this server's processes now, and how it was attributed."""
        pid = self.managed.info.pid if self.managed else None
        if pid is None:
            return None, ""
        return gpu.attribute_vram(pid, self.vram_before_bytes)

    def stop_monitor(self) -> None:
        if self.gpu is not None:
            self.gpu.stop()

    def peak_rss_bytes(self) -> int | None:
        return self.managed.peak_rss_bytes if self.managed else None

    def offload(self, *, has_draft: bool = False) -> OffloadReport | None:
        """GPU offload as the server's log reported it (None for an external server)."""
        return self.managed.offload(has_draft=has_draft) if self.managed else None


def check_offload(
    profile: ProfileConfig, report: OffloadReport, *, cuda: bool, log_path: Path | None = None
) -> OffloadVerdict:
    """The offload check on the log alone (`server/offload.py` says what else it reads)."""
    return verify_offload(profile, OffloadEvidence(report), cuda=cuda, log_path=log_path)


def offload_evidence(prepared: PreparedProfile, running: RunningServer) -> OffloadEvidence:
    """What this start says about its offload: the log, the build's devices and, on a CUDA
    build asked for GPU layers, NVML's VRAM of the process tree against the weights."""
    has_draft = prepared.draft is not None
    report = running.offload(has_draft=has_draft) or OffloadReport(None, None)
    text = ""
    if running.managed is not None and running.managed.info.log_path is not None:
        try:
            text = running.managed.info.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
    vram: int | None = None
    source = ""
    weights: int | None = None
    if prepared.cuda and prepared.wants_gpu() and prepared.model:
        vram, source = running.vram()
        paths = [prepared.model.path] + ([prepared.draft.path] if prepared.draft else [])
        weights = gpu_weights_bytes(paths)
    return OffloadEvidence(
        report, prepared.devices, vram, weights, draft_loaded(text), vram_source=source
    )


def prepare(config: Config, name: str, *, progress: Progress = _quiet) -> PreparedProfile:
    profile = get_profile(config, name)
    if profile.url is not None:
        check_answers(profile.url, name)
        identity = read_identity(profile.url)
        progress(f"profile {name}: {identity.label()} (not started by watchkeeper)")
        return PreparedProfile(
            name, profile, None, None, None, None, external_url=profile.url, identity=identity
        )
    external = config.server.resolved_external_url()
    if external:
        return PreparedProfile(name, profile, None, None, None, None, external_url=external)
    binary = ensure_binary(config.server, progress=progress)
    models = ModelStore(config, progress=progress)
    model = models.ensure(profile.model)
    draft = models.ensure(profile.draft_model) if profile.draft_model else None
    info = read_help(binary, config.server.resolved_cache_dir())
    prepared = PreparedProfile(name, profile, binary, model, draft, info)
    if prepared.cuda and prepared.wants_gpu():
        devices = parse_devices(binary)
        prepared = replace(prepared, devices=devices)
        # An empty list is refused here, in seconds, before any server starts.
        verify_offload(profile, OffloadEvidence(OffloadReport(None, None), devices), cuda=True)
        progress(f"profile {name}: GPU {', '.join(d.description for d in devices)}")
    notes = prepared.args(port=8080).notes  # builds the argv once to fail early on bad flags
    for note in notes:
        progress(f"profile {name}: {note}")
    return prepared


def parse_devices(binary: ServerBinary) -> tuple[ListedDevice, ...]:
    text = list_devices_text(binary)
    try:
        return parse_list_devices(text)
    except ValueError as exc:
        raise ServerError(
            f"{binary.path} --list-devices printed no device list: {text.strip()[:200]}"
        ) from exc


def start(config: Config, prepared: PreparedProfile, *, log_path: Path) -> RunningServer:
    """Start a prepared (managed) profile's server and check its GPU offload: the one way a
    server is started, for the bench, the nightly and the soak alike, so none of them measures
    a server that got less offload than its profile asked for. The caller stops it
    (`running.managed.stop()`); on any error here nothing is left running."""
    assert prepared.binary is not None and not prepared.external_url
    explicit = config.server.port
    attempts = 1 if explicit else 3
    last_error: ServerError | None = None
    for _ in range(attempts):
        port = explicit or free_port()
        before = gpu.memory_used_bytes() if prepared.cuda else None
        argv = prepared.args(port).argv
        server = ManagedServer(
            argv, port=port, log_path=log_path, startup_timeout_s=config.server.startup_timeout_s
        )
        try:
            server.start()
        except ServerError as exc:
            # A free port can be taken between our probe and the server's bind (any outgoing
            # connection on this host may be given it as its ephemeral port): try another.
            if explicit or not (exc.port_taken or "bind" in exc.log_tail):
                raise
            last_error = exc
            continue
        running = RunningServer(server.info.base_url, argv, server, vram_before_bytes=before)
        try:
            verdict = verify_offload(
                prepared.profile,
                offload_evidence(prepared, running),
                cuda=prepared.cuda,
                log_path=log_path,
            )
        except BaseException:
            server.stop()
            raise
        pid = server.info.pid
        fallback = gpu.vram_since(before) if prepared.cuda else None
        monitor = monitor_for(pid, fallback) if prepared.cuda and pid is not None else None
        return replace(running, offload_verdict=verdict, gpu=monitor)
    assert last_error is not None
    raise last_error


def attach(prepared: PreparedProfile) -> RunningServer:
    """An external arm's server, checked that it answers: never started, never stopped."""
    assert prepared.external_url
    if prepared.profile.url is not None:
        check_answers(prepared.external_url, prepared.name)
    else:
        check_external(prepared.external_url)
    return RunningServer(prepared.external_url.rstrip("/"), (), None)


@contextmanager
def serve(config: Config, prepared: PreparedProfile, *, log_path: Path) -> Iterator[RunningServer]:
    if prepared.external_url:
        yield attach(prepared)
        return
    running = start(config, prepared, log_path=log_path)
    assert running.managed is not None
    try:
        yield running
    finally:
        running.stop_monitor()
        running.managed.stop()
