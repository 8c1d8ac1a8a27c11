"""deliver-set's price of its nightly stage (sets/deliver_set.nightly_price), no server: the
rounds at the sweep's seconds a request and, in the exact identity mode, the identity pass,
every task probed on both servers at the sweep's `pair_probe_s`. The code-edit set of 7 Dec
2026 priced its nightly at its rounds alone (96 requests at 7.73 s: 12.4 min, inside the
stage's 14.1) and the night took 30.8 min, 18.2 of them the identity pass."""

from __future__ import annotations

from typing import Literal

import pytest

from watchkeeper.config import Config
from watchkeeper.config.model import BenchConfig, NightlyConfig
from watchkeeper.sets.deliver_set import nightly_price

SWEEP = {"pace_s": 7.73, "pair_probe_s": 45.0, "requests": 216, "tasks": 8}


def _config(mode: Literal["exact", "batched"] = "exact") -> Config:
    return Config(
        nightly=NightlyConfig(rounds=6, per_category=8, categories=["code_edit"]),
        bench=BenchConfig(identity_mode=mode),
    )


def test_the_nightly_is_priced_with_its_exact_identity_probes() -> None:
    """6 rounds x 2 arms x 8 tasks at 7.73 s = 742.1 s; the 8 tasks each probed on both
    servers at 45 s a probe (the pair's, floor and replays included): 360 s more."""
    price = nightly_price(_config(), SWEEP, 1)
    assert (price.requests, price.probes) == (96, 8)
    assert price.rounds_s == pytest.approx(96 * 7.73)
    assert price.probes_s == pytest.approx(8 * 45.0)
    assert price.seconds == pytest.approx(96 * 7.73 + 360.0)
    without = nightly_price(_config(), {**SWEEP, "pair_probe_s": 0.0}, 1)
    assert price.seconds - without.seconds == pytest.approx(360.0)
    assert price.text == (
        "18.4 min (96 requests at the sweep's pace, 12.4 min, and 8 exact identity probes on "
        "both servers, 6.0 min)"
    )
    assert without.text == "12.4 min (96 requests at the sweep's pace)"
    # Two categories: twice the tasks, twice the probes.
    assert nightly_price(_config(), SWEEP, 2).probes_s == pytest.approx(16 * 45.0)


def test_a_sweep_without_a_probe_price_and_the_batched_mode_price_the_rounds_alone() -> None:
    """A set begun before the sweep recorded `pair_probe_s` resumes at the old price; the
    batched mode's probes run on the rounds' servers and are not priced here."""
    old = {k: v for k, v in SWEEP.items() if k != "pair_probe_s"}
    assert nightly_price(_config(), old, 1).probes_s == 0.0
    assert nightly_price(_config("batched"), SWEEP, 1).probes_s == 0.0
    assert nightly_price(_config("batched"), SWEEP, 1).seconds == pytest.approx(96 * 7.73)
