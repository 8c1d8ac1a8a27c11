"""The soak against the pinned reference: one ratio per series, blocks as the replicates.

A soak's absolute tok/s wander +-10% from block to block on a shared host (measured: one
series 134.5 then 120.5 tok/s while another moved +9% in the same minutes), so a drift check
on them alone cannot tell a slower build from a noisy night. With the nightly's pinned
reference running as one more arm, each cycle of blocks holds a current block and a reference
block at the same concurrency, back to back, their order alternating from cycle to cycle; the
ratio of their medians cancels what hit both. The cycle is the replicate (never the request:
requests of one block share its minutes); the verdict rules are the nightly's
(`analysis.stats.classify`), and a regression is confirmed inside the soak when both halves of
it show the drop on their own.

What cycles cannot cancel is the server *instance*: both arms keep one process all night, and
two processes of the same binary and model differed by 4.8% through a whole A/A soak here
(every cycle 1.02-1.06). So the soak's threshold (`soak.min_effect`, 10%) sits above that; the
nightly, which starts fresh servers every night, is the instrument for small steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from watchkeeper.analysis.stats import classify, log_t_interval
from watchkeeper.nightly.ratios import VERDICTS
from watchkeeper.store.soak_store import SoakSampleView

MIN_CYCLES = 4
"""Judged cycles (current/reference block pairs) needed for a CI."""
WARMUP_CYCLES = 1
"""The first cycle is set aside: in a real A/A soak here it read 1.238 against 1.02-1.06 for
the rest (both servers' first minutes under load)."""


def _t_interval(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Geometric mean and 95% CI from a t-interval on the log ratios.

    Not a bootstrap: with 4-10 cycles a percentile bootstrap is too narrow (it cannot see
    beyond the sample's own range), and a soak has that few. The t-interval widens honestly."""
    logs = np.log(np.asarray(ratios, float))
    low, high = log_t_interval(logs)
    return math.exp(float(logs.mean())), math.exp(low), math.exp(high)


def cycle_length(params: dict[str, Any]) -> int:
    return max(1, len(params.get("profiles") or ()) * len(params.get("concurrency") or ()))


def _block_medians(
    samples: Sequence[SoakSampleView],
) -> dict[tuple[str, int, int], float]:
    """(arm, concurrency, block) -> median decode tok/s of its measured load requests."""
    values: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for s in samples:
        if not s.is_probe and s.error is None and s.decode_tps:
            values[(s.profile, s.concurrency, s.block)].append(s.decode_tps)
    return {key: float(np.median(v)) for key, v in values.items()}


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def reference_ratios(
    samples: Sequence[SoakSampleView],
    params: dict[str, Any],
    *,
    threshold: float,
) -> list[dict[str, Any]]:
    """One entry per (profile, concurrency) soaked beside a reference arm; [] without one.

    ``params`` is the campaign's: ``references`` maps each current profile to its reference
    arm, the reference's id and whether the two are identical (an A/A soak)."""
    refs: dict[str, dict[str, Any]] = params.get("references") or {}
    if not refs:
        return []
    length = cycle_length(params)
    medians = _block_medians(samples)
    out = []
    for profile, ref in sorted(refs.items()):
        for conc in params.get("concurrency") or ():
            by_cycle: dict[int, dict[str, float]] = defaultdict(dict)
            for (arm, c, block), value in medians.items():
                if c != conc or arm not in (profile, ref["arm"]):
                    continue
                by_cycle[block // length]["current" if arm == profile else "reference"] = value
            cycles = sorted(k for k, v in by_cycle.items() if len(v) == 2)
            entry: dict[str, Any] = {
                "profile": profile,
                "concurrency": conc,
                "reference_arm": ref["arm"],
                "reference_id": ref["reference_id"],
                "aa": bool(ref.get("aa")),
                "host_fingerprint": ref.get("host_fingerprint", ""),
                "threshold": threshold,
                "cycles": [
                    {
                        "cycle": k,
                        "current_tps": by_cycle[k]["current"],
                        "reference_tps": by_cycle[k]["reference"],
                        "ratio": by_cycle[k]["current"] / by_cycle[k]["reference"],
                    }
                    for k in cycles
                ],
            }
            judged = cycles[WARMUP_CYCLES:]
            ratios = [by_cycle[k]["current"] / by_cycle[k]["reference"] for k in judged]
            entry["warmup_cycles"] = cycles[:WARMUP_CYCLES]
            entry["n_cycles"] = len(ratios)
            if len(ratios) < MIN_CYCLES:
                entry.update(estimate=_geomean(ratios), ci95=None, verdict="insufficient data")
                out.append(entry)
                continue
            estimate, low, high = _t_interval(ratios)
            verdict = VERDICTS[classify(estimate, low, high, threshold)]
            half = len(ratios) // 2
            halves = [_geomean(ratios[:half]), _geomean(ratios[half:])]
            entry.update(
                estimate=estimate,
                ci95=[low, high],
                half_width=math.sqrt(high / low) - 1.0,
                verdict=verdict,
                halves=halves,
                # Both halves beyond the threshold on their own: the drop is not one bad hour.
                confirmed=verdict == "regression"
                and all(h is not None and h < 1.0 - threshold for h in halves),
            )
            out.append(entry)
    return out


def series_label(entry: dict[str, Any]) -> str:
    return f"{entry['profile']} c{entry['concurrency']}"
