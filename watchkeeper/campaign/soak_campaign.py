"""A soak's campaign: the reference arms beside each profile, the plan's signature, and the
campaign opened or resumed where it stopped.

Kept out of `commands/soak.py` so the command composes: these steps decide *which* campaign a
soak writes to and what a resume must match (the plan, the reference arms and the sampler;
never the seed, which is resumed), and they are the part a soak's resume tests lean on.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from watchkeeper.campaign.campaigns import open_campaign
from watchkeeper.campaign.load_shape import with_slots
from watchkeeper.campaign.references import reference_profile
from watchkeeper.config import Config
from watchkeeper.config.durations import format_duration
from watchkeeper.errors import ConfigError, SoakError
from watchkeeper.host import info as hostinfo
from watchkeeper.load.arrivals import ArrivalSpec
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.nightly.reference import identify
from watchkeeper.server.flags import SPELLINGS
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.soak.plan import ResumePoint
from watchkeeper.soak.views import SoakData
from watchkeeper.store.db import Database
from watchkeeper.store.references import ReferenceStore
from watchkeeper.store.repository import Repository
from watchkeeper.store.soak_store import SoakStore

Progress = Callable[[str], None]


def soak_servers(
    config: Config, prepared: Sequence[PreparedProfile], depth: int, *, shipped: bool
) -> list[PreparedProfile]:
    """The servers a soak starts: `depth` slots each (a block at concurrency 4 on one slot
    would queue in the server, not batch) and the prompt cache bound. A soak of a
    recommendation (`shipped`) runs the unit's settings instead: its profiles carry
    [service]'s slots and cache already (publish/served.py) and its depth is checked against
    them, so nothing here changes them."""
    return with_cache_ram(with_slots(prepared, depth), soak_cache_ram(config, shipped=shipped))


def soak_cache_ram(config: Config, *, shipped: bool) -> int | None:
    """The prompt cache (`--cache-ram` MiB) a soak's servers run with: a recommendation's unit
    serves with [service]'s (its profiles carry it), any other soak with [soak]'s. Decided here
    once because the servers, the campaign's params and the resume signature must agree: a
    signature reading the other setting would resume a soak under another cache, and one
    campaign would mix RSS with and without it."""
    return config.service.cache_ram_mib if shipped else config.soak.cache_ram_mib


def with_cache_ram(prepared: Sequence[PreparedProfile], mib: int | None) -> list[PreparedProfile]:
    """Every server the soak starts gets `--cache-ram mib` (`soak.cache_ram_mib`).

    Why: the 11434 build keeps the state of every prompt a slot let go in host memory, up to
    8192 MiB, evicting the oldest beyond it. Under a soak's load that is RSS growth (+184 MiB in
    the first two minutes of a Qwen 1.5B server at concurrency 1 and 4 here, +2 MiB with the
    cache off) which ends only at the limit, hours later: the leak test would call it a leak, or
    hide a real one beneath it. Off, RSS growth is the process's own. A build without the flag
    has no such cache; a profile that sets the flag itself, and a server somebody else runs,
    keep theirs. None: unchanged."""
    if mib is None:
        return list(prepared)
    out = []
    for p in prepared:
        extra = p.profile.extra_args
        cache_ram = SPELLINGS["cache_ram"]
        has_flag = p.help is not None and cache_ram[0] in p.help.flags
        own = any(a.split("=", 1)[0] in cache_ram for a in extra)
        if p.external_url or not has_flag or own:
            out.append(p)
            continue
        profile = p.profile.model_copy(update={"extra_args": [*extra, cache_ram[0], str(mib)]})
        out.append(replace(p, profile=profile))
    return out


def resume_point(data: SoakData) -> ResumePoint:
    """Next block after the last stored one; elapsed = the blocks' measured time."""
    load = [b for b in data.blocks if not b.is_probe]
    if not load:
        return ResumePoint()
    elapsed = sum(
        (b.finished_at - b.started_at).total_seconds() for b in load if b.finished_at is not None
    )
    return ResumePoint(max(b.block for b in load) + 1, elapsed)


def plan_signature(
    config: Config,
    names: tuple[str, ...],
    levels: tuple[int, ...],
    duration_s: float,
    block_s: float,
    tasks: Sequence[Task],
    references: dict[str, dict[str, Any]],
    *,
    shipped: bool,
    sampling: SamplingSettings,
    arrival: ArrivalSpec | None = None,
) -> str:
    """What a resume must match: the plan, the reference arms, the sampler (not its seed,
    which is resumed), an open loop's arrivals and the servers' prompt cache (`shipped`: a
    recommendation's unit, whose cache is [service]'s: `soak_cache_ram`). `sampling`: the
    soak's load sampler (`soak_sampling`), whatever its seed."""
    soak = config.soak
    blob = json.dumps([names, levels, duration_s, block_s, [t.id for t in tasks]])
    if arrival is not None:  # closed-loop soaks keep the signature they always had
        blob += json.dumps({k: v for k, v in arrival.to_json().items() if k != "seed"})
    if references:  # the reference arms are part of the plan a resume must match
        blob += json.dumps(sorted((k, v["reference_id"]) for k, v in references.items()))
        blob += f"restart_every={soak.restart_every}"
    mib = soak_cache_ram(config, shipped=shipped)
    if mib is not None:  # RSS with and without the prompt cache never mix
        blob += f"cache_ram={mib}"
    unseeded = replace(sampling, seed=SamplingSettings().seed)  # the seed is resumed
    if unseeded != SamplingSettings():  # greedy soaks keep the signature they always had
        blob += json.dumps(unseeded.to_json(), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def open_or_resume(
    config: Config,
    repo: Repository,
    store: SoakStore,
    prepared: list[PreparedProfile],
    names: tuple[str, ...],
    *,
    signature: str,
    resume_id: int | None,
    fresh: bool,
    seed: int | None,
    sampling: SamplingSettings,
    params: dict[str, Any],
    progress: Progress,
) -> tuple[int, ResumePoint, bool, int]:
    """The campaign to run: the one named or found with this plan's signature (resumed where
    it stopped, with its seed), else a new one, its `sampling` stored with its seed.
    (campaign, resume point, resumed?, seed)."""
    duration = params["duration"]
    campaign_id = resume_id
    if campaign_id is None and not fresh:
        campaign_id = store.find_resumable(signature)
    if campaign_id is not None:
        data = store.load(campaign_id)
        if data.params.get("signature") != signature:
            raise SoakError(
                f"campaign {campaign_id} is not a soak with this plan",
                hint="use the same --duration/--profiles/--concurrency/--block/task set, "
                "or --fresh",
            )
        resume, seed = resume_point(data), int(data.params["seed"])
        store.set_status(campaign_id, "running")
        progress(
            f"resuming soak campaign {campaign_id} at block {resume.next_block}, "
            f"{format_duration(resume.elapsed_s)} of {duration} done"
        )
        return campaign_id, resume, True, seed
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    params = _with_seed(params, seed, replace(sampling, seed=seed).to_json())
    campaign_id = open_campaign(repo, kind="soak", prepared=prepared, params=params).campaign_id
    progress(f"soak campaign {campaign_id}: {duration} over {', '.join(names)}, seed {seed}")
    return campaign_id, ResumePoint(), False, seed


def _with_seed(params: dict[str, Any], seed: int, sampling: dict[str, Any]) -> dict[str, Any]:
    """A new campaign's params with its seed (after the concurrencies) and its sampler (after
    the temperature), in the order they have always been stored."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        out[key] = value
        if key == "concurrency":
            out["seed"] = seed
        elif key == "temperature":
            out["sampling"] = sampling
    return out


def reference_arms(
    config: Config, db: Database, prepared: list[PreparedProfile], *, progress: Progress
) -> tuple[list[PreparedProfile], dict[str, dict[str, Any]]]:
    """The pinned reference of each profile on this host, as extra soak arms.

    A profile without one soaks alone, as before, and says so: the nightly pins it."""
    store = ReferenceStore(db)
    host = hostinfo.collect()
    arms: list[PreparedProfile] = []
    references: dict[str, dict[str, Any]] = {}
    for current in prepared:
        ref = store.active(host.fingerprint, current.name)
        if ref is None:
            progress(
                f"{current.name}: no pinned reference on this host (the nightly pins one); "
                "throughput is judged on its own blocks only"
            )
            continue
        try:
            arm = reference_profile(config, current, ref)
        except ConfigError as exc:
            # Six hours of soak are worth more than the pairing: soak alone, and say why.
            progress(f"{current.name}: soaking without its reference: {exc} ({exc.hint})")
            continue
        aa = ref.identity == identify(current, host.fingerprint).digest
        arms.append(arm)
        references[current.name] = {
            "arm": arm.name,
            "reference_id": ref.id,
            "aa": aa,
            "host_fingerprint": host.fingerprint,
        }
        progress(
            f"{current.name}: soaking beside reference #{ref.id} (pinned "
            f"{ref.pinned_at:%Y-%m-%d} by {ref.pinned_by})"
            f"{'; identical to it: an A/A soak' if aa else ''}"
        )
    return arms, references


def interleaved(names: tuple[str, ...], references: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        out.append(name)
        if name in references:
            out.append(references[name]["arm"])
    return tuple(out)
