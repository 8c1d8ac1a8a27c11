"""The bisect's search, its decision rule and its resume, on releases whose throughput is known:
the build and the measurement are stand-ins (a real build takes ~7 minutes a release), the
statistics and the state file are the real ones."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from watchkeeper.analysis.stats import Pair, RatioCI
from watchkeeper.errors import ConfigError
from watchkeeper.upgrade.bisect import Bisector, decide
from watchkeeper.upgrade.bisect_state import Built, load_state, start_or_resume

VERSIONS = [f"{9000 + i}.0.0" for i in range(12)]
TASKS = ("a", "b", "c", "d")


def _ci(estimate: float, low: float, high: float) -> RatioCI:
    return RatioCI(estimate, low, high, 12, 4, 3, verdict="slower")


def test_the_decision_rule_is_bad_beyond_good_within_and_more_otherwise() -> None:
    assert decide(_ci(0.80, 0.76, 0.84), 0.03) == "bad"  # all of the CI beyond -3%
    assert decide(_ci(0.99, 0.975, 1.01), 0.03) == "good"  # a slowdown beyond 3% ruled out
    assert decide(_ci(1.20, 1.15, 1.25), 0.03) == "good"  # faster is not the regression
    assert decide(_ci(0.96, 0.93, 0.99), 0.03) == "more"  # straddles the threshold
    assert decide(None, 0.03) == "more"
    too_few = RatioCI(0.5, 0.5, 0.5, 2, 2, 1)  # "insufficient replicates": no CI at all
    assert decide(too_few, 0.03) == "more"


class Releases:
    """Stand-in builds and measurements: decode tok/s per release, with seeded noise."""

    def __init__(self, speed: dict[str, float], noise: float = 0.01, crash_after: int = -1):
        self.speed = speed
        self.noise = noise
        self.crash_after = crash_after
        self.builds: list[str] = []
        self.batches: list[tuple[str, str, int]] = []

    def build(self, version: str) -> Built:
        self.builds.append(version)
        return Built(version, f"/cache/{version}/llama-server", version * 2, 400.0)

    def measure(self, base: Built, cand: Built, rounds: int, first_round: int) -> list[Pair]:
        if self.crash_after == len(self.batches):
            raise KeyboardInterrupt("killed mid-bisect")
        self.batches.append((cand.version, base.version, first_round))
        out = []
        for r in range(first_round, first_round + rounds):
            rng = random.Random(f"{base.version}|{cand.version}|{r}")
            for task in TASKS:
                b = self.speed[base.version] * math.exp(rng.gauss(0, self.noise))
                c = self.speed[cand.version] * math.exp(rng.gauss(0, self.noise))
                out.append(Pair(task, r, b, c))
        return out


def _stepped(first_bad: str, factor: float = 0.7) -> dict[str, float]:
    return {v: 100.0 * (factor if v >= first_bad else 1.0) for v in VERSIONS}


def _bisector(tmp_path: Path, releases: Releases, **kw: int) -> Bisector:
    path = tmp_path / "bisect.json"
    state = start_or_resume(
        path, good=VERSIONS[0], bad=VERSIONS[-1], profile="p", threshold=0.03, versions=VERSIONS
    )
    return Bisector(state, state_path=path, build=releases.build, measure=releases.measure, **kw)


def test_the_search_names_the_first_bad_release_and_its_ratio_against_its_predecessor(
    tmp_path: Path,
) -> None:
    releases = Releases(_stepped("9007.0.0"))
    result = _bisector(tmp_path, releases).run()
    assert result.status == "found"
    assert (result.first_bad, result.last_good, result.tag) == ("9007.0.0", "9006.0.0", "b9007")
    final = result.against_predecessor
    assert final is not None and final.baseline == "9006.0.0" and final.decision == "slower"
    assert final.estimate == pytest.approx(0.7, abs=0.02)
    assert final.high is not None and final.high < 1 / 1.03
    # The ends first, then a binary search: log2(11) ~ 4 midpoints, then the final pair.
    assert result.steps[0].candidate == VERSIONS[-1]
    assert 4 <= len(result.steps) <= 6
    assert len(set(releases.builds)) == len(releases.builds)  # each release built once


def test_a_range_without_a_step_says_no_release_differs(tmp_path: Path) -> None:
    releases = Releases({v: 100.0 for v in VERSIONS})
    result = _bisector(tmp_path, releases).run()
    assert result.status == "no difference" and result.first_bad is None
    assert [s.candidate for s in result.steps] == [VERSIONS[-1]]
    assert sorted(releases.builds) == [VERSIONS[0], VERSIONS[-1]]


def test_an_undecided_step_gets_more_rounds_then_stops_as_inconclusive(tmp_path: Path) -> None:
    # A 3% slowdown with 3% noise: the CI straddles the threshold's edge for a long time.
    speed = {v: 97.0 if v >= "9001.0.0" else 100.0 for v in VERSIONS}
    releases = Releases(speed, noise=0.03)
    result = _bisector(tmp_path, releases, rounds=3, max_rounds=9).run()
    assert result.status == "inconclusive"
    assert result.unresolved == (VERSIONS[0], VERSIONS[-1])
    assert [b[2] for b in releases.batches] == [0, 3, 6]  # batches pool: rounds 0-8
    assert result.steps[0].rounds == 9 and result.steps[0].decision == "inconclusive"


def test_a_killed_bisect_resumes_without_rebuilding_or_remeasuring(tmp_path: Path) -> None:
    whole = Releases(_stepped("9004.0.0"))
    expected = _bisector(tmp_path / "whole", whole).run()

    crashing = Releases(_stepped("9004.0.0"), crash_after=3)
    with pytest.raises(KeyboardInterrupt):
        _bisector(tmp_path, crashing).run()
    saved = load_state(tmp_path / "bisect.json")
    assert saved is not None and len([s for s in saved.steps.values() if s.finished]) == 3
    resumed = Releases(_stepped("9004.0.0"))
    result = _bisector(tmp_path, resumed).run()
    assert (result.status, result.first_bad) == ("found", expected.first_bad)
    assert crashing.batches + resumed.batches == whole.batches  # nothing measured twice
    finished = {s.candidate for s in saved.steps.values() if s.finished}
    # Builds only for what still had to be measured: the good end and the open candidates.
    assert not (finished - {VERSIONS[0]}) & set(resumed.builds)
    assert [s.estimate for s in result.steps] == [s.estimate for s in expected.steps]


def test_a_state_file_of_another_bisect_is_not_overwritten(tmp_path: Path) -> None:
    _bisector(tmp_path, Releases({v: 100.0 for v in VERSIONS})).run()
    with pytest.raises(ConfigError, match="holds another bisect"):
        start_or_resume(
            tmp_path / "bisect.json",
            good=VERSIONS[1],
            bad=VERSIONS[-1],
            profile="p",
            threshold=0.03,
            versions=VERSIONS,
        )
