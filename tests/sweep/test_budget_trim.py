"""Before round 1 a sweep whose one round of every arm cannot fit its budget drops the knob
settings (campaign/budget_trim.py) instead of passing it: the default Qwen sweep planned
5.9 min over and ran 43 min against its 40 (7 Dec, 15 arms; 16 with the A/A control).

The fixtures are test_round_price's hand-checkable ones, rebuilt here (test modules do not
import each other): four tasks, a round of base, ngram and draft 131.7 s, and the exact
probes priced task by task."""

from __future__ import annotations

from datetime import UTC, datetime

from watchkeeper.analysis.racing_types import RaceArm, RaceSettings
from watchkeeper.campaign.budget_trim import plan_active
from watchkeeper.campaign.calibration import Calibration, DraftCost, VerifyCost
from watchkeeper.campaign.racer import EXACT_PROBE_SHARE, Racer
from watchkeeper.load.records import RequestSample, RunResult, Task

T0 = datetime(2026, 12, 7, tzinfo=UTC)
COSTS = Calibration(
    {"ngram": DraftCost(0.0), "draft": DraftCost(0.5)},
    {"ngram": VerifyCost(49, 8.8), "draft": VerifyCost(17, 4.0)},
)


def _task(tid: str, cat: str, text_chars: int) -> Task:
    return Task(tid, cat, ({"role": "user", "content": "a" * text_chars},), 100)


WARM = _task("prose-1", "prose", 367)
TASKS = [WARM, _task("prose-2", "prose", 367), _task("code-1", "code", 1567)]
TASKS.append(_task("code-2", "code", 1567))


def _warm(arm: str, decode_ms: float) -> RunResult:
    latency = (1000.0 + 50 * decode_ms) / 1000 + 0.1
    s = RequestSample(
        WARM.id, "prose", 0, T0, latency_s=latency, prompt_tokens=100, prompt_ms=1000.0,
        completion_tokens=50, predicted_ms=50 * decode_ms, draft_n=40 if arm == "draft" else None,
        draft_n_accepted=20 if arm == "draft" else None,
    )  # fmt: skip
    return RunResult(arm, arm, 0, True, 1, T0, T0, (s,), ())


RUNS = [_warm("base", 100.0), _warm("ngram", 90.0), _warm("draft", 180.0)]


def _racer(budget_s: float, trim: tuple[str, ...], said: list[str]) -> Racer:
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0), RaceArm("draft", 4.0)]
    racer = Racer(
        arms, RaceSettings(seed=3), budget_s=budget_s, clock=lambda: 0.0,
        progress=said.append, probe_share=EXACT_PROBE_SHARE, trim=trim,
    )  # fmt: skip
    racer.probe_count, racer.probe_fraction = 1, 1 / 4
    racer.costs = COSTS
    racer.probe_tasks = lambda: (TASKS[2],)
    return racer


def _plan(racer: Racer) -> list[str]:
    return list(plan_active(racer, RUNS, 4, [(t.id, t.category) for t in TASKS], TASKS))


def test_a_budget_one_round_of_every_arm_passes_drops_the_trim_arms_until_it_fits() -> None:
    said: list[str] = []
    untrimmed = _racer(150.0, (), [])
    assert _plan(untrimmed) == ["base", "ngram", "draft"]
    assert untrimmed.plan is not None and untrimmed.plan.rounds == 0  # passes its budget
    racer = _racer(150.0, ("draft",), said)
    assert _plan(racer) == ["base", "ngram"]
    assert racer.plan is not None and racer.plan.rounds >= 1
    (drop,) = racer.state.drops
    assert (drop.arm, drop.round, drop.rule) == ("draft", 0, "budget")
    assert "one round of every arm does not fit the budget" in drop.reason
    assert said[0] == "race: dropped draft before round 1 (budget)"
    assert said[-1].startswith("race plan: CIs over rounds") and "1 round(s) fit" in said[-1]
    assert sum(line.startswith("race plan") for line in said) == 1  # one decision printed


def test_a_plan_that_fits_drops_nothing_and_an_arm_not_named_is_never_dropped() -> None:
    roomy = _racer(3000.0, ("draft",), [])
    assert _plan(roomy) == ["base", "ngram", "draft"] and roomy.state.drops == ()
    tight = _racer(1.0, ("draft",), [])  # nothing fits: only the named arm goes
    assert _plan(tight) == ["base", "ngram"]
    assert [d.arm for d in tight.state.drops] == ["draft"]
