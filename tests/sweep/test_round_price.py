"""The sweep's round and exact identity pass priced task by task from each task's size
(campaign/round_price.py), not from the warm-up's mean request: campaign 1 (2026-12-07)
priced its round at 24.6 min from two short, cached warm-up prompts and took 31.4.

Hand-checkable fixtures, no server, no clock: a warm-up task of 400 characters as JSON sent
as 100 prompt tokens (0.25 a character), answered to half its 100-token cap at 100 ms a
decode step on the baseline; the calibration's batches of 17 and 49 tokens cost 4.0 and 8.8
decode steps: 0.15 steps (15 ms) a prompt token. A round after the first leaves out the
prefill of the arms whose process the race keeps (the code-edit sweep of 7 Dec priced every
round like round 1 and planned 1 round where 3 ran), and the nightly's exact pass is priced a
probe on both its servers (deliver-set priced that night without it: 12.4 min, took 30.8)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.nights import HOST, MODEL, PROFILE

from watchkeeper.analysis.racing_tasks import plan
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings
from watchkeeper.campaign.calibration import Calibration, DraftCost, VerifyCost
from watchkeeper.campaign.racer import EXACT_PROBE_SHARE, Racer
from watchkeeper.campaign.round_price import (
    EXACT_PREFILL_STEPS,
    pair_probe_s,
    round_price,
    task_chars,
)
from watchkeeper.campaign.sweep_plan import kept_arms
from watchkeeper.commands.sweep import _pair_probe_s as stored_pair_probe_s
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.load.records import RequestSample, RunResult, Task
from watchkeeper.store.db import open_database
from watchkeeper.store.repository import Repository

T0 = datetime(2026, 12, 7, tzinfo=UTC)
COSTS = Calibration(
    {"ngram": DraftCost(0.0), "draft": DraftCost(0.5)},
    {"ngram": VerifyCost(49, 8.8), "draft": VerifyCost(17, 4.0)},
)


def _task(tid: str, cat: str, text_chars: int, cap: int = 100) -> Task:
    """A one-message task of 33 + `text_chars` characters as JSON."""
    return Task(tid, cat, ({"role": "user", "content": "a" * text_chars},), cap)


WARM = _task("prose-1", "prose", 367)  # 400 characters: 100 tokens is 0.25 a character
SHORT = _task("prose-2", "prose", 367)
LONG = _task("code-1", "code", 1567)  # 1600 characters: 400 tokens
TASKS = [WARM, SHORT, LONG, _task("code-2", "code", 1567)]


def _warm(arm: str, *, prompt_ms: float, decode_ms: float, overhead_s: float = 0.1) -> RunResult:
    """One warm-up request of WARM: 100 prompt tokens, 50 of its 100 cap answered."""
    latency = (prompt_ms + 50 * decode_ms) / 1000 + overhead_s
    s = RequestSample(
        WARM.id, "prose", 0, T0, latency_s=latency, prompt_tokens=100, prompt_ms=prompt_ms,
        completion_tokens=50, predicted_ms=50 * decode_ms, draft_n=40 if arm == "draft" else None,
        draft_n_accepted=30 if arm == "draft" else None,
    )  # fmt: skip
    return RunResult(arm, arm, 0, True, 1, T0, T0, (s,), ())


# The baseline's warm-up prompt came from the cache (5 ms for 100 tokens); the others' did not.
RUNS = [
    _warm("base", prompt_ms=5.0, decode_ms=100.0),
    _warm("ngram", prompt_ms=2000.0, decode_ms=90.0),
    _warm("draft", prompt_ms=3000.0, decode_ms=200.0),
]
ARMS = ["base", "ngram", "draft"]


def test_each_task_is_priced_from_its_size_at_the_calibrated_uncached_prefill() -> None:
    """Baseline, LONG: 400 tokens x (0.15 x 100 ms) = 6 s, + 50 x 100 ms = 5 s, + 0.1 s
    overhead = 11.1 s; the draft arm prefills on its draft model too (x 1.5: 9 s) and decodes
    at 200 ms (10 s). The cached 5 ms warm-up prompt priced nothing."""
    assert task_chars(WARM) == 400 and task_chars(LONG) == 1600
    price = round_price(RUNS, TASKS, ARMS, "base", COSTS)
    assert price is not None
    assert (price.tokens_per_char, price.answer_share, price.step_s) == (0.25, 0.5, 0.1)
    assert price.prompt_tokens(LONG) == 400 and price.answer_tokens(LONG) == 50
    assert price.rates["base"].prefill_s == pytest.approx(0.015)
    assert price.rates["draft"].prefill_s == pytest.approx(0.0225)
    assert price.request_s(LONG, "base") == pytest.approx(6.0 + 5.0 + 0.1)
    assert price.request_s(LONG, "ngram") == pytest.approx(6.0 + 4.5 + 0.1)
    assert price.request_s(LONG, "draft") == pytest.approx(9.0 + 10.0 + 0.1)
    assert price.request_s(SHORT, "base") == pytest.approx(1.5 + 5.0 + 0.1)
    assert price.round_s([SHORT, LONG], ARMS) == pytest.approx(
        (1.5 + 5.0 + 0.1) + (1.5 + 4.5 + 0.1) + (2.25 + 10.0 + 0.1) + 11.1 + 10.6 + 19.1
    )
    assert "0.150 decode steps a token (verification batches of 17 and 49 tokens" in price.how


def test_without_a_calibration_a_cached_warm_up_prompt_reads_as_the_median_arms() -> None:
    """Slowest warm-up rates: base 0.05 ms (cached), ngram 20 ms, draft 30 ms a token; the
    median arm's 20 ms floors the baseline's."""
    price = round_price(RUNS, TASKS, ARMS, "base")
    assert price is not None
    rates = {a: r.prefill_s for a, r in price.rates.items()}
    assert rates == pytest.approx({"base": 0.02, "ngram": 0.02, "draft": 0.03})
    assert price.request_s(LONG, "base") == pytest.approx(8.0 + 5.0 + 0.1)


def test_no_timings_price_as_before_and_an_untimed_arm_at_its_mean_request() -> None:
    """A warm-up without timings gives no price (the racer keeps the mean warm-up request);
    one arm without them is priced at its mean warm-up request."""
    bare = [
        RunResult(a, a, 0, True, 1, T0, T0, (RequestSample(WARM.id, "prose", 0, T0, 4.0),), ())
        for a in ARMS
    ]
    assert round_price(bare, TASKS, ARMS, "base", COSTS) is None
    assert round_price(RUNS, [LONG], ARMS, "base", COSTS) is None  # no warm-up task known
    price = round_price([*RUNS[:2], bare[2]], TASKS, ARMS, "base", COSTS)
    assert price is not None and price.rates["draft"].prefill_s is None
    assert price.request_s(LONG, "draft") == 0.0 + price.rates["draft"].fallback_s


def test_an_exact_probe_prefills_a_token_a_pass_and_verifies_a_draft_token_a_step() -> None:
    """At ubatch 1, LONG on the baseline: 400 x 0.8 x 100 ms = 32 s, + 50 x 100 ms + 0.1 s.
    The draft arm's warm-up drafted 40 and accepted 30 of 50 tokens: a token costs 1 + 0.2
    rejected + 0.5 x 0.8 drafted = 1.6 steps (160 ms, below its batched 200 ms: 200), and its
    prompt 1.5x the baseline's (its draft model prefills too). The floor of 2 probes of 50
    tokens replays 50 positions each at a step; each speculative arm 2 divergences a probe."""
    price = round_price(RUNS, TASKS, ARMS, "base", COSTS)
    assert price is not None and EXACT_PREFILL_STEPS == 0.8
    assert price.exact_probe_s("base", 400, 50) == pytest.approx(32.0 + 5.0 + 0.1)
    assert price.exact_decode_s("draft") == pytest.approx(0.2)
    assert price.exact_probe_s("draft", 400, 50) == pytest.approx(48.0 + 10.0 + 0.1)
    # A measured request that drafted 100 of which 20 were accepted, 50 tokens in 4 s (80 ms):
    # 1 + 80/50 + 0.5 x 100/50 = 3.6 steps, 360 ms a token.
    s = RequestSample(
        LONG.id, "code", 0, T0, completion_tokens=50, predicted_ms=4000.0, draft_n=100,
        draft_n_accepted=20,
    )  # fmt: skip
    assert price.exact_decode_s("draft", s) == pytest.approx(0.36)
    assert price.floor_s(2, 50) == pytest.approx(2 * 50 * 0.1)
    probes = [("code-1", 400.0, 50.0), ("code-2", 400.0, 50.0)]
    assert price.exact_pass_s(probes, ["base"]) == pytest.approx(2 * 37.1 + 10.0)
    assert price.exact_pass_s(probes, ["draft"]) == pytest.approx(2 * 58.1 + 2 * 2 * 0.1)


def _racer(budget_s: float, *, clock: list[float], kept: tuple[str, ...] = ()) -> Racer:
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0), RaceArm("draft", 4.0)]
    racer = Racer(
        arms, RaceSettings(seed=3), budget_s=budget_s, clock=iter(clock).__next__,
        progress=lambda _m: None, probe_share=EXACT_PROBE_SHARE, kept=kept,
    )  # fmt: skip
    racer.probe_count, racer.probe_fraction = 1, 1 / 4
    return racer


def test_the_racer_plans_its_round_from_the_tasks_sizes_and_its_probes_by_task() -> None:
    """Four tasks: a round of the three arms is 2 x (6.6 + 6.1 + 12.35) + 2 x (11.1 + 10.6 +
    19.1) = 131.7 s; the mean warm-up request (5.105 + 6.6 + 13.1 s a task, 99.2 s a round)
    priced the same round 25% short. One probe of a code task (its category's mean): 37.1 s
    on the baseline and its floor of 50 positions (5 s), 37.1 s on ngram (its decode at
    ubatch 1 a whole step, not its batched 90 ms) and 2 divergence replays (0.2 s), 58.1 +
    0.2 s on the draft arm: 137.7 s, within a quarter of the 1500 s budget."""
    racer = _racer(1500.0, clock=[0.0, 0.0])
    racer.ceiling(COSTS)
    racer.probe_tasks = lambda: (LONG,)
    got = racer.plan_rounds(RUNS, 4, [(t.id, t.category) for t in TASKS], TASKS)
    assert "~2.2 min a round of every arm" in got.why  # 131.7 s
    assert racer.price is not None
    assert racer.price.round_s(TASKS, ARMS) == pytest.approx(131.7)
    assert "identity probes' reserve (2.3 min)" in got.why  # 137.7 s
    old = _racer(1500.0, clock=[0.0, 0.0]).plan_rounds(RUNS, 4, [])
    assert "~1.7 min a round" in old.why  # 4 x 24.805 s
    # After round 1 the probes are priced from the round's own requests: the baseline's
    # code-1 took a 600-token prompt and 64 answer tokens: 600 x 0.8 x 0.1 + 64 x 0.1 +
    # 0.1 = 54.5 s, and its floor 64 positions x 0.1 s.
    r1 = RequestSample(
        LONG.id, "code", 0, T0, latency_s=20.0, prompt_tokens=600, completion_tokens=64,
        predicted_ms=6400.0, decode_tps_server=10.0,
    )  # fmt: skip
    run = RunResult("base", "base", 1, False, 1, T0, T0, (r1,), ())
    assert racer.probe_seconds([run], ["base"]) == pytest.approx(54.5 + 6.4)


def test_a_later_round_leaves_out_the_prefill_of_kept_arms_only() -> None:
    """Round 1 of the four tasks is 131.7 s; its prefill is 2 x 1.5 + 2 x 6 = 15 s on the
    baseline and on ngram (15 ms a token) and 22.5 s on the draft arm (22.5 ms). A kept
    process restores every prompt from its cache in round 2: base and draft kept, ngram
    renewed each round (a fresh process, every prompt prefilled again), 131.7 - 15 - 22.5."""
    price = round_price(RUNS, TASKS, ARMS, "base", COSTS)
    assert price is not None
    first = price.round_s(TASKS, ARMS)
    assert first == pytest.approx(131.7)
    prefill = {
        a: sum(price.prompt_tokens(t) * (price.rates[a].prefill_s or 0) for t in TASKS)
        for a in ARMS
    }
    assert prefill == pytest.approx({"base": 15.0, "ngram": 15.0, "draft": 22.5})
    kept = {"base", "draft"}
    assert price.later_round_s(TASKS, ARMS, kept) == pytest.approx(first - 15.0 - 22.5)
    assert price.later_round_s(TASKS, ARMS, set(ARMS)) == pytest.approx(first - 52.5)
    assert price.later_round_s(TASKS, ["ngram"], kept) == pytest.approx(
        price.round_s(TASKS, ["ngram"])
    )
    assert price.later_request_s(LONG, "base") == pytest.approx(5.0 + 0.1)  # answer + overhead
    assert price.later_round_s(TASKS, ARMS, ()) == pytest.approx(first)


def test_the_plan_counts_round_1_then_cheaper_later_rounds() -> None:
    """The code-edit sweep of 7 Dec 2026 (9 arms, 8 tasks, 64-token answers): 23.1 min for
    rounds after the reserve; round 1 took 8.7 min, rounds 2 and 3 (six of the nine arms'
    prompts restored) 5.5 and 5.3. Priced like round 1, every round at 8.7: 2 rounds fit, no
    CI; round 1 then 5.5 a round: 3 fit, a CI over rounds after round 3, as the race found."""
    room, reserve = 23.1 * 60, 9.0 * 60
    old = plan(8, 8.7 * 60, room + reserve, reserve_s=reserve)
    assert (old.rounds, old.ci_after) == (2, None)
    assert "~8.7 min a round of every arm" in old.why
    new = plan(8, 8.7 * 60, room + reserve, reserve_s=reserve, later_s=5.5 * 60)
    assert (new.design, new.rounds, new.ci_after) == ("rounds", 3, 3)
    assert "~8.7 min round 1 of every arm and ~5.5 min each round after it" in new.why
    assert (
        "23.1 min for rounds after the identity probes' reserve (9.0 min): 3 round(s) fit"
        in new.why
    )
    # Not even round 1 fits: none, however cheap the later ones.
    assert plan(8, 8.7 * 60, 8 * 60, later_s=60.0).rounds == 0
    assert plan(8, 8.7 * 60, 60 * 60, later_s=60.0, max_rounds=5).rounds == 5


def test_the_racer_plans_three_rounds_where_its_kept_arms_later_rounds_fit() -> None:
    """A 480 s budget: a quarter (120 s) caps the identity reserve, 360 s are left for rounds.
    Round 1 is 131.7 s; with ngram renewed each round and the others kept a later round is
    94.2 s: 131.7 + 2 x 94.2 = 320.1 s, 3 rounds fit. Every round priced like round 1 (no arm
    known to be kept), 2 x 131.7: 2 rounds, no CI."""
    racer = _racer(480.0, clock=[0.0, 0.0], kept=("base", "draft"))
    racer.ceiling(COSTS)
    racer.probe_tasks = lambda: (LONG,)
    got = racer.plan_rounds(RUNS, 4, [(t.id, t.category) for t in TASKS], TASKS)
    assert (got.design, got.rounds, got.ci_after) == ("rounds", 3, 3)
    assert "~2.2 min round 1 of every arm and ~1.6 min each round after it" in got.why
    assert "6.0 min for rounds after the identity probes' reserve (2.0 min): 3 round(s)" in got.why
    before = _racer(480.0, clock=[0.0, 0.0])
    before.ceiling(COSTS)
    before.probe_tasks = lambda: (LONG,)
    old = before.plan_rounds(RUNS, 4, [(t.id, t.category) for t in TASKS], TASKS)
    assert (old.rounds, old.ci_after) == (2, None) and "~2.2 min a round of every arm" in old.why


def test_the_sweep_keeps_every_arm_but_the_renewed_and_those_without_a_prompt_cache() -> None:
    """ngram-mod learns across requests (a fresh process each round); a profile's own
    `--cache-ram 0` turns the host prompt cache off: both prefill every round."""
    model = "qwen2.5-coder-1.5b-instruct-q4_k_m"
    generated = {
        "base": ProfileConfig(model=model),
        "simple": ProfileConfig(model=model, spec_type="ngram-simple"),
        "mod": ProfileConfig(model=model, spec_type="ngram-mod"),
        "nocache": ProfileConfig(model=model, spec_type="ngram-simple", extra_args=["-cram", "0"]),
        "nocache2": ProfileConfig(model=model, extra_args=["--cache-ram=0"]),
        "bigcache": ProfileConfig(model=model, extra_args=["--cache-ram", "16384"]),
    }
    config = Config(profiles=generated)
    assert kept_arms(config, generated) == {"base", "simple", "bigcache"}


def _one(tid: str, arm: str, seq: int) -> RequestSample:
    drafts = (40, 30) if arm == "draft" else (None, None)
    return RequestSample(
        tid, "code", seq, T0, latency_s=20.0, prompt_tokens=400, completion_tokens=50,
        predicted_ms=50 * (200.0 if arm == "draft" else 100.0), draft_n=drafts[0],
        draft_n_accepted=drafts[1],
    )  # fmt: skip


def _pair_runs() -> list[RunResult]:
    """Round 1 of code-1 and code-2 on the baseline and the draft arm."""
    return [
        RunResult(a, a, 1, False, 1, T0, T0, (_one("code-1", a, 0), _one("code-2", a, 1)), ())
        for a in ("base", "draft")
    ]


def test_the_nightlys_exact_pass_is_priced_a_probe_on_both_servers() -> None:
    """The draft arm's round 1: LONG and code-2, 400-token prompts, 50 tokens answered with 40
    drafted and 30 accepted in 10 s: 58.1 s a probe at ubatch 1 (as above). The nightly probes
    each on its reference's server and tonight's (2 x 2 x 58.1), the reference replays its
    floor (2 probes x 50 positions x 0.1 s) and tonight's server its divergences (2 x 2 x 0.1
    s): 242.8 s for the two probes. The baseline's settings draft nothing: no divergences."""
    price = round_price(RUNS, TASKS, ARMS, "base", COSTS)
    assert price is not None
    runs = _pair_runs()
    assert pair_probe_s(price, runs, "draft") == pytest.approx((4 * 58.1 + 10.0 + 0.4) / 2)
    # The baseline: 400 x 0.8 x 0.1 + 50 x 0.1 + 0.1 = 37.1 s a probe, its floor, no replays.
    assert pair_probe_s(price, runs, "base") == pytest.approx((4 * 37.1 + 10.0) / 2)
    assert pair_probe_s(price, runs, "ngram") is None  # no round-1 request of it
    assert pair_probe_s(price, RUNS, "draft") is None  # warm-up runs only


def test_the_sweep_prices_the_pair_probe_from_its_stored_runs(db_url: str) -> None:
    """What deliver-set keeps from the sweep: the chosen arm's pair probe, from the campaign's
    runs as the store gives them back (121.4 s, as above); no race, no price."""
    racer = _racer(1500.0, clock=[0.0, 0.0])
    racer.price = round_price(RUNS, TASKS, ARMS, "base", COSTS)
    runs = _pair_runs()
    with open_database(db_url) as db:
        repo = Repository(db)
        host, model = repo.ensure_host(HOST), repo.ensure_model(MODEL)
        profile = repo.ensure_profile("draft", PROFILE, target_model_id=model, draft_model_id=None)
        campaign = repo.create_campaign(kind="sweep", host_id=host, build_id=None, params={})
        for run in [*RUNS, *runs]:
            repo.save_run(campaign, profile, run)
        assert stored_pair_probe_s(db, campaign, racer, "draft") == pytest.approx(121.4)
        assert stored_pair_probe_s(db, campaign, None, "draft") == 0.0  # no race: not priced


def _round_1(arm: str, tps: float) -> RunResult:
    """Round 1 of the four tasks on `arm`: 10 s a request (40 s), decoding at `tps`."""
    drafts = (None, None) if arm == "base" else (20, 15)
    samples = []
    for i, t in enumerate(TASKS):
        s = RequestSample(
            t.id, t.category, i, T0, latency_s=10.0, prompt_tokens=task_chars(t) // 4,
            completion_tokens=50, predicted_ms=50_000 / tps, decode_tps_server=tps,
            draft_n=drafts[0], draft_n_accepted=drafts[1],
        )  # fmt: skip
        samples.append(s)
    return RunResult(arm, arm, 1, False, 1, T0, T0, tuple(samples), ())


def test_after_round_1_the_next_round_is_priced_at_the_kept_arms_later_share() -> None:
    """Round 1 took 120 s (3 arms x 40 s) and 300 s have passed of 480. Priced as round 1
    again, round 2 (120 s) and the probes' reserve (79.9 s) pass the budget: stop, though
    the plan said 3 rounds fit. Each kept arm's round 2 is its round 1 times its priced later
    share (base 0.576: 15 of its 35.4 s were prefill; draft 0.642), ngram's (renewed) as
    measured: 23.1 + 40 + 25.7 = 88.7 s, and round 2 runs."""
    runs = [*RUNS, _round_1("base", 10.0), _round_1("ngram", 11.0), _round_1("draft", 8.0)]
    go: dict[tuple[str, ...], bool] = {}
    for kept in (("base", "draft"), ()):
        said: list[str] = []
        racer = Racer(
            [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0), RaceArm("draft", 4.0)],
            RaceSettings(seed=3), budget_s=480.0, clock=iter([0.0, 0.0, 300.0]).__next__,
            progress=said.append, probe_share=EXACT_PROBE_SHARE, kept=kept,
        )  # fmt: skip
        racer.probe_count, racer.probe_fraction = 1, 1 / 4
        racer.ceiling(COSTS)
        racer.probe_tasks = lambda: (LONG,)
        racer.plan_rounds(RUNS, 4, [(t.id, t.category) for t in TASKS], TASKS)
        _, go[kept] = racer(runs)
        if kept:
            assert racer.later == pytest.approx(
                {"base": 1 - 15.0 / 35.4, "ngram": 1.0, "draft": 1 - 22.5 / 62.9}
            )
        else:
            assert "another round of 3 arm(s) (~2.0 min)" in racer.stop_reason
    assert go == {("base", "draft"): True, (): False}
