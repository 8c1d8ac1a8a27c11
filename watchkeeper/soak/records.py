"""Plain dataclasses a soak hands between its parts, and their JSON form for the spool.

Every item names its run by a `RunKey` (the run table's natural key), never by a database id:
the id may not exist yet when the database is down, and a replay must find the same row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from watchkeeper.load.records import RequestSample, RunPurpose, TokenLogprob

LEGACY_PROBE_SUFFIX = ":probe"
"""How a spool written before `RunKey.purpose` named a probe run: `<profile>:probe`."""


@dataclass(frozen=True, slots=True)
class RunKey:
    """(arm, purpose, block, concurrency) of one block: the run table's natural key. A block's
    load and its probes are two runs of the same arm, told apart by `purpose`."""

    arm: str
    block: int
    """The block's index, stored in the run's `round` column."""
    concurrency: int
    profile_id: int
    purpose: RunPurpose = RunPurpose.MEASURED

    @property
    def is_probe(self) -> bool:
        return self.purpose == RunPurpose.PROBE


@dataclass(frozen=True, slots=True)
class RunOpen:
    key: RunKey
    started_at: datetime
    server_argv: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunClose:
    key: RunKey
    finished_at: datetime
    status: str
    peak_rss_bytes: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SampleRecord:
    key: RunKey
    sample: RequestSample


@dataclass(frozen=True, slots=True)
class ResourcePoint:
    taken_at: datetime
    key: RunKey | None
    rss_bytes: int | None = None
    cpu_percent: float | None = None
    vram_bytes: int | None = None
    busy_slots: int | None = None
    kv_usage: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    host_other_cpu: float | None = None
    """The share of all the host's cores used outside the soak's servers since the previous
    point (`soak/hostcpu.py`); None on the first point and in spools written before it."""


@dataclass(frozen=True, slots=True)
class IncidentRecord:
    natural_key: str
    kind: str
    occurred_at: datetime
    profile: str | None = None
    key: RunKey | None = None
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


Item = RunOpen | RunClose | SampleRecord | ResourcePoint | IncidentRecord


def _key_json(key: RunKey | None) -> list[Any] | None:
    if key is None:
        return None
    return [key.arm, key.block, key.concurrency, key.profile_id, str(key.purpose)]


def _key_from(raw: list[Any] | None) -> RunKey | None:
    """Also reads a key spooled before the purpose was a field (four items, a probe named
    `<profile>:probe`), so a soak resumed across the upgrade replays its spool."""
    if raw is None:
        return None
    arm, rnd, concurrency, profile_id = raw[0], int(raw[1]), int(raw[2]), int(raw[3])
    if len(raw) > 4:
        return RunKey(arm, rnd, concurrency, profile_id, RunPurpose(raw[4]))
    if arm.endswith(LEGACY_PROBE_SUFFIX):
        return RunKey(
            arm.removesuffix(LEGACY_PROBE_SUFFIX), rnd, concurrency, profile_id, RunPurpose.PROBE
        )
    return RunKey(arm, rnd, concurrency, profile_id)


def _time(raw: str) -> datetime:
    return datetime.fromisoformat(raw)


def sample_to_json(s: RequestSample) -> dict[str, Any]:
    values = {f.name: getattr(s, f.name) for f in fields(RequestSample)}
    values["started_at"] = s.started_at.isoformat()
    values["tokens"] = [t.to_json() for t in s.tokens] if s.tokens is not None else None
    return values


def sample_from_json(raw: dict[str, Any]) -> RequestSample:
    values = dict(raw)
    values["started_at"] = _time(raw["started_at"])
    tokens = raw.get("tokens")
    values["tokens"] = tuple(TokenLogprob.from_json(t) for t in tokens) if tokens else None
    return RequestSample(**values)


def item_to_json(item: Item) -> dict[str, Any]:
    if isinstance(item, RunOpen):
        return {
            "type": "run_open",
            "key": _key_json(item.key),
            "started_at": item.started_at.isoformat(),
            "argv": list(item.server_argv),
        }
    if isinstance(item, RunClose):
        return {
            "type": "run_close",
            "key": _key_json(item.key),
            "finished_at": item.finished_at.isoformat(),
            "status": item.status,
            "peak_rss_bytes": item.peak_rss_bytes,
            "error": item.error,
        }
    if isinstance(item, SampleRecord):
        return {"type": "sample", "key": _key_json(item.key), "sample": sample_to_json(item.sample)}
    if isinstance(item, ResourcePoint):
        return {
            "type": "resource",
            "key": _key_json(item.key),
            "taken_at": item.taken_at.isoformat(),
            "rss_bytes": item.rss_bytes,
            "cpu_percent": item.cpu_percent,
            "vram_bytes": item.vram_bytes,
            "busy_slots": item.busy_slots,
            "kv_usage": item.kv_usage,
            "metrics": item.metrics,
            "host_other_cpu": item.host_other_cpu,
        }
    return {
        "type": "incident",
        "natural_key": item.natural_key,
        "kind": item.kind,
        "occurred_at": item.occurred_at.isoformat(),
        "profile": item.profile,
        "key": _key_json(item.key),
        "detail": item.detail,
        "evidence": item.evidence,
    }


def item_from_json(raw: dict[str, Any]) -> Item:
    kind = raw["type"]
    key = _key_from(raw.get("key"))
    if kind == "run_open":
        assert key is not None
        return RunOpen(key, _time(raw["started_at"]), tuple(raw["argv"]))
    if kind == "run_close":
        assert key is not None
        return RunClose(
            key, _time(raw["finished_at"]), raw["status"], raw["peak_rss_bytes"], raw["error"]
        )
    if kind == "sample":
        assert key is not None
        return SampleRecord(key, sample_from_json(raw["sample"]))
    if kind == "resource":
        return ResourcePoint(
            _time(raw["taken_at"]),
            key,
            raw["rss_bytes"],
            raw["cpu_percent"],
            raw["vram_bytes"],
            raw["busy_slots"],
            raw["kv_usage"],
            raw["metrics"] or {},
            raw.get("host_other_cpu"),
        )
    if kind == "incident":
        return IncidentRecord(
            raw["natural_key"],
            raw["kind"],
            _time(raw["occurred_at"]),
            raw["profile"],
            key,
            raw["detail"],
            raw["evidence"] or {},
        )
    raise ValueError(f"unknown spool item type {kind!r}")
