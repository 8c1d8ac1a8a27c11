"""What a soak leaves for the people who act on it: findings (a profile stopped after repeated
crashes, a confirmed regression against the reference, a memory leak) and its paired ratios
in the nightly series (the digest's table, the A/A false-alarm rate).

Split from `commands/soak.py`, which runs the soak and calls these once it is judged.
"""

from __future__ import annotations

from watchkeeper.findings.evidence import SoakRatioEvidence
from watchkeeper.nightly.ratios import series_name
from watchkeeper.soak.verdicts import SoakVerdict
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.references import RatioRecord, ReferenceStore


def record_findings(
    findings: FindingStore, campaign_id: int, verdict: SoakVerdict, *, final: bool
) -> None:
    """Stopped profiles at once; a leak only on a finished soak (a resume may still clear it)."""
    figures = verdict.figures
    if figures is None:
        return
    for profile in figures.profiles_stopped:
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-stopped:{profile}",
                kind="soak_profile_stopped",
                severity="high",
                title=f"{profile} crashed repeatedly during the soak and was stopped",
                evidence={"incidents": dict(figures.incidents)},
                label="stability",
            )
        )
    if not final:
        return
    for ratio in figures.ratios:
        if ratio.aa or not ratio.confirmed:
            continue
        label = f"{ratio.profile} c{ratio.concurrency}"
        evidence = SoakRatioEvidence.from_verdict(ratio.to_json())
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-regression:{ratio.profile}:c{ratio.concurrency}",
                kind="regression",
                severity="high",
                title=f"{label}: decode tok/s {evidence.delta_text()} against the reference "
                f"through the soak ({evidence.labelled_ci_text()})",
                evidence=evidence.to_json(),
                label="stability",
            )
        )
    for leak in verdict.leaks:
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-leak:{leak.profile}",
                kind="soak_memory_leak",
                severity="high",
                title=f"{leak.profile}: RSS grows {leak.slope or 0.0:.0f} MB/h during the soak",
                evidence=leak.to_json(),
                label="stability",
            )
        )


def record_ratios(ratios: ReferenceStore, campaign_id: int, verdict: SoakVerdict) -> None:
    """The soak's paired ratios join the nightly series (digest table, A/A false-alarm rate).

    Only a finished soak: a resumed one is judged again as a whole and stored once."""
    if ratios.ratios_of(campaign_id) or verdict.figures is None:
        return
    rows = []
    for r in verdict.figures.ratios:
        if r.estimate is None:
            continue
        category = f"soak c{r.concurrency}"
        rows.append(
            RatioRecord(
                campaign_id=campaign_id,
                reference_id=r.reference_id,
                series=series_name(r.host_fingerprint, r.profile, category),
                host_fingerprint=r.host_fingerprint,
                profile=r.profile,
                category=category,
                metric="decode_tps",
                estimate=r.estimate,
                low=r.ci95[0] if r.ci95 else None,
                high=r.ci95[1] if r.ci95 else None,
                n_pairs=r.n_cycles,
                n_tasks=1,
                n_rounds=r.n_pairs,
                threshold=r.threshold,
                verdict=r.verdict,
                aa=r.aa,
                confirmed=r.confirmed,
            )
        )
    ratios.add_ratios(rows)
