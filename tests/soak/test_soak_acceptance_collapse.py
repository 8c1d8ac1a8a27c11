"""The collapse alarm's real positive control and its A/A, through the soak
(commands/soak.py -> campaign/acceptance_findings.py): one profile, SmolLM2 drafting with a
draft model named in [models], soaked four times with the drafter that fits (SmolLM2 itself),
then once with the same profile's drafter file swapped for one that shares SmolLM2's
vocabulary but no longer fits it (scripts/misfit_drafter_gguf.py: SmolLM2 with its 30 blocks
in reversed order, bytes untouched). The fourth fitting soak, judged against the three before
it, files nothing (the A/A); the misfit soak, judged against the four, files
`acceptance_collapse`. On 2026-12-07 (2 cores, load 7-9): with 20 s soaks (144 s) the A/A
accepted 211 of 217 drafted tokens (97.2%) against a median of 98.2% over 3 soaks, `no change`
(p = 0.41), the misfit soak 1 of 352 (0.3%) against 97.9% over 4, `collapse` (p = 5.7e-07);
with 30 s soaks (211 s) the A/A 163 of 166 (98.2%) against 98.2%, `no change` (p = 0.5), the
misfit 0.0% against 98.2%, `collapse` (p = 4.5e-08). Run with `-s` to print both verdicts;
counts over runs: benchmarks/acceptance_controls_real.py."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from support.soakkit import soak_settings
from support.taskfiles import write_taskset
from support.tinymodels import DRAFTING, drafting_config, write_model

from watchkeeper.campaign.acceptance_findings import judge_campaign
from watchkeeper.commands.soak import soak_command
from watchkeeper.config.requests import SoakRequest
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Finding

PROMPTS = (
    "Tell me about the sea in two sentences.",
    "Explain what a compiler does.",
    "Write a short poem about bread.",
    "Why is the sky blue?",
)
SOAK = "30s"
"""Long enough on a loaded 2-core host for every soak to draft the 64 tokens a run needs to
count (12 s gave 68 once: three 32-token answers; at load 9, with two Qwen servers beside it,
20 s soaks drafted 37-53 on 2026-12-07)."""


def _findings(url: str, campaign: int) -> list[Finding]:
    db = Database(url)
    with db.session() as s:
        found = list(s.scalars(select(Finding).filter_by(campaign_id=campaign)).all())
    db.close()
    return found


def test_a_drafter_that_stopped_fitting_files_a_collapse_and_an_aa_files_nothing(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    binary, smollm2 = real_server
    misfit = write_model("misfit_drafter_gguf.py", tmp_path / "misfit.gguf", binary, smollm2,
                         "--source")  # fmt: skip
    tasks = write_taskset(tmp_path, [(f"p{i}", p) for i, p in enumerate(PROMPTS)], 64)

    def soak(drafter: Path) -> int:
        result = soak_command(
            drafting_config(
                sqlite_url, drafter, soak_settings(temperature=0.0, probe_interval_s=600.0)
            ),
            SoakRequest(duration=SOAK, block=SOAK, profiles=[DRAFTING], taskset=tasks),
        )
        assert result.status == "completed"
        return result.campaign_id

    history = [soak(smollm2.path) for _ in range(3)]
    aa = soak(smollm2.path)
    collapsed = soak(misfit)
    db = Database(sqlite_url)
    try:
        (a,) = judge_campaign(db, aa, kinds=("soak",))
        (c,) = judge_campaign(db, collapsed, kinds=("soak",))
    finally:
        db.close()
    assert a.collapse.history_runs == 3 and a.collapse.verdict == "no change", a.to_json()
    assert not [f for f in _findings(sqlite_url, aa) if f.kind.startswith("acceptance_")]
    assert c.collapse.history_runs == 4 and c.collapse.verdict == "collapse", c.to_json()
    assert c.collapse.current < 0.5 * c.collapse.history_median, c.to_json()
    found = [f for f in _findings(sqlite_url, collapsed) if f.kind == "acceptance_collapse"]
    assert len(found) == 1 and found[0].fingerprint == "soak-acceptance-collapse:sd"
    assert "acceptance collapsed to" in found[0].title, found[0].title
    assert len(history) == 3
    print("FIGURES", a.to_json(), c.to_json())
