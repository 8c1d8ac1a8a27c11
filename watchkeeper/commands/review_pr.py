"""`watchkeeper review-pr`: a paired A/B bench of a PR's head against its base, as one sticky
comment on the PR.

For each open PR into `review.base_branch` whose changed files match `review.paths`: skip it
when the database says it was already reviewed at its current head SHA; otherwise claim it
(one agent per PR and head), check out base and head as scratch worktrees, read
`review.profiles_file` on each side, and bench every profile whose definition differs, the
base's as baseline and the head's as candidate, through the same `execute_bench` the nightly
bench uses. The comment is found again by its hidden marker (or the stored comment id) and
edited in place, so a PR carries one review however often it is pushed.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import socket
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from watchkeeper.analysis.benchmark import ALL, BenchResult, throughput_pairs
from watchkeeper.analysis.stats import RatioCI, paired_speedup
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.bench_report import finish_with_report
from watchkeeper.config import Config, ModelConfig, ProfileConfig
from watchkeeper.config.base import NAME_PATTERN
from watchkeeper.config.inputs import parse_toml_text, read_text
from watchkeeper.config.requests import ReviewPrRequest
from watchkeeper.errors import ReviewError, TrackerError, TrackerPermanentError, WatchkeeperError
from watchkeeper.load.records import RunResult
from watchkeeper.load.sampling import SamplingSettings, command_sampling
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.history import History
from watchkeeper.store.tracker_store import TrackerStore
from watchkeeper.tracker import escape
from watchkeeper.tracker.checkout import Mirror
from watchkeeper.tracker.forge import Forge, PullRequest
from watchkeeper.tracker.pr_comment import ProfileReview, review_comment, review_marker, verdict
from watchkeeper.tracker.tokens import forge_for

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class PrOutcome:
    number: int
    head_sha: str
    status: str
    """reviewed, skipped, not relevant, busy, failed."""
    detail: str
    comment_url: str = ""


@dataclass(slots=True)
class ReviewOutcome:
    reviews: list[PrOutcome] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "reviews": [
                {
                    "number": r.number,
                    "head_sha": r.head_sha,
                    "status": r.status,
                    "detail": r.detail,
                    "comment_url": r.comment_url,
                }
                for r in self.reviews
            ]
        }


@dataclass(frozen=True, slots=True)
class Side:
    profiles: dict[str, ProfileConfig]
    models: dict[str, ModelConfig]


def load_side(root: Path, rel: str, side: str) -> Side:
    """The profiles (and pinned models) one side of the PR defines, namespaced by side so that
    base and head can both be loaded into one config."""
    path = root / rel
    if not path.exists():
        return Side({}, {})
    try:  # a PR's file is hostile input: a symlink to /dev/zero is refused unread
        data = parse_toml_text(read_text(path, f"{side}: {rel}", ReviewError, limit=1 << 20))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ReviewError(f"{side}: {rel}: cannot read it ({exc})") from exc
    except RecursionError:
        raise ReviewError(f"{side}: {rel}: cannot read it (nested too deeply)") from None
    try:
        models = {
            name: ModelConfig.model_validate(value)
            for name, value in (data.get("models") or {}).items()
        }
        profiles = {
            name: ProfileConfig.model_validate(value)
            for name, value in (data.get("profiles") or {}).items()
        }
    except ValidationError as exc:
        raise ReviewError(f"{side}: {rel}: {exc.errors()[0]['msg']}") from exc
    bad = [n for n in (*models, *profiles) if not re.fullmatch(NAME_PATTERN, n)]
    if bad:  # a name becomes a file name (its server log): no `../`
        raise ReviewError(f"{side}: {rel}: {bad[0]!r} is not a name (letters, digits, . _ + -)")
    renamed_models = {
        f"{side}-{name}": m.model_copy(
            update={"path": str((root / Path(m.path).expanduser()).resolve())}
        )
        for name, m in models.items()
    }

    def ref(name: str | None) -> str | None:
        return f"{side}-{name}" if name in models else name

    renamed = {
        name: p.model_copy(update={"model": ref(p.model), "draft_model": ref(p.draft_model)})
        for name, p in profiles.items()
    }
    return Side(renamed, renamed_models)


def _fingerprint(profile: ProfileConfig, models: dict[str, ModelConfig]) -> str:
    """What the profile runs: its fields with side names replaced by the pinned files."""
    pins = {n: (m.path, m.sha256) for n, m in models.items()}
    payload = profile.model_dump(exclude={"description"})
    payload["model"] = pins.get(profile.model, profile.model)
    payload["draft_model"] = pins.get(profile.draft_model or "", profile.draft_model)
    return repr(sorted(payload.items()))


def review_bench(
    config: Config,
    db: Database,
    name: str,
    base: Side,
    head: Side,
    progress: Progress,
    sampling: SamplingSettings | None = None,
) -> BenchResult:
    """Profile `name` of the base (baseline) against the head (candidate) at `sampling` (None:
    the config's [bench] keys), sized for the CI
    target: a pilot of ``review.rounds``, then, on the same servers, as many more rounds as
    the pilot's CI width asks for and the time budget allows (see `size_rounds`)."""
    review = config.review
    profiles = {f"base-{name}": base.profiles[name], f"head-{name}": head.profiles[name]}
    config = config.model_copy(
        update={
            "profiles": {**config.profiles, **profiles},
            "models": {**config.models, **base.models, **head.models},
        }
    )
    taskset = Path(review.taskset) if review.taskset else config.bench.resolved_taskset()
    tasks = select(
        load_taskset(taskset),
        limit=review.limit or None,
        per_category=review.per_category or None,
    )
    started = time.monotonic()
    notes: list[str] = []
    seed = sampling.seed if sampling is not None else config.bench.seed

    def more_rounds(runs: Sequence[RunResult], pilot_s: float) -> int:
        pairs = throughput_pairs(runs, f"base-{name}", f"head-{name}").get(ALL, [])
        pilot = paired_speedup(
            pairs,
            seed=seed,
            threshold=config.bench.min_effect,
        )
        rounds, note = size_rounds(
            pilot,
            pilot_rounds=review.rounds,
            pilot_s=pilot_s,
            target=review.ci_half_width,
            max_rounds=review.max_rounds,
            budget_s=review.max_minutes * 60.0 - (time.monotonic() - started),
        )
        notes.append(note)
        if rounds > review.rounds:
            progress(f"{name}: {note}")
        return rounds - review.rounds

    plan = BenchPlan(
        profiles=tuple(profiles),
        tasks=tuple(tasks),
        rounds=review.rounds,
        warmup_rounds=review.warmup_rounds,
        warmup_tasks=min(2, len(tasks)),
        concurrency=config.bench.concurrency,
        more_rounds=more_rounds,
        restart_every=config.bench.restart_every,
        sampling=sampling,
    )
    result = execute_bench(config, plan, kind="review", progress=progress, database=db)
    result = replace(result, extras={**result.extras, "sizing": "; ".join(notes)})
    result = finish_with_report(config, result, progress=progress, database=db)
    # A review is not a night: keep it out of the regression detector's judging.
    History(db).mark_analysed(result.campaign_id, {"skipped": "pull request review"})
    return result


@dataclass
class _Review:
    config: Config
    forge: Forge
    store: TrackerStore
    db: Database
    progress: Progress
    owner: str
    sampling: SamplingSettings

    def bench_pair(self, name: str, base: Side, head: Side) -> BenchResult:
        return review_bench(self.config, self.db, name, base, head, self.progress, self.sampling)

    def measure(self, pr: PullRequest) -> list[ProfileReview]:
        review = self.config.review
        root = review.resolved_checkout_dir(self.config.server.resolved_cache_dir())
        root = root / self.forge.repository.replace("/", "-")
        mirror = Mirror(root, review.clone_url)
        mirror.fetch()
        for sha, ref in ((pr.base_sha, pr.base_ref), (pr.head_sha, pr.head_ref)):
            if not mirror.has(sha):
                mirror.fetch_ref(ref)
            if not mirror.has(sha):
                raise ReviewError(f"PR #{pr.number}: commit {sha[:12]} is not in {ref}")
        scratch = root / "worktrees" / f"pr{pr.number}-{os.getpid()}"
        try:
            return self._measure_in(mirror, pr, scratch)
        finally:
            # The worktrees go with their context managers; their folder must go too.
            shutil.rmtree(scratch, ignore_errors=True)

    def _measure_in(self, mirror: Mirror, pr: PullRequest, scratch: Path) -> list[ProfileReview]:
        review = self.config.review
        with (
            mirror.worktree(pr.base_sha, scratch / "base") as base_dir,
            mirror.worktree(pr.head_sha, scratch / "head") as head_dir,
        ):
            base = load_side(base_dir, review.profiles_file, "base")
            head = load_side(head_dir, review.profiles_file, "head")
            names = review.profiles or sorted(set(base.profiles) | set(head.profiles))
            out = []
            for name in names:
                if name not in base.profiles or name not in head.profiles:
                    where = "head" if name in head.profiles else "base"
                    out.append(ProfileReview(name, None, f"defined only on the {where} side"))
                    continue
                same = _fingerprint(base.profiles[name], base.models) == _fingerprint(
                    head.profiles[name], head.models
                )
                if same:
                    out.append(ProfileReview(name, None, "identical on both sides"))
                    continue
                self.progress(f"PR #{pr.number}: benchmarking {name}, head against base")
                out.append(ProfileReview(name, self.bench_pair(name, base, head)))
        return out

    def post(self, pr: PullRequest, body: str, comment_id: int | None) -> tuple[int, str]:
        """Edit the sticky comment (stored id, else found by marker), or create it."""
        if comment_id is not None:
            try:
                c = self.forge.edit_comment(comment_id, body)
                return c.id, c.url
            except TrackerPermanentError as exc:
                if exc.status != 404:  # deleted by someone: look again, else create
                    raise
        token, me = review_marker(pr.number), self.forge.whoami()
        for c in self.forge.comments(pr.number):
            if escape.has_marker(c.body, token) and c.author == me:
                edited = self.forge.edit_comment(c.id, body)
                return edited.id, edited.url
        made = self.forge.comment(pr.number, body)
        return made.id, made.url

    def review(self, pr: PullRequest) -> PrOutcome:
        review = self.config.review
        files = self.forge.pull_files(pr.number)
        matched = [f for f in files if any(fnmatch(f, pat) for pat in review.paths)]
        if not matched:
            return PrOutcome(pr.number, pr.head_sha, "not relevant", "no watched path changed")
        state = self.store.review(pr.number)
        if state is not None and state.head_sha == pr.head_sha and state.status == "posted":
            return PrOutcome(pr.number, pr.head_sha, "skipped", "already reviewed at this head")
        lease = self.config.tracker.claim_lease_s
        if not self.store.claim_review(
            pr.number, head_sha=pr.head_sha, base_sha=pr.base_sha, owner=self.owner, lease_s=lease
        ):
            return PrOutcome(pr.number, pr.head_sha, "busy", "another run is reviewing it")
        try:
            reviews = self.measure(pr)
            body = review_comment(pr, reviews, matched)
            comment_id, url = self.post(pr, body, state.comment_id if state else None)
        except WatchkeeperError as exc:
            self.store.finish_review(pr.number, status="failed", error=str(exc)[:2000])
            raise
        campaigns = [r.result.campaign_id for r in reviews if r.result is not None]
        line = verdict(reviews)
        self.store.finish_review(
            pr.number,
            status="posted",
            comment_id=comment_id,
            campaign_id=campaigns[0] if campaigns else None,
            verdict=line[:2000],
            error=None,
        )
        self.progress(f"PR #{pr.number}: {line}")
        return PrOutcome(pr.number, pr.head_sha, "reviewed", line, url)


def review_pr_command(
    config: Config,
    request: ReviewPrRequest,
    *,
    progress: Progress = _quiet,
    client: Forge | None = None,
    sleep: Callable[[float], None] = time.sleep,
    database: Database | None = None,
) -> ReviewOutcome:
    """Review one PR (`request.pr`) or every matching open PR (at most review.max_prs: without
    `pr`, as a review-pr job asks; the CLI asks for `--all-open` by name), its sampler (over
    the config's [bench] keys) resolved here once. ``client`` and ``sleep`` stand in for the
    forge in tests."""
    if request.pr is not None and request.all_open:
        raise ReviewError("review-pr takes pr=N or all_open, not both")
    pr = request.pr
    sampling = command_sampling(config, given=request.sampler())
    repository = config.review.repository or config.tracker.repository
    outcome = ReviewOutcome()
    with (
        forge_for(config.tracker, client=client, repository=repository, sleep=sleep) as forge,
        open_database(config.database.resolved_url(), given=database) as db,
    ):
        run = _Review(
            config=config,
            forge=forge,
            store=TrackerStore(db, tracker=forge.kind, repository=forge.repository),
            db=db,
            progress=progress,
            owner=f"{socket.gethostname()[:40]}:{os.getpid()}",
            sampling=sampling,
        )
        if pr is not None:
            pulls = [forge.pull(pr)]
            if pulls[0].state != "open":
                raise ReviewError(f"PR #{pr} is {pulls[0].state}, not open")
        else:
            base = config.review.base_branch
            pulls = [p for p in forge.open_pulls() if p.base_ref == base]
        benched = 0
        for p in pulls:
            if benched >= config.review.max_prs:
                outcome.reviews.append(
                    PrOutcome(p.number, p.head_sha, "busy", "left for the next run (max_prs)")
                )
                continue
            try:
                result = run.review(p)
            except TrackerError:
                raise
            except WatchkeeperError as exc:
                if pr is not None:
                    raise
                result = PrOutcome(p.number, p.head_sha, "failed", str(exc))
            benched += result.status in ("reviewed", "failed")
            outcome.reviews.append(result)
        return outcome


def size_rounds(
    pilot: RatioCI | None,
    *,
    pilot_rounds: int,
    pilot_s: float,
    target: float,
    max_rounds: int,
    budget_s: float,
) -> tuple[int, str]:
    """Total rounds (the pilot's included) whose CI half-width should reach ``target``, and
    what the comment says about it.

    The half-width shrinks about with the square root of the rounds, so the pilot's width says
    how many are needed; the rounds beyond the pilot must fit ``budget_s`` at the pilot's pace.
    Two reviews of the same code once read 0.91x "regresses" and 1.22x "faster" at three
    rounds: a comment must either reach the target or say that it did not."""
    half = pilot.half_width if pilot is not None else None
    if half is None:
        return pilot_rounds, f"no CI after the {pilot_rounds}-round pilot: not sized"
    if half <= target:
        return (
            pilot_rounds,
            f"CI half-width {half:.1%} after {pilot_rounds} rounds (target {target:.0%})",
        )
    needed = math.ceil(pilot_rounds * (half / target) ** 2)
    per_round_s = pilot_s / pilot_rounds if pilot_rounds else 0.0
    affordable = pilot_rounds + (int(budget_s // per_round_s) if per_round_s > 0 else needed)
    rounds = max(pilot_rounds, min(needed, max_rounds, affordable))
    note = (
        f"pilot CI half-width {half:.1%} after {pilot_rounds} rounds; {rounds} rounds in all "
        f"for a {target:.0%} target"
    )
    if rounds < needed:
        note += (
            f" (stopped short of the {needed} it needs: the time budget or review.max_rounds "
            "allows no more)"
        )
    return rounds, note
