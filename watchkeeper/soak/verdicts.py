"""Judge a soak from what the database holds: a pure function of the stored campaign.

Because it reads the stored rows (not the counters of the process that ran the load), a soak
that was interrupted and resumed is judged as one night. Trends use Theil-Sen (median of
pairwise slopes, with its rank-based CI): robust to the odd slow request and to the step a
restart leaves in memory. A trend counts only when it is both large (beyond the configured
threshold) and significant (its 95% CI excludes zero), so short or noisy soaks do not cry wolf.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from scipy import stats

from watchkeeper.analysis.acceptance import AcceptanceCurve, curve, explain
from watchkeeper.config import SoakConfig
from watchkeeper.soak.durations import parse_duration
from watchkeeper.soak.paired import MIN_CYCLES, cold_blocks, reference_ratios, series_label
from watchkeeper.store.soak_store import SoakData, SoakSampleView

MAX_POINTS_PER_SEGMENT = 400


@dataclass(frozen=True, slots=True)
class Trend:
    slope: float
    low: float
    high: float
    points: int

    def to_json(self) -> dict[str, Any]:
        return {"slope": self.slope, "ci95": [self.low, self.high], "points": self.points}


def theil_sen(segments: Sequence[tuple[Sequence[float], Sequence[float]]]) -> Trend | None:
    """Slope of y on x with a 95% CI, pooling pairs only *within* each segment (a server
    restart or a switched profile starts a new segment, so its step is not a slope)."""
    usable = [(np.asarray(x, float), np.asarray(y, float)) for x, y in segments if len(x) >= 2]
    if not usable:
        return None
    if len(usable) == 1:
        x, y = _thin(*usable[0])
        if np.ptp(x) == 0:
            return None
        res = stats.theilslopes(y, x, alpha=0.95)
        return Trend(float(res[0]), float(res[2]), float(res[3]), len(x))
    slopes: list[np.ndarray] = []
    variance, points = 0.0, 0
    for raw_x, raw_y in usable:
        x, y = _thin(raw_x, raw_y)
        i, j = np.triu_indices(len(x), 1)
        dx = x[j] - x[i]
        keep = dx != 0
        slopes.append((y[j] - y[i])[keep] / dx[keep])
        n = len(x)
        variance += n * (n - 1) * (2 * n + 5) / 18.0
        points += n
    pooled = np.sort(np.concatenate(slopes))
    total = len(pooled)
    if total == 0:
        return None
    z = float(stats.norm.ppf(0.975))
    upper = min(round((total + z * math.sqrt(variance)) / 2.0), total - 1)
    lower = max(round((total - z * math.sqrt(variance)) / 2.0) - 1, 0)
    return Trend(float(np.median(pooled)), float(pooled[lower]), float(pooled[upper]), points)


def _thin(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bin medians when a segment is long (8 h of 5 s samples is 16 M pairs)."""
    if len(x) <= MAX_POINTS_PER_SEGMENT:
        return x, y
    bins = np.array_split(np.argsort(x), MAX_POINTS_PER_SEGMENT)
    return np.array([np.median(x[b]) for b in bins]), np.array([np.median(y[b]) for b in bins])


@dataclass(frozen=True, slots=True)
class SoakVerdict:
    campaign_id: int
    stable: bool
    reasons: tuple[str, ...]
    notes: tuple[str, ...]
    figures: dict[str, Any]
    leaks: tuple[dict[str, Any], ...] = field(default=())

    @property
    def headline(self) -> str:
        if self.stable:
            return "stable: " + "; ".join(self.notes[:1] or ("no problem found",))
        return "unstable: " + "; ".join(self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "verdict": "stable" if self.stable else "unstable",
            "headline": self.headline,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "figures": self.figures,
        }


def _hours(t: datetime, origin: datetime) -> float:
    return (t - origin).total_seconds() / 3600.0


def _series_trends(
    samples: Sequence[SoakSampleView], origin: datetime, slice_s: float, cfg: SoakConfig
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    reasons: list[str] = []
    notes: list[str] = []
    out: list[dict[str, Any]] = []
    groups: dict[tuple[str, int], list[SoakSampleView]] = defaultdict(list)
    for s in samples:
        if not s.is_probe and s.error is None:
            groups[(s.profile, s.concurrency)].append(s)
    for (profile, conc), rows in sorted(groups.items()):
        slices: dict[int, list[SoakSampleView]] = defaultdict(list)
        for s in rows:
            slices[int((s.started_at - origin).total_seconds() // slice_s)].append(s)
        table = []
        for index in sorted(slices):
            part = slices[index]
            tps = [s.decode_tps for s in part if s.decode_tps]
            drafted = sum(s.draft_n or 0 for s in part)
            accepted = sum(s.draft_n_accepted or 0 for s in part)
            table.append(
                {
                    "t_h": (index + 0.5) * slice_s / 3600.0,
                    "requests": len(part),
                    "decode_tps": statistics.median(tps) if tps else None,
                    "tokens": sum(s.completion_tokens or 0 for s in part),
                    "acceptance": accepted / drafted if drafted else None,
                }
            )
        name = f"{profile} c{conc}"
        entry: dict[str, Any] = {"profile": profile, "concurrency": conc, "slices": table}
        span_h = (len(slices) * slice_s) / 3600.0
        # One point per block (its median): the block is the replicate, not the time slice.
        tps_points = [(_hours(when, origin), v) for when, v in block_medians(rows)]
        trend = (
            theil_sen([tuple(zip(*tps_points, strict=True))])  # type: ignore[list-item]
            if len(tps_points) >= MIN_BLOCKS
            else None
        )
        if trend is None:
            notes.append(
                f"{name}: {len(tps_points)} block(s), fewer than {MIN_BLOCKS}: throughput "
                "drift not judged"
            )
        else:
            level = statistics.median(v for _, v in tps_points)
            change = trend.slope * span_h / level
            ci = [trend.low * span_h / level, trend.high * span_h / level]
            entry["throughput_drift"] = {
                **trend.to_json(),
                "unit": "tok/s per hour",
                "level_tps": level,
                "change": change,
                "change_ci95": ci,
            }
            if change < -cfg.drift_threshold and ci[1] < 0:
                reasons.append(
                    f"{name}: throughput drifted {change:+.0%} over the soak "
                    f"(95% CI {ci[0]:+.0%}..{ci[1]:+.0%})"
                )
        shift = level_shift(rows)
        if shift is None:
            notes.append(
                f"{name}: {len(block_medians(rows))} block(s), fewer than {MIN_BLOCKS}: "
                "throughput level shift not judged"
            )
        else:
            entry["throughput_shift"] = shift
            low, high = shift["change_ci95"]
            if (
                shift["change"] < -cfg.drift_threshold
                and high < 0
                and not any(r.startswith(f"{name}: throughput drifted") for r in reasons)
            ):
                reasons.append(
                    f"{name}: throughput drifted {shift['change']:+.0%} from the first to the "
                    f"last third of the soak (95% CI {low:+.0%}..{high:+.0%})"
                )
        acc_points = [(r["t_h"], r["acceptance"]) for r in table if r["acceptance"] is not None]
        if len(acc_points) >= 3:
            acc = theil_sen([tuple(zip(*acc_points, strict=True))])  # type: ignore[list-item]
            if acc is not None:
                change = acc.slope * span_h
                entry["acceptance_drift"] = {
                    **acc.to_json(),
                    "unit": "acceptance per hour",
                    "change_points": change,
                    "change_ci95": [acc.low * span_h, acc.high * span_h],
                }
                if change < -cfg.acceptance_drift_threshold and acc.high < 0:
                    reasons.append(f"{name}: acceptance drifted {change * 100:+.1f} points")
        out.append(entry)
    return out, reasons, notes


MIN_BLOCKS = 6
"""Blocks of one series needed before its throughput drift is judged: two per third at least.
Block-to-block wobble of +-10% is this host (measured: one series read 134.5 then 120.5 tok/s
while another moved +9% in the same minutes); a CI from the pooled requests of one block per
third called that "unstable"."""


def block_medians(
    rows: Sequence[SoakSampleView], *, min_requests: int = 1
) -> list[tuple[datetime, float]]:
    """(start, median decode tok/s) per block that finished a request, in time order.

    Any block with a measured request counts. A minimum of three per block once dropped the
    very blocks a slowdown produces (a server at half speed finishes half the requests of a
    short block), which hid the drift it was there to see: a survivorship bias, caught by a
    fresh-clone CI run where only the four fast blocks were left."""
    by_block: dict[int, list[SoakSampleView]] = defaultdict(list)
    for s in rows:
        if s.decode_tps:
            by_block[s.block].append(s)
    out = []
    for part in by_block.values():
        if len(part) >= min_requests:
            out.append(
                (min(s.started_at for s in part), float(np.median([s.decode_tps for s in part])))
            )
    return sorted(out)


def level_shift(
    rows: Sequence[SoakSampleView], *, min_blocks: int = MIN_BLOCKS, resamples: int = 2000
) -> dict[str, Any] | None:
    """Median block speed of the last third of the soak's blocks against the first third, with
    a bootstrap CI of the relative change that resamples *blocks* within each third.

    Theil-Sen is robust by design, which makes it blind to a step late in the run: with the
    slow part under ~30% of the points its median slope stays near zero. A server restarted
    slower at 2 a.m. is exactly such a step, so it gets its own check. The replicate is the
    block, never the request: requests of one block share its minutes. None below
    ``min_blocks`` blocks: not judged."""
    blocks = block_medians(rows)
    if len(blocks) < min_blocks:
        return None
    third = len(blocks) // 3
    first = np.array([v for _, v in blocks[:third]])
    last = np.array([v for _, v in blocks[-third:]])
    rng = np.random.default_rng(0)
    ratios = np.median(rng.choice(last, (resamples, len(last))), axis=1) / np.median(
        rng.choice(first, (resamples, len(first))), axis=1
    )
    low, high = np.percentile(ratios - 1.0, [2.5, 97.5])
    return {
        "first_third_tps": float(np.median(first)),
        "last_third_tps": float(np.median(last)),
        "blocks": [len(first), len(last)],
        "change": float(np.median(last) / np.median(first) - 1.0),
        "change_ci95": [float(low), float(high)],
    }


def _rss_trends(
    data: SoakData, origin: datetime, cfg: SoakConfig
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    segments: dict[str, dict[Any, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    first_seen: dict[tuple[str, Any], datetime] = {}
    for r in data.resources:
        if r.profile is None or not r.rss_bytes:
            continue
        seg = (r.profile, r.server_pid)
        start = first_seen.setdefault(seg, r.taken_at)
        if (r.taken_at - start).total_seconds() < cfg.rss_warmup_s:
            continue
        segments[r.profile][r.server_pid].append((_hours(r.taken_at, origin), r.rss_bytes / 2**20))
    out, leaks, notes = [], [], []
    for profile, by_pid in sorted(segments.items()):
        parts = [tuple(zip(*sorted(pts), strict=True)) for pts in by_pid.values() if len(pts) >= 2]
        span_s = sum((max(p[0]) - min(p[0])) * 3600 for p in parts)
        trend = theil_sen(parts)  # type: ignore[arg-type]
        entry: dict[str, Any] = {
            "profile": profile,
            "span_s": round(span_s, 1),
            "servers": len(by_pid),
        }
        if trend is None:
            notes.append(f"{profile}: not enough RSS samples for a memory trend")
            out.append(entry)
            continue
        entry.update({**trend.to_json(), "unit": "MB per hour"})
        judged = span_s >= cfg.leak_min_span_s
        entry["judged"] = judged
        if not judged:
            notes.append(
                f"{profile}: {span_s:.0f}s of RSS history (< {cfg.leak_min_span_s:.0f}s), "
                "leak not judged"
            )
        elif trend.slope > cfg.leak_threshold_mb_per_hour and trend.low > 0:
            leaks.append({"profile": profile, **entry})
        out.append(entry)
    return out, leaks, notes


def acceptance_curves(data: SoakData) -> list[AcceptanceCurve]:
    """Per arm, the acceptance curve over everything its servers verified while sampled.

    The counters are cumulative per process, so each process contributes the delta between
    its first and last resource sample, and a restart starts a new process rather than a
    negative delta. That span holds the arm's load and its temperature-0 probes alike (one
    server serves both); the soak's question is whether acceptance holds over hours, which
    `acceptance_drift` answers from the per-request counts, and this curve says at which
    draft positions the accepted tokens come from.
    """
    spans: dict[str, dict[Any, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in data.resources:
        if r.profile is not None and r.counters:
            spans[r.profile][r.server_pid].append(r.counters)
    out = []
    for profile, by_pid in sorted(spans.items()):
        scrapes = [(points[0], points[-1]) for points in by_pid.values()]
        c = curve(profile, scrapes)
        if c is not None:
            out.append(c)
    return out


def _identical(samples: Sequence[SoakSampleView]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, str], list[SoakSampleView]] = defaultdict(list)
    for s in samples:
        if s.is_probe and s.error is None:
            groups[(s.profile, s.concurrency, s.task_id)].append(s)
    out = []
    for (profile, conc, task), rows in sorted(groups.items()):
        reference = rows[0].output_text
        same = sum(1 for r in rows[1:] if r.output_text == reference)
        compared = len(rows) - 1
        out.append(
            {
                "profile": profile,
                "concurrency": conc,
                "task_id": task,
                "probes": len(rows),
                "compared": compared,
                "identical": same,
                "rate": same / compared if compared else None,
            }
        )
    return out


def judge(data: SoakData, cfg: SoakConfig) -> SoakVerdict:
    """The verdict and its figures for a whole campaign (every block, every resume)."""
    samples = data.samples
    reasons: list[str] = []
    notes: list[str] = []
    if not samples:
        return SoakVerdict(data.campaign_id, False, ("no request was stored",), (), {})
    origin = samples[0].started_at
    slice_s = parse_duration(str(data.params.get("slice") or cfg.slice))
    errors = [s for s in samples if s.error is not None]
    timeouts = [s for s in errors if (s.error or "").startswith("timeout")]
    error_rate = len(errors) / len(samples)
    kinds = Counter(incident.kind for incident in data.incidents)
    series, drift_reasons, drift_notes = _series_trends(samples, origin, slice_s, cfg)
    rss, leaks, rss_notes = _rss_trends(data, origin, cfg)
    curves = acceptance_curves(data)
    identical = _identical(samples)
    compared = sum(i["compared"] for i in identical)
    same = sum(i["identical"] for i in identical)
    identical_rate = same / compared if compared else None
    crashes = kinds["server_crash"] + kinds["server_unresponsive"]
    if crashes:
        reasons.append(
            f"server crashed {kinds['server_crash']}x, unresponsive {kinds['server_unresponsive']}x"
            f" ({kinds['server_restart']} restarts)"
        )
    stopped = sorted({i.profile or "" for i in data.incidents if i.kind == "profile_stopped"})
    if stopped:
        reasons.append(f"stopped after repeated crashes: {', '.join(stopped)}")
    if kinds["server_unreachable"]:
        reasons.append(f"external server unreachable {kinds['server_unreachable']}x")
    if kinds["stuck_slot"]:
        reasons.append(f"{kinds['stuck_slot']} stuck slot(s)")
    if error_rate > cfg.max_error_rate:
        reasons.append(
            f"error rate {error_rate:.1%} > {cfg.max_error_rate:.1%} "
            f"({len(errors)} of {len(samples)}, {len(timeouts)} timeouts)"
        )
    reasons.extend(drift_reasons)
    paired = reference_ratios(
        samples,
        data.params,
        threshold=cfg.min_effect,
        cold=cold_blocks(data.incidents),
        autocorrelation_floor=cfg.autocorrelation_floor,
    )
    for entry in paired:
        label = f"{series_label(entry)} vs reference #{entry['reference_id']}"
        if entry["ci95"] is None:
            notes.append(
                f"{label}: {entry['n_pairs']} process pair(s) with {entry['n_cycles']} judged "
                f"cycle(s), fewer than {MIN_CYCLES}: ratio not judged"
            )
            continue
        low, high = entry["ci95"]
        text = (
            f"{label}: {entry['estimate']:.3f}x (95% CI {low:.3f}..{high:.3f}, "
            f"{entry['n_cycles']} cycles, {entry['n_pairs']} process pairs, effective n "
            f"{entry['n_eff']:.1f}, threshold {entry['threshold']:.0%}), {entry['verdict']}"
        )
        if entry["verdict"] == "regression" and not entry["aa"] and entry["confirmed"]:
            reasons.append(text + ", in both halves of the soak")
        elif entry["aa"] and entry["verdict"] in ("regression", "improvement"):
            notes.append(text + " on an A/A soak: a false alarm, counted in the digest")
        else:
            notes.append(text)
    for leak in leaks:
        reasons.append(
            f"{leak['profile']}: RSS grows {leak['slope']:.0f} MB/h "
            f"(95% CI {leak['ci95'][0]:.0f}..{leak['ci95'][1]:.0f}) > "
            f"{cfg.leak_threshold_mb_per_hour:.0f} MB/h"
        )
    if identical_rate is not None and identical_rate < cfg.min_identical_rate:
        reasons.append(
            f"temperature-0 probes identical {identical_rate:.0%} of the time ({same}/{compared})"
        )
    if identical_rate is None:
        notes.append("fewer than 2 probes per series: identical-output rate not judged")
    span_s = (samples[-1].started_at - origin).total_seconds()
    notes.insert(0, f"{len(samples)} requests over {span_s / 3600:.2f}h, {len(errors)} errors")
    notes.extend(drift_notes + rss_notes)
    notes.extend(explain(c) for c in curves)
    figures = {
        "requests": len(samples),
        "load_requests": sum(1 for s in samples if not s.is_probe),
        "probes": sum(1 for s in samples if s.is_probe),
        "errors": len(errors),
        "timeouts": len(timeouts),
        "error_rate": error_rate,
        "timeout_rate": len(timeouts) / len(samples),
        "span_s": span_s,
        "slice_s": slice_s,
        "restarts": kinds["server_restart"],
        "crashes": kinds["server_crash"],
        "unresponsive": kinds["server_unresponsive"],
        "stuck_slots": kinds["stuck_slot"],
        "profiles_stopped": stopped,
        "db_outages": kinds["db_outage"],
        "incidents": dict(kinds),
        "identical_output_rate": identical_rate,
        "identical_output": identical,
        "series": series,
        "reference": paired,
        "rss": rss,
        "acceptance_curves": [c.to_json() for c in curves],
        "leak_threshold_mb_per_hour": cfg.leak_threshold_mb_per_hour,
    }
    return SoakVerdict(
        data.campaign_id, not reasons, tuple(reasons), tuple(notes), figures, tuple(leaks)
    )
