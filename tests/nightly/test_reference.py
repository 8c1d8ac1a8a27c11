"""Pinned references: snapshots by content hash, pruning, and a maintainer's ack retiring the
reference a nightly regression was measured against. No server: files and a SQLite store."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support.native import fake_build
from support.references import pin_reference

from watchkeeper.nightly.findings import set_status
from watchkeeper.nightly.reference import prune_snapshots, snapshot_binary, snapshot_model
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.history import History
from watchkeeper.store.references import RatioRecord, ReferenceStore


def _pin(db: Database, profile: str = "s") -> int:
    return pin_reference(db, profile=profile, host="h" * 16, pinned_by="t").id


def test_a_rebuild_does_not_touch_the_snapshot_and_pruning_keeps_what_is_referenced(
    tmp_path: Path,
) -> None:
    build = tmp_path / "build" / "bin"
    old = fake_build(build, "old")
    old_bytes = old.read_bytes()
    model_file = tmp_path / "model.gguf"
    model_file.write_bytes(b"weights")
    root = tmp_path / "snapshots"
    binary = snapshot_binary(ServerBinary(old, "v", "cpu", "a" * 64), root)
    model = snapshot_model(ModelFile("m", model_file, "d" * 64, 7), root)
    shutil.rmtree(build)
    fake_build(build, "new")  # a rebuild replaces the build
    assert binary.read_bytes() == old_bytes
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    assert done.stdout == "version: old (fake)\n"  # its own library, not the rebuild's
    assert model.read_bytes() == b"weights"
    snapshot_binary(ServerBinary(build / "llama-server", "v2", "cpu", "e" * 64), root)
    removed = prune_snapshots(root, {"a" * 64, "d" * 64})
    assert removed == [root / "binaries" / ("e" * 64)]
    assert binary.is_file() and model.is_file()


def test_pinning_again_retires_the_previous_reference(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wk.db'}")
    try:
        store = ReferenceStore(db)
        first = _pin(db)
        second = _pin(db)
        active = store.active("h" * 16, "s")
        assert active is not None and active.id == second
        assert [r.active for r in store.history("s")] == [False, True]
        assert first != second
    finally:
        db.close()


def test_acknowledging_a_nightly_regression_retires_its_reference(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wk.db'}")
    try:
        store = ReferenceStore(db)
        ref = _pin(db)
        finding = FindingStore(db).record_recurring(
            NewFinding(
                fingerprint="nightly:x",
                kind="regression",
                label="regression",
                severity="high",
                title="s · all: decode tok/s -11%",
                evidence={"reference": {"id": ref}},
            )
        )
        set_status(History(db), finding, "ack", "accepted for the new kernel")
        assert store.active("h" * 16, "s") is None
        (row,) = store.history("s")
        assert "finding #" in row.reason and "accepted for the new kernel" in row.reason
    finally:
        db.close()


def _ratio(category: str, estimate: float, confirmed: bool) -> RatioRecord:
    return RatioRecord(
        campaign_id=1,
        reference_id=1,
        series=f"host|s|{category}|decode_tps",
        host_fingerprint="host",
        profile="s",
        category=category,
        metric="decode_tps",
        estimate=estimate,
        low=estimate - 0.02,
        high=estimate + 0.02,
        n_pairs=30,
        n_tasks=6,
        n_rounds=5,
        threshold=0.03,
        verdict="regression" if confirmed else "no change",
        aa=False,
        confirmed=confirmed,
    )


def test_one_regression_is_one_finding_with_its_categories_as_evidence() -> None:
    from watchkeeper.campaign.nightly_findings import finding_series

    everywhere = [_ratio("all", 0.5, True), _ratio("prose", 0.5, True), _ratio("code", 0.6, True)]
    ((head, also),) = finding_series(everywhere)
    assert head.category == "all" and [a.category for a in also] == ["prose", "code"]
    # Diluted overall: each confirmed category is its own finding.
    diluted = [_ratio("all", 0.99, False), _ratio("prose", 0.9, True), _ratio("code", 0.9, True)]
    assert [(r.category, a) for r, a in finding_series(diluted)] == [("prose", []), ("code", [])]
    assert finding_series([_ratio("all", 1.0, False)]) == []
