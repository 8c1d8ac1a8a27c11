"""The round's sd that the one-round interval over tasks floors by (`racing_tasks.ROUND_SD`)
stands on a measurement: `benchmarks/round_sd.py` recovers a known round sd from simulated
A/A tables, and on the committed A/A nights its 95% upper end is the constant."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from watchkeeper.analysis.racing_tasks import ROUND_SD
from watchkeeper.analysis.table_fit import winsorize_cells


def _script() -> ModuleType:
    path = Path(__file__).parents[2] / "benchmarks" / "round_sd.py"
    spec = importlib.util.spec_from_file_location("round_sd_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_known_round_sd_is_recovered_inside_its_interval() -> None:
    """8 tables of 24 tasks x 6 rounds, round sd 4%, cell sd 5% (seed 3)."""
    rs = _script()
    rng = np.random.default_rng(3)
    tables = [
        rng.normal(0.0, 0.1, (24, 1))
        + rng.normal(0.0, 0.04, (1, 6))
        + rng.normal(0.0, 0.05, (24, 6))
        for _ in range(8)
    ]
    est, ms_r, ms_e, df_r, df_e, tasks = rs.shared_var(tables)
    low, high = rs.f_ci(ms_r, ms_e, df_r, df_e, tasks)
    assert low <= 0.04**2 <= high
    assert abs(math.sqrt(est) - 0.04) < 0.015
    # No round effect at all: the estimate is about 0 and the upper end small.
    flat = [rng.normal(0.0, 0.05, (24, 6)) for _ in range(8)]
    est0, *rest = rs.shared_var(flat)
    assert rs.f_ci(*rest)[1] < 0.02**2 and est0 < 0.01**2


def test_the_constant_is_the_upper_end_measured_on_the_committed_aa_nights() -> None:
    """Winsorized cells: point 0, upper end 2.47% (F) and 2.06% (bootstrap over the nights)."""
    rs = _script()
    nights = [winsorize_cells(t)[0] for t in rs.aa_nights()]
    assert len(nights) == 8 and all(t.shape == (24, 6) for t in nights)
    est, ms_r, ms_e, df_r, df_e, tasks = rs.shared_var(nights)
    high = rs.f_ci(ms_r, ms_e, df_r, df_e, tasks)[1]
    assert est <= 0.0 < rs.round_sd_of(high, True) <= ROUND_SD
    assert rs.round_sd_of(high, True) == pytest.approx(ROUND_SD, abs=0.001)
    assert rs.round_sd_of(rs.bootstrap_ci(nights, draws=300)[1], True) <= ROUND_SD
