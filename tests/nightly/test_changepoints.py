"""Change points over nightly run medians, and naming the first bad build."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from watchkeeper.nightly.changepoints import find_change_points, first_bad, noise_scale
from watchkeeper.nightly.detector import Direction


def nights(seed: int, n: int = 40, level: float = 50.0, cv: float = 0.013) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in level * (1 + rng.normal(0, cv, n))]


def stepped(seed: int, at: int, factor: float, n: int = 40) -> list[float]:
    return [v * (factor if i >= at else 1.0) for i, v in enumerate(nights(seed, n))]


def builds(values: list[float]) -> list[tuple[str, float]]:
    return [(f"b{1000 + i}", v) for i, v in enumerate(values)]


@pytest.mark.parametrize("at", [8, 20, 33])
def test_a_5_percent_step_is_found_within_2_runs_of_where_it_happened(at: int) -> None:
    for seed in range(10):
        starts = find_change_points(stepped(seed, at, 0.95))
        assert starts, f"seed {seed}: no change point"
        assert min(abs(s - at) for s in starts) <= 2


def test_pure_noise_constant_and_short_series_have_no_change_points() -> None:
    assert sum(bool(find_change_points(nights(seed))) for seed in range(30)) <= 1
    assert find_change_points([50.0] * 30) == []
    assert find_change_points([50.0, 40.0, 30.0, 20.0, 10.0]) == []  # shorter than 2 segments


def test_a_single_odd_night_never_opens_a_segment() -> None:
    for seed in range(10):
        values = nights(seed, 30)
        values[14] *= 0.8
        assert find_change_points(values) == []


def test_segments_respect_min_size_and_a_huge_penalty_keeps_one_level() -> None:
    values = stepped(0, 36, 0.9)  # the new level has only 4 nights so far
    assert find_change_points(values, min_size=8) == []  # too young to be a segment yet
    for min_size in (3, 5):
        starts = find_change_points(values, min_size=min_size)
        assert starts, min_size
        bounds = [0, *starts, len(values)]
        assert min(b - a for a, b in pairwise(bounds)) >= min_size
    assert find_change_points(stepped(0, 20, 0.9), penalty=1e6) == []
    with pytest.raises(ValueError, match="min_size"):
        find_change_points(values, min_size=0)


def test_the_noise_scale_ignores_the_step_itself() -> None:
    quiet, with_step = noise_scale(nights(4)), noise_scale(stepped(4, 20, 0.8))
    assert with_step == pytest.approx(quiet, rel=0.1)
    assert float(np.std(stepped(4, 20, 0.8))) > 5 * with_step


def test_first_bad_names_the_build_where_decode_speed_dropped() -> None:
    points = builds(stepped(7, 27, 0.92))
    found = first_bad(points, Direction.HIGHER)
    assert found is not None
    assert found.label == "b1027" and found.index == 27 and found.is_current
    assert found.relative_change == pytest.approx(-0.08, abs=0.015)
    assert found.after_median < found.before_median


def test_first_bad_for_lower_is_better_names_where_latency_rose() -> None:
    points = builds(stepped(8, 22, 1.10))
    found = first_bad(points, Direction.LOWER)
    assert found is not None and found.label == "b1022"
    assert first_bad(points, Direction.HIGHER) is None  # higher latency is no regression there


def test_an_improvement_names_no_bad_build() -> None:
    assert first_bad(builds(stepped(9, 25, 1.08)), Direction.HIGHER) is None
    assert first_bad(builds(nights(9)), Direction.HIGHER) is None


def test_a_fixed_regression_is_still_named_but_not_current_and_a_newer_one_wins() -> None:
    values = nights(10, 45)
    dipped = [v * (0.9 if 12 <= i < 24 else 1.0) for i, v in enumerate(values)]
    fixed = first_bad(builds(dipped), Direction.HIGHER)
    assert fixed is not None and fixed.label == "b1012" and not fixed.is_current
    again = [v * (0.9 if i >= 36 else 1.0) for i, v in enumerate(dipped)]
    newer = first_bad(builds(again), Direction.HIGHER)
    assert newer is not None and newer.label == "b1036" and newer.is_current


def test_a_rate_that_starts_at_zero_has_no_relative_change() -> None:
    errors = [0.0] * 20 + [0.05] * 10
    found = first_bad(builds(errors), Direction.LOWER)
    assert found is not None and found.label == "b1020"
    assert found.relative_change is None and found.before_median == 0.0
