"""The soak's temperature-0 probes are judged as the bench judges a divergence: by token ids and
the reference's top-2 logprobs, not by text equality (soak/probes.py).

The negative control is a flip at a near tie (what a probe sharing its batches with three load
requests does on a healthy server); the positive control is a token the reference did not
nearly tie with, which must make the soak unstable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from watchkeeper.config import SoakConfig
from watchkeeper.load.records import Alternative, TokenLogprob
from watchkeeper.soak.probes import judge_probes
from watchkeeper.soak.verdicts import judge
from watchkeeper.soak.views import SoakData, SoakSampleView

T0 = datetime(2026, 11, 27, 23, 58, tzinfo=UTC)
WORDS = ["The", " cat", " sat", " on", " the", " mat", "."]


VOCAB: dict[str, int] = {}


def tok_id(text: str) -> int:
    return VOCAB.setdefault(text, len(VOCAB))


def tok(text: str, *, margin: float = 3.0, runner_up: str = " x") -> TokenLogprob:
    top = (
        Alternative(tok_id(text), text, -0.01),
        Alternative(tok_id(runner_up), runner_up, -0.01 - margin),
    )
    return TokenLogprob(tok_id(text), text, -0.01, top)


def tokens(
    words: list[str], *, tie_at: int | None = None, runner: str = " dog"
) -> tuple[TokenLogprob, ...]:
    return tuple(
        tok(w, margin=0.004 if i == tie_at else 3.0, runner_up=runner if i == tie_at else " x")
        for i, w in enumerate(words)
    )


def probe(
    profile: str,
    conc: int,
    minute: int,
    toks: tuple[TokenLogprob, ...] | None,
    text: str | None = None,
) -> SoakSampleView:
    out = text if text is not None else "".join(t.text for t in toks or ())
    n = len(toks) if toks is not None else 7
    return SoakSampleView(
        profile, conc, True, "prose-01", T0 + timedelta(minutes=minute), 2.0, n, 30.0,
        None, None, None, out, minute, "length", toks,
    )  # fmt: skip


def data(samples: list[SoakSampleView]) -> SoakData:
    return SoakData(1, {}, "completed", (), tuple(samples), (), ())


def test_a_flip_at_a_near_tie_is_consistent_and_the_soak_stays_stable() -> None:
    # At concurrency 4 the probe's batch holds other requests: at token 2 the reference's
    # top-2 were 0.004 nats apart and this probe took the runner-up.
    reference = tokens(WORDS, tie_at=2, runner=" dog")
    flipped = tokens([*WORDS[:2], " dog", " on", " a", " rug", "."])
    samples = [probe("base", 4, 0, reference), probe("base", 4, 5, flipped)]
    samples.append(probe("base", 4, 10, reference))
    (entry,) = judge_probes(samples, near_tie_threshold=0.1)
    c = entry.counts
    assert (c.compared, c.identical, c.near_tie, c.mismatch) == (2, 1, 1, 0)
    verdict = judge(data(samples), SoakConfig(), near_tie_threshold=0.1)
    assert not [r for r in verdict.reasons if "probes" in r]
    # identical means token for token; consistent (near ties counted in) has its own key
    assert verdict.figures.rates.identical == 0.5
    assert verdict.figures.rates.consistent == 1.0


def test_a_token_the_reference_did_not_nearly_tie_with_makes_the_soak_unstable() -> None:
    reference = tokens(WORDS, tie_at=2, runner=" dog")
    # Token 4 differs and the reference was sure of its own (3 nats): a wrong answer, as a
    # corrupted cache or a broken verification would give.
    wrong = [*WORDS[:4], " a", " mat", "."]
    samples = [probe("spec", 1, 0, reference)]
    samples += [probe("spec", 1, m, tokens(wrong)) for m in (5, 10)]
    (entry,) = judge_probes(samples, near_tie_threshold=0.1)
    assert entry.counts.mismatch == 2
    assert entry.first_mismatch is not None and entry.first_mismatch.token == 4
    verdict = judge(data(samples), SoakConfig(), near_tie_threshold=0.1)
    assert any("answered differently 100%" in r and "spec at concurrency 1: 2" in r
               for r in verdict.reasons)  # fmt: skip
    assert not verdict.stable


def test_a_speculating_arm_without_logprobs_is_weighed_by_the_baseline_arms_probe() -> None:
    # llama-server returns no logprobs for drafted tokens: the speculating arm's probes carry
    # text only, so the baseline's complete probe at the same task and concurrency weighs them.
    base = tokens(WORDS, tie_at=5, runner=" rug")
    near = "".join([*WORDS[:5], " rug", "."])
    far = "".join([*WORDS[:3], " under", " the", " mat", "."])
    samples = [
        probe("base", 1, 0, base),
        probe("spec", 1, 1, None, "".join(WORDS)),
        probe("spec", 1, 6, None, near),
        probe("spec", 1, 11, None, far),
    ]
    entries = {e.profile: e for e in judge_probes(samples, near_tie_threshold=0.1)}
    spec = entries["spec"]
    assert spec.reference == "other arm" and spec.reference_profile == "base"
    assert spec.counts.compared == 3
    assert (spec.counts.identical, spec.counts.near_tie, spec.counts.mismatch) == (1, 1, 1)
    assert entries["base"].counts.compared == 0


def test_text_only_probes_with_nothing_to_weigh_them_are_unverified_and_never_a_reason() -> None:
    samples = [
        probe("spec", 1, 0, None, "The cat sat."),
        probe("spec", 1, 5, None, "The cat sat down."),
    ]
    verdict = judge(data(samples), SoakConfig(), near_tie_threshold=0.1)
    assert verdict.figures.probe_totals.unverified == 1
    assert not [r for r in verdict.reasons if "probes" in r]
    assert any("no token data to weigh" in n for n in verdict.notes)
