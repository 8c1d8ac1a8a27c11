"""Reads and writes in the vocabulary of the pipeline (dataclasses in, dataclasses out).

Callers never see ORM rows: a campaign is an id, a run result is a `RunResult`. Upserts on
natural keys make every write safe to repeat.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from watchkeeper.config import ProfileConfig
from watchkeeper.host.info import HostInfo
from watchkeeper.load.records import RunResult
from watchkeeper.redaction import redact_url
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.campaigns import CampaignRows
from watchkeeper.store.db import Database
from watchkeeper.store.runs import RunRows, StoredRun
from watchkeeper.store.schema import (
    Host,
    Model,
    OutputCheck,
    Profile,
    Report,
    ServerBuild,
)
from watchkeeper.store.upsert import insert_if_absent


class Repository:
    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def db(self) -> Database:
        return self._db

    def ensure_host(self, info: HostInfo) -> int:
        row, _ = insert_if_absent(
            self._db,
            Host,
            {"fingerprint": info.fingerprint},
            hostname=info.hostname,
            cpu_model=info.cpu_model,
            cpu_count=info.cpu_count,
            memory_bytes=info.memory_bytes,
            gpu=info.gpu,
            os=info.os,
            gpu_driver=info.gpu_driver,
            gpu_cuda=info.gpu_cuda,
        )
        return int(row.id)

    def ensure_build(self, binary: ServerBinary | None, *, external_url: str = "") -> int:
        identity: str | None = None
        build_info: str | None = None
        if binary is None:
            fingerprint = f"external:{redact_url(external_url)}"[:64]
            version, variant, path = "external", "external", None
        else:
            fingerprint, version, variant = binary.sha256, binary.version, binary.variant
            path = str(binary.path)
            identity = binary.identity[:255]
            build_info = json.dumps(binary.build_info(), sort_keys=True)
        row, _ = insert_if_absent(
            self._db,
            ServerBuild,
            {"fingerprint": fingerprint},
            version=version,
            variant=variant,
            binary_path=path,
            identity=identity,
            build_info=build_info,
        )
        return int(row.id)

    def ensure_model(self, model: ModelFile) -> int:
        row, _ = insert_if_absent(
            self._db,
            Model,
            {"sha256": model.sha256},
            name=model.name,
            path=str(model.path),
            size_bytes=model.size,
        )
        return int(row.id)

    def ensure_profile(
        self,
        name: str,
        profile: ProfileConfig,
        *,
        target_model_id: int | None,
        draft_model_id: int | None,
    ) -> int:
        row, _ = insert_if_absent(
            self._db,
            Profile,
            {"name": name, "config_hash": profile.config_hash()},
            config=profile.model_dump(mode="json"),
            target_model_id=target_model_id,
            draft_model_id=draft_model_id,
            spec_type=profile.spec_type,
        )
        return int(row.id)

    def create_campaign(
        self, *, kind: str, host_id: int, build_id: int | None, params: dict[str, Any]
    ) -> int:
        return CampaignRows(self._db).create(
            kind=kind, host_id=host_id, build_id=build_id, params=params
        )

    def finish_campaign(
        self, campaign_id: int, *, status: str, summary: dict[str, Any] | None = None
    ) -> None:
        CampaignRows(self._db).finish(campaign_id, status=status, summary=summary)

    def save_run(self, campaign_id: int, profile_id: int, result: RunResult) -> int:
        """Store one run and all its samples in one transaction (see `store.runs`)."""
        return RunRows(self._db).save(campaign_id, profile_id, result)

    def add_output_checks(self, rows: list[dict[str, Any]]) -> None:
        with self._db.session() as s:
            for values in rows:
                key = {k: values[k] for k in ("candidate_run_id", "baseline_run_id", "task_id")}
                if s.scalars(select(OutputCheck.id).filter_by(**key)).first() is None:
                    s.add(OutputCheck(**values))

    def add_report(self, campaign_id: int, *, kind: str, path: str) -> None:
        with self._db.session() as s:
            s.add(Report(campaign_id=campaign_id, kind=kind, path=path))

    def load_runs(self, campaign_id: int) -> list[StoredRun]:
        return RunRows(self._db).load(campaign_id)
