"""Synthetic nights written through the real store: campaigns, runs and samples with known
levels, so the tracking and digest tests control exactly what the detector sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from watchkeeper.config import ProfileConfig
from watchkeeper.host.info import HostInfo
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.repository import Repository

HOST = HostInfo("f" * 64, "nightbox", "Test CPU", 2, 24 << 30, None, "Linux")
MODEL = ModelFile("smollm2", Path("/models/smollm2.gguf"), "a" * 64, 100)
PROFILE = ProfileConfig(model="smollm2")
START = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)


def build(name: str) -> ServerBinary:
    digest = (name.encode().hex() + "0" * 64)[:64]
    return ServerBinary(Path(f"/builds/{name}/llama-server"), f"version: {name}", "cpu", digest)


@dataclass
class Nights:
    db: Database
    seed: int = 0
    categories: tuple[str, ...] = ("code", "prose")
    tasks_per_category: int = 8
    night: int = 0
    rng: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.repo = Repository(self.db)

    def add(
        self,
        build_name: str = "b1",
        *,
        tps: float = 100.0,
        slow_category: str | None = None,
        errors: int = 0,
        rss: float = 500e6,
        kind: str = "bench",
        status: str = "completed",
    ) -> int:
        """One night: one campaign, one measured run of the profile."""
        when = START + timedelta(days=self.night)
        self.night += 1
        host = self.repo.ensure_host(HOST)
        build_id = self.repo.ensure_build(build(build_name))
        model = self.repo.ensure_model(MODEL)
        profile = self.repo.ensure_profile(
            "smollm2-baseline", PROFILE, target_model_id=model, draft_model_id=None
        )
        campaign = self.repo.create_campaign(
            kind=kind, host_id=host, build_id=build_id, params={"night": self.night}
        )
        level = tps * (1 + self.rng.normal(0, 0.01))
        samples = []
        seq = 0
        for category in self.categories:
            factor = 0.8 if category == slow_category else 1.0
            for i in range(self.tasks_per_category):
                failed = seq < errors
                speed = level * factor * float(self.rng.lognormal(0, 0.03))
                samples.append(
                    RequestSample(
                        task_id=f"{category}-{i}",
                        category=category,
                        seq=seq,
                        started_at=when + timedelta(seconds=seq),
                        ttft_s=None if failed else 0.05 * float(self.rng.lognormal(0, 0.03)),
                        latency_s=None if failed else 1.0,
                        completion_tokens=None if failed else 64,
                        decode_tps_server=None if failed else speed,
                        output_text="" if failed else "ok",
                        error="HTTP 500: boom" if failed else None,
                    )
                )
                seq += 1
        result = RunResult(
            arm="smollm2-baseline",
            profile_name="smollm2-baseline",
            round=1,
            is_warmup=False,
            concurrency=1,
            started_at=when,
            finished_at=when + timedelta(minutes=5),
            samples=tuple(samples),
            server_argv=("llama-server", "--model", "/models/smollm2.gguf"),
            peak_rss_bytes=int(rss * (1 + self.rng.normal(0, 0.002))),
        )
        self.repo.save_run(campaign, profile, result)
        self.repo.finish_campaign(campaign, status=status)
        return campaign
