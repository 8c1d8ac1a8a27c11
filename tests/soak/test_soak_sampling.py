"""The soak samples as the service does: [soak]'s temperature, top_k, top_p and min_p (the
command line's --temperature and friends go over them) reach every load request, a profile's own
keys win for its arm, the seed is the soak's, and the temperature-0 probes stay greedy."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support.soakkit import soak_settings, write_taskset

from watchkeeper.cli.app import build_parser
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.load.sampling import SamplingSettings, soak_sampling
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.soak import loop
from watchkeeper.soak.plan import SoakPlan
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Campaign


def test_the_command_line_sampler_goes_over_the_soak_section_with_the_soaks_seed() -> None:
    args = build_parser().parse_args(
        ["soak", "--temperature", "0.7", "--top-k", "3", "--top-p", "0.9", "--min-p", "0"]
    )
    given = SoakRequest.from_cli(vars(args)).sampler()
    assert soak_sampling(Config(), 9, given=given) == SamplingSettings(
        temperature=0.7, top_k=3, top_p=0.9, min_p=0.0, seed=9
    )
    # Nothing given: the soak stays greedy, and its requests send no top_k/top_p/min_p.
    plain = soak_sampling(Config(), 9)
    assert plain.request_fields() == {"temperature": 0.0, "seed": 9}
    # A soak job's request carries its sampler to the command: given over [soak]'s, not
    # written into the config (None: not given).
    request = SoakRequest(temperature=0.7, top_k=3)
    assert soak_sampling(Config(), 9, given=request.sampler()) == SamplingSettings(
        temperature=0.7, top_k=3, seed=9
    )


def test_an_arm_with_its_own_sampler_keys_gets_them_the_others_the_soaks() -> None:
    soak = SamplingSettings(temperature=0.7, seed=4)
    hot = SamplingSettings(temperature=0.8, seed=4)
    plan = SoakPlan(
        60.0, 5.0, ("a", "b"), (1,), 4, (), None,  # type: ignore[arg-type]
        soak, arm_sampling={"b": hot},
    )  # fmt: skip
    assert plan.sampler("a") == soak and plan.sampler("b") == hot


def recorded_chat(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The soak loop's calls to `chat`, recorded on their way to the real one: what every
    request was asked to send."""
    sent: list[dict[str, Any]] = []
    real_chat = loop.chat

    def recording_chat(*args: Any, **kwargs: Any) -> Any:
        sent.append(kwargs)
        return real_chat(*args, **kwargs)

    monkeypatch.setattr(loop, "chat", recording_chat)
    return sent


def test_load_requests_carry_the_sampler_and_probes_stay_greedy(
    real_server: tuple[ServerBinary, ModelFile],
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real soak on a real server, with the loop's calls to `chat` recorded on their way
    through: what every request was asked to send."""
    sent = recorded_chat(monkeypatch)
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        server=ServerConfig(startup_timeout_s=120),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=1024, top_k=5)},
        soak=soak_settings(temperature=0.7, top_p=0.9, probe_interval_s=2.0),
    )
    result = soak_command(
        config,
        SoakRequest(
            duration="8s", block="8s", profiles=["s"], taskset=write_taskset(tmp_path), seed=3
        ),
    )
    assert result.status == "completed"
    load = [k for k in sent if k["sampling"] is not None]
    probes = [k for k in sent if k["sampling"] is None]
    assert load and probes, f"{len(load)} load requests, {len(probes)} probes"
    # The profile's top_k over the soak's temperature and top_p, with the soak's seed.
    assert {k["sampling"] for k in load} == {
        SamplingSettings(temperature=0.7, top_k=5, top_p=0.9, seed=3)
    }
    assert all(k["top_logprobs"] == 0 for k in load)
    assert all(k["temperature"] == 0.0 and k["top_logprobs"] == 2 for k in probes)
    # The soak's own sampler (before the profile's keys) is in its result and --json.
    assert result.to_json()["sampling"] == {
        "temperature": 0.7,
        "top_k": None,
        "top_p": 0.9,
        "min_p": None,
        "seed": 3,
    }


def test_an_open_loop_soak_sends_on_its_schedule_and_keeps_it_in_the_campaign(
    real_server: tuple[ServerBinary, ModelFile],
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`soak --rate 2 --arrival constant`: every request of a block is due at start + i/2 s
    (the arrival schedule, not the answers, decides; load/openloop.py), so the gaps between
    the due times are whole multiples of 0.5 s however slow the server or the host is. The due
    times are the schedule's, never measured."""
    sent = recorded_chat(monkeypatch)
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        server=ServerConfig(startup_timeout_s=120),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=1024)},
        soak=soak_settings(probe_interval_s=3.0),
    )
    result = soak_command(
        config,
        SoakRequest(
            duration="6s",
            block="6s",
            profiles=["s"],
            concurrency=[2],
            taskset=write_taskset(tmp_path, max_tokens=8),
            seed=3,
            rate=2.0,
            arrival="constant",
        ),
    )
    assert result.status == "completed"
    # The probe goes alone before the block's schedule starts: it has no due time.
    load = [k for k in sent if k["sampling"] is not None]
    assert [k["origin"] for k in sent if k["sampling"] is None] == [None]
    due = sorted(k["origin"] for k in load)
    assert len(due) >= 3 and all(k["origin"] is not None for k in load)
    gaps = [(b - a) / 0.5 for a, b in itertools.pairwise(due)]
    assert all(abs(g - round(g)) < 1e-6 and round(g) >= 1 for g in gaps), gaps
    # No more requests than the schedule holds in 6 s (12 arrivals, 0.0 .. 5.5 s).
    assert len(due) <= 12
    with Database(sqlite_url).session() as s:
        params = s.scalars(select(Campaign.params)).one()
    assert params["arrival"]["rate"] == 2.0 and params["arrival"]["process"] == "constant"
