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
    for profile in verdict.figures.get("profiles_stopped", []):
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-stopped:{profile}",
                kind="soak_profile_stopped",
                severity="high",
                title=f"{profile} crashed repeatedly during the soak and was stopped",
                evidence={"incidents": verdict.figures.get("incidents", {})},
                label="stability",
            )
        )
    if not final:
        return
    for entry in verdict.figures.get("reference", []):
        if entry["aa"] or not entry.get("confirmed"):
            continue
        label = f"{entry['profile']} c{entry['concurrency']}"
        evidence = SoakRatioEvidence.from_verdict(entry)
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-regression:{entry['profile']}:c{entry['concurrency']}",
                kind="regression",
                severity="high",
                title=f"{label}: decode tok/s {evidence.delta_text()} against the reference "
                f"through the soak (95% CI {evidence.ci_text()})",
                evidence=evidence.to_json(),
                label="stability",
            )
        )
    for leak in verdict.leaks:
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-leak:{leak['profile']}",
                kind="soak_memory_leak",
                severity="high",
                title=f"{leak['profile']}: RSS grows {leak['slope']:.0f} MB/h during the soak",
                evidence=leak,
                label="stability",
            )
        )


def record_ratios(ratios: ReferenceStore, campaign_id: int, verdict: SoakVerdict) -> None:
    """The soak's paired ratios join the nightly series (digest table, A/A false-alarm rate).

    Only a finished soak: a resumed one is judged again as a whole and stored once."""
    if ratios.ratios_of(campaign_id):
        return
    rows = []
    for entry in verdict.figures.get("reference", []):
        if entry.get("estimate") is None:
            continue
        ci = entry.get("ci95")
        host = entry["host_fingerprint"]
        category = f"soak c{entry['concurrency']}"
        rows.append(
            RatioRecord(
                campaign_id=campaign_id,
                reference_id=entry["reference_id"],
                series=series_name(host, entry["profile"], category),
                host_fingerprint=host,
                profile=entry["profile"],
                category=category,
                metric="decode_tps",
                estimate=entry["estimate"],
                low=ci[0] if ci else None,
                high=ci[1] if ci else None,
                n_pairs=entry["n_cycles"],
                n_tasks=1,
                n_rounds=entry["n_pairs"],
                threshold=entry["threshold"],
                verdict=entry["verdict"],
                aa=entry["aa"],
                confirmed=bool(entry.get("confirmed")),
            )
        )
    ratios.add_ratios(rows)
