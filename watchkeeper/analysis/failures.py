"""Failed and timed-out requests (and those that returned no speed) as a verdict of their own.

A request that fails or times out has no speed, so it drops out of the paired ratios: a build
that times out on the heaviest tasks does not look slower, it looks *faster* (its slow cells
are gone). Failures are therefore counted per arm and compared on their own: Fisher's exact
test on the 2 x 2 table (failed, succeeded) x (current, reference), one-sided for an excess on
the current arm. Exact because failures are rare (0 of 288 against 3 of 288 is the usual
shape) and a normal approximation is useless there. A significant excess is a regression
whatever the ratio of the requests that did succeed says.
"""

from __future__ import annotations

from dataclasses import dataclass

from scipy import stats as scipy_stats

ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class FailureCheck:
    current_failed: int
    current_requests: int
    reference_failed: int
    reference_requests: int
    p_value: float
    """One-sided Fisher's exact test: the current arm fails more often than the reference."""

    @property
    def regression(self) -> bool:
        return self.p_value < ALPHA

    def describe(self) -> str:
        return (
            f"failed requests: {self.current_failed} of {self.current_requests} current, "
            f"{self.reference_failed} of {self.reference_requests} reference "
            f"(Fisher's exact test, one-sided p={self.p_value:.2g})"
        )


def failure_check(
    current_failed: int, current_requests: int, reference_failed: int, reference_requests: int
) -> FailureCheck:
    """Fisher's exact test for more failures on the current arm. No requests: p = 1."""
    if current_requests <= 0 or reference_requests <= 0:
        p = 1.0
    else:
        table = [
            [current_failed, current_requests - current_failed],
            [reference_failed, reference_requests - reference_failed],
        ]
        p = float(scipy_stats.fisher_exact(table, alternative="greater").pvalue)
    return FailureCheck(current_failed, current_requests, reference_failed, reference_requests, p)
