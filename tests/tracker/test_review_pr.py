"""`watchkeeper review-pr`: real git remotes with PR refs, the fake forge, a real paired bench
of head against base on llama-server + SmolLM2, and one sticky comment edited in place."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest
from sqlalchemy import delete
from support.fakeforge import FakeForge, serve
from support.taskfiles import write_taskset
from support.trackerkit import TOKEN_ENV, Sleeps, tracker_config

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.commands.review_pr import review_pr_command
from watchkeeper.config import BenchConfig, Config, DatabaseConfig, ServerConfig
from watchkeeper.config.requests import ReviewPrRequest
from watchkeeper.config.tracker import ReviewConfig
from watchkeeper.errors import ReviewError
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.store.schema import PrReview
from watchkeeper.tracker import escape
from watchkeeper.tracker.forge import PullRequest
from watchkeeper.tracker.pr_comment import ProfileReview, review_comment, review_marker

GOLDEN = Path(__file__).parents[1] / "golden" / "pr_comment.md"
BASE_TOML = '[profiles.prod]\nmodel = "smollm2-135m-instruct-q4_1"\nctx_size = 1024\n'
NGRAM_TOML = BASE_TOML + 'spec_type = "ngram-simple"\n'
BRIEF_TASKS = [
    ("brief-01", "Write two sentences about a planned database maintenance window."),
    ("brief-02", "Explain in two sentences why a cache can make a web page faster."),
]
"""The review's two tasks: 40-token answers instead of the standard set's first two (128 tokens
each, on six measured servers and two exact identity passes): the sticky-comment test went from
100 s to 37 s (2026-11-29, quiet)."""


class Upstream:
    """A bare remote as the forge would host it, and a clone to push branches and PR refs."""

    def __init__(self, root: Path) -> None:
        self.bare = git.Repo.init(root / "remote.git", bare=True, initial_branch="main")
        self.work = git.Repo.clone_from(str(root / "remote.git"), root / "work")
        with self.work.config_writer() as cw:
            cw.set_value("user", "name", "dev")
            cw.set_value("user", "email", "dev@example.com")
        self.commit("watchkeeper.toml", BASE_TOML, "initial profiles", branch="main")
        self.base = self.work.head.commit.hexsha

    def commit(self, path: str, text: str, message: str, *, branch: str) -> str:
        if branch not in [h.name for h in self.work.heads]:
            self.work.git.checkout("-b", branch)
        else:
            self.work.git.checkout(branch)
        (Path(self.work.working_dir) / path).write_text(text, encoding="utf-8")
        self.work.index.add([path])
        self.work.index.commit(message)
        self.work.git.push("origin", f"HEAD:refs/heads/{branch}", "--force")
        return self.work.head.commit.hexsha

    def pr_ref(self, number: int) -> None:
        self.work.git.push("origin", f"HEAD:refs/pull/{number}/head", "--force")


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    return Upstream(tmp_path)


@pytest.fixture
def gh(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeForge]:
    fake = FakeForge("github")
    monkeypatch.setenv(TOKEN_ENV, fake.token)
    with serve(fake) as served:
        yield served


def make_config(forge: FakeForge, upstream: Upstream, tmp_path: Path, **server: Any) -> Config:
    return Config(
        database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'wk.db'}"),
        server=ServerConfig(**server),
        bench=BenchConfig(reports_dir=str(tmp_path / "reports")),
        tracker=tracker_config(forge),
        review=ReviewConfig(
            clone_url=str(Path(upstream.bare.git_dir)),
            taskset=str(write_taskset(tmp_path, BRIEF_TASKS, max_tokens=40)),
            checkout_dir=str(tmp_path / "checkouts"),
            per_category=0,
            rounds=3,
            max_rounds=3,  # the pilot is the whole review here: sizing is tested on its own
            warmup_rounds=0,
        ),
    )


def open_pr(forge: FakeForge, upstream: Upstream, text: str, files: list[str]) -> int:
    head = upstream.commit("watchkeeper.toml", text, "change profiles", branch="feature")
    number = forge.add_pull("Tune the server", "feature", head, upstream.base, files)
    upstream.pr_ref(number)
    return number


def bot_comments(forge: FakeForge, number: int) -> list[dict[str, Any]]:
    return [c for c in forge.comments_on(number) if c["user"] == forge.bot]


def test_a_pr_is_benchmarked_head_against_base_once_per_head_and_the_comment_is_sticky(
    gh: FakeForge, upstream: Upstream, tmp_path: Path, real_server: tuple[ServerBinary, ModelFile]
) -> None:
    binary, _ = real_server
    config = make_config(gh, upstream, tmp_path, binary=str(binary.path))
    number = open_pr(gh, upstream, NGRAM_TOML, ["watchkeeper.toml"])

    first = review_pr_command(config, ReviewPrRequest(pr=number), sleep=Sleeps())
    (r,) = first.reviews
    assert r.status == "reviewed", r.detail
    (comment,) = bot_comments(gh, number)
    body = comment["body"]
    assert escape.has_marker(body, review_marker(number))
    assert f"head `{r.head_sha[:10]}` against base `{upstream.base[:10]}`" in body
    assert "#### Speed-up (decode tok/s, head / base)" in body and "| prod | all |" in body
    assert "#### Identical output" in body and "#### Method" in body
    assert "2 tasks" in body and "3 measured round(s)" in body
    db = Database(config.database.url)
    with db.session() as s:
        (row,) = s.query(PrReview).all()
        assert (row.status, row.head_sha, row.comment_id) == ("posted", r.head_sha, comment["id"])
        assert row.campaign_id is not None
    db.close()

    again = review_pr_command(config, ReviewPrRequest(all_open=True), sleep=Sleeps())
    assert [x.status for x in again.reviews] == ["skipped"]
    assert len(bot_comments(gh, number)) == 1

    head2 = upstream.commit(
        "watchkeeper.toml", NGRAM_TOML + "draft_n_max = 8\n", "longer drafts", branch="feature"
    )
    upstream.pr_ref(number)
    gh.update_pull(number, head2)
    pushed = review_pr_command(config, ReviewPrRequest(all_open=True), sleep=Sleeps())
    assert [x.status for x in pushed.reviews] == ["reviewed"]
    (comment,) = bot_comments(gh, number)  # edited in place, not a second comment
    assert f"head `{head2[:10]}`" in comment["body"]
    assert gh.requests("PATCH", "/issues/comments/") == 1
    db = Database(config.database.url)
    assert History(db).pending_campaigns() == []  # reviews are not nights for the detector
    db.close()
    # The scratch folder (worktrees/pr1-<pid>) goes too, not only the worktrees inside it.
    assert not list((tmp_path / "checkouts").glob("*/worktrees/*"))


def test_prs_touching_no_watched_path_are_left_alone(
    gh: FakeForge, upstream: Upstream, tmp_path: Path
) -> None:
    config = make_config(gh, upstream, tmp_path)
    number = open_pr(gh, upstream, BASE_TOML + "# comment only\n", ["README.md", "docs/x.md"])
    outcome = review_pr_command(config, ReviewPrRequest(all_open=True), sleep=Sleeps())
    assert [(x.number, x.status) for x in outcome.reviews] == [(number, "not relevant")]
    assert gh.comments_on(number) == []


def test_identical_profiles_are_not_benchmarked_and_a_lost_row_still_finds_the_comment(
    gh: FakeForge, upstream: Upstream, tmp_path: Path
) -> None:
    config = make_config(gh, upstream, tmp_path)
    text = BASE_TOML + "# only a comment changed\n"
    number = open_pr(gh, upstream, text, ["watchkeeper.toml", "systemd/llama.service"])
    gh.add_comment(number, "Looks fine to me", "alice")
    (r,) = review_pr_command(config, ReviewPrRequest(pr=number), sleep=Sleeps()).reviews
    assert r.status == "reviewed"
    (comment,) = bot_comments(gh, number)
    assert "no profile differs between base and head" in comment["body"]
    assert "prod: identical on both sides" in comment["body"]
    db = Database(config.database.url)
    with db.session() as s:  # the database forgets the review (a new agent, a restore)
        s.execute(delete(PrReview))
    db.close()
    head2 = upstream.commit("watchkeeper.toml", text + "# again\n", "again", branch="feature")
    upstream.pr_ref(number)
    gh.update_pull(number, head2)
    review_pr_command(config, ReviewPrRequest(pr=number), sleep=Sleeps())
    (comment,) = bot_comments(gh, number)
    assert f"head `{head2[:10]}`" in comment["body"]
    assert len(gh.comments_on(number)) == 2  # alice's and ours


def test_a_head_commit_missing_from_the_remote_is_a_review_error(
    gh: FakeForge, upstream: Upstream, tmp_path: Path
) -> None:
    config = make_config(gh, upstream, tmp_path)
    number = gh.add_pull("ghost", "nowhere", "f" * 40, upstream.base, ["watchkeeper.toml"])
    with pytest.raises(ReviewError, match="could not fetch nowhere|not in nowhere"):
        review_pr_command(config, ReviewPrRequest(pr=number), sleep=Sleeps())
    db = Database(config.database.url)
    with db.session() as s:
        (row,) = s.query(PrReview).all()
        assert row.status == "failed" and row.error
    db.close()


def test_a_review_that_fails_inside_its_worktrees_leaves_no_scratch_folder(
    gh: FakeForge, upstream: Upstream, tmp_path: Path
) -> None:
    config = make_config(gh, upstream, tmp_path)
    number = open_pr(gh, upstream, "[profiles.prod\nbroken", ["watchkeeper.toml"])
    with pytest.raises(ReviewError, match="head: watchkeeper.toml: cannot read it"):
        review_pr_command(config, ReviewPrRequest(pr=number), sleep=Sleeps())
    assert list((tmp_path / "checkouts").glob("*/worktrees")), "the review never got that far"
    assert not list((tmp_path / "checkouts").glob("*/worktrees/*"))


def test_the_pr_comment_matches_the_golden_file(result: BenchResult) -> None:
    pr = PullRequest(42, "Enable drafting", "open", "https://forge/pr/42", "1234567890abcdef" * 2 + "12345678",
                     "feature", "fedcba0987654321" * 2 + "87654321", "main")  # fmt: skip
    reviews = [
        ProfileReview("prod", result),
        ProfileReview("batch", None, "identical on both sides"),
    ]
    text = review_comment(pr, reviews, ["watchkeeper.toml", "systemd/llama-server.service"])
    if os.environ.get("WATCHKEEPER_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")
    assert "**⚠️ head regresses**" in text  # the ngram arm has a mismatch


def test_review_rounds_are_sized_for_the_ci_target_within_the_budget() -> None:
    from watchkeeper.analysis.stats import RatioCI
    from watchkeeper.commands.review_pr import size_rounds

    def pilot(low: float, high: float) -> RatioCI:
        return RatioCI(1.0, low, high, 24, 6, 4, verdict="inconclusive")

    def sized(low: float, high: float, budget_s: float, max_rounds: int = 30) -> tuple[int, str]:
        return size_rounds(
            pilot(low, high),
            pilot_rounds=4,
            pilot_s=40,
            target=0.03,
            max_rounds=max_rounds,
            budget_s=budget_s,
        )

    # +-3% already: the pilot is enough.
    assert sized(0.98, 1.02, 3000)[0] == 4
    # +-6%: four times the pilot's rounds (16 in all, the pilot's 4 included) fit the budget.
    rounds, note = sized(1 / 1.06, 1.06, 3000)
    assert rounds in (16, 17) and "stopped short" not in note
    # The same with 60 s left (10 s a round): 6 more, and the comment says it stopped short.
    rounds, note = sized(1 / 1.06, 1.06, 60)
    assert rounds == 10 and "stopped short of the" in note
    # review.max_rounds caps it the same way.
    rounds, note = sized(1 / 1.06, 1.06, 3000, max_rounds=8)
    assert rounds == 8 and "stopped short" in note
    # No CI from the pilot (too few tasks): nothing to size from, and it says so.
    rounds, note = size_rounds(
        None, pilot_rounds=4, pilot_s=40, target=0.03, max_rounds=30, budget_s=3000
    )
    assert rounds == 4 and "not sized" in note
